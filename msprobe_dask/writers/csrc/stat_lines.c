/* stat_lines: the csv lines of a statistics table part straight from its rows (writers/stat_lines.py),
 * without the table: table.build_table (its cells: _stat_columns, metrics/stats.py's stat_diffs;
 * judge/rules.py's judge_columns) and csv_writer.csv_lines, which stay the definition;
 * tests/writers/test_stat_lines.py checks that both give the same bytes. stat_columns: the same cells
 * as the table's columns, where the table is wanted (build_table's ``judged``). Every rule, text and number
 * is handed with the call (stat_lines.py's RULES): the diffs of two finite floats and the checks of
 * rows of texts are made here, any other pair's diff cells by the rules' stat_diff, any other cell's
 * reading by the rules' functions (of texts, asked once a text a call: a part's rows repeat a few).
 * None: a row this code does not take (the Python path runs). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>

#include "csv_cells.h"
#include "../../csrc/checker_rules.h"
#include "../../csrc/ignored_apis.h"
#include "../../csrc/py_calls.h"

/* a row's cells by slot (stat_lines.py's SLOTS: the columns of a statistics table, in their order) */
enum { BASE = 0, DIFFS = 8, RELS = 12, STATS = 16, CONSISTENT = 24, RESULT = 25, ERR = 26, STACK = 27, N_SLOTS = 28 };
/* LeafRow's fields */
enum { NAME, ENTRY, STATE, DTYPE_F, SHAPE_F, GRAD, STATS_F, N_FIELDS };

typedef struct {
    Rules csv;
    PyObject *field, *order, *na, *same, *inf, *percent, *stat_diff, *fraction, *nan_or_inf;
    PyObject *verdict, *no_grad, *same_value, *same_dtype;
    CheckerRules checks; /* RULES.checkers */
    int slots[N_SLOTS], n_columns; /* the slot of each column */
    int plain_rel; /* the text of a relative error made here (a float's repr, the percent) needs no change */
    PyObject *verdicts[1 << N_MESSAGES]; /* (Result, Err_message) of each set of messages, made when met */
    /* the rules' answers for values a part's rows repeat ('None', a list's text, the statistics of integer
     * tensors, a pair of dtypes), asked once a value (dicts, made when met): stat_diff's cells of a
     * memo_pair, keyed (x, y); is_nan_or_inf of a text; same_dtype's and same_value's truths of a
     * memo_pair */
    PyObject *pair_diffs, *text_nan_inf, *dtypes_same, *values_same;
} Rules_;

typedef struct {
    PyObject *n, *b;        /* the NPU row and its Bench partner (borrowed; b NULL: none) */
    PyObject *cells[16]; /* diffs, relative errors (NULL: r, a percentage), statistics (held) */
    double r[4];            /* a relative error made here, as a percentage */
    double fraction;        /* NormRelativeErr's relative_fraction (has_fraction) */
    int has_fraction, norm_inf, out, mask;
} Row;

static PyObject *field_of(PyObject *row, int i) { /* a LeafRow's field (borrowed) */
    return PyTuple_GET_ITEM(row, i);
}

/* whether a LeafRow this code takes: a tuple whose texts are str and statistics a 4-tuple */
static int taken(PyObject *row) {
    if (!PyTuple_Check(row) || PyTuple_GET_SIZE(row) < N_FIELDS)
        return 0;
    for (int i = NAME; i <= GRAD; i++)
        if (!PyUnicode_CheckExact(field_of(row, i)))
            return 0;
    PyObject *stats = field_of(row, STATS_F);
    return PyTuple_Check(stats) && PyTuple_GET_SIZE(stats) == 4;
}

/* a truth of Python's ``a op b`` (-1 on error) */
static int compared(PyObject *a, PyObject *b, int op) {
    return PyObject_RichCompareBool(a, b, op);
}

/* the statistics cells of a row (_stat_columns): float(v) where the column is float, the Bench ones
 * N/A without a partner */
