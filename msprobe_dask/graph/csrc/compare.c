/* The summary compare of a node pair (graph/stat_cells.py: stat_diffs; cells.py: summary_row; checks.py: check_rows;
 * compare.py: write_back) whose items all have partners. Its rules, texts and numbers are
 * graph/cells.py's SUMMARY_RULES, handed once by configure_summary(rules) and read by name: none is
 * written here. Over 400 lines: the rules' intake, the diffs and the checkers share those rules (R)
 * and the pair's cells. */
#include "speedups.h"
#include "../../csrc/checker_rules.h"
#include "../../csrc/ignored_apis.h"
#include "../../csrc/py_calls.h"

#define MAX_GROUPS 8 /* state groups (cells.STATE_GROUPS has 4) */
#define MAX_STATES 16
#define ROW_ERRORS (TENFOLD - 1) /* the messages of the per-row checkers (errors), not the node-wide Tenfold */

/* cells.SUMMARY_RULES (see SummaryRules) */
static struct {
    PyObject *rules; /* held: holds the objects below */
    PyObject *stat_diff, *stats_of, *cells_of, *special, *exported_text, *err_message, *no_bench;
    PyObject *no_value, *rel_text, *zero_rel, *null_stat, *no_npu;
    CheckerRules checks; /* rules.checkers */
    PyObject *results[3], *stats[4], *written[N_WRITTEN], *states[MAX_STATES];
    PyObject *texts[1 << N_MESSAGES]; /* err_message of each set of messages (held), made when first met */
    int state_group[MAX_STATES], n_states, n_groups;
    double rel_lo, rel_hi;
} R;

/* rules.<name>, a new reference, or NULL with an error naming it */
static PyObject *rule(PyObject *rules, const char *name) {
    PyObject *v = PyObject_GetAttrString(rules, name);
    if (v == NULL)
        PyErr_Format(PyExc_TypeError, "configure_summary: the rules have no %s", name);
    return v;
}

/* ``n`` texts of the tuple rules.<name> into out (borrowed: R.rules holds them) */
static int rule_texts(PyObject *rules, const char *name, PyObject **out, Py_ssize_t n) {
    PyObject *v = rule(rules, name);
    if (v == NULL)
        return -1;
    int ok = PyTuple_Check(v) && PyTuple_GET_SIZE(v) == n;
    for (Py_ssize_t i = 0; ok && i < n; i++)
        ok = PyUnicode_CheckExact(out[i] = PyTuple_GET_ITEM(v, i));
    Py_DECREF(v); /* (the tuple stays alive: a field of the frozen rules) */
    if (!ok)
        PyErr_Format(PyExc_TypeError, "configure_summary: %s must be a tuple of %zd str", name, n);
    return ok ? 0 : -1;
}

/* rel_text's texts made before, by the bits of their r (a dump's relative errors repeat: T's 94,500
 * relative-error cells hold 5,758 texts), with the decimals they were made with; 16,384 slots (T's
 * texts evict one another: 9,103 made, 16,853 with 4,096 slots) */
#define REL_CACHE_BITS 14
#define REL_CACHE (1 << REL_CACHE_BITS)
static struct {
    uint64_t bits;
    PyObject *text; /* held */
} rel_cache[REL_CACHE];
static unsigned rel_cache_version; /* the text rules' version its texts were made with */

static void rel_cache_clear(void) {
    for (int i = 0; i < REL_CACHE; i++)
        Py_CLEAR(rel_cache[i].text);
}

/* texts found to be statistics of their own cells (the rules' cells_of leaves them as they are) that
 * the rules' special does not read as NaN or inf (a bool tensor's "True", a null's "None", a process
 * group's ranks "[0]"), asked once per text (held; found by its content: a process group's ranks are a
 * new str in each entry's items) */
#define PLAIN_TEXTS 64
static struct {
    PyObject *text;
    int plain;
} plain_texts[PLAIN_TEXTS];

static void plain_texts_clear(void) {
    for (int i = 0; i < PLAIN_TEXTS; i++)
        Py_CLEAR(plain_texts[i].text);
}

static void release(void) {
    rel_cache_clear(); /* (made as instances of the rules' exported_text) */
    for (int i = 0; i < 1 << N_MESSAGES; i++)
        Py_XDECREF(R.texts[i]);
    Py_XDECREF(R.err_message);
    Py_XDECREF(R.no_bench);
    Py_XDECREF(R.no_npu);
    Py_XDECREF(R.stat_diff);
    Py_XDECREF(R.no_value);
    Py_XDECREF(R.null_stat);
    plain_texts_clear();
    Py_XDECREF(R.rel_text);
    Py_XDECREF(R.zero_rel);
    Py_XDECREF(R.stats_of);
    Py_XDECREF(R.cells_of);
    Py_XDECREF(R.special);
    Py_XDECREF(R.exported_text);
    Py_XDECREF(R.rules);
    memset(&R, 0, sizeof(R));
}

