/* A dump entry's compare rows made straight from its JSON text, without the parsed entry (a statistics
 * compare's parts need nothing else of it): leaf_rows(text, start, end, entry) is
 *
 *     entry_rows(entry, json.loads(text[start:end]))       (dump/rows.py)
 *
 * for an entry json.loads reads and check_entry accepts, or None for an entry this code does not
 * take: anything but tensors (their dtype a string, shape a list of ints, statistics numbers, bools
 * or nulls), plain scalar arguments (a number, bool, null or string value), process groups (their ranks
 * a list of ints or null), nulls, and their lists and dicts; a class_type (P2P ops), the other kinds
 * rows.py renders by rules of their own (sizes, slices, ellipses) and peer arguments; strings with
 * escapes or outside printable ASCII, integers of 19 digits or more, duplicate keys, deep nesting,
 * and text json would refuse. The Python path then makes the rows, and its errors.
 *
 * rows.py's rules (the row type, its texts, the entry's parts and shapes, the md5 of a scalar) are its
 * LEAF_RULES, handed once by configure_leaf_rows(rules). The entry is read into entry_text.c's tape of
 * values, then walked as rows._walk walks the parsed entry. */
#include "speedups.h"

#define ROW_FIELDS 11 /* rows.LeafRow's */
#define MAX_PARTS 8

/* rows.LEAF_RULES */
static struct {
    PyObject *rules; /* held: holds the objects below */
    PyTypeObject *row;
    PyObject *na, *no_data_name, *no_md5, *crc, *empty_shape, *none_text, *true_text, *false_text;
    PyObject *scalar_md5s, *type_texts; /* the answers of scalar_md5 and scalar_type_text (dicts, made when met) */
    Text peer_arguments[MAX_TEXTS], own_kinds[MAX_TEXTS], parameters_grad, group_kind, group_ranks;
    PyObject *parameters_grad_state;
    int n_peer_arguments, n_own_kinds;
    struct {
        Text key;
        PyObject *state; /* also the part's name after the entry's: ``entry.state`` */
    } parts[MAX_PARTS];
    int n_parts;
    struct {
        Text key;
        int kind; /* J_LIST or J_OBJ */
    } shapes[MAX_PARTS];
    int n_shapes;
    char sep; /* rows.NAME_SEP: between an entry name's parts and a leaf's path's */
} LR;

static void release_leaf_rules(void) {
    Py_XDECREF(LR.rules);
    Py_XDECREF(LR.empty_shape);
    Py_XDECREF(LR.none_text);
    Py_XDECREF(LR.true_text);
    Py_XDECREF(LR.false_text);
    Py_XDECREF(LR.scalar_md5s);
    Py_XDECREF(LR.type_texts);
    memset(&LR, 0, sizeof(LR));
}

/* an ASCII str's text (held by the rules), or -1 with a TypeError */
static int rule_text(PyObject *v, Text *out) {
    if (!PyUnicode_CheckExact(v) || !PyUnicode_IS_ASCII(v)) {
        PyErr_SetString(PyExc_TypeError, "configure_leaf_rows: rules of the wrong types");
        return -1;
    }
    out->s = (const char *)PyUnicode_1BYTE_DATA(v);
    out->n = PyUnicode_GET_LENGTH(v);
    return 0;
}

/* a tuple of at most ``max`` items, or NULL with a TypeError */
static PyObject *rule_tuple(PyObject *v, Py_ssize_t max) {
    if (PyTuple_Check(v) && PyTuple_GET_SIZE(v) <= max)
        return v;
    PyErr_SetString(PyExc_TypeError, "configure_leaf_rows: rules of the wrong types");
    return NULL;
}

