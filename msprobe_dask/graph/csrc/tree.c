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

/* ------------------------------------------------------------------ build._attach_all */

typedef struct {
    PyObject *nodes, *stacks, *micro, *no_stack, *no_forward_stack, *node_class, *api, *module, *api_prefixes,
        *node_type_of, *repair, *attach;
} Build;

/* the ASCII str a[0:n] + mid + b[0:m] */
static PyObject *joined(const char *a, Py_ssize_t n, const char *mid, const char *b, Py_ssize_t m) {
    Py_ssize_t k = (Py_ssize_t)strlen(mid);
    PyObject *text = PyUnicode_New(n + k + m, 127);
    if (text != NULL) {
        char *out = (char *)PyUnicode_1BYTE_DATA(text);
        memcpy(out, a, n);
        memcpy(out + n, mid, k);
        memcpy(out + n + k, b, m);
    }
    return text;
}

static int ascii_tail_digits(const char *s, Py_ssize_t n) {
    Py_ssize_t k = 0;
    while (k < n && s[n - 1 - k] >= '0' && s[n - 1 - k] <= '9')
        k++;
    return (int)k;
}

/* s[0:n] with every ``from`` (f letters) replaced by ``to`` (t letters): str.replace */
static PyObject *replaced(const char *s, Py_ssize_t n, const char *from, Py_ssize_t f, const char *to, Py_ssize_t t) {
    Py_ssize_t count = 0;
    for (Py_ssize_t i = 0; i + f <= n;)
        i += memcmp(s + i, from, f) == 0 ? (count++, f) : 1;
    char *out = PyMem_Malloc(n + count * (t > f ? t - f : 0) + 1);
    if (out == NULL)
        return PyErr_NoMemory();
    Py_ssize_t m = 0;
    for (Py_ssize_t i = 0; i < n;) {
        if (i + f <= n && memcmp(s + i, from, f) == 0) {
            memcpy(out + m, to, t);
            m += t;
            i += f;
        } else {
            out[m++] = s[i++];
        }
    }
    PyObject *text = PyUnicode_FromStringAndSize(out, m);
    PyMem_Free(out);
    return text;
}

/* where "<word>." + ASCII digits end s[0:n] (the word with its leading '.'), as (\.word\.)(\d+)$ finds
 * it in a text without a newline: the start of ".word.", or -1 */
static Py_ssize_t numbered_tail(const char *s, Py_ssize_t n, const char *word, Py_ssize_t w) {
    int digits = ascii_tail_digits(s, n);
    Py_ssize_t at = n - digits - w;
    return digits > 0 && at >= 0 && memcmp(s + at, word, w) == 0 ? at : -1;
}

/* the id of the forward twin whose stack a backward node without one shows (_Builder._stack_for), or
 * NULL without an error when it has none */
static PyObject *twin_id(const char *s, Py_ssize_t n) {
    if (n >= 9 && memcmp(s + n - 9, ".backward", 9) == 0)
        return replaced(s, n, "backward", 8, "forward", 7);
    Py_ssize_t at = numbered_tail(s, n, ".backward.", 10); /* BWD */
    return at < 0 ? NULL : joined(s, at, ".forward.0", "", 0);
}

/* _Builder._stack_for */
static PyObject *stack_for(Build *b, PyObject *node_id, const char *s, Py_ssize_t n) {
    PyObject *stack = PyDict_GetItemWithError(b->stacks, node_id);
    if (stack == NULL && PyErr_Occurred())
        return NULL;
    if (stack == NULL)
        stack = b->no_stack;
    int truthy = PyObject_IsTrue(stack);
    if (truthy < 0)
        return NULL;
    if (truthy || !HAS_LIT(s, n, ".backward"))
        return Py_NewRef(stack);
    PyObject *twin = twin_id(s, n);
    if (twin == NULL)
        return PyErr_Occurred() ? NULL : Py_NewRef(stack);
    PyObject *node = PyDict_GetItemWithError(b->nodes, twin);
    Py_DECREF(twin);
    if (node == NULL)
        return PyErr_Occurred() ? NULL : Py_NewRef(b->no_forward_stack);
    return PyObject_GetAttr(node, str_stack);
}

/* node_type_of: the prefixes of API ids, Module. and Cell., else the Python function */
static PyObject *type_of(Build *b, PyObject *node_id, const char *s, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(b->api_prefixes); i++) {
        Py_ssize_t m;
        const char *p = ascii_data(PyTuple_GET_ITEM(b->api_prefixes, i), &m);
        if (p != NULL && m <= n && memcmp(s, p, m) == 0)
            return Py_NewRef(b->api);
    }
    if ((n >= 7 && memcmp(s, "Module.", 7) == 0) || (n >= 5 && memcmp(s, "Cell.", 5) == 0))
        return Py_NewRef(b->module);
    return PyObject_CallOneArg(b->node_type_of, node_id);
}