/* configure_summary(rules): take cells.SUMMARY_RULES */
PyObject *configure_summary(PyObject *self, PyObject *rules) {
    release();
    PyObject *positional = NULL, *checkers = NULL, *groups = NULL;
    if ((R.stat_diff = rule(rules, "stat_diff")) == NULL || (R.no_value = rule(rules, "no_value")) == NULL ||
        (R.null_stat = rule(rules, "null_stat")) == NULL ||
        (R.rel_text = rule(rules, "rel_text")) == NULL || (R.zero_rel = rule(rules, "zero_rel")) == NULL ||
        (R.stats_of = rule(rules, "stats_of")) == NULL ||
        (R.cells_of = rule(rules, "cells_of")) == NULL || (R.special = rule(rules, "special")) == NULL ||
        (R.exported_text = rule(rules, "exported_text")) == NULL ||
        (positional = rule(rules, "positional")) == NULL ||
        (R.err_message = rule(rules, "err_message")) == NULL || (R.no_bench = rule(rules, "no_bench")) == NULL ||
        (R.no_npu = rule(rules, "no_npu")) == NULL || (checkers = rule(rules, "checkers")) == NULL ||
        (groups = rule(rules, "state_groups")) == NULL ||
        take_checker_rules(checkers, &R.checks, "configure_summary") < 0)
        goto fail;
    if (!PyCallable_Check(R.stat_diff) || !PyUnicode_CheckExact(R.no_value) || !PyCallable_Check(R.rel_text) ||
        !PyUnicode_CheckExact(R.zero_rel) ||
        !PyUnicode_CheckExact(R.null_stat) ||
        !PyCallable_Check(R.stats_of) || !PyCallable_Check(R.cells_of) ||
        !PyCallable_Check(R.special) || !PyType_Check(R.exported_text) || !PyCallable_Check(R.err_message) ||
        !PyTuple_Check(R.no_bench) || !PyUnicode_CheckExact(R.no_npu) ||
        !PyArg_ParseTuple(positional, "dd", &R.rel_lo, &R.rel_hi)) {
        PyErr_SetString(PyExc_TypeError, "configure_summary: rules of the wrong types");
        goto fail;
    }
    if (rule_texts(rules, "results", R.results, 3) < 0 || rule_texts(rules, "stats", R.stats, 4) < 0 ||
        rule_texts(rules, "written", R.written, N_WRITTEN) < 0)
        goto fail;
    if (!PyTuple_Check(groups) || PyTuple_GET_SIZE(groups) > MAX_GROUPS) {
        PyErr_SetString(PyExc_TypeError, "configure_summary: state_groups must be a short tuple");
        goto fail;
    }
    R.n_groups = (int)PyTuple_GET_SIZE(groups);
    for (int g = 0; g < R.n_groups; g++) {
        PyObject *states = PyTuple_GET_ITEM(groups, g);
        for (Py_ssize_t i = 0; PyTuple_Check(states) && i < PyTuple_GET_SIZE(states); i++) {
            PyObject *state = PyTuple_GET_ITEM(states, i);
            if (R.n_states == MAX_STATES || !PyUnicode_CheckExact(state)) {
                PyErr_SetString(PyExc_TypeError, "configure_summary: state_groups must hold a few str");
                goto fail;
            }
            R.state_group[R.n_states] = g;
            R.states[R.n_states++] = state;
        }
    }
    R.rules = Py_NewRef(rules);
    Py_DECREF(positional);
    Py_DECREF(checkers); /* (held by R.rules, which R.checks borrows from) */
    Py_DECREF(groups);
    Py_RETURN_NONE;
fail:
    Py_XDECREF(positional);
    Py_XDECREF(checkers);
    Py_XDECREF(groups);
    release();
    return NULL;
}

static int summary_configured(void) {
    if (configured() < 0)
        return -1; /* (rel_text: the export's decimals, ExportedText) */
    if (R.rules != NULL)
        return 0;
    PyErr_SetString(PyExc_RuntimeError, "_speedups.configure_summary() was not called");
    return -1;
}

/* str(r) + the percent (text_rules.percent) in its exported form (cells.rel_text) of a finite r > 0: for r in cells.POSITIONAL,
 * r to 6 decimals (text_rules.decimals), or repr(r) where that has fewer decimals (the rounded text
 * ends with 0 and round(r, 6) == r: round() and format(r, ".6f") take the same correctly rounded
 * digits); elsewhere the rules' rel_text(r), once per r */