static int take_leaf_rules(PyObject *rules) {
    /* rows.LeafRules, read by field name (the rules hold each field's value) */
    static const char *const fields[13] = {"row",          "na",        "no_data_name", "no_md5",
                                           "peer_arguments", "own_kinds", "entry_parts",  "entry_shapes",
                                           "parameters_grad", "crc",     "text",         "process_group",
                                           "separator"};
    PyObject *f[13];
    for (int i = 0; i < 13; i++) {
        if ((f[i] = PyObject_GetAttrString(rules, fields[i])) == NULL)
            return -1;
        Py_DECREF(f[i]);
    }
    PyObject *row = f[0], *peers, *kinds, *parts, *shapes, *group;
    if (!PyType_Check(row) || !PyType_IsSubtype((PyTypeObject *)row, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "configure_leaf_rows: the row type must be a tuple's");
        return -1;
    }
    PyObject *row_fields = PyObject_GetAttrString(row, "_fields"); /* (a NamedTuple's) */
    int fields_ok = row_fields != NULL && PyTuple_Check(row_fields) && PyTuple_GET_SIZE(row_fields) == ROW_FIELDS;
    Py_XDECREF(row_fields);
    if (!fields_ok) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_TypeError, "configure_leaf_rows: the row type must have %d fields", ROW_FIELDS);
        return -1;
    }
    LR.row = (PyTypeObject *)row;
    Text unused;
    if (rule_text(f[1], &unused) < 0 || rule_text(f[2], &unused) < 0 || rule_text(f[3], &unused) < 0 ||
        rule_text(f[8], &LR.parameters_grad) < 0 || LR.parameters_grad.n == 0)
        return -1;
    Text sep;
    if (rule_text(f[12], &sep) < 0)
        return -1;
    if (sep.n != 1) {
        PyErr_SetString(PyExc_ValueError, "configure_leaf_rows: the separator must be one ASCII character");
        return -1;
    }
    LR.sep = sep.s[0];
    LR.parameters_grad_state = f[8];
    LR.na = f[1];
    LR.no_data_name = f[2];
    LR.no_md5 = f[3];
    if ((peers = rule_tuple(f[4], MAX_TEXTS)) == NULL || (kinds = rule_tuple(f[5], MAX_TEXTS)) == NULL ||
        (parts = rule_tuple(f[6], MAX_PARTS)) == NULL || (shapes = rule_tuple(f[7], MAX_PARTS)) == NULL ||
        (group = rule_tuple(f[11], 2)) == NULL)
        return -1;
    if (PyTuple_GET_SIZE(group) != 2 || rule_text(PyTuple_GET_ITEM(group, 0), &LR.group_kind) < 0 ||
        rule_text(PyTuple_GET_ITEM(group, 1), &LR.group_ranks) < 0)
        return -1;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(peers); i++)
        if (rule_text(PyTuple_GET_ITEM(peers, i), &LR.peer_arguments[i]) < 0)
            return -1;
    LR.n_peer_arguments = (int)PyTuple_GET_SIZE(peers);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kinds); i++)
        if (rule_text(PyTuple_GET_ITEM(kinds, i), &LR.own_kinds[i]) < 0)
            return -1;
    LR.n_own_kinds = (int)PyTuple_GET_SIZE(kinds);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(parts); i++) {
        PyObject *part = rule_tuple(PyTuple_GET_ITEM(parts, i), 2);
        if (part == NULL || PyTuple_GET_SIZE(part) != 2 || rule_text(PyTuple_GET_ITEM(part, 0), &LR.parts[i].key) < 0 ||
            rule_text(PyTuple_GET_ITEM(part, 1), &unused) < 0)
            return -1;
        LR.parts[i].state = PyTuple_GET_ITEM(part, 1);
    }
    LR.n_parts = (int)PyTuple_GET_SIZE(parts);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(shapes); i++) {
        PyObject *shape = rule_tuple(PyTuple_GET_ITEM(shapes, i), 2);
        if (shape == NULL || PyTuple_GET_SIZE(shape) != 2 || rule_text(PyTuple_GET_ITEM(shape, 0), &LR.shapes[i].key) < 0)
            return -1;
        PyObject *kind = PyTuple_GET_ITEM(shape, 1);
        if (kind != (PyObject *)&PyList_Type && kind != (PyObject *)&PyDict_Type) {
            PyErr_SetString(PyExc_TypeError, "configure_leaf_rows: an entry shape of list or dict expected");
            return -1;
        }
        LR.shapes[i].kind = kind == (PyObject *)&PyList_Type ? J_LIST : J_OBJ;
    }
    LR.n_shapes = (int)PyTuple_GET_SIZE(shapes);
    if (!PyCallable_Check(f[9]) || !PyCallable_Check(f[10])) {
        PyErr_SetString(PyExc_TypeError, "configure_leaf_rows: the md5 and the text functions must be callable");
        return -1;
    }
    LR.crc = f[9];
    /* the texts of rows._leaf_row's str(...) of an empty shape, None, True and False */
    PyObject *empty = PyList_New(0);
    LR.empty_shape = empty != NULL ? PyObject_CallOneArg(f[10], empty) : NULL;
    Py_XDECREF(empty);
    LR.none_text = LR.empty_shape != NULL ? PyObject_CallOneArg(f[10], Py_None) : NULL;
    LR.true_text = LR.none_text != NULL ? PyObject_CallOneArg(f[10], Py_True) : NULL;
    LR.false_text = LR.true_text != NULL ? PyObject_CallOneArg(f[10], Py_False) : NULL;
    if (LR.false_text == NULL)
        return -1;
    PyUnicode_InternInPlace(&LR.empty_shape);
    LR.rules = Py_NewRef(rules); /* (the rules hold what the fields point to) */
    return 0;
}