static int stat_cells(Row *w, const int *as_float, Rules_ *R) {
    PyObject *sides[2] = {w->n, w->b};
    for (int s = 0; s < 2; s++) {
        for (int i = 0; i < 4; i++) {
            PyObject *v;
            if (sides[s] == NULL)
                v = Py_NewRef(R->na);
            else {
                v = PyTuple_GET_ITEM(field_of(sides[s], STATS_F), i);
                v = as_float[4 * s + i] && !PyFloat_CheckExact(v) ? PyNumber_Float(v) : Py_NewRef(v);
                if (v == NULL)
                    return -1;
            }
            w->cells[STATS - DIFFS + 4 * s + i] = v;
        }
    }
    return 0;
}

/* the memo *memo (a dict made when first needed) */
static PyObject *memo_of(PyObject **memo) {
    return *memo != NULL ? *memo : (*memo = PyDict_New());
}

/* whether the rules' answers for x and y may be kept by their values: two texts or two ints (of exact
 * types: 1, 1.0 and True are equal keys that the rules may answer for differently) */
static int memo_pair(PyObject *x, PyObject *y) {
    return (PyUnicode_CheckExact(x) && PyUnicode_CheckExact(y)) || (PyLong_CheckExact(x) && PyLong_CheckExact(y));
}

/* the truth of f(x, y): 1, 0, or -1 on error; of a memo_pair asked once a pair (*memo) */
static int pair_truth(PyObject *f, PyObject *x, PyObject *y, PyObject **memo) {
    PyObject *key = NULL;
    if (memo_pair(x, y)) {
        if (memo_of(memo) == NULL || (key = PyTuple_Pack(2, x, y)) == NULL)
            return -1;
        PyObject *known = PyDict_GetItemWithError(*memo, key);
        if (known != NULL || PyErr_Occurred()) {
            Py_DECREF(key);
            return known == NULL ? -1 : known == Py_True;
        }
    }
    PyObject *v = PyObject_CallFunctionObjArgs(f, x, y, NULL);
    int truth = v == NULL ? -1 : PyObject_IsTrue(v);
    Py_XDECREF(v);
    if (truth >= 0 && key != NULL && PyDict_SetItem(*memo, key, truth ? Py_True : Py_False) < 0)
        truth = -1;
    Py_XDECREF(key);
    return truth;
}

/* the rules' stat_diff(x, y)'s two cells (new references) into cells; of a memo_pair asked once a pair */
static int pair_diff(PyObject *x, PyObject *y, PyObject **cells, Rules_ *R) {
    if (!memo_pair(x, y))
        return call_tuple(R->stat_diff, x, y, 2, cells, "stat_lines: stat_diff");
    PyObject *memo = memo_of(&R->pair_diffs), *key = memo == NULL ? NULL : PyTuple_Pack(2, x, y);
    if (key == NULL)
        return -1;
    PyObject *known = PyDict_GetItemWithError(memo, key);
    int rc = 0;
    if (known != NULL) {
        cells[0] = Py_NewRef(PyTuple_GET_ITEM(known, 0));
        cells[1] = Py_NewRef(PyTuple_GET_ITEM(known, 1));
    } else if (PyErr_Occurred() || call_tuple(R->stat_diff, x, y, 2, cells, "stat_lines: stat_diff") < 0)
        rc = -1;
    else {
        PyObject *pair = PyTuple_Pack(2, cells[0], cells[1]);
        rc = pair == NULL || PyDict_SetItem(memo, key, pair) < 0 ? -1 : 0;
        Py_XDECREF(pair);
        if (rc < 0) {
            Py_DECREF(cells[0]);
            Py_DECREF(cells[1]);
        }
    }
    Py_DECREF(key);
    return rc;
}

/* two ints of a column whose diffs are float64 (stat_diffs' in_float) as doubles: 1, 0 if they are
 * not two ints or do not fit a double (the rules' stat_diff takes them), -1 on error */
static int ints_as_doubles(PyObject *x, PyObject *y, double *a, double *b) {
    if (!PyLong_CheckExact(x) || !PyLong_CheckExact(y))
        return 0;
    *a = PyLong_AsDouble(x);
    *b = *a == -1.0 && PyErr_Occurred() ? -1.0 : PyLong_AsDouble(y);
    if (*b == -1.0 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError))
            return -1;
        PyErr_Clear();
        return 0;
    }
    return 1;
}

