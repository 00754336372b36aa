/* build.parse_items for a graph whose dump.json entries are read by spans (dump/entries.py). */
#include "speedups.h"

/* fastjson.has_long_integer: a run of 19 digits or more, at the start or not after a '.' */
static int has_long_integer(const char *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    while (i < n) {
        if (s[i] < '0' || s[i] > '9') {
            i++;
            continue;
        }
        Py_ssize_t run = i;
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++;
        if (i - run >= 19 && (run == 0 || s[run - 1] != '.'))
            return 1;
    }
    return 0;
}

/* The span of node_id's entry in text (*s, *n): 1; 0 without an error set when it has none (no span,
 * a one-line entry, a span out of the text); -1 on error. */
static int entry_span(PyObject *node_id, PyObject *spans, PyObject *small, PyObject *text, const char **s,
                      Py_ssize_t *n) {
    int in_small = PyDict_Contains(small, node_id);
    if (in_small != 0)
        return in_small < 0 ? -1 : 0;
    PyObject *span = PyDict_GetItemWithError(spans, node_id);
    if (span == NULL || !PyTuple_CheckExact(span) || PyTuple_GET_SIZE(span) != 2)
        return PyErr_Occurred() ? -1 : 0;
    Py_ssize_t start = PyLong_AsSsize_t(PyTuple_GET_ITEM(span, 0));
    Py_ssize_t end = PyLong_AsSsize_t(PyTuple_GET_ITEM(span, 1));
    if (PyErr_Occurred() || start < 0 || end < start || end > PyBytes_GET_SIZE(text)) {
        PyErr_Clear();
        return 0;
    }
    *s = PyBytes_AS_STRING(text) + start;
    *n = end - start;
    return 1;
}

/* The entry of node_id parsed from its span (a new reference), or NULL without an error set when
 * Python must read it (no span, a one-line entry, a long integer, a text orjson refuses). */
static PyObject *span_entry(PyObject *node_id, PyObject *spans, PyObject *small, PyObject *text, PyObject *loads) {
    const char *s = NULL;
    Py_ssize_t n = 0;
    if (entry_span(node_id, spans, small, text, &s, &n) <= 0 || has_long_integer(s, n))
        return NULL;
    PyObject *piece = PyBytes_FromStringAndSize(s, n);
    if (piece == NULL)
        return NULL;
    PyObject *entry = PyObject_CallOneArg(loads, piece);
    Py_DECREF(piece);
    return entry;
}

/* Whether a node is to be given items: 1, or 0 for the root, a collection or a node that holds some;
 * -1 on error. */
static int wants_items(PyObject *node, PyObject *root, PyObject *collection) {
    if (node == root)
        return 0;
    PyObject *type = PyObject_GetAttr(node, str_type_attr);
    int skip = type == NULL ? -1 : PyObject_RichCompareBool(type, collection, Py_EQ);
    Py_XDECREF(type);
    for (int k = 0; skip == 0 && k < 2; k++) {
        PyObject *held = PyObject_GetAttr(node, k ? str_output_data : str_input_data);
        skip = held == NULL ? -1 : PyObject_IsTrue(held);
        Py_XDECREF(held);
    }
    return skip < 0 ? -1 : !skip;
}

/* parse_items(nodes, root, collection, spans, small, text, loads, python_items, python_entry_items,
 * crc_empty, python_leaf): each node that is not the root nor a collection and holds no items gets
 * (input_data, output_data) from its entry; python_items(node_id) where Python reads the entry,
 * python_entry_items(node_id, entry) where entry_items does not take it or refuses it. */
