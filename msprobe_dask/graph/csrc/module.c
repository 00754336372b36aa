/* The module msprobe_dask.graph._speedups: its functions and the texts they use. */
#include "speedups.h"

PyObject *exported_text_type, *orjson_dumps, *str_id, *str_parent, *str_children, *str_stack,
    *str_precision, *str_overflow, *str_micro, *str_link, *str_merge_info, *str_input_data, *str_output_data,
    *str_type_attr, *str_empty;
PyObject *str_type, *str_data_name, *str_dtype, *str_value, *str_requires_grad, *str_shape, *str_md5,
    *str_full_op_name, *str_state;
static PyObject *leaf_keys_held; /* markers.LEAF_KEYS, the tuple whose texts leaf_keys points into */
Text md5_key;

TextRules text_rules;
unsigned text_rules_version;
PyObject *stat_keys_held;
static PyObject *text_rules_held; /* the rules whose texts text_rules points into */

int configured(void) {
    if (exported_text_type != NULL && orjson_dumps != NULL)
        return 0;
    PyErr_SetString(PyExc_RuntimeError, "_speedups.configure_text() was not called");
    return -1;
}

static int int_field(PyObject *rules, const char *name, int *out) {
    PyObject *v = PyObject_GetAttrString(rules, name);
    long x = v != NULL ? PyLong_AsLong(v) : -1;
    Py_XDECREF(v);
    if (x == -1 && PyErr_Occurred())
        return -1;
    *out = (int)x;
    return 0;
}

/* rules.<name>, an ASCII str, into *out; -1 on error */
static int text_field(PyObject *rules, const char *name, Text *out) {
    PyObject *v = PyObject_GetAttrString(rules, name);
    int ok = v != NULL && PyUnicode_CheckExact(v) && PyUnicode_IS_ASCII(v);
    if (ok) {
        out->s = (const char *)PyUnicode_1BYTE_DATA(v);
        out->n = PyUnicode_GET_LENGTH(v);
    } else if (v != NULL)
        PyErr_Format(PyExc_TypeError, "configure_text: %s must be an ASCII str", name);
    Py_XDECREF(v); /* (the frozen rules hold it) */
    return ok ? 0 : -1;
}

/* rules.<name>, a tuple of at most MAX_TEXTS ASCII str, into out[*count] */
static int texts_field(PyObject *rules, const char *name, Text *out, int *count) {
    PyObject *v = PyObject_GetAttrString(rules, name);
    int ok = v != NULL && PyTuple_Check(v) && PyTuple_GET_SIZE(v) <= MAX_TEXTS;
    for (Py_ssize_t i = 0; ok && i < PyTuple_GET_SIZE(v); i++) {
        PyObject *s = PyTuple_GET_ITEM(v, i);
        ok = PyUnicode_CheckExact(s) && PyUnicode_IS_ASCII(s);
        if (ok) {
            out[i].s = (const char *)PyUnicode_1BYTE_DATA(s);
            out[i].n = PyUnicode_GET_LENGTH(s);
        }
    }
    if (ok)
        *count = (int)PyTuple_GET_SIZE(v);
    else if (v != NULL)
        PyErr_Format(PyExc_TypeError, "configure_text: %s must be a tuple of a few ASCII str", name);
    Py_XDECREF(v);
    return ok ? 0 : -1;
}

/* rules.sub_keys (items.SUB_KEYS): at most MAX_TEXTS tuples (key, suffix, ...) of ASCII str */
static int sub_keys_field(PyObject *rules, TextRules *r) {
    PyObject *v = PyObject_GetAttrString(rules, "sub_keys");
    int ok = v != NULL && PyTuple_Check(v) && PyTuple_GET_SIZE(v) <= MAX_TEXTS;
    for (Py_ssize_t i = 0; ok && i < PyTuple_GET_SIZE(v); i++) {
        PyObject *part = PyTuple_GET_ITEM(v, i);
        ok = PyTuple_Check(part) && PyTuple_GET_SIZE(part) >= 2;
        for (int j = 0; ok && j < 2; j++) {
            PyObject *s = PyTuple_GET_ITEM(part, j);
            Text *t = j == 0 ? &r->sub_key[i] : &r->sub_suffix[i];
            ok = PyUnicode_CheckExact(s) && PyUnicode_IS_ASCII(s);
            if (ok) {
                t->s = (const char *)PyUnicode_1BYTE_DATA(s);
                t->n = PyUnicode_GET_LENGTH(s);
            }
        }
    }
    if (ok)
        r->n_sub_keys = (int)PyTuple_GET_SIZE(v);
    else if (v != NULL)
        PyErr_SetString(PyExc_TypeError, "configure_text: sub_keys must be a few tuples (key, suffix, ...) of ASCII str");
    Py_XDECREF(v);
    return ok ? 0 : -1;
}

