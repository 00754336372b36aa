/* Dump entries into items (items.py: parse_entry, _leaf, split_items). */
#include "speedups.h"

/* str(type(value)) of a leaf that is a plain int or float argument (items._fill_non_tensor's
 * general case: not a size, slice, ellipsis or process group, nor a rank parameter), else NULL */
static PyObject *plain_scalar_type(PyObject *src, PyObject *value, PyObject *name) {
    if (value == NULL || !(PyLong_CheckExact(value) || PyFloat_CheckExact(value)))
        return NULL;
    PyObject *kind = PyDict_GetItemWithError(src, str_type);
    if (kind == NULL || !PyUnicode_CheckExact(kind))
        return NULL;
    for (int i = 0; i < 4; i++) {
        int eq = PyUnicode_Compare(kind, shaped_kinds[i]);
        if (eq == 0 || (eq == -1 && PyErr_Occurred()))
            return NULL;
    }
    Py_ssize_t n = PyUnicode_GET_LENGTH(name);
    Py_ssize_t dot = PyUnicode_FindChar(name, '.', 0, n, -1);
    if (dot == -2)
        return NULL;
    PyObject *last = PyUnicode_Substring(name, dot + 1, n); /* name.rpartition(".")[2] */
    if (last == NULL)
        return NULL;
    int rank = 0;
    for (int i = 0; i < 4 && !rank; i++)
        rank = PyUnicode_Compare(last, rank_params[i]) == 0;
    Py_DECREF(last);
    if (rank || PyErr_Occurred())
        return NULL;
    return PyLong_CheckExact(value) ? str_int_type : str_float_type;
}

/* whether the item made of ``src`` has a truthy ``key`` (a bool is then its text "True" or "False",
 * which is truthy): 1, 0, or -1 on error */
static int set_in_item(PyObject *src, PyObject *key) {
    PyObject *v = PyDict_GetItemWithError(src, key);
    if (v == NULL)
        return PyErr_Occurred() ? -1 : 0;
    return PyBool_Check(v) ? 1 : PyObject_IsTrue(v);
}

/* items._leaf's item for a tensor leaf (a truthy dtype, and an md5 or no value) or a plain int or
 * float argument; None for the others (the Python path: sizes, slices, groups, bools, strings ...) */
static PyObject *leaf_of(PyObject *src, PyObject *name, PyObject *state, PyObject *crc_empty) {
    if (!PyDict_CheckExact(src))
        Py_RETURN_NONE;
    int truthy = set_in_item(src, str_dtype);
    if (truthy < 0)
        return NULL;
    PyObject *value = PyDict_GetItemWithError(src, str_value), *scalar_type = NULL;
    if (value == NULL && PyErr_Occurred())
        return NULL;
    if (!truthy) { /* not a tensor: a plain int or float argument here, the others in Python */
        scalar_type = plain_scalar_type(src, value, name);
        if (scalar_type == NULL)
            return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    }
    int has_md5 = set_in_item(src, str_md5);
    if (has_md5 < 0)
        return NULL;
    if (!has_md5 && value != NULL && scalar_type == NULL) /* (a tensor with a value: Python) */
        Py_RETURN_NONE;
    PyObject *data_name = PyDict_GetItemWithError(src, str_data_name);
    if (data_name == NULL && PyErr_Occurred())
        return NULL;
    truthy = data_name != NULL ? PyObject_IsTrue(data_name) : 0;
    if (truthy < 0)
        return NULL;
    if (!truthy)
        data_name = str_no_data_name;
    else if (!PyUnicode_CheckExact(data_name))
        Py_RETURN_NONE;
    PyObject *item = PyDict_Copy(src), *full = NULL;
    if (item == NULL)
        return NULL;
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (PyDict_Next(src, &pos, &k, &v)) /* bools as their text */
        if (PyBool_Check(v) && PyDict_SetItem(item, k, v == Py_True ? str_true : str_false) < 0)
            goto fail;
    if (PyDict_SetItem(item, str_data_name, data_name) < 0)
        goto fail;
    int no_name = PyUnicode_Compare(data_name, str_no_data_name);
    if (no_name == -1 && PyErr_Occurred())
        goto fail;
    if (no_name == 0) {
        full = Py_NewRef(name);
    } else {
        Py_ssize_t n = PyUnicode_GET_LENGTH(data_name);
        Py_ssize_t dot = PyUnicode_FindChar(data_name, '.', 0, n, -1);
        if (dot == -2)
            goto fail;
        full = PyUnicode_Substring(data_name, 0, dot >= 0 ? dot : n);
        if (full == NULL)
            goto fail;
    }
    if (PyDict_SetItem(item, str_full_op_name, full) < 0 || PyDict_SetItem(item, str_state, state) < 0)
        goto fail;
    PyObject *defaults[5] = {str_requires_grad, stat_names[0], stat_names[1], stat_names[2], stat_names[3]};
    for (int i = 0; i < 5; i++) {
        int has = PyDict_Contains(item, defaults[i]);
        if (has < 0 || (!has && PyDict_SetItem(item, defaults[i], Py_None) < 0))
            goto fail;
    }
    if (scalar_type != NULL) { /* items._fill_non_tensor's general case */
        if (PyDict_SetItem(item, str_dtype, scalar_type) < 0 ||
            PyDict_SetItem(item, str_shape, str_no_shape) < 0)
            goto fail;
        for (int i = 0; i < 4; i++)
            if (PyDict_SetItem(item, stat_names[i], value) < 0)
                goto fail;
    }
    if (!has_md5) {
        PyObject *crc = value != NULL ? PyObject_CallOneArg(crc32_text, value) : Py_NewRef(crc_empty);
        if (crc == NULL)
            goto fail;
        int rc = PyDict_SetItem(item, str_md5, crc);
        Py_DECREF(crc);
        if (rc < 0)
            goto fail;
    }
    Py_DECREF(full);
    return item;
fail:
    Py_XDECREF(full);
    Py_DECREF(item);
    return NULL;
}

