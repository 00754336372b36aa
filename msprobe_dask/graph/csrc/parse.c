/* node_items.export_texts: the rows' item texts of the nodes of a graph whose dump.json entries are read by
 * spans (dump/entries.py), made by entry_text.c. */
#include "speedups.h"

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
    Py_ssize_t batch_n;
    const char *batch = batch_p2p_text(&batch_n);
    PyObject *seq = batch != NULL ? PySequence_Fast(nodes, "nodes must be a sequence") : NULL;
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
        int found = id_text != NULL && !has_part(id_text, id_n, batch, batch_n)
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