/* a tuple of ``count`` ASCII str into keys[]: 0, or -1 */
static int ascii_texts(PyObject *tuple, int count, Text *keys) {
    int ok = PyTuple_Check(tuple) && PyTuple_GET_SIZE(tuple) == count;
    for (int i = 0; ok && i < count; i++) {
        PyObject *s = PyTuple_GET_ITEM(tuple, i);
        ok = PyUnicode_CheckExact(s) && PyUnicode_IS_ASCII(s);
        if (ok) {
            keys[i].s = (const char *)PyUnicode_1BYTE_DATA(s);
            keys[i].n = PyUnicode_GET_LENGTH(s);
        }
    }
    return ok ? 0 : -1;
}

/* configure_stats(stats): take markers.STATS, N_STATS distinct ASCII str that are no other key's name,
 * as the keys of the statistics (stat_keys); configure_text, called after it, finds its null_key among them */
static PyObject *configure_stats(PyObject *self, PyObject *stats) {
    Text keys[N_STATS];
    if (ascii_texts(stats, N_STATS, keys) < 0 || take_stat_keys(keys) < 0) {
        PyErr_Format(PyExc_ValueError, "configure_stats: %d distinct ASCII str, none a key of another role", N_STATS);
        return NULL;
    }
    Py_XSETREF(stat_keys_held, Py_NewRef(stats));
    Py_RETURN_NONE;
}

/* the keys of markers.LEAF_KEYS (markers.LeafKeys' order) after its roles' (K_TYPE ... K_SHAPE), whose
 * interned texts the kernels read and set items by */
#define N_LEAF_KEYS (N_LEAF_ROLES + 3)
static PyObject **const leaf_key_vars[N_LEAF_KEYS] = { /* (md5's text: md5_key too) */
    &str_type, NULL, &str_data_name, &str_dtype, &str_value, &str_requires_grad, &str_shape, /* (the roles') */
    &str_md5,  &str_full_op_name, &str_state};

/* configure_keys(keys): take markers.LEAF_KEYS, N_LEAF_KEYS distinct ASCII str: the first N_LEAF_ROLES the
 * keys of roles K_TYPE ... (leaf_keys), none a statistic's; each (but class_type's) as an interned text.
 * The texts it replaces stay alive (what rules configured before took of them: configure the rules again
 * after it). */
static PyObject *configure_keys(PyObject *self, PyObject *keys) {
    Text texts[N_LEAF_KEYS];
    int ok = ascii_texts(keys, N_LEAF_KEYS, texts) == 0;
    for (int i = N_LEAF_ROLES; ok && i < N_LEAF_KEYS; i++) /* (the roles' are checked by take_leaf_keys) */
        for (int j = 0; ok && j < i; j++)
            ok = texts[i].n > 0 && !text_is(texts[i].s, texts[i].n, &texts[j]);
    if (!ok || take_leaf_keys(texts) < 0) {
        PyErr_Format(PyExc_ValueError, "configure_keys: %d distinct ASCII str, none a statistic's key", N_LEAF_KEYS);
        return NULL;
    }
    Py_XSETREF(leaf_keys_held, Py_NewRef(keys));
    md5_key = texts[N_LEAF_ROLES];
    for (int i = 0; i < N_LEAF_KEYS; i++)
        if (leaf_key_vars[i] != NULL) {
            PyObject *s = Py_NewRef(PyTuple_GET_ITEM(keys, i));
            PyUnicode_InternInPlace(&s);
            *leaf_key_vars[i] = s; /* (a reference kept: see above) */
        }
    Py_RETURN_NONE;
}