PyObject *leaf(PyObject *self, PyObject *args) {
    PyObject *src, *name, *state, *crc_empty;
    if (!PyArg_ParseTuple(args, "OUUU", &src, &name, &state, &crc_empty) || configured() < 0)
        return NULL;
    return leaf_of(src, name, state, crc_empty);
}


/* name + "." + str(i), for an ASCII name */
static PyObject *element_name(PyObject *name, Py_ssize_t i) {
    char digits[24], *end = digits + sizeof(digits), *p = end;
    size_t u = (size_t)i;
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    Py_ssize_t n = PyUnicode_GET_LENGTH(name), k = end - p;
    PyObject *s = PyUnicode_New(n + 1 + k, 127);
    if (s == NULL)
        return NULL;
    char *out = (char *)PyUnicode_1BYTE_DATA(s);
    memcpy(out, PyUnicode_1BYTE_DATA(name), n);
    out[n] = '.';
    memcpy(out + n + 1, p, k);
    return s;
}

/* the item of one leaf of an entry (C's leaf, else python_leaf); NULL: error or (*handled = 0) a
 * value this code does not take */
static PyObject *leaf_item(PyObject *v, PyObject *name, PyObject *state, PyObject *crc_empty,
                           PyObject *python_leaf, int *handled) {
    *handled = 0;
    if (!PyDict_CheckExact(v))
        return NULL;
    PyObject *kind = PyDict_GetItemWithError(v, str_type);
    if (kind == NULL || !PyUnicode_CheckExact(kind))
        return NULL;
    PyObject *class_type = PyDict_GetItemWithError(v, str_class_type);
    if (class_type == NULL && PyErr_Occurred())
        return NULL;
    if (class_type != NULL) { /* (a P2P op is unpacked by the Python path) */
        int p2p = PyObject_RichCompareBool(class_type, str_p2p_class, Py_EQ);
        if (p2p != 0)
            return NULL;
    }
    *handled = 1;
    PyObject *item = leaf_of(v, name, state, crc_empty);
    if (item == Py_None) {
        Py_DECREF(item);
        item = PyObject_CallFunctionObjArgs(python_leaf, v, name, state, NULL);
    }
    return item;
}

/* split_items: an item goes to the outputs (by its full name) if that holds ".output." and not
 * ".input.", else to the inputs (by its data name without the last part, or its full name) */
