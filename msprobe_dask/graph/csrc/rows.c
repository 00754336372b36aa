/* tb_nodes rows (rows.py: chunk_rows). */
#include "speedups.h"

/* json.dumps of a list of str, where each is printable ASCII without escapes; UNHANDLED else */
static int add_str_list(Buf *b, PyObject *list) {
    if (BUF_LIT(b, "[") < 0)
        return -1;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++) {
        PyObject *x = PyList_GET_ITEM(list, i);
        Py_ssize_t n;
        const char *s = PyUnicode_CheckExact(x) ? ascii_data(x, &n) : NULL;
        if (s == NULL || classes(s, n) & (BAD | ESCAPED))
            return UNHANDLED;
        if ((i > 0 && BUF_LIT(b, ", ") < 0) || BUF_LIT(b, "\"") < 0 || buf_add(b, s, n) < 0 ||
            BUF_LIT(b, "\"") < 0)
            return -1;
    }
    return BUF_LIT(b, "]") < 0 ? -1 : DONE;
}

/* the JSON text of a list of str (dumps(list) where the fast path does not take it) */
static PyObject *str_list_json(PyObject *list, PyObject *dumps) {
    if (PyList_CheckExact(list)) {
        Buf b;
        buf_init(&b);
        int rc = add_str_list(&b, list);
        PyObject *text = rc == DONE ? buf_text(&b) : NULL;
        buf_free(&b);
        if (rc != UNHANDLED)
            return text;
    }
    return PyObject_CallOneArg(dumps, list);
}


/* the items' JSON text: data_json, else the Python to_json */
static PyObject *items_text(PyObject *data, Skip *skip, PyObject *to_json) {
    if (PyDict_CheckExact(data)) {
        PyObject *text = data_json(data, skip);
        if (text != Py_None)
            return text;
        Py_DECREF(text);
    }
    return PyObject_CallOneArg(to_json, data);
}

/* node_rows(nodes, start, how, stacks, p2p, texts=None) -> rows.chunk_rows' rows of ``nodes`` (a run of
 * sorted_nodes() from position ``start``), its first stack uses appended to ``stacks`` and the
 * batch_isend_irecv ops put in ``p2p``. ``how``: (row_id, graph_id, source, data_path, step, rank,
 * stack numbers by id(stack), ids of the nodes that use a number first, the item skip sets
 * (plain, batch), the Python to_json functions (plain, batch), dumps, batch_p2p_ops). ``texts``: for each
 * node, its (input_data, output_data) texts if made already (build.export_texts), else None. */