/* configure_leaf_rows(rules): take rows.LEAF_RULES */
PyObject *configure_leaf_rows(PyObject *self, PyObject *rules) {
    release_leaf_rules();
    if (take_leaf_rules(rules) < 0) {
        release_leaf_rules();
        return NULL;
    }
    Py_RETURN_NONE;
}

typedef struct {
    Tape t;
    Buf name; /* the walked value's path (no floats deferred in it) */
    PyObject *entry, *state, *rows;
    int index_lists; /* a list's members named sep and i (else the list's name) */
} RowWalk;

static PyObject *ascii_text(const char *s, Py_ssize_t n) {
    PyObject *u = PyUnicode_New(n, 127);
    if (u != NULL)
        memcpy(PyUnicode_1BYTE_DATA(u), s, (size_t)n);
    return u;
}

/* append the row of these cells (new references, taken; any NULL: an error, the others released) */
static int add_row(RowWalk *w, PyObject *name, PyObject *dtype, PyObject *shape, PyObject *grad, PyObject *stats,
                   PyObject *md5, PyObject *data_name) {
    PyObject *cells[ROW_FIELDS] = {name, Py_NewRef(w->entry), Py_NewRef(w->state), dtype, shape, grad,
                                   stats, md5, data_name, Py_NewRef(LR.na), Py_NewRef(LR.na)};
    PyObject *row = NULL;
    int ok = 1;
    for (int i = 0; i < ROW_FIELDS; i++)
        ok = ok && cells[i] != NULL;
    if (ok)
        row = LR.row->tp_alloc(LR.row, ROW_FIELDS); /* (a tuple subclass: what tuple.__new__ makes) */
    if (row == NULL) {
        for (int i = 0; i < ROW_FIELDS; i++)
            Py_XDECREF(cells[i]);
        return -1;
    }
    for (int i = 0; i < ROW_FIELDS; i++)
        PyTuple_SET_ITEM(row, i, cells[i]);
    int rc = PyList_Append(w->rows, row);
    Py_DECREF(row);
    return rc < 0 ? -1 : DONE;
}

static PyObject *stats_of(PyObject *x) { /* (x, x, x, x), x taken */
    PyObject *t = x != NULL ? PyTuple_Pack(4, x, x, x, x) : NULL;
    Py_XDECREF(x);
    return t;
}