/* the diff and relative-error cells of statistic i (stat_diffs; in_float: its column's diffs are
 * float64), and of NormRelativeErr what the checkers read */
static int diff_cells(Row *w, int i, int in_float, Rules_ *R) {
    PyObject *x = w->cells[STATS - DIFFS + i], *y = w->cells[STATS - DIFFS + 4 + i];
    PyObject **d = &w->cells[i], **t = &w->cells[4 + i];
    double a = 0.0, b = 0.0;
    int numbers = PyFloat_CheckExact(x) && PyFloat_CheckExact(y);
    if (numbers) {
        a = PyFloat_AS_DOUBLE(x);
        b = PyFloat_AS_DOUBLE(y);
    } else if (in_float && (numbers = ints_as_doubles(x, y, &a, &b)) < 0)
        return -1;
    if (numbers) {
        if (isfinite(a) && isfinite(b)) {
            if (a == b && (a != 0.0 || copysign(1.0, a) == copysign(1.0, b))) {
                *d = Py_NewRef(R->same);
                *t = Py_NewRef(R->same);
                return 0;
            }
            double diff = a - b, r = b == 0.0 ? 0.0 : fabs(diff / b * 100);
            if (isfinite(diff) && isfinite(r)) {
                if ((*d = PyFloat_FromDouble(diff)) == NULL)
                    return -1;
                if (b == 0.0) {
                    *t = Py_NewRef(R->inf);
                    w->norm_inf = i == 3;
                } else {
                    w->r[i] = r;
                    if (i == 3) {
                        w->fraction = r / 100;
                        w->has_fraction = 1;
                    }
                }
                return 0;
            }
        }
    }
    PyObject *cells[2];
    if (pair_diff(x, y, cells, R) < 0)
        return -1;
    *d = cells[0];
    *t = cells[1];
    if (i != 3)
        return 0;
    int inf = compared(*t, R->inf, Py_EQ);
    PyObject *f = inf < 0 ? NULL : PyObject_CallOneArg(R->fraction, *t);
    if (f == NULL)
        return -1;
    w->norm_inf = inf;
    w->has_fraction = f != Py_None;
    w->fraction = w->has_fraction ? PyFloat_AsDouble(f) : 0.0;
    Py_DECREF(f);
    return w->has_fraction && w->fraction == -1.0 && PyErr_Occurred() ? -1 : 0;
}

/* is_nan_or_inf of a cell: 1, 0, or -1 on error */
static int nan_or_inf(PyObject *v, Rules_ *R) {
    if (PyFloat_CheckExact(v))
        return !isfinite(PyFloat_AS_DOUBLE(v));
    if (PyLong_CheckExact(v))
        return 0;
    PyObject *memo = PyUnicode_CheckExact(v) ? memo_of(&R->text_nan_inf) : NULL;
    if (memo == NULL && PyErr_Occurred())
        return -1;
    PyObject *known = memo == NULL ? NULL : PyDict_GetItemWithError(memo, v);
    if (known != NULL)
        return known == Py_True;
    if (PyErr_Occurred())
        return -1;
    PyObject *t = PyObject_CallOneArg(R->nan_or_inf, v);
    int truth = t == NULL ? -1 : PyObject_IsTrue(t);
    Py_XDECREF(t);
    if (truth >= 0 && memo != NULL && PyDict_SetItem(memo, v, truth ? Py_True : Py_False) < 0)
        return -1;
    return truth;
}

/* the largest relative fraction of rows [from, to) of the kind ``out`` (max(): a NaN first stays); 0.0
 * if none has one */
static double max_fraction(Row *rows, Py_ssize_t from, Py_ssize_t to, int out) {
    double m = 0.0;
    int held = 0;
    for (Py_ssize_t i = from; i < to; i++)
        if (rows[i].out == out && rows[i].has_fraction && (!held || rows[i].fraction > m)) {
            m = rows[i].fraction;
            held = 1;
        }
    return m;
}