static PyObject *rel_text(double r) {
    uint64_t bits;
    memcpy(&bits, &r, sizeof(bits));
    if (rel_cache_version != text_rules_version) {
        rel_cache_clear();
        rel_cache_version = text_rules_version;
    }
    size_t slot = (size_t)((bits * 0x9E3779B97F4A7C15ull) >> (64 - REL_CACHE_BITS));
    if (rel_cache[slot].text != NULL && rel_cache[slot].bits == bits)
        return Py_NewRef(rel_cache[slot].text);
    if (!(r >= R.rel_lo && r < R.rel_hi)) {
        PyObject *x = PyFloat_FromDouble(r);
        PyObject *made = x != NULL ? PyObject_CallOneArg(R.rel_text, x) : NULL;
        Py_XDECREF(x);
        if (made != NULL) {
            Py_XSETREF(rel_cache[slot].text, Py_NewRef(made));
            rel_cache[slot].bits = bits;
        }
        return made;
    }
    char *t = PyOS_double_to_string(r, 'f', text_rules.decimals, 0, NULL);
    if (t == NULL)
        return NULL;
    size_t n = strlen(t);
    char text[64];
    if (t[n - 1] == '0' && PyOS_string_to_double(t, NULL, NULL) == r) {
        PyMem_Free(t);
        t = PyOS_double_to_string(r, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
        if (t == NULL)
            return NULL;
        n = strlen(t);
    }
    memcpy(text, t, n); /* (at most 17 digits, a point and an exponent; then at most MAX_PERCENT) */
    PyMem_Free(t);
    memcpy(text + n, text_rules.percent.s, (size_t)text_rules.percent.n);
    PyObject *s = PyUnicode_FromStringAndSize(text, (Py_ssize_t)n + text_rules.percent.n);
    if (s == NULL)
        return NULL;
    PyObject *exported = PyObject_CallOneArg(R.exported_text, s);
    Py_DECREF(s);
    if (exported != NULL) {
        Py_XSETREF(rel_cache[slot].text, Py_NewRef(exported));
        rel_cache[slot].bits = bits;
    }
    return exported;
}

/* the relative-error cell of equal statistics (the rules' zero_rel, a new reference to it: T has
 * 24,728 of them) */
static PyObject *zero_rel_text(void) { return Py_NewRef(R.zero_rel); }

/* the diff cell, relative-error cell and ratio (new references) of one NPU/Bench statistic: two
 * floats whose difference is finite, two ints equal or over a Bench 0, or a text (not a number) here,
 * the others by the rules' stat_diff(x, y) */
static int diff_cells(PyObject *x, PyObject *y, PyObject **d, PyObject **t, PyObject **ratio) {
    *d = *t = *ratio = NULL;
    if (PyUnicode_Check(x) || PyUnicode_Check(y)) { /* (not numbers: no cells) */
        *d = Py_NewRef(R.no_value);
        *t = Py_NewRef(R.no_value);
        *ratio = Py_NewRef(Py_None);
        goto made;
    }
    if (PyFloat_CheckExact(x) && PyFloat_CheckExact(y) && isfinite(PyFloat_AS_DOUBLE(x) - PyFloat_AS_DOUBLE(y))) {
        double dx = PyFloat_AS_DOUBLE(x) - PyFloat_AS_DOUBLE(y);
        if (PyFloat_AS_DOUBLE(y) == 0.0) {
            *d = PyFloat_FromDouble(dx);
            *t = Py_NewRef(R.no_value);
            *ratio = Py_NewRef(Py_None);
            goto made;
        }
        double r = fabs(dx / PyFloat_AS_DOUBLE(y) * 100);
        if (r == 0.0)
            *t = zero_rel_text();
        else if (isfinite(r))
            *t = rel_text(r);
        else
            goto general;
        *d = PyFloat_FromDouble(dx);
        *ratio = PyFloat_FromDouble(r / 100);
        goto made;
    }
    if (PyLong_CheckExact(x) && PyLong_CheckExact(y) && PyObject_Not(y) == 1) {
        *d = PyNumber_Subtract(x, y);
        *t = Py_NewRef(R.no_value);
        *ratio = Py_NewRef(Py_None);
        goto made;
    }
    if (PyLong_CheckExact(x) && PyLong_CheckExact(y)) {
        int equal = PyObject_RichCompareBool(x, y, Py_EQ);
        int nonzero = equal > 0 ? PyObject_IsTrue(y) : 0;
        if (equal < 0 || nonzero < 0)
            return -1;
        if (nonzero) {
            *d = PyLong_FromLong(0);
            *t = zero_rel_text();
            *ratio = PyFloat_FromDouble(0.0);
            goto made;
        }
    }
general:; /* the general rule, in Python */
    PyObject *cells[3];
    if (call_tuple(R.stat_diff, x, y, 3, cells, "stat_diff") < 0)
        return -1;
    *d = cells[0];
    *t = cells[1];
    *ratio = cells[2];
made:
    if (*d != NULL && *t != NULL && *ratio != NULL)
        return 0;
    Py_CLEAR(*d);
    Py_CLEAR(*t);
    Py_CLEAR(*ratio);
    return -1;
}

/* stat_diffs(ns, bs) -> (diffs, rels, ratio): cells._diffs for two tuples of statistics (ratio: the
 * last one's) */
PyObject *stat_diffs(PyObject *self, PyObject *args) {
    PyObject *ns, *bs;
    if (!PyArg_ParseTuple(args, "O!O!", &PyTuple_Type, &ns, &PyTuple_Type, &bs) || summary_configured() < 0)
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(ns) < PyTuple_GET_SIZE(bs) ? PyTuple_GET_SIZE(ns) : PyTuple_GET_SIZE(bs);
    if (n == 0) {
        PyErr_SetString(PyExc_ValueError, "stat_diffs of no statistics");
        return NULL;
    }
    PyObject *diffs = PyList_New(n), *rels = PyList_New(n), *ratio = NULL;
    if (diffs == NULL || rels == NULL)
        goto fail;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *d, *t;
        Py_CLEAR(ratio);
        if (diff_cells(PyTuple_GET_ITEM(ns, i), PyTuple_GET_ITEM(bs, i), &d, &t, &ratio) < 0)
            goto fail;
        PyList_SET_ITEM(diffs, i, d);
        PyList_SET_ITEM(rels, i, t);
    }
    return Py_BuildValue("(NNN)", diffs, rels, ratio);
fail:
    Py_XDECREF(diffs);
    Py_XDECREF(rels);
    Py_XDECREF(ratio);
    return NULL;
}