/* a statistic of a tensor leaf (rows._tensor_stat), a new reference; NULL without an error: not taken */
static PyObject *tensor_stat(const Val *v) {
    if (v == NULL || v->kind == J_NULL)
        return Py_NewRef(LR.none_text);
    if (v->kind == J_TRUE || v->kind == J_FALSE)
        return Py_NewRef(v->kind == J_TRUE ? LR.true_text : LR.false_text);
    return number_of(v);
}

/* a scalar argument's value as json.loads reads it; NULL without an error: not taken */
static PyObject *scalar_value(const Val *v) {
    if (v == NULL || v->kind == J_NULL)
        return Py_NewRef(Py_None);
    if (v->kind == J_TRUE || v->kind == J_FALSE)
        return Py_NewRef(v->kind == J_TRUE ? Py_True : Py_False);
    if (v->kind == J_STR)
        return v->plain ? ascii_text(v->s, v->n) : NULL;
    return number_of(v);
}

#define SCALAR_MD5S 65536 /* scalars whose md5 cell scalar_md5 keeps, at most */

/* the rules' crc of scalar argument x (a new reference), asked once a value (a dump's scalar arguments
 * repeat: 0, 1, True, a dim, an eps) for up to SCALAR_MD5S values, keyed with their type (1, 1.0 and True
 * are equal keys whose texts differ); not a float zero (0.0 and -0.0 are too) or NaN (no key finds it) */
static PyObject *scalar_md5(PyObject *x) {
    double f = PyFloat_CheckExact(x) ? PyFloat_AS_DOUBLE(x) : 0.0;
    if (!PyLong_CheckExact(x) && !PyBool_Check(x) && x != Py_None && !PyUnicode_CheckExact(x) && (f == 0.0 || isnan(f)))
        return PyObject_CallOneArg(LR.crc, x);
    if (LR.scalar_md5s == NULL && (LR.scalar_md5s = PyDict_New()) == NULL)
        return NULL;
    PyObject *key = PyTuple_Pack(2, (PyObject *)Py_TYPE(x), x);
    if (key == NULL)
        return NULL;
    PyObject *md5 = PyDict_GetItemWithError(LR.scalar_md5s, key);
    if (md5 != NULL)
        Py_INCREF(md5);
    else if (!PyErr_Occurred()) {
        md5 = PyObject_CallOneArg(LR.crc, x);
        if (md5 != NULL && PyDict_GET_SIZE(LR.scalar_md5s) < SCALAR_MD5S && PyDict_SetItem(LR.scalar_md5s, key, md5) < 0)
            Py_CLEAR(md5);
    }
    Py_DECREF(key);
    return md5;
}

/* str(type(x)) of a scalar argument (a new reference), asked once a type */
static PyObject *scalar_type_text(PyObject *x) {
    PyObject *type = (PyObject *)Py_TYPE(x);
    if (LR.type_texts == NULL && (LR.type_texts = PyDict_New()) == NULL)
        return NULL;
    PyObject *text = PyDict_GetItemWithError(LR.type_texts, type);
    if (text != NULL || PyErr_Occurred())
        return Py_XNewRef(text);
    text = PyObject_Str(type);
    if (text != NULL && PyDict_SetItem(LR.type_texts, type, text) < 0)
        Py_CLEAR(text);
    return text;
}

/* str() of a list of ints (a tensor's shape, a process group's ranks): "[2, 3]" (interned); NULL without
 * an error: not taken */
static PyObject *int_list_text(const Tape *t, const Val *v) {
    if (v->kind != J_LIST)
        return NULL;
    char text[512];
    Py_ssize_t n = 0;
    text[n++] = '[';
    for (int i = v->first; i >= 0; i = t->v[i].next) {
        const Val *d = &t->v[i];
        int neg = d->kind == J_INT && d->s[0] == '-';
        if (d->kind != J_INT || d->n - neg > 18 || n + d->n + 3 > (Py_ssize_t)sizeof(text))
            return NULL;
        if (i != v->first) {
            text[n++] = ',';
            text[n++] = ' ';
        }
        if (neg && d->n == 2 && d->s[1] == '0') { /* -0 is 0 */
            text[n++] = '0';
        } else {
            memcpy(text + n, d->s, (size_t)d->n);
            n += d->n;
        }
    }
    text[n++] = ']';
    PyObject *s = ascii_text(text, n);
    if (s != NULL)
        PyUnicode_InternInPlace(&s);
    return s;
}