/* the node of ``node_id`` (ASCII, in s/n), made (_Builder.new) if new: a new reference */
static PyObject *get_node(Build *b, PyObject *node_id, const char *s, Py_ssize_t n) {
    PyObject *node = PyDict_GetItemWithError(b->nodes, node_id);
    if (node != NULL || PyErr_Occurred())
        return Py_XNewRef(node);
    PyObject *args[8] = {node_id, NULL, Py_None, NULL, NULL, NULL, NULL, NULL};
    if ((args[1] = type_of(b, node_id, s, n)) == NULL || (args[3] = PyList_New(0)) == NULL ||
        (args[4] = PyDict_New()) == NULL || (args[5] = PyDict_New()) == NULL ||
        (args[6] = stack_for(b, node_id, s, n)) == NULL)
        goto done;
    if (b->micro == Py_None) {
        args[7] = Py_NewRef(Py_None);
    } else {
        args[7] = Py_XNewRef(PyDict_GetItemWithError(b->micro, node_id));
        if (args[7] == NULL && !PyErr_Occurred())
            args[7] = PyLong_FromLong(0);
        if (args[7] == NULL)
            goto done;
    }
    node = PyObject_Vectorcall(b->node_class, args, 8, NULL);
    if (node != NULL && PyDict_SetItem(b->nodes, node_id, node) < 0)
        Py_CLEAR(node);
done:
    for (int i = 1; i < 8; i++)
        if (i != 2)
            Py_XDECREF(args[i]);
    return node;
}

/* s with its ".word.N" tail (at ``at``, the old word ``w`` letters) given the word ``to`` */
static PyObject *renamed_tail(const char *s, Py_ssize_t n, Py_ssize_t at, Py_ssize_t w, const char *to) {
    return joined(s, at, to, s + at + w, n - at - w);
}

/* build._backward_of of a str: FWD.sub(r".backward.\2", fp); NULL without an error for one this code
 * does not take (not ASCII, a newline) */
static PyObject *backward_of(PyObject *fp) {
    Py_ssize_t n;
    const char *s = PyUnicode_CheckExact(fp) ? ascii_data(fp, &n) : NULL;
    if (s == NULL || memchr(s, '\n', n) != NULL)
        return NULL;
    Py_ssize_t at = numbered_tail(s, n, ".forward.", 9);
    return at < 0 ? Py_NewRef(fp) : renamed_tail(s, n, at, 9, ".backward.");
}

/* ``cand`` if it names a node of construct.json, else NULL (0) without an error; -1 on error */
static int known(PyObject *construct, PyObject *cand) {
    return PyDict_Contains(construct, cand);
}

/* the part of s[0:n] before its k-th '.' from the end ("".join(s.split(".")[:-k])), or -1 if fewer */
static Py_ssize_t before_dot_from_end(const char *s, Py_ssize_t n, int k) {
    for (Py_ssize_t i = n - 1; i >= 0; i--)
        if (s[i] == '.' && --k == 0)
            return i;
    return -1;
}

/* build._repair_parent for an ASCII ``sub`` holding ".backward" and a parent ``up`` that is None or a
 * str: a new reference, or NULL; *fallback set (no error) where the Python function is to answer (a
 * newline, a text that is not ASCII, a parent of construct.json that is not a str) */
static PyObject *repair_parent(PyObject *construct, const char *s, Py_ssize_t n, PyObject *up, int *fallback) {
    PyObject *key = NULL, *fp, *cand = NULL, *result = NULL;
    *fallback = memchr(s, '\n', n) != NULL;
    if (*fallback)
        return NULL;
    int ends = n >= 9 && memcmp(s + n - 9, ".backward", 9) == 0;
    Py_ssize_t at = ends ? -1 : numbered_tail(s, n, ".backward.", 10);
    if ((!ends && at < 0) || (ends && up != Py_None))
        return Py_NewRef(up);
    if (!ends && up != Py_None) { /* moved to another module than its parent's: the forward twin's parent */
        Py_ssize_t m;
        const char *u = ascii_data(up, &m);
        if (u == NULL || memchr(u, '\n', m) != NULL) {
            *fallback = 1;
            return NULL;
        }
        Py_ssize_t a = before_dot_from_end(s, n, 4), b = before_dot_from_end(u, m, 3);
        if (a < 0 || b < 0 || (a == b && memcmp(s, u, a) == 0))
            return Py_NewRef(up);
    }
    key = ends ? replaced(s, n, "backward", 8, "forward", 7) : renamed_tail(s, n, at, 10, ".forward.");
    if (key == NULL)
        return NULL;
    fp = PyDict_GetItemWithError(construct, key);
    Py_DECREF(key);
    if (fp == NULL)
        return PyErr_Occurred() ? NULL : Py_NewRef(up);
    if (up != Py_None && fp == Py_None)
        return Py_NewRef(Py_None);
    int truthy = up != Py_None ? 1 : PyObject_IsTrue(fp); /* (with no parent, a falsy one is no twin) */
    if (truthy <= 0)
        return truthy < 0 ? NULL : Py_NewRef(up);
    if (ends) {
        Py_ssize_t m;
        const char *f = PyUnicode_CheckExact(fp) ? ascii_data(fp, &m) : NULL;
        cand = f != NULL ? replaced(f, m, "forward", 7, "backward", 8) : NULL;
    } else {
        cand = backward_of(fp);
    }
    if (cand == NULL) {
        *fallback = !PyErr_Occurred();
        return NULL;
    }
    int found = known(construct, cand);
    result = found > 0 ? Py_NewRef(cand) : found == 0 ? Py_NewRef(up) : NULL;
    Py_DECREF(cand);
    return result;
}