#define MAX_ROWS 32 /* items per state group (more: the Python path) */

typedef struct Row {
    PyObject *n, *b; /* the NPU item and its Bench partner (borrowed) */
    PyObject *name;   /* the NPU item's full_op_name (held) */
    PyObject *cells[N_WRITTEN]; /* the cells written back (new references) */
    double ratio; /* NormRelativeErr as a ratio, NAN where None */
    int out, has_ratio;
    int flags;  /* the per-row checkers that flag it (REQUIRES_GRAD ...), before the node's ignore class */
    int no_bench; /* its Bench name stands for no partner (cells.NO_BENCH) */
} Row;

/* the items of one side's node by cells.STATE_GROUPS, inputs before outputs; -1 error, 0 a value
 * this code does not take, else 1 */
static int grouped(PyObject *in, PyObject *out, PyObject *groups[MAX_GROUPS][MAX_ROWS], int counts[MAX_GROUPS]) {
    PyObject *datas[2] = {in, out};
    for (int g = 0; g < R.n_groups; g++)
        counts[g] = 0;
    for (int i = 0; i < 2; i++) {
        Py_ssize_t pos = 0;
        PyObject *k, *item;
        while (PyDict_Next(datas[i], &pos, &k, &item)) {
            if (!PyDict_CheckExact(item))
                return UNHANDLED;
            PyObject *state = PyDict_GetItemWithError(item, str_state);
            if (state == NULL && PyErr_Occurred())
                return -1;
            if (state == NULL || state == Py_None)
                continue;
            if (!PyUnicode_CheckExact(state))
                return UNHANDLED;
            int g = -1;
            for (int j = 0; j < R.n_states && g < 0; j++) {
                int eq = state == R.states[j] ? 0 : PyUnicode_Compare(state, R.states[j]);
                if (eq == -1 && PyErr_Occurred())
                    return -1;
                if (eq == 0)
                    g = R.state_group[j];
            }
            if (g < 0)
                continue;
            if (counts[g] == MAX_ROWS)
                return UNHANDLED;
            groups[g][counts[g]++] = item;
        }
    }
    return DONE;
}

/* whether the text s is a statistic that is its own cell and not special (see plain_texts): 1, 0, or
 * -1 on error */