/* str() of a tensor's shape: a list of ints, "[]" for none */
static PyObject *shape_text(const Tape *t, const Val *v) {
    return v == NULL || v->kind == J_NULL ? Py_NewRef(LR.empty_shape) : int_list_text(t, v);
}

/* str() of a process group's ranks: a list of ints, "None" for none */
static PyObject *ranks_text(const Tape *t, const Val *v) {
    return v == NULL || v->kind == J_NULL ? Py_NewRef(LR.none_text) : int_list_text(t, v);
}

#define NOT_TAKEN(x) ((x) == NULL && !PyErr_Occurred())

/* rows._leaf_row of the leaf ``v`` (an object whose type is a plain string ``kind``) */
static int add_leaf(RowWalk *w, const Val *v, const Val *kind) {
    const Val *dtype = NULL, *value = NULL, *grad = NULL, *shape = NULL, *data_name = NULL, *md5 = NULL, *ranks = NULL;
    const Val *stats[N_STATS] = {NULL};
    for (int i = v->first; i >= 0; i = w->t.v[i].next) {
        const Val *m = &w->t.v[i];
        switch (m->role) {
        case K_DTYPE: dtype = m; break;
        case K_VALUE: value = m; break;
        case K_REQUIRES_GRAD: grad = m; break;
        case K_SHAPE: shape = m; break;
        case K_DATA_NAME: data_name = m; break;
        case K_MAX: case K_MIN: case K_MEAN: case K_NORM: stats[m->role - K_MAX] = m; break;
        default:
            if (text_is(m->k, m->kn, &md5_key))
                md5 = m;
            else if (text_is(m->k, m->kn, &LR.group_ranks))
                ranks = m;
        }
    }
    /* requires_grad: None -> N/A, else str(); data_name: a falsy one -> NO_DATA_NAME */
    if ((grad != NULL && grad->kind != J_NULL && grad->kind != J_TRUE && grad->kind != J_FALSE) ||
        (data_name != NULL && data_name->kind != J_NULL && !(data_name->kind == J_STR && data_name->plain)) ||
        (md5 != NULL && !(md5->kind == J_STR && md5->plain)))
        return UNHANDLED;
    int named = data_name != NULL && data_name->kind == J_STR && data_name->n > 0;
    const char *name_s = w->name.p;
    Py_ssize_t name_n = w->name.len;
    if (named) { /* data_name.rsplit(sep, 1)[0] */
        name_s = data_name->s;
        name_n = data_name->n;
        for (Py_ssize_t i = data_name->n - 1; i >= 0; i--)
            if (data_name->s[i] == LR.sep) {
                name_n = i;
                break;
            }
    }
    int group = 0; /* a process group */
    if (dtype == NULL) { /* a scalar argument: not one rows.py renders by a rule of its own */
        Py_ssize_t last = name_n;
        while (last > 0 && name_s[last - 1] != LR.sep)
            last--;
        if (text_in(name_s + last, name_n - last, LR.peer_arguments, LR.n_peer_arguments) ||
            text_in(kind->s, kind->n, LR.own_kinds, LR.n_own_kinds))
            return UNHANDLED;
        group = text_is(kind->s, kind->n, &LR.group_kind);
    } else if (dtype->kind != J_STR || !dtype->plain || (value != NULL && md5 == NULL)) {
        return UNHANDLED;
    }
    PyObject *x = NULL, *stat_cells = NULL, *dtype_text = NULL, *shape_cell = NULL, *md5_cell = NULL;
    if (dtype != NULL) {
        PyObject *s[4] = {NULL, NULL, NULL, NULL};
        int taken = 1;
        for (int i = 0; i < 4 && taken; i++)
            taken = (s[i] = tensor_stat(stats[i])) != NULL;
        if (taken)
            stat_cells = PyTuple_Pack(4, s[0], s[1], s[2], s[3]);
        for (int i = 0; i < 4; i++)
            Py_XDECREF(s[i]);
        if (stat_cells == NULL)
            return PyErr_Occurred() ? -1 : UNHANDLED;
        shape_cell = shape_text(&w->t, shape);
        if (shape_cell == NULL) {
            Py_DECREF(stat_cells);
            return PyErr_Occurred() ? -1 : UNHANDLED;
        }
        dtype_text = ascii_text(dtype->s, dtype->n);
        if (dtype_text != NULL)
            PyUnicode_InternInPlace(&dtype_text);
        md5_cell = md5 != NULL ? ascii_text(md5->s, md5->n) : Py_NewRef(LR.no_md5);
    } else if (group) { /* its ranks' text in its statistics and md5 cells, its type the dtype's */
        if ((md5_cell = ranks_text(&w->t, ranks)) == NULL)
            return PyErr_Occurred() ? -1 : UNHANDLED;
        stat_cells = stats_of(Py_NewRef(md5_cell));
        dtype_text = ascii_text(kind->s, kind->n);
        if (dtype_text != NULL)
            PyUnicode_InternInPlace(&dtype_text);
        shape_cell = Py_NewRef(LR.empty_shape);
    } else {
        if ((x = scalar_value(value)) == NULL)
            return PyErr_Occurred() ? -1 : UNHANDLED;
        stat_cells = stats_of(x == Py_None ? Py_NewRef(LR.none_text) : Py_NewRef(x));
        dtype_text = scalar_type_text(x);
        shape_cell = Py_NewRef(LR.empty_shape);
        md5_cell = md5 != NULL ? ascii_text(md5->s, md5->n) : scalar_md5(x);
        Py_DECREF(x);
    }
    PyObject *grad_cell = grad == NULL || grad->kind == J_NULL ? LR.na : grad->kind == J_TRUE ? LR.true_text : LR.false_text;
    PyObject *data_cell = named ? ascii_text(data_name->s, data_name->n) : Py_NewRef(LR.no_data_name);
    return add_row(w, ascii_text(name_s, name_n), dtype_text, shape_cell, Py_NewRef(grad_cell), stat_cells, md5_cell,
                   data_cell);
}