/* the checks of one row against its partner (judge_columns' _pair_checks); out: an output row */
static int pair_checks(Row *w, Rules_ *R) {
    PyObject *n = w->n, *b = w->b;
    int t;
    if (b == NULL || (t = compared(field_of(b, NAME), R->na, Py_EQ)) > 0)
        return 0;
    if (t < 0)
        return -1;
    PyObject *grad = field_of(n, GRAD), *bgrad = field_of(b, GRAD);
    if ((t = PySequence_Contains(R->no_grad, grad)) == 0 && (t = PySequence_Contains(R->no_grad, bgrad)) == 0 &&
        (t = compared(grad, bgrad, Py_NE)) > 0)
        w->mask |= REQUIRES_GRAD;
    if (t < 0)
        return -1;
    PyObject *dtype = field_of(n, DTYPE_F), *bdtype = field_of(b, DTYPE_F);
    t = 0;
    if (!w->out && (t = PyUnicode_Contains(dtype, R->checks.not_a_tensor)) > 0 &&
        (t = PyUnicode_Contains(bdtype, R->checks.not_a_tensor)) > 0 &&
        (t = compared(field_of(n, SHAPE_F), R->checks.scalar_shape, Py_EQ)) > 0) {
        PyObject *x = w->cells[STATS - DIFFS], *y = w->cells[STATS - DIFFS + 4];
        if (PyFloat_CheckExact(x) && PyFloat_CheckExact(y)) { /* same_value of two floats: equal, or NaN */
            double a = PyFloat_AS_DOUBLE(x), b = PyFloat_AS_DOUBLE(y);
            t = !(a == b || (isnan(a) && isnan(b)));
        } else {
            t = pair_truth(R->same_value, x, y, &R->values_same);
            t = t < 0 ? -1 : !t;
        }
        if (t > 0)
            w->mask |= SCALAR;
    }
    if (t < 0)
        return -1;
    if ((t = compared(dtype, bdtype, Py_NE)) > 0) {
        t = pair_truth(R->same_dtype, dtype, bdtype, &R->dtypes_same);
        t = t < 0 ? -1 : !t;
        for (Py_ssize_t i = 0; t > 0 && i < PyTuple_GET_SIZE(R->checks.fused); i++) {
            t = PySequence_Contains(field_of(b, NAME), PyTuple_GET_ITEM(R->checks.fused, i));
            t = t < 0 ? -1 : !t;
        }
        if (t > 0)
            w->mask |= DTYPE;
    }
    if (t < 0)
        return -1;
    if ((t = compared(field_of(n, SHAPE_F), field_of(b, SHAPE_F), Py_NE)) > 0)
        w->mask |= SHAPE;
    return t < 0 ? -1 : 0;
}

/* "" (0), "input" (1) or "all" (2): the ignored APIs' class of the group's API (judge_columns: the
 * name of its first input row, or of its first row) */
static int ignore_class(Row *rows, Py_ssize_t from, Py_ssize_t to, Rules_ *R) {
    Py_ssize_t first = from;
    while (first < to && rows[first].out)
        first++;
    return api_ignore_class(field_of(rows[first < to ? first : from].n, NAME), R->checks.all_ignored, R->checks.input_ignored);
}