PyObject *node_rows(PyObject *self, PyObject *args) {
    PyObject *nodes, *how, *stacks_out, *p2p_out, *texts = Py_None;
    Py_ssize_t start;
    PyObject *row_id, *graph_id, *source, *data_path, *step, *rank, *number_of, *first, *skip_set,
        *batch_skip_set, *to_json, *batch_to_json, *dumps, *batch_ops;
    if (!PyArg_ParseTuple(args, "O!nO!O!O!|O", &PyList_Type, &nodes, &start, &PyTuple_Type, &how, &PyList_Type,
                          &stacks_out, &PyDict_Type, &p2p_out, &texts) ||
        !PyArg_ParseTuple(how, "UUUOOOO!O!OOOOOO", &row_id, &graph_id, &source, &data_path, &step, &rank,
                          &PyDict_Type, &number_of, &PyDict_Type, &first, &skip_set, &batch_skip_set,
                          &to_json,
                          &batch_to_json, &dumps, &batch_ops))
        return NULL;
    Skip skip, batch_skip;
    if (configured() < 0 || skip_of(skip_set, &skip) < 0 || skip_of(batch_skip_set, &batch_skip) < 0)
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(nodes);
    if (texts != Py_None && (!PyList_CheckExact(texts) || PyList_GET_SIZE(texts) != n)) {
        PyErr_SetString(PyExc_TypeError, "texts must be None or a list with one entry per node");
        return NULL;
    }
    PyObject *rows = PyList_New(n), *sids = PyDict_New();
    if (rows == NULL || sids == NULL)
        goto fail;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *node = PyList_GET_ITEM(nodes, i);
        PyObject *cells[22] = {NULL};
        PyObject *stack = PyObject_GetAttr(node, str_stack), *key = NULL, *number = NULL;
        if (stack == NULL)
            goto fail;
        key = PyLong_FromVoidPtr(stack);
        number = key != NULL ? PyDict_GetItemWithError(number_of, key) : NULL;
        Py_XDECREF(key);
        if (number == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_KeyError, "a node's stack has no number");
            Py_DECREF(stack);
            goto fail;
        }
        PyObject *sid = PyDict_GetItemWithError(sids, number); /* f"{row_id}{n}" */
        if (sid == NULL) {
            sid = PyErr_Occurred() ? NULL : PyUnicode_FromFormat("%U%S", row_id, number);
            if (sid == NULL || PyDict_SetItem(sids, number, sid) < 0) {
                Py_XDECREF(sid);
                Py_DECREF(stack);
                goto fail;
            }
            Py_DECREF(sid);
        }
        cells[11] = Py_NewRef(sid);
        key = PyLong_FromVoidPtr(node);
        int is_first = key != NULL ? PyDict_Contains(first, key) : -1;
        Py_XDECREF(key);
        if (is_first) { /* (first use of a stack number, or an error) */
            PyObject *text = is_first > 0 ? PyObject_CallOneArg(dumps, stack) : NULL;
            PyObject *pair = text != NULL ? PyTuple_Pack(2, number, text) : NULL;
            int rc = pair != NULL ? PyList_Append(stacks_out, pair) : -1;
            Py_XDECREF(text);
            Py_XDECREF(pair);
            if (rc < 0) {
                Py_DECREF(stack);
                goto row_fail;
            }
        }
        Py_DECREF(stack);
        PyObject *node_id = cells[3] = PyObject_GetAttr(node, str_id);
        if (node_id == NULL)
            goto row_fail;
        if (!PyUnicode_Check(node_id)) {
            PyErr_SetString(PyExc_TypeError, "a node id is not a str");
            goto row_fail;
        }
        int batch = PyUnicode_Find(node_id, str_batch_p2p, 0, PyUnicode_GET_LENGTH(node_id), 1) >= 0;
        if (PyErr_Occurred())
            goto row_fail;
        if (batch) {
            PyObject *ops = PyObject_CallOneArg(batch_ops, node);
            int rc = ops != NULL ? PyDict_SetItem(p2p_out, node_id, ops) : -1;
            Py_XDECREF(ops);
            if (rc < 0)
                goto row_fail;
        }
        PyObject *parent = PyObject_GetAttr(node, str_parent);
        if (parent == NULL)
            goto row_fail;
        cells[5] = parent == Py_None ? Py_NewRef(str_empty) : PyObject_GetAttr(parent, str_id);
        Py_DECREF(parent);
        PyObject *children = PyObject_GetAttr(node, str_children);
        if (cells[5] == NULL || children == NULL) {
            Py_XDECREF(children);
            goto row_fail;
        }
        int has_children = PyObject_IsTrue(children);
        if (has_children > 0) { /* dumps([c.id for c in children]) */
            PyObject *ids = PySequence_List(children);
            for (Py_ssize_t j = 0; ids != NULL && j < PyList_GET_SIZE(ids); j++) {
                PyObject *id = PyObject_GetAttr(PyList_GET_ITEM(ids, j), str_id);
                if (id == NULL)
                    Py_CLEAR(ids);
                else
                    PyList_SetItem(ids, j, id);
            }
            cells[6] = ids != NULL ? str_list_json(ids, dumps) : NULL;
            Py_XDECREF(ids);
        } else if (has_children == 0)
            cells[6] = Py_NewRef(str_empty);
        Py_DECREF(children);
        if (cells[6] == NULL)
            goto row_fail;
        PyObject *link = PyObject_GetAttr(node, str_link);
        cells[10] = link != NULL ? str_list_json(link, dumps) : NULL;
        Py_XDECREF(link);
        PyObject *merge = cells[10] != NULL ? PyObject_GetAttr(node, str_merge_info) : NULL;
        if (merge == NULL)
            goto row_fail;
        int has_merge = PyObject_IsTrue(merge);
        cells[12] = has_merge > 0    ? PyObject_CallOneArg(dumps, merge)
                    : has_merge == 0 ? Py_NewRef(str_empty)
                                     : NULL;
        Py_DECREF(merge);
        PyObject *micro = cells[12] != NULL ? PyObject_GetAttr(node, str_micro) : NULL;
        if (micro == NULL)
            goto row_fail;
        if (micro == Py_None)
            Py_SETREF(micro, Py_NewRef(zero));
        cells[9] = micro;
        if ((cells[4] = PyObject_GetAttr(node, str_type_attr)) == NULL ||
            (cells[7] = PyObject_GetAttr(node, str_precision)) == NULL ||
            (cells[8] = PyObject_GetAttr(node, str_overflow)) == NULL)
            goto row_fail;
        Skip *node_skip = batch ? &batch_skip : &skip;
        PyObject *node_to_json = batch ? batch_to_json : to_json;
        PyObject *made = texts != Py_None ? PyList_GET_ITEM(texts, i) : Py_None;
        if (made != Py_None) { /* (input_data, output_data) texts made already */
            if (!PyTuple_CheckExact(made) || PyTuple_GET_SIZE(made) != 2) {
                PyErr_SetString(PyExc_TypeError, "a node's texts must be a pair");
                goto row_fail;
            }
            cells[15] = Py_NewRef(PyTuple_GET_ITEM(made, 0));
            cells[16] = Py_NewRef(PyTuple_GET_ITEM(made, 1));
        } else {
            PyObject *data = PyObject_GetAttr(node, str_input_data);
            cells[15] = data != NULL ? items_text(data, node_skip, node_to_json) : NULL;
            Py_XDECREF(data);
            data = cells[15] != NULL ? PyObject_GetAttr(node, str_output_data) : NULL;
            cells[16] = data != NULL ? items_text(data, node_skip, node_to_json) : NULL;
            Py_XDECREF(data);
        }
        if (cells[16] == NULL || (cells[0] = PyUnicode_Concat(row_id, node_id)) == NULL ||
            (cells[2] = PyLong_FromSsize_t(start + i)) == NULL)
            goto row_fail;
        int distributed = PyUnicode_Tailmatch(node_id, str_distributed, 0, PY_SSIZE_T_MAX, -1);
        if (distributed < 0)
            goto row_fail;
        cells[1] = Py_NewRef(graph_id);
        cells[13] = Py_NewRef(str_empty_map);
        cells[14] = Py_NewRef(zero);
        cells[17] = Py_NewRef(source);
        cells[18] = Py_NewRef(data_path);
        cells[19] = Py_NewRef(step);
        cells[20] = Py_NewRef(rank);
        cells[21] = PyLong_FromLong(distributed);
        PyObject *row = cells[21] != NULL ? PyList_New(22) : NULL;
        if (row == NULL)
            goto row_fail;
        for (int c = 0; c < 22; c++)
            PyList_SET_ITEM(row, c, cells[c]);
        PyList_SET_ITEM(rows, i, row);
        continue;
    row_fail:
        for (int c = 0; c < 22; c++)
            Py_XDECREF(cells[c]);
        goto fail;
    }
    Py_DECREF(sids);
    return rows;
fail:
    Py_XDECREF(rows);
    Py_XDECREF(sids);
    return NULL;
}