static int walk_value(RowWalk *w, const Val *v, int depth);

static int walk_member(void *w, const Val *v, int depth) {
    return walk_value((RowWalk *)w, v, depth);
}

/* the members of a list or an object, each named after the walked path: sep and i (where lists are
 * numbered) or sep and the key */
static int walk_members(RowWalk *w, const Val *v, int depth) {
    return walk_members_of(w, &w->t, &w->name, LR.sep, v, depth, w->index_lists, NULL, walk_member);
}

/* rows._walk of one value, named w->name */
static int walk_value(RowWalk *w, const Val *v, int depth) {
    if (depth > MAX_NEST)
        return UNHANDLED;
    if (v->kind == J_NULL) {
        PyObject *none4 = stats_of(Py_NewRef(LR.none_text));
        return add_row(w, ascii_text(w->name.p, w->name.len), Py_NewRef(LR.na), Py_NewRef(LR.na), Py_NewRef(LR.na),
                       none4, Py_NewRef(LR.na), Py_NewRef(LR.no_data_name));
    }
    if (v->kind == J_LIST)
        return walk_members(w, v, depth);
    if (v->kind != J_OBJ)
        return DONE; /* a bare scalar makes no row */
    const Val *kind = NULL;
    for (int i = v->first; i >= 0; i = w->t.v[i].next) {
        const Val *m = &w->t.v[i];
        if (!m->kplain || m->role == K_CLASS_TYPE)
            return UNHANDLED; /* (a class_type: maybe a P2P op) */
        for (int j = v->first; j != i; j = w->t.v[j].next) /* a key given twice */
            if (w->t.v[j].kn == m->kn && memcmp(w->t.v[j].k, m->k, m->kn) == 0)
                return UNHANDLED;
        if (m->role == K_TYPE)
            kind = m;
    }
    if (kind != NULL && kind->kind == J_STR)
        return kind->plain ? add_leaf(w, v, kind) : UNHANDLED;
    return walk_members(w, v, depth);
}