/* judge_columns of the group of rows [from, to) (one dump entry): each row's mask of messages */
static int judge_group(Row *rows, Py_ssize_t from, Py_ssize_t to, Rules_ *R) {
    int ignore = ignore_class(rows, from, to, R);
    if (ignore < 0)
        return -1;
    for (Py_ssize_t i = from; ignore < 2 && i < to; i++) {
        Row *w = &rows[i];
        if (ignore == 1 && !w->out)
            continue;
        int npu = nan_or_inf(w->cells[STATS - DIFFS], R);
        if (npu == 0)
            npu = nan_or_inf(w->cells[STATS - DIFFS + 1], R);
        int bench = npu > 0 ? nan_or_inf(w->cells[STATS - DIFFS + 4], R) : 0;
        if (npu > 0 && bench == 0)
            bench = nan_or_inf(w->cells[STATS - DIFFS + 5], R);
        if (npu < 0 || bench < 0)
            return -1;
        if (npu && !bench)
            w->mask |= NAN_INF;
        if (pair_checks(w, R) < 0)
            return -1;
    }
    if (ignore != 0)
        return 0;
    double norm_in = max_fraction(rows, from, to, 0), norm_out = max_fraction(rows, from, to, 1);
    Py_ssize_t first_out = -1;
    for (Py_ssize_t i = from; i < to; i++) {
        Row *w = &rows[i];
        if (!w->out)
            continue;
        if (first_out < 0)
            first_out = i;
        double norm = w->norm_inf ? INFINITY : w->has_fraction ? w->fraction : 0.0;
        if (norm_in < R->checks.small_input_norm && norm > R->checks.big_output_norm)
            w->mask |= NORM_OUTPUT;
    }
    if (first_out >= 0 && ((norm_in == 0 && norm_out > R->checks.output_norm_over_zero) ||
                           (norm_in > 0 && norm_out / norm_in > R->checks.tenfold)))
        rows[first_out].mask |= TENFOLD;
    return 0;
}

/* (Result, Err_message) of a set of messages, borrowed: the rules' verdict, asked once a set */
static PyObject *verdict(int mask, Rules_ *R) {
    if (R->verdicts[mask] != NULL)
        return R->verdicts[mask];
    int n = 0;
    for (int i = 0; i < N_MESSAGES; i++)
        n += (mask >> i) & 1;
    PyObject *messages = PyTuple_New(n);
    if (messages == NULL)
        return NULL;
    for (int i = 0, k = 0; i < N_MESSAGES; i++)
        if (mask & (1 << i))
            PyTuple_SET_ITEM(messages, k++, Py_NewRef(R->checks.messages[i]));
    PyObject *v = PyObject_CallOneArg(R->verdict, messages);
    Py_DECREF(messages);
    if (v != NULL && !(PyTuple_Check(v) && PyTuple_GET_SIZE(v) == 2)) {
        PyErr_SetString(PyExc_TypeError, "stat_lines: verdict must return a 2-tuple");
        Py_CLEAR(v);
    }
    return R->verdicts[mask] = v;
}

/* row w's line: its cells in the order of the columns */
static int put_row(Buffer *out, Row *w, PyObject *stack, Rules_ *R) {
    PyObject *v = verdict(w->mask, R);
    if (v == NULL)
        return -1;
    for (int j = 0; j < R->n_columns; j++) {
        if (j > 0 && put(out, &R->csv.delimiter_char, 1) < 0)
            return -1;
        int slot = R->slots[j];
        PyObject *cell = NULL;
        if (slot >= BASE && slot < DIFFS) {
            PyObject *side = slot % 2 ? w->b : w->n;
            cell = side == NULL ? R->na : field_of(side, (int[]){NAME, DTYPE_F, SHAPE_F, GRAD}[slot / 2]);
        } else if (slot >= DIFFS && slot < CONSISTENT) {
            cell = w->cells[slot - DIFFS];
            if (cell == NULL) { /* a relative error made here: its float, then the percent sign */
                PyObject *r = PyFloat_FromDouble(w->r[slot - RELS]);
                int ok = r == NULL ? -1 : deferred_add(&R->csv.floats, out->len, r);
                Py_XDECREF(r);
                Py_ssize_t size;
                const char *percent = PyUnicode_AsUTF8AndSize(R->percent, &size);
                if (ok < 0 || percent == NULL || put(out, percent, size) < 0)
                    return -1;
                continue;
            }
        } else if (slot == CONSISTENT) {
            PyObject *bgrad = w->b == NULL ? R->na : field_of(w->b, GRAD);
            cell = PyObject_RichCompare(field_of(w->n, GRAD), bgrad, Py_EQ);
            int ok = cell == NULL ? -1 : put_cell(out, cell, &R->csv, R->field);
            Py_XDECREF(cell);
            if (ok < 0)
                return -1;
            continue;
        } else if (slot == RESULT || slot == ERR)
            cell = PyTuple_GET_ITEM(v, slot - RESULT);
        else if (slot == STACK && stack != NULL)
            cell = stack;
        else {
            PyErr_SetString(PyExc_ValueError, "stat_lines: a column of no slot");
            return -1;
        }
        if (put_cell(out, cell, &R->csv, R->field) < 0)
            return -1;
    }
    return put(out, R->csv.end_text, R->csv.end_n);
}