static int split_item(PyObject *item, PyObject *inputs, PyObject *outputs) {
    PyObject *full = PyDict_GetItemWithError(item, str_full_op_name);
    PyObject *data_name = full != NULL ? PyDict_GetItemWithError(item, str_data_name) : NULL;
    if (full == NULL || data_name == NULL || !PyUnicode_CheckExact(full) || !PyUnicode_CheckExact(data_name))
        return PyErr_Occurred() ? -1 : UNHANDLED;
    Py_ssize_t n = PyUnicode_GET_LENGTH(full);
    Py_ssize_t out = PyUnicode_Find(full, str_output_part, 0, n, 1);
    Py_ssize_t in = out >= 0 ? PyUnicode_Find(full, str_input_part, 0, n, 1) : -1;
    if (out == -2 || in == -2)
        return -1;
    if (out >= 0 && in < 0)
        return PyDict_SetItem(outputs, full, item) < 0 ? -1 : DONE;
    int no_name = PyUnicode_Compare(data_name, str_no_data_name);
    if (no_name == -1 && PyErr_Occurred())
        return -1;
    if (no_name == 0)
        return PyDict_SetItem(inputs, full, item) < 0 ? -1 : DONE;
    Py_ssize_t m = PyUnicode_GET_LENGTH(data_name);
    Py_ssize_t dot = PyUnicode_FindChar(data_name, '.', 0, m, -1);
    if (dot == -2)
        return -1;
    PyObject *key = PyUnicode_Substring(data_name, 0, dot >= 0 ? dot : m);
    if (key == NULL)
        return -1;
    int rc = PyDict_SetItem(inputs, key, item);
    Py_DECREF(key);
    return rc < 0 ? -1 : DONE;
}

/* entry_items(node_id, entry, crc_empty, python_leaf) -> (input_data, output_data):
 * split_items(parse_entry(node_id, entry)) for an entry whose parts are lists of leaves (or empty
 * dicts), else None (the Python path: nested values, None, P2P ops, parameters_grad) */
PyObject *entry_items(PyObject *self, PyObject *args) {
    PyObject *node_id, *entry, *crc_empty, *python_leaf;
    if (!PyArg_ParseTuple(args, "UOUO", &node_id, &entry, &crc_empty, &python_leaf) || configured() < 0)
        return NULL;
    if (!PyDict_CheckExact(entry) || !PyUnicode_IS_ASCII(node_id))
        Py_RETURN_NONE;
    Py_ssize_t n = PyUnicode_GET_LENGTH(node_id);
    if (n >= 15 && memmem(PyUnicode_1BYTE_DATA(node_id), n, "parameters_grad", 15) != NULL)
        Py_RETURN_NONE;
    PyObject *inputs = PyDict_New(), *outputs = PyDict_New(), *name = NULL, *sub = NULL, *item = NULL;
    if (inputs == NULL || outputs == NULL)
        goto fail;
    for (int k = 0; k < 5; k++) {
        PyObject *value = PyDict_GetItemWithError(entry, sub_keys[k]);
        if (value == NULL) {
            if (PyErr_Occurred())
                goto fail;
            continue;
        }
        if (PyDict_CheckExact(value) && PyDict_GET_SIZE(value) == 0)
            continue;
        if (!PyList_CheckExact(value))
            goto unhandled;
        name = PyUnicode_Concat(node_id, sub_suffixes[k]);
        if (name == NULL)
            goto fail;
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(value); i++) {
            int handled;
            if ((sub = element_name(name, i)) == NULL)
                goto fail;
            item = leaf_item(PyList_GET_ITEM(value, i), sub, sub_states[k], crc_empty, python_leaf, &handled);
            Py_CLEAR(sub);
            if (item == NULL) {
                if (handled || PyErr_Occurred())
                    goto fail;
                goto unhandled;
            }
            int rc = PyDict_CheckExact(item) ? split_item(item, inputs, outputs) : UNHANDLED;
            Py_CLEAR(item);
            if (rc < 0)
                goto fail;
            if (rc == UNHANDLED)
                goto unhandled;
        }
        Py_CLEAR(name);
    }
    return Py_BuildValue("(NN)", inputs, outputs);
unhandled:
    Py_XDECREF(inputs);
    Py_XDECREF(outputs);
    Py_XDECREF(name);
    Py_RETURN_NONE;
fail:
    Py_XDECREF(inputs);
    Py_XDECREF(outputs);
    Py_XDECREF(name);
    return NULL;
}