static int plain_text(PyObject *s) {
    Py_hash_t hash = PyObject_Hash(s);
    if (hash == -1)
        return -1;
    size_t slot = (size_t)hash % PLAIN_TEXTS;
    PyObject *known = plain_texts[slot].text;
    if (known == s || (known != NULL && PyUnicode_GET_LENGTH(known) == PyUnicode_GET_LENGTH(s) &&
                       PyUnicode_Compare(known, s) == 0))
        return plain_texts[slot].plain;
    PyObject *four = PyTuple_Pack(4, s, s, s, s), *cells = NULL, *special = NULL;
    int plain = four != NULL && (cells = PyObject_CallOneArg(R.cells_of, four)) != NULL &&
                        (special = PyObject_CallOneArg(R.special, s)) != NULL
                    ? PyTuple_Check(cells) && PyTuple_GET_SIZE(cells) == 4
                    : -1;
    for (int i = 0; plain > 0 && i < 4; i++) {
        PyObject *cell = PyTuple_GET_ITEM(cells, i);
        plain = PyUnicode_CheckExact(cell) ? PyUnicode_Compare(cell, s) == 0 : 0;
    }
    if (plain > 0)
        plain = PyObject_Not(special);
    Py_XDECREF(four);
    Py_XDECREF(cells);
    Py_XDECREF(special);
    if (plain >= 0) {
        Py_XSETREF(plain_texts[slot].text, Py_NewRef(s));
        plain_texts[slot].plain = plain;
    }
    return plain;
}

/* the four statistics of an item (cells._stats: a null is the rules' null_stat): each an exact int, a
 * finite exact float, or a text that is its own cell and not special (what cells._cells leaves as
 * they are, and what no NaN/Inf checker flags); 1 if so, 0 otherwise, -1 on error */
static int plain_stats(PyObject *item, PyObject *stats[4]) {
    for (int i = 0; i < 4; i++) {
        stats[i] = PyDict_GetItemWithError(item, R.stats[i]);
        if (stats[i] == NULL)
            return PyErr_Occurred() ? -1 : 0;
        if (stats[i] == Py_None)
            stats[i] = R.null_stat;
        if (PyUnicode_CheckExact(stats[i])) {
            int plain = plain_text(stats[i]);
            if (plain <= 0)
                return plain;
        } else if (!(PyLong_CheckExact(stats[i]) || (PyFloat_CheckExact(stats[i]) && isfinite(PyFloat_AS_DOUBLE(stats[i]))))) {
            return 0;
        }
    }
    return 1;
}

/* Python's ``a op b`` taken as a truth: 1, 0, or -1 on error; a or b NULL: missing (None). Two str
 * (the common cells) are compared here. */
static int compared(PyObject *a, PyObject *b, int op) {
    a = a ? a : Py_None;
    b = b ? b : Py_None;
    if (PyUnicode_CheckExact(a) && PyUnicode_CheckExact(b)) {
        int c = PyUnicode_Compare(a, b);
        if (c == -1 && PyErr_Occurred())
            return -1;
        return op == Py_EQ ? c == 0 : c != 0;
    }
    PyObject *c = PyObject_RichCompare(a, b, op);
    if (c == NULL)
        return -1;
    int truth = PyObject_IsTrue(c);
    Py_DECREF(c);
    return truth;
}

static int truthy(PyObject *a) { /* bool(a), a NULL: None */
    return a == NULL ? 0 : PyObject_IsTrue(a);
}

/* ``part in text`` for a str text: 1, 0, or -1 on error */
static int holds(PyObject *text, PyObject *part) {
    return PyUnicode_Contains(text, part);
}

static PyObject *get(PyObject *item, PyObject *key) { /* item.get(key), borrowed; NULL: missing or error */
    return PyDict_GetItemWithError(item, key);
}

#define GET(var, item, key)                                                                                      \
    PyObject *var = get(item, key);                                                                              \
    if (var == NULL && PyErr_Occurred())                                                                         \
        return -1;

/* which per-row checkers of checks._row_messages but NaN/Inf flag the row (r->flags, r->no_bench), before
 * the node's ignore class, nc and bc its statistics' cells: 1, 0 for the Python path, or -1 on error */
