/* Walks over a built graph's nodes (model.py: Graph._tree_post_order; rows.py: number_stacks). */
#include "speedups.h"

/* tree_post_order(root, limit) -> Graph._tree_post_order(): the nodes in post-order (children in order,
 * the root last), or None if a node is reached twice or more than ``limit`` nodes are. */
PyObject *tree_post_order(PyObject *self, PyObject *args) {
    PyObject *root;
    Py_ssize_t limit;
    if (!PyArg_ParseTuple(args, "On", &root, &limit))
        return NULL;
    PyObject *out = PyList_New(0), *todo = PyList_New(0), *seen = PySet_New(NULL), *result = NULL;
    if (out == NULL || todo == NULL || seen == NULL || PyList_Append(todo, root) < 0)
        goto done;
    while (PyList_GET_SIZE(todo) > 0) {
        Py_ssize_t last = PyList_GET_SIZE(todo) - 1;
        PyObject *node = Py_NewRef(PyList_GET_ITEM(todo, last));
        int rc = PyList_SetSlice(todo, last, last + 1, NULL);
        int had = rc < 0 ? -1 : PySet_Contains(seen, node); /* (nodes hash by identity) */
        if (had == 0)
            rc = PySet_Add(seen, node) < 0 || PyList_Append(out, node) < 0 ? -1 : 0;
        PyObject *children = had == 0 && rc == 0 ? PyObject_GetAttr(node, str_children) : NULL;
        Py_DECREF(node);
        if (had > 0 || PyList_GET_SIZE(out) > limit) {
            result = Py_NewRef(Py_None);
            goto done;
        }
        if (children == NULL)
            goto done;
        PyObject *seq = PySequence_Fast(children, "children must be a sequence");
        Py_DECREF(children);
        if (seq == NULL)
            goto done;
        for (Py_ssize_t i = 0; rc == 0 && i < PySequence_Fast_GET_SIZE(seq); i++)
            rc = PyList_Append(todo, PySequence_Fast_GET_ITEM(seq, i));
        Py_DECREF(seq);
        if (rc < 0)
            goto done;
    }
    if (PyList_Reverse(out) == 0)
        result = Py_NewRef(out);
done:
    Py_XDECREF(out);
    Py_XDECREF(todo);
    Py_XDECREF(seen);
    return result;
}

/* the key of a stack (rows._stack_key): the tuple of its lines if it is a list of str, else its JSON
 * text by ``dumps`` */
static PyObject *stack_key(PyObject *stack, PyObject *dumps) {
    if (PyList_CheckExact(stack)) {
        Py_ssize_t n = PyList_GET_SIZE(stack), i = 0;
        while (i < n && PyUnicode_CheckExact(PyList_GET_ITEM(stack, i)))
            i++;
        if (i == n)
            return PyList_AsTuple(stack);
    }
    return PyObject_CallOneArg(dumps, stack);
}

/* number_stacks(nodes, dumps) -> (of_list, first): rows.number_stacks' StackIds parts */
PyObject *number_stacks(PyObject *self, PyObject *args) {
    PyObject *nodes, *dumps;
    if (!PyArg_ParseTuple(args, "O!O", &PyList_Type, &nodes, &dumps))
        return NULL;
    PyObject *numbers = PyDict_New(), *of_list = PyDict_New(), *first = PyDict_New(), *result = NULL;
    if (numbers == NULL || of_list == NULL || first == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(nodes); i++) {
        PyObject *node = PyList_GET_ITEM(nodes, i);
        PyObject *stack = PyObject_GetAttr(node, str_stack), *key = NULL, *content = NULL, *n = NULL;
        int rc = -1;
        if (stack == NULL || (key = PyLong_FromVoidPtr(stack)) == NULL)
            goto next;
        rc = PyDict_Contains(of_list, key);
        if (rc != 0)
            goto next;
        rc = -1;
        if ((content = stack_key(stack, dumps)) == NULL)
            goto next;
        n = Py_XNewRef(PyDict_GetItemWithError(numbers, content));
        if (n == NULL) {
            PyObject *at = PyErr_Occurred() ? NULL : PyLong_FromVoidPtr(node);
            n = at != NULL ? PyLong_FromSsize_t(PyDict_GET_SIZE(numbers)) : NULL;
            if (n == NULL || PyDict_SetItem(numbers, content, n) < 0 || PyDict_SetItem(first, at, n) < 0)
                Py_CLEAR(n);
            Py_XDECREF(at);
        }
        rc = n != NULL ? PyDict_SetItem(of_list, key, n) : -1;
    next:
        Py_XDECREF(stack);
        Py_XDECREF(key);
        Py_XDECREF(content);
        Py_XDECREF(n);
        if (rc < 0)
            goto done;
    }
    result = PyTuple_Pack(2, of_list, first);
done:
    Py_XDECREF(numbers);
    Py_XDECREF(of_list);
    Py_XDECREF(first);
    return result;
}

/* propagate_micro(node, max_depth) -> build._propagate: each node under ``node`` without a micro step
 * takes its parent's, walked depth first as _propagate walks; the first node found deeper than
 * ``max_depth`` below ``node`` (the caller raises its error), or None. */
PyObject *propagate_micro(PyObject *self, PyObject *args) {
    PyObject *node;
    Py_ssize_t max_depth;
    if (!PyArg_ParseTuple(args, "On", &node, &max_depth))
        return NULL;
    PyObject *todo = PyList_New(0), *depths = PyList_New(0), *result = NULL;
    PyObject *zero_depth = PyLong_FromLong(0);
    if (todo == NULL || depths == NULL || zero_depth == NULL || PyList_Append(todo, node) < 0 ||
        PyList_Append(depths, zero_depth) < 0)
        goto done;
    while (PyList_GET_SIZE(todo) > 0) {
        Py_ssize_t last = PyList_GET_SIZE(todo) - 1;
        PyObject *n = Py_NewRef(PyList_GET_ITEM(todo, last));
        Py_ssize_t depth = PyLong_AsSsize_t(PyList_GET_ITEM(depths, last));
        if (PyList_SetSlice(todo, last, last + 1, NULL) < 0 || PyList_SetSlice(depths, last, last + 1, NULL) < 0) {
            Py_DECREF(n);
            goto done;
        }
        if (depth > max_depth) {
            result = n;
            goto done;
        }
        PyObject *children = PyObject_GetAttr(n, str_children), *micro = PyObject_GetAttr(n, str_micro);
        PyObject *seq = children != NULL ? PySequence_Fast(children, "children must be a sequence") : NULL;
        PyObject *below = PyLong_FromSsize_t(depth + 1);
        int rc = seq != NULL && micro != NULL && below != NULL ? 0 : -1;
        for (Py_ssize_t i = 0; rc == 0 && i < PySequence_Fast_GET_SIZE(seq); i++) {
            PyObject *child = PySequence_Fast_GET_ITEM(seq, i), *own = PyObject_GetAttr(child, str_micro);
            rc = own == NULL ? -1 : own == Py_None ? PyObject_SetAttr(child, str_micro, micro) : 0;
            Py_XDECREF(own);
            if (rc == 0)
                rc = PyList_Append(todo, child) < 0 || PyList_Append(depths, below) < 0 ? -1 : 0;
        }
        Py_XDECREF(children);
        Py_XDECREF(micro);
        Py_XDECREF(seq);
        Py_XDECREF(below);
        Py_DECREF(n);
        if (rc < 0)
            goto done;
    }
    result = Py_NewRef(Py_None);
done:
    Py_XDECREF(todo);
    Py_XDECREF(depths);
    Py_XDECREF(zero_depth);
    return result;
}