PyObject *parse_items(PyObject *self, PyObject *args) {
    PyObject *nodes, *root, *collection, *spans, *small, *text, *loads, *python_items, *python_entry_items,
        *crc_empty, *python_leaf;
    if (!PyArg_ParseTuple(args, "OOOO!O!O!OOOUO", &nodes, &root, &collection, &PyDict_Type, &spans,
                          &PyDict_Type, &small, &PyBytes_Type, &text, &loads, &python_items,
                          &python_entry_items, &crc_empty, &python_leaf) ||
        configured() < 0)
        return NULL;
    PyObject *seq = PySequence_Fast(nodes, "nodes must be a sequence");
    if (seq == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
        PyObject *node = PySequence_Fast_GET_ITEM(seq, i), *id = NULL, *items = NULL;
        int wanted = wants_items(node, root, collection);
        if (wanted == 0)
            continue;
        if (wanted < 0 || (id = PyObject_GetAttr(node, str_id)) == NULL)
            goto fail;
        PyObject *entry = PyUnicode_CheckExact(id) ? span_entry(id, spans, small, text, loads) : NULL;
        if (entry != NULL) {
            PyObject *call = PyTuple_Pack(4, id, entry, crc_empty, python_leaf);
            items = call != NULL ? entry_items(self, call) : NULL;
            Py_XDECREF(call);
            /* None: not a case the C takes; an error (a bad value): Python's error names the dump.json */
            if (items == NULL && PyErr_ExceptionMatches(PyExc_Exception))
                PyErr_Clear();
            if (items == Py_None || (items == NULL && !PyErr_Occurred())) {
                Py_XDECREF(items);
                items = PyObject_CallFunctionObjArgs(python_entry_items, id, entry, NULL);
            }
            Py_DECREF(entry);
        } else if (PyErr_Occurred() && !PyErr_ExceptionMatches(PyExc_ValueError)) {
            goto fail; /* ValueError: orjson refuses the text, Python reads it (and gives its error) */
        } else {
            PyErr_Clear();
            items = PyObject_CallOneArg(python_items, id);
        }
        if (items == NULL)
            goto fail;
        if (!PyTuple_CheckExact(items) || PyTuple_GET_SIZE(items) != 2) {
            PyErr_SetString(PyExc_TypeError, "items must be an (input_data, output_data) pair");
            goto fail;
        }
        if (PyObject_SetAttr(node, str_input_data, PyTuple_GET_ITEM(items, 0)) < 0 ||
            PyObject_SetAttr(node, str_output_data, PyTuple_GET_ITEM(items, 1)) < 0)
            goto fail;
        Py_DECREF(id);
        Py_DECREF(items);
        continue;
    fail:
        Py_XDECREF(id);
        Py_XDECREF(items);
        Py_DECREF(seq);
        return NULL;
    }
    Py_DECREF(seq);
    Py_RETURN_NONE;
}

/* node_texts(nodes, root, collection, spans, small, text) -> for each node, the texts of its
 * exported (input_data, output_data) made straight from its entry's span (entry_text.c); or None where
 * its items must be parsed:
 * nodes parse_items skips (the root, collections, nodes holding items), batch_isend_irecv nodes
 * (exported with other keys, their ops read from the items), entries without a span or of one line,
 * and entries entry_text.c does not take. */
PyObject *node_texts(PyObject *self, PyObject *args) {
    PyObject *nodes, *root, *collection, *spans, *small, *text;
    if (!PyArg_ParseTuple(args, "OOOO!O!O!", &nodes, &root, &collection, &PyDict_Type, &spans, &PyDict_Type,
                          &small, &PyBytes_Type, &text) ||
        configured() < 0)
        return NULL;
    PyObject *seq = PySequence_Fast(nodes, "nodes must be a sequence");
    if (seq == NULL)
        return NULL;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(seq);
    PyObject *out = PyList_New(count);
    for (Py_ssize_t i = 0; out != NULL && i < count; i++) {
        PyObject *node = PySequence_Fast_GET_ITEM(seq, i), *texts = NULL;
        int wanted = wants_items(node, root, collection);
        PyObject *id = wanted > 0 ? PyObject_GetAttr(node, str_id) : NULL;
        const char *s = NULL, *id_text = NULL;
        Py_ssize_t n = 0, id_n = 0;
        if (id != NULL && PyUnicode_CheckExact(id))
            id_text = ascii_data(id, &id_n);
        int found = id_text != NULL && !HAS_LIT(id_text, id_n, "batch_isend_irecv")
                        ? entry_span(id, spans, small, text, &s, &n)
                        : 0;
        if (found > 0) {
            texts = texts_of_entry(s, n, id_text, id_n);
        } else if (wanted >= 0 && found == 0 && !PyErr_Occurred()) {
            texts = Py_NewRef(Py_None);
        }
        Py_XDECREF(id);
        if (texts == NULL)
            Py_CLEAR(out);
        else
            PyList_SET_ITEM(out, i, texts);
    }
    Py_DECREF(seq);
    return out;
}