static int take_rules(PyObject *rules, Rules_ *R) {
    PyObject *checkers;
    if (!PyArg_ParseTuple(rules, "(UUUOUUU)OO!UUUUOOOOOO!OO:stat_lines rules", &R->csv.start, &R->csv.inside,
                          &R->csv.quote, &R->csv.dumps, &R->csv.delimiter, &R->csv.quote_mark, &R->csv.line_end, &R->field, &PyTuple_Type, &R->order, &R->na, &R->same,
                          &R->inf, &R->percent, &R->stat_diff, &R->fraction, &R->nan_or_inf, &checkers,
                          &R->verdict, &PyTuple_Type, &R->no_grad, &R->same_value, &R->same_dtype) ||
        take_checker_rules(checkers, &R->checks, "stat_lines") < 0 || classify(&R->csv) < 0)
        return -1;
    R->n_columns = (int)PyTuple_GET_SIZE(R->order);
    if (R->n_columns > N_SLOTS) {
        PyErr_SetString(PyExc_ValueError, "stat_lines: more columns than slots");
        return -1;
    }
    for (int j = 0; j < R->n_columns; j++) {
        long slot = PyLong_AsLong(PyTuple_GET_ITEM(R->order, j));
        if (slot < 0 || slot >= N_SLOTS) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "stat_lines: a column of no slot");
            return -1;
        }
        R->slots[j] = (int)slot;
    }
    /* a relative error's text: a non-negative finite float's repr and the percent text */
    R->plain_rel = 1;
    const char *repr_chars = "0123456789.e+-";
    for (const char *c = repr_chars; *c; c++)
        R->plain_rel &= !(char_class(&R->csv, (Py_UCS4)*c) & (INSIDE | QUOTE)) && (*c > '9' || *c < '0' || !(char_class(&R->csv, (Py_UCS4)*c) & START));
    for (Py_ssize_t i = 0; i < PyUnicode_GET_LENGTH(R->percent); i++)
        R->plain_rel &= !(char_class(&R->csv, PyUnicode_READ_CHAR(R->percent, i)) & (INSIDE | QUOTE));
    return 0;
}

/* the cells and checkers' masks of the rows npus[i], benches[i] (lists; benches[i] None: no partner;
 * float_stats: 12 bools) into *rows (PyMem; free_rows), *made of them holding cells: 1, 0 for a row
 * this code does not take, -1 error */
static int judged_rows(PyObject *npus, PyObject *benches, PyObject *float_stats, Rules_ *R, Row **rows, Py_ssize_t *made) {
    Py_ssize_t n = PyList_GET_SIZE(npus);
    *rows = NULL;
    *made = 0;
    if (PyList_GET_SIZE(benches) != n || PyTuple_GET_SIZE(float_stats) != 12) {
        PyErr_SetString(PyExc_ValueError, "stat_lines: sides or float_stats of the wrong sizes");
        return -1;
    }
    int as_float[12]; /* the 8 statistics columns, then the 4 diff columns (table.float_stat_columns) */
    for (int i = 0; i < 12; i++)
        if ((as_float[i] = PyObject_IsTrue(PyTuple_GET_ITEM(float_stats, i))) < 0)
            return -1;
    if ((*rows = PyMem_Calloc(n ? n : 1, sizeof(Row))) == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        Row *w = &(*rows)[i];
        *made = i + 1;
        w->n = PyList_GET_ITEM(npus, i);
        w->b = PyList_GET_ITEM(benches, i);
        w->b = w->b == Py_None ? NULL : w->b;
        if (!taken(w->n) || (w->b != NULL && !taken(w->b)))
            return 0;
        Py_ssize_t at = PyUnicode_Find(field_of(w->n, NAME), R->checks.output_part, 0, PY_SSIZE_T_MAX, 1);
        if (at == -2)
            return -1;
        w->out = at >= 0;
        if (stat_cells(w, as_float, R) < 0)
            return -1;
        for (int k = 0; k < 4; k++)
            if (diff_cells(w, k, as_float[8 + k], R) < 0)
                return -1;
    }
    for (Py_ssize_t from = 0, to = 1; to <= n; to++) { /* the groups: runs of rows of one entry */
        if (to < n) {
            int same = compared(field_of((*rows)[to].n, ENTRY), field_of((*rows)[to - 1].n, ENTRY), Py_EQ);
            if (same < 0)
                return -1;
            if (same)
                continue;
        }
        if (judge_group(*rows, from, to, R) < 0)
            return -1;
        from = to;
    }
    return 1;
}