static int row_flags(Row *r, PyObject *nc[4], PyObject *bc[4]) {
    GET(rg, r->n, str_requires_grad)
    GET(brg, r->b, str_requires_grad)
    GET(dtype, r->n, str_dtype)
    GET(bdtype, r->b, str_dtype)
    GET(shape, r->n, str_shape)
    GET(bshape, r->b, str_shape)
    GET(bench_name, r->b, str_full_op_name)
    if (bench_name == NULL)
        return 0; /* (a KeyError of the Python path) */
    int t;
    /* RequiresGrad: nrg and brg and nrg != brg */
    if ((t = truthy(rg)) > 0 && (t = truthy(brg)) > 0 && (t = compared(rg, brg, Py_NE)) > 0)
        r->flags |= REQUIRES_GRAD;
    if (t < 0)
        return -1;
    /* Scalar: str dtypes both not of a tensor, a scalar's shape and another max */
    if (dtype != NULL && bdtype != NULL && PyUnicode_Check(dtype) && PyUnicode_Check(bdtype) &&
        (t = holds(dtype, R.checks.not_a_tensor)) > 0 && (t = holds(bdtype, R.checks.not_a_tensor)) > 0 &&
        (t = compared(shape, R.checks.scalar_shape, Py_EQ)) > 0 && (t = compared(nc[0], bc[0], Py_NE)) > 0)
        r->flags |= SCALAR;
    if (t < 0)
        return -1;
    /* DType: dtypes both given and different, an NPU name, a Bench name of no fused weights (the
     * order of checks._row_messages' tests does not matter: none has an effect) */
    if ((t = truthy(dtype)) > 0 && (t = truthy(bdtype)) > 0 && (t = compared(dtype, bdtype, Py_NE)) > 0 &&
        (t = compared(r->name, R.no_npu, Py_NE)) > 0) {
        PyObject *bn = PyObject_Str(bench_name);
        if (bn == NULL)
            return -1;
        for (Py_ssize_t i = 0; t > 0 && i < PyTuple_GET_SIZE(R.checks.fused); i++) {
            t = holds(bn, PyTuple_GET_ITEM(R.checks.fused, i));
            t = t < 0 ? -1 : !t;
        }
        Py_DECREF(bn);
        if (t > 0)
            r->flags |= DTYPE;
    }
    if (t < 0)
        return -1;
    /* Shape: both given and different */
    if (shape != NULL && shape != Py_None && bshape != NULL && bshape != Py_None &&
        (t = compared(shape, bshape, Py_NE)) > 0)
        r->flags |= SHAPE;
    if (t < 0)
        return -1;
    /* the three checkers of a row with a partner */
    if (r->flags & (REQUIRES_GRAD | DTYPE | SHAPE) && (r->no_bench = PySequence_Contains(R.no_bench, bench_name)) < 0)
        return -1;
    return 1;
}

/* the four values of rules.<f>(x) (a 4-tuple, held in *held) into v; -1 on error */
static int four(PyObject *f, PyObject *x, PyObject **held, PyObject *v[4]) {
    *held = PyObject_CallOneArg(f, x);
    if (*held == NULL)
        return -1;
    if (!PyTuple_Check(*held) || PyTuple_GET_SIZE(*held) != 4) {
        PyErr_SetString(PyExc_TypeError, "configure_summary: stats_of and cells_of must give 4-tuples");
        return -1;
    }
    for (int i = 0; i < 4; i++)
        v[i] = PyTuple_GET_ITEM(*held, i);
    return 0;
}

/* rules.special(a) or rules.special(b): 1, 0, or -1 on error */
static int special_either(PyObject *a, PyObject *b) {
    PyObject *x[2] = {a, b};
    for (int i = 0; i < 2; i++) {
        PyObject *t = PyObject_CallOneArg(R.special, x[i]);
        int truth = t != NULL ? PyObject_IsTrue(t) : -1;
        Py_XDECREF(t);
        if (truth != 0)
            return truth;
    }
    return 0;
}

/* the NPU and Bench statistics (ns, bs: cells._stats) of a row's items whose statistics are not all
 * plain numbers, their cells (nc, bc: cells._cells) and whether the NaN/Inf checker flags it; the
 * four tuples are held in held[]: 0, or -1 on error */
static int general_cells(Row *r, PyObject *ns[4], PyObject *bs[4], PyObject *nc[4], PyObject *bc[4], PyObject *held[4]) {
    if (four(R.stats_of, r->n, &held[0], ns) < 0 || four(R.stats_of, r->b, &held[1], bs) < 0 ||
        four(R.cells_of, held[0], &held[2], nc) < 0 || four(R.cells_of, held[1], &held[3], bc) < 0)
        return -1;
    int npu = special_either(nc[0], nc[1]), bench = npu > 0 ? special_either(bc[0], bc[1]) : 0;
    if (npu < 0 || bench < 0)
        return -1;
    if (npu && !bench)
        r->flags |= NAN_INF;
    return 0;
}

/* a summary row (cells.summary_row) of a pair of items: its cells and checkers' flags; items whose
 * statistics are plain numbers here, the others' statistics and cells by the rules' stats_of and
 * cells_of; 1 made, 0 for the Python path, -1 error */