static int append(PyObject *list, PyObject *x) {
    if (PyList_CheckExact(list))
        return PyList_Append(list, x);
    PyObject *r = PyObject_CallMethod(list, "append", "O", x);
    Py_XDECREF(r);
    return r == NULL ? -1 : 0;
}

/* node.attach(parent) */
static int attach(PyObject *node, PyObject *parent) {
    PyObject *has = PyObject_GetAttr(node, str_parent);
    if (has == NULL)
        return -1;
    int rc = 0;
    if (has == Py_None && parent != node) {
        PyObject *children = PyObject_GetAttr(parent, str_children);
        rc = children != NULL && PyObject_SetAttr(node, str_parent, parent) == 0 && append(children, node) == 0
                 ? 0
                 : -1;
        Py_XDECREF(children);
    }
    Py_DECREF(has);
    return rc;
}

/* the ASCII data of a str without a newline (the names this code takes: the regular expressions of
 * build.py read a final newline as the end), else NULL */
static const char *ascii_line(PyObject *name, Py_ssize_t *n) {
    const char *s = ascii_data(name, n);
    return s != NULL && memchr(s, '\n', *n) == NULL ? s : NULL;
}

/* attach_all(construct, nodes, root, how): build._attach_all for a build without items. ``how``:
 * (stacks, micro or None, NO_STACK, NO_FORWARD_STACK, Node, API, MODULE, API prefixes, node_type_of,
 * repair(sub, up) -> up, attach(sub, up)). The backward nodes' parents are repaired by ``repair``;
 * ``attach`` (Python) takes the entries whose names are not ASCII or hold a newline (or whose parent is
 * neither a name nor None). */
PyObject *attach_all(PyObject *self, PyObject *args) {
    PyObject *construct, *root, *how;
    Build b;
    if (!PyArg_ParseTuple(args, "O!O!OO!", &PyDict_Type, &construct, &PyDict_Type, &b.nodes, &root, &PyTuple_Type,
                          &how) ||
        !PyArg_ParseTuple(how, "O!OOOOOOO!OOO", &PyDict_Type, &b.stacks, &b.micro, &b.no_stack,
                          &b.no_forward_stack, &b.node_class, &b.api, &b.module, &PyTuple_Type, &b.api_prefixes,
                          &b.node_type_of, &b.repair, &b.attach))
        return NULL;
    if (b.micro != Py_None && !PyDict_Check(b.micro)) {
        PyErr_SetString(PyExc_TypeError, "micro must be a dict or None");
        return NULL;
    }
    Py_ssize_t pos = 0;
    PyObject *sub, *up;
    while (PyDict_Next(construct, &pos, &sub, &up)) {
        Py_INCREF(sub);
        Py_INCREF(up);
        int rc = PySequence_Contains(sub, str_backward_part); /* (a name that is not a str: TypeError) */
        Py_ssize_t n = 0, m = 0;
        const char *s = rc >= 0 && PyUnicode_CheckExact(sub) ? ascii_line(sub, &n) : NULL;
        if (rc > 0) { /* _repair_parent, in C where it can */
            int fallback = 1;
            PyObject *repaired = s != NULL && (up == Py_None || PyUnicode_CheckExact(up))
                                     ? repair_parent(construct, s, n, up, &fallback)
                                     : NULL;
            if (repaired == NULL && fallback && !PyErr_Occurred())
                repaired = PyObject_CallFunctionObjArgs(b.repair, sub, up, NULL);
            Py_SETREF(up, repaired);
            rc = up == NULL ? -1 : 0;
        }
        const char *u = rc == 0 && s != NULL && PyUnicode_CheckExact(up) ? ascii_line(up, &m) : NULL;
        if (rc < 0) {
        } else if (s == NULL || (up != Py_None && u == NULL)) {
            PyObject *done = PyObject_CallFunctionObjArgs(b.attach, sub, up, NULL);
            rc = done == NULL ? -1 : 0;
            Py_XDECREF(done);
        } else {
            PyObject *parent = up == Py_None ? Py_NewRef(root) : get_node(&b, up, u, m);
            PyObject *node = parent != NULL ? get_node(&b, sub, s, n) : NULL;
            rc = node == NULL ? -1 : attach(node, parent);
            Py_XDECREF(parent);
            Py_XDECREF(node);
        }
        Py_DECREF(sub);
        Py_XDECREF(up);
        if (rc < 0)
            return NULL;
    }
    Py_RETURN_NONE;
}