/* rows.entry_rows of the parsed entry w->t.v[0] (ASCII name entry[0:n]), after check_entry */
static int walk_entry(RowWalk *w, const char *entry, Py_ssize_t n) {
    const Val *body = &w->t.v[0];
    if (body->kind != J_OBJ)
        return UNHANDLED;
    for (int i = body->first; i >= 0; i = w->t.v[i].next) {
        const Val *m = &w->t.v[i];
        if (!m->kplain)
            return UNHANDLED; /* (its key may read as one of the parts') */
        for (int j = body->first; j != i; j = w->t.v[j].next)
            if (w->t.v[j].kn == m->kn && memcmp(w->t.v[j].k, m->k, m->kn) == 0)
                return UNHANDLED; /* given twice */
        for (int s = 0; s < LR.n_shapes; s++) /* entry_shape.check_entry's shapes */
            if (text_is(m->k, m->kn, &LR.shapes[s].key) && m->kind != J_NULL && m->kind != LR.shapes[s].kind)
                return UNHANDLED;
    }
    if (last_parts_hold(entry, n, LR.sep, &LR.parameters_grad)) { /* the whole entry, its lists' elements unnumbered */
        w->name.len = 0;
        if (buf_add(&w->name, entry, n) < 0)
            return -1;
        w->state = LR.parameters_grad_state;
        w->index_lists = 0;
        return walk_value(w, body, 0);
    }
    w->index_lists = 1;
    for (int p = 0; p < LR.n_parts; p++) {
        for (int i = body->first; i >= 0; i = w->t.v[i].next) {
            const Val *m = &w->t.v[i];
            if (!text_is(m->k, m->kn, &LR.parts[p].key))
                continue;
            Py_ssize_t state_n = 0;
            const char *state = ascii_data(LR.parts[p].state, &state_n);
            w->name.len = 0;
            if (buf_add(&w->name, entry, n) < 0 || buf_add(&w->name, &LR.sep, 1) < 0 || buf_add(&w->name, state, state_n) < 0)
                return -1;
            w->state = LR.parts[p].state;
            int rc = walk_value(w, m, 0);
            if (rc <= 0)
                return rc;
        }
    }
    return DONE;
}

/* leaf_rows(text, start, end, entry) -> the rows of the entry text[start:end], or None (see above) */
PyObject *leaf_rows(PyObject *self, PyObject *args) {
    PyObject *text, *entry;
    Py_ssize_t start, end;
    if (!PyArg_ParseTuple(args, "O!nnU", &PyBytes_Type, &text, &start, &end, &entry))
        return NULL;
    if (LR.rules == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_speedups.configure_leaf_rows() was not called");
        return NULL;
    }
    if (start < 0 || end < start || end > PyBytes_GET_SIZE(text)) {
        PyErr_SetString(PyExc_ValueError, "leaf_rows: a span outside the text");
        return NULL;
    }
    Py_ssize_t n;
    const char *name = ascii_data(entry, &n);
    if (name == NULL || classes(name, n) & (BAD | ESCAPED))
        Py_RETURN_NONE;
    RowWalk w;
    w.entry = entry;
    w.state = NULL;
    w.rows = PyList_New(0);
    if (w.rows == NULL)
        return NULL;
    buf_init(&w.name);
    int rc = read_entry(&w.t, PyBytes_AS_STRING(text) + start, end - start);
    if (rc == DONE)
        rc = walk_entry(&w, name, n);
    tape_free(&w.t);
    buf_free(&w.name);
    if (rc == DONE)
        return w.rows;
    Py_DECREF(w.rows);
    if (rc == UNHANDLED)
        Py_RETURN_NONE;
    return NULL;
}