static int pair_row(Row *r) {
    PyObject *ns[4], *bs[4], *nc[4], *bc[4], *held[4] = {NULL, NULL, NULL, NULL};
    int rc = -1, nk = plain_stats(r->n, ns), bk = nk > 0 ? plain_stats(r->b, bs) : 0;
    if (nk < 0 || bk < 0)
        return -1;
    if (nk && bk) { /* (their own cells) */
        memcpy(nc, ns, sizeof(nc));
        memcpy(bc, bs, sizeof(bc));
    } else if (general_cells(r, ns, bs, nc, bc, held) < 0) {
        goto done;
    }
    PyObject *rg = get(r->n, str_requires_grad);
    if (rg == NULL && PyErr_Occurred())
        goto done;
    PyObject *brg = get(r->b, str_requires_grad);
    if (brg == NULL && PyErr_Occurred())
        goto done;
    PyObject *rg_same = PyObject_RichCompare(rg ? rg : Py_None, brg ? brg : Py_None, Py_EQ);
    if (rg_same == NULL)
        goto done;
    r->cells[8] = rg_same;
    if ((rc = row_flags(r, nc, bc)) <= 0)
        goto done;
    rc = -1;
    PyObject *ratio = NULL;
    for (int i = 0; i < 4; i++) {
        Py_XDECREF(ratio);
        ratio = NULL;
        if (diff_cells(ns[i], bs[i], &r->cells[i], &r->cells[4 + i], &ratio) < 0)
            goto done;
    }
    r->has_ratio = ratio != Py_None;
    r->ratio = r->has_ratio ? PyFloat_AsDouble(ratio) : NAN;
    Py_DECREF(ratio);
    if (!(r->has_ratio && r->ratio == -1.0 && PyErr_Occurred()))
        rc = DONE;
done:
    for (int i = 0; i < 4; i++)
        Py_XDECREF(held[i]);
    return rc;
}

/* the Err_message cell of a set of messages (bits of N_MESSAGES), borrowed: made by the rules'
 * err_message the first time */
static PyObject *err_text(int mask) {
    if (R.texts[mask] != NULL)
        return R.texts[mask];
    PyObject *list = PyList_New(0);
    for (int i = 0; list != NULL && i < N_MESSAGES; i++)
        if (mask & (1 << i) && PyList_Append(list, R.checks.messages[i]) < 0)
            Py_CLEAR(list);
    if (list == NULL)
        return NULL;
    R.texts[mask] = PyObject_CallOneArg(R.err_message, list);
    Py_DECREF(list);
    return R.texts[mask];
}

/* "" (0), "input" (1) or "all" (2): the class of ignored APIs of the first input row's API name */
static int ignore_class(Row *rows, int n) {
    for (int i = 0; i < n; i++)
        if (!rows[i].out)
            return api_ignore_class(rows[i].name, R.checks.all_ignored, R.checks.input_ignored);
    return 0;
}

/* the answer of summary_pair with atol and rtol: (level, node_exceeds of the pair: True, False, or None
 * for the Python path), level a new reference (stolen) */
static PyObject *with_exceeds(PyObject *level, PyObject *npu_in, PyObject *npu_out, PyObject *bench_in,
                              PyObject *bench_out, double atol, double rtol) {
    int rc = rows_exceed(npu_in, npu_out, bench_in, bench_out, atol, rtol);
    if (rc < 0) {
        Py_DECREF(level);
        return NULL;
    }
    PyObject *exceeds = rc == ROWS_ASK_PYTHON ? Py_None : rc == ROWS_EXCEED ? Py_True : Py_False;
    return Py_BuildValue("(NO)", level, exceeds);
}

/* summary_pair(npu_in, npu_out, bench_in, bench_out, atol=None, rtol=None) -> the node's worst level (0,
 * 1, 2), its items given their compare cells: compare_pair in summary mode (not merged) when every item
 * has a partner, else None (the Python path, nothing changed). Given atol and rtol (a pair of the same
 * name, not a communication node's), (level, whether a row's error exceeds rtol: row_exceeds.c's answer
 * of node_exceeds, None where it leaves it to Python), both items' statistics read while in hand. */