static void free_rows(Row *rows, Py_ssize_t made, Rules_ *R) {
    for (Py_ssize_t i = 0; rows != NULL && i < made; i++)
        for (int j = 0; j < 16; j++)
            Py_XDECREF(rows[i].cells[j]);
    for (int i = 0; i < 1 << N_MESSAGES; i++)
        Py_XDECREF(R->verdicts[i]);
    Py_CLEAR(R->pair_diffs);
    Py_CLEAR(R->text_nan_inf);
    Py_CLEAR(R->dtypes_same);
    Py_CLEAR(R->values_same);
    PyMem_Free(rows);
    release_cells(&R->csv);
}

/* a relative error made here as its cell: repr(r) and the percent text */
static PyObject *rel_cell(double r, Rules_ *R) {
    char *t = PyOS_double_to_string(r, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
    if (t == NULL)
        return NULL;
    PyObject *cell;
    if (PyUnicode_IS_ASCII(R->percent)) { /* (the usual case, made without a format) */
        size_t n = strlen(t);
        Py_ssize_t m = PyUnicode_GET_LENGTH(R->percent);
        if ((cell = PyUnicode_New((Py_ssize_t)n + m, 127)) != NULL) {
            memcpy(PyUnicode_1BYTE_DATA(cell), t, n);
            memcpy(PyUnicode_1BYTE_DATA(cell) + n, PyUnicode_1BYTE_DATA(R->percent), m);
        }
    } else
        cell = PyUnicode_FromFormat("%s%U", t, R->percent);
    PyMem_Free(t);
    return cell;
}

/* the cell of slot ``slot`` (DIFFS ... ERR) of row w, a new reference */
static PyObject *cell_of(Row *w, int slot, Rules_ *R) {
    if (slot < CONSISTENT) {
        PyObject *cell = w->cells[slot - DIFFS];
        return cell != NULL ? Py_NewRef(cell) : rel_cell(w->r[slot - RELS], R);
    }
    if (slot == CONSISTENT)
        return PyObject_RichCompare(field_of(w->n, GRAD), w->b == NULL ? R->na : field_of(w->b, GRAD), Py_EQ);
    PyObject *v = verdict(w->mask, R);
    return v == NULL ? NULL : Py_NewRef(PyTuple_GET_ITEM(v, slot - RESULT));
}

/* the columns of slots[0 .. count) (each one of DIFFS ... ERR; a tuple of lists) of the n judged rows
 * (judged_rows) */
static PyObject *judged_columns(Row *rows, Py_ssize_t n, const int *slots, int count, Rules_ *R) {
    PyObject *result = PyTuple_New(count);
    for (int k = 0; result != NULL && k < count; k++) {
        PyObject *column = PyList_New(n);
        if (column != NULL)
            PyTuple_SET_ITEM(result, k, column);
        for (Py_ssize_t i = 0; column != NULL && i < n; i++) {
            PyObject *cell = cell_of(&rows[i], slots[k], R);
            if (cell == NULL)
                column = NULL;
            else
                PyList_SET_ITEM(column, i, cell);
        }
        if (column == NULL)
            Py_CLEAR(result);
    }
    return result;
}

/* stat_columns(npus, benches, float_stats, rules): the columns of slots DIFFS ... ERR (lists) of the
 * statistics table of these rows (judged_rows), or None for the Python path */
PyObject *stat_columns(PyObject *self, PyObject *args) {
    PyObject *npus, *benches, *float_stats, *rules;
    Rules_ R = {0};
    if (!PyArg_ParseTuple(args, "O!O!O!O!:stat_columns", &PyList_Type, &npus, &PyList_Type, &benches, &PyTuple_Type,
                          &float_stats, &PyTuple_Type, &rules) ||
        take_rules(rules, &R) < 0)
        return NULL;
    Row *rows;
    Py_ssize_t made, n = PyList_GET_SIZE(npus);
    PyObject *result = NULL;
    int rc = judged_rows(npus, benches, float_stats, &R, &rows, &made);
    if (rc == 0)
        result = Py_NewRef(Py_None);
    else if (rc > 0) {
        int slots[STACK - DIFFS];
        for (int slot = DIFFS; slot < STACK; slot++)
            slots[slot - DIFFS] = slot;
        result = judged_columns(rows, n, slots, STACK - DIFFS, &R);
    }
    free_rows(rows, made, &R);
    return result;
}

/* stat_lines(npus, benches, float_stats, stacks, rules[, slots]): the csv lines (bytes) of the
 * statistics table of these rows (judged_rows; stacks: the NPU_Stack_Info cells, or None), given slots
 * (a tuple of slots of DIFFS ... ERR) (lines, those columns of the same pass, as stat_columns makes
 * them); or None for the Python path */
PyObject *stat_lines(PyObject *self, PyObject *args) {
    PyObject *npus, *benches, *float_stats, *stacks, *rules, *wanted = NULL;
    int slots[STACK - DIFFS], count = 0;
    Rules_ R = {0};
    if (!PyArg_ParseTuple(args, "O!O!O!OO!|O!:stat_lines", &PyList_Type, &npus, &PyList_Type, &benches, &PyTuple_Type,
                          &float_stats, &stacks, &PyTuple_Type, &rules, &PyTuple_Type, &wanted) ||
        take_rules(rules, &R) < 0)
        return NULL;
    if (wanted != NULL) {
        if (PyTuple_GET_SIZE(wanted) > STACK - DIFFS) {
            PyErr_SetString(PyExc_ValueError, "stat_lines: more columns than slots");
            return NULL;
        }
        for (count = 0; count < PyTuple_GET_SIZE(wanted); count++) {
            long slot = PyLong_AsLong(PyTuple_GET_ITEM(wanted, count));
            if (slot < DIFFS || slot >= STACK) {
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_ValueError, "stat_lines: a column of no judged slot");
                return NULL;
            }
            slots[count] = (int)slot;
        }
    }
    if (!R.plain_rel)
        Py_RETURN_NONE;
    Py_ssize_t n = PyList_GET_SIZE(npus);
    if (stacks != Py_None && !(PyList_Check(stacks) && PyList_GET_SIZE(stacks) == n)) {
        PyErr_SetString(PyExc_ValueError, "stat_lines: stacks of the wrong size");
        return NULL;
    }
    Row *rows;
    Py_ssize_t made;
    PyObject *result = NULL;
    Buffer out = {0};
    int rc = judged_rows(npus, benches, float_stats, &R, &rows, &made);
    if (rc == 0)
        result = Py_NewRef(Py_None);
    for (Py_ssize_t i = 0; rc > 0 && i < n; i++)
        if (put_row(&out, &rows[i], stacks == Py_None ? NULL : PyList_GET_ITEM(stacks, i), &R) < 0)
            rc = -1;
    if (rc > 0)
        result = deferred_text(&R.csv.floats, R.csv.dumps, out.data, out.len, 1);
    if (rc > 0 && result != NULL && wanted != NULL) {
        PyObject *columns = judged_columns(rows, n, slots, count, &R);
        Py_SETREF(result, columns == NULL ? NULL : PyTuple_Pack(2, result, columns));
        Py_XDECREF(columns);
    }
    PyMem_Free(out.data);
    free_rows(rows, made, &R);
    return result;
}