/* configure_text(rules): take item_text.TEXT_RULES (see TextRules) */
static PyObject *configure_text(PyObject *self, PyObject *rules) {
    PyObject *exported = PyObject_GetAttrString(rules, "exported_text");
    PyObject *dumps = exported != NULL ? PyObject_GetAttrString(rules, "float_dumps") : NULL;
    PyObject *digits = dumps != NULL ? PyObject_GetAttrString(rules, "long_decimal") : NULL;
    TextRules r = {0};
    Text keys[MAX_TEXTS];
    PyObject *bools = NULL;
    int ok = digits != NULL && PyType_Check(exported) && PyCallable_Check(dumps) &&
             PyArg_ParseTuple(digits, "iii", &r.int_digits, &r.min_decimals, &r.max_decimals) &&
             int_field(rules, "decimals", &r.decimals) == 0 && text_field(rules, "percent", &r.percent) == 0 &&
             texts_field(rules, "left_out", r.left_out, &r.n_left_out) == 0 &&
             texts_field(rules, "shaped_kinds", r.shaped_kinds, &r.n_shaped_kinds) == 0 &&
             texts_field(rules, "peer_arguments", r.peer_arguments, &r.n_peer_arguments) == 0 &&
             text_field(rules, "no_data_name", &r.no_data_name) == 0 &&
             text_field(rules, "scalar_shape", &r.scalar_shape) == 0 &&
             text_field(rules, "process_group", &r.process_group) == 0 &&
             text_field(rules, "group_ranks", &r.group_ranks) == 0 &&
             texts_field(rules, "process_group_kept", r.process_group_kept, &r.n_process_group_kept) == 0 &&
             text_field(rules, "p2p_class", &r.p2p_class) == 0 &&
             text_field(rules, "parameters_grad", &r.parameters_grad) == 0 &&
             text_field(rules, "output_part", &r.output_part) == 0 &&
             text_field(rules, "input_part", &r.input_part) == 0 && sub_keys_field(rules, &r) == 0 &&
             (r.process_group_text = PyObject_GetAttrString(rules, "process_group")) != NULL &&
             texts_field(rules, "item_keys", keys, &r.n_item_keys) == 0 &&
             text_field(rules, "null_key", &r.null_key) == 0 && text_field(rules, "null_item", &r.null_item) == 0 &&
             (r.null_key_text = PyObject_GetAttrString(rules, "null_key")) != NULL &&
             (bools = PyObject_GetAttrString(rules, "bool_text")) != NULL &&
             text_field(rules, "null_text", &r.null_text) == 0 && text_field(rules, "none_text", &r.none_text) == 0;
    if (ok && ascii_texts(bools, 2, r.bool_text) < 0) {
        PyErr_SetString(PyExc_TypeError, "configure_text: bool_text must be 2 ASCII str");
        ok = 0;
    }
    Py_XDECREF(bools); /* (the frozen rules hold it) */
    for (int i = 0; ok && i < r.n_item_keys; i++) /* (a key entry_text.c cannot add must be left out) */
        if ((r.item_keys[i] = leaf_key_role(keys[i].s, keys[i].n, &r)) < 0) {
            PyErr_Format(PyExc_ValueError, "configure_text: entry_text.c cannot add the key %s", keys[i].s);
            ok = 0;
        }
    Py_XDECREF(r.process_group_text); /* (the frozen rules hold them) */
    Py_XDECREF(r.null_key_text);
    r.null_role = ok ? leaf_key_role(r.null_key.s, r.null_key.n, &r) : -1;
    if (ok && (r.null_role < K_MAX || r.null_role > K_NORM)) {
        PyErr_SetString(PyExc_ValueError, "configure_text: null_key must be one of the statistics (configure_stats)");
        ok = 0;
    }
    /* (add_rounded holds a long decimal in 48 bytes) */
    if (ok && (r.parameters_grad.n == 0 || r.output_part.n == 0 || r.input_part.n == 0)) {
        PyErr_SetString(PyExc_ValueError, r.parameters_grad.n == 0 ? "configure_text: parameters_grad is empty"
                                                                   : "configure_text: an item part is empty");
        ok = 0;
    }
    if (ok && (r.none_text.n < 1 || classes(r.none_text.s, r.none_text.n) & (BAD | ESCAPED | QUOTE) ||
               classes(r.null_text.s, r.null_text.n) & (BAD | ESCAPED | QUOTE))) {
        PyErr_SetString(PyExc_ValueError, "configure_text: none_text (not empty) and null_text must be printable "
                                          "ASCII without quotes or escapes");
        ok = 0;
    }
    if (ok && (r.percent.n < 1 || r.percent.n > MAX_PERCENT)) { /* (compare.c's rel_text adds it to 64 bytes) */
        PyErr_SetString(PyExc_ValueError, "configure_text: percent must be 1 to 8 characters");
        ok = 0;
    }
    if (ok && (r.decimals < 0 || r.decimals > 20 || r.min_decimals < 1 || r.int_digits + r.max_decimals > 44)) {
        PyErr_SetString(PyExc_ValueError, "configure_text: decimals out of range");
        ok = 0;
    }
    if (ok) {
        text_rules = r;
        text_rules_version++;
        text_rules_taken();
        Py_XSETREF(text_rules_held, Py_NewRef(rules));
        Py_XSETREF(exported_text_type, Py_NewRef(exported));
        Py_XSETREF(orjson_dumps, Py_NewRef(dumps));
    } else if (!PyErr_Occurred())
        PyErr_SetString(PyExc_TypeError, "configure_text: rules of the wrong types");
    Py_XDECREF(exported);
    Py_XDECREF(dumps);
    Py_XDECREF(digits);
    if (!ok)
        return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"configure_keys", configure_keys, METH_O,
     "configure_keys(keys): the keys of a leaf the kernels read by name (dump/markers.py's LEAF_KEYS)."},
    {"configure_stats", configure_stats, METH_O,
     "configure_stats(stats): the keys of a leaf's statistics, in their order (dump/markers.py's STATS)."},
    {"configure_text", configure_text, METH_O,
     "configure_text(rules): the export's text rules (graph/item_text.py's TEXT_RULES)."},
    {"configure_rows", configure_rows, METH_O, "configure_rows(rules): the rows' columns (graph/rows.py's ROW_RULES)."},
    {"items_json", items_json, METH_VARARGS,
     "items_json(data, skip): the JSON text of a node's exported items, or None."},
    {"node_rows", node_rows, METH_VARARGS,
     "node_rows(nodes, start, chunk, stacks, p2p, texts=None): rows.chunk_rows' rows."},
    {"configure_items", configure_items, METH_O, "configure_items(rules): the items' rules (graph/items.py's ITEM_RULES)."},
    {"node_items", node_items, METH_VARARGS,
     "node_items(ids, spans, small, text): items.entry_items of each node id's entry, or None."},
    {"entries_to_parse", entries_to_parse, METH_VARARGS,
     "entries_to_parse(ids, spans, small, text): the ids whose entries json.loads must parse to know "
     "whether they are JSON (the others are)."},
    {"entry_lines", entry_lines, METH_VARARGS,
     "entry_lines(text, lo, hi, indent): dump/entries_scan.py's entry_lines, as a tuple, or None."},
    {"entry_spans", entry_spans, METH_VARARGS,
     "entry_spans(text, lo, hi, indent, base, shift, spans, escaped): dump/entries_scan.py's entry_spans "
     "(without find and heads)."},
    {"mentions", mentions, METH_VARARGS,
     "mentions(text, tokens): a bool for each token, whether text holds it (dump/entries.py: mentions)."},
    {"configure_summary", configure_summary, METH_O,
     "configure_summary(rules): the summary compare's rules (graph/cells.py's SUMMARY_RULES)."},
    {"configure_errors", configure_errors, METH_VARARGS,
     "configure_errors(scale_stats, norm_stat): analysis/row_errors.py's SCALE_STATS and NORM_STAT."},
    {"summary_pair", summary_pair, METH_VARARGS,
     "summary_pair(npu_in, npu_out, bench_in, bench_out, atol=None, rtol=None): the node's worst level, "
     "or None; with atol and rtol, (level, divergence_rows.node_exceeds or None)."},
    {"stat_diffs", stat_diffs, METH_VARARGS, "stat_diffs(ns, bs): cells._diffs."},
    {"entry_texts", entry_texts, METH_VARARGS,
     "entry_texts(text, start, end, node_id): the exported items' JSON texts of an entry, or None."},
    {"node_texts", node_texts, METH_VARARGS,
     "node_texts(nodes, root, collection, spans, small, text): entry_texts of each node's entry, "
     "or None."},
    {"configure_leaf_rows", configure_leaf_rows, METH_O,
     "configure_leaf_rows(rules): the compare rows' rules (dump/rows.py's LEAF_RULES)."},
    {"leaf_rows", leaf_rows, METH_VARARGS,
     "leaf_rows(text, start, end, entry): the compare rows of an entry straight from its text, or None."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_speedups", NULL, -1, methods};

/* the interned texts the code reads Node attributes by: graph/model.Node's field names, the module's
 * NODE_ATTRIBUTES (tests/graph/test_native.py checks them against the fields) */
static const struct {
    PyObject **var;
    const char *text;
} node_attributes[] = {
    {&str_id, "id"}, {&str_parent, "parent"}, {&str_children, "children"}, {&str_stack, "stack"},
    {&str_precision, "precision"}, {&str_overflow, "overflow"}, {&str_micro, "micro"}, {&str_link, "link"},
    {&str_merge_info, "merge_info"}, {&str_input_data, "input_data"}, {&str_output_data, "output_data"},
    {&str_type_attr, "type"},
};
#define N_NODE_ATTRIBUTES (sizeof(node_attributes) / sizeof(node_attributes[0]))

PyMODINIT_FUNC PyInit__speedups(void) {
    init_char_classes();
    PyObject *names = PyTuple_New(N_NODE_ATTRIBUTES);
    for (size_t i = 0; names != NULL && i < N_NODE_ATTRIBUTES; i++)
        if ((*node_attributes[i].var = PyUnicode_InternFromString(node_attributes[i].text)) == NULL)
            Py_CLEAR(names);
        else
            PyTuple_SET_ITEM(names, i, Py_NewRef(*node_attributes[i].var));
    if (names == NULL || (str_empty = PyUnicode_InternFromString("")) == NULL) {
        Py_XDECREF(names);
        return NULL;
    }
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && (PyModule_AddIntConstant(m, "API", SPEEDUPS_API) < 0 ||
                      PyModule_AddObjectRef(m, "NODE_ATTRIBUTES", names) < 0))
        Py_CLEAR(m);
    Py_DECREF(names);
    return m;
}