PyObject *summary_pair(PyObject *self, PyObject *args) {
    PyObject *npu_in, *npu_out, *bench_in, *bench_out, *atol_o = Py_None, *rtol_o = Py_None;
    if (!PyArg_ParseTuple(args, "OOOO|OO", &npu_in, &npu_out, &bench_in, &bench_out, &atol_o, &rtol_o) ||
        summary_configured() < 0)
        return NULL;
    int tolerance = atol_o != Py_None && rtol_o != Py_None;
    double atol = tolerance ? PyFloat_AsDouble(atol_o) : 0.0, rtol = tolerance ? PyFloat_AsDouble(rtol_o) : 0.0;
    if ((atol == -1.0 || rtol == -1.0) && PyErr_Occurred())
        return NULL;
    if (!PyDict_CheckExact(npu_in) || !PyDict_CheckExact(npu_out) || !PyDict_CheckExact(bench_in) ||
        !PyDict_CheckExact(bench_out))
        Py_RETURN_NONE; /* (other mappings: the Python path) */
    PyObject *ng[MAX_GROUPS][MAX_ROWS], *bg[MAX_GROUPS][MAX_ROWS];
    Row rows[MAX_GROUPS * MAX_ROWS];
    int nc[MAX_GROUPS], bc[MAX_GROUPS], n = 0, rc;
    if ((rc = grouped(npu_in, npu_out, ng, nc)) <= 0 || (rc = grouped(bench_in, bench_out, bg, bc)) <= 0)
        return rc < 0 ? NULL : Py_NewRef(Py_None);
    PyObject *result = NULL, *by_name = NULL;
    for (int g = 0; g < R.n_groups; g++) {
        for (int i = 0; i < nc[g]; i++) {
            if (i >= bc[g])
                goto unhandled; /* an item without a partner */
            Row *r = &rows[n];
            memset(r, 0, sizeof(Row));
            r->n = ng[g][i];
            r->b = bg[g][i];
            n++;
            PyObject *name = get(r->n, str_full_op_name);
            if (name == NULL || !PyUnicode_CheckExact(name))
                goto unhandled_or_error;
            r->name = Py_NewRef(name);
            Py_ssize_t at = PyUnicode_Find(name, R.checks.output_part, 0, PyUnicode_GET_LENGTH(name), 1);
            if (at == -2)
                goto done;
            r->out = at >= 0;
            if ((rc = pair_row(r)) <= 0)
                goto unhandled_or_error;
        }
    }
    if (n == 0)
        goto unhandled;
    int ignore = ignore_class(rows, n);
    if (ignore < 0)
        goto done;
    int relerr = 0, warn = 0, first_out = -1, worst = 0;
    if (ignore == 0) { /* the node-wide RelativeErr and RelativeWarn checkers */
        double a = 0.0, b = 0.0;
        for (int i = 0; i < n; i++) {
            if (rows[i].out && first_out < 0)
                first_out = i;
            if (!rows[i].has_ratio)
                continue;
            if (rows[i].out) {
                if (rows[i].ratio > b)
                    b = rows[i].ratio;
            } else if (rows[i].ratio > a)
                a = rows[i].ratio;
        }
        a = fabs(a);
        b = fabs(b);
        relerr = a < R.checks.small_input_norm;
        warn = first_out >= 0 && ((a == 0 && b > R.checks.output_norm_over_zero) || (a != 0 && b / a > R.checks.tenfold));
    }
    for (int i = 0; i < n; i++) { /* each row's messages (checks.check_rows) */
        Row *r = &rows[i];
        int mask = 0;
        if (ignore != 2) {
            if (relerr && r->out && r->has_ratio && fabs(r->ratio) > R.checks.big_output_norm)
                mask |= NORM_OUTPUT;
            if (ignore != 1 || r->out)
                mask |= r->flags & (r->no_bench ? NAN_INF : NAN_INF | REQUIRES_GRAD | DTYPE | SHAPE);
            if (ignore == 0 && !r->out)
                mask |= r->flags & SCALAR;
            if (warn && i == first_out)
                mask |= TENFOLD;
        }
        int level = mask & ROW_ERRORS ? 2 : mask ? 1 : 0;
        if (level > worst)
            worst = level;
        PyObject *text = err_text(mask);
        if (text == NULL)
            goto done;
        r->cells[9] = Py_NewRef(R.results[level]);
        r->cells[10] = Py_NewRef(text);
    }
    /* write back: the cells of each row into the NPU item of its name (the last row of a name wins) */
    by_name = PyDict_New();
    if (by_name == NULL)
        goto done;
    for (int i = 0; i < n; i++) {
        PyObject *index = PyLong_FromLong(i);
        if (index == NULL || PyDict_SetItem(by_name, rows[i].name, index) < 0) {
            Py_XDECREF(index);
            goto done;
        }
        Py_DECREF(index);
    }
    PyObject *datas[2] = {npu_in, npu_out};
    for (int d = 0; d < 2; d++) {
        Py_ssize_t pos = 0;
        PyObject *k, *item;
        while (PyDict_Next(datas[d], &pos, &k, &item)) {
            PyObject *index = PyDict_GetItemWithError(by_name, k);
            if (index == NULL) {
                if (PyErr_Occurred())
                    goto done;
                continue;
            }
            Row *r = &rows[PyLong_AsLong(index)];
            for (int j = 0; j < N_WRITTEN; j++)
                if (PyDict_SetItem(item, R.written[j], r->cells[j]) < 0)
                    goto done;
        }
    }
    result = PyLong_FromLong(worst);
    if (result != NULL && tolerance)
        result = with_exceeds(result, npu_in, npu_out, bench_in, bench_out, atol, rtol);
    goto done;
unhandled_or_error:
    if (PyErr_Occurred())
        goto done;
unhandled:
    result = Py_NewRef(Py_None);
done:
    Py_XDECREF(by_name);
    for (int i = 0; i < n; i++) {
        Py_CLEAR(rows[i].name);
        for (int j = 0; j < N_WRITTEN; j++)
            Py_CLEAR(rows[i].cells[j]);
    }
    return result;
}
