/* A kernel's readings of its rules' Python objects, shared by graph/csrc/compare.c and
 * writers/csrc/stat_lines.c: a number of the rules (judge/rules.py's LIMITS), and a call back into a
 * rule's Python definition whose answer is a tuple of known size (metrics/stats.py's diff cells). */
#ifndef MSPROBE_DASK_PY_CALLS_H
#define MSPROBE_DASK_PY_CALLS_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* f(x, y)'s n items, new references in out[0..n); -1 with an exception set where f raises or does not
 * return an n-tuple (``what`` names f in the message) */
static inline int call_tuple(PyObject *f, PyObject *x, PyObject *y, Py_ssize_t n, PyObject **out,
                             const char *what) {
    PyObject *t = PyObject_CallFunctionObjArgs(f, x, y, NULL);
    if (t == NULL)
        return -1;
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != n) {
        Py_DECREF(t);
        PyErr_Format(PyExc_TypeError, "%s must return a %zd-tuple", what, n);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        out[i] = Py_NewRef(PyTuple_GET_ITEM(t, i));
    Py_DECREF(t);
    return 0;
}

/* the number from.<name> in *x; -1 with an exception set (``what`` names the kernel in the message) */
static inline int rule_number(PyObject *from, const char *name, double *x, const char *what) {
    PyObject *v = PyObject_GetAttrString(from, name);
    if (v == NULL) {
        PyErr_Format(PyExc_TypeError, "%s: the rules have no %s", what, name);
        return -1;
    }
    *x = PyFloat_AsDouble(v);
    Py_DECREF(v);
    return *x == -1.0 && PyErr_Occurred() ? -1 : 0;
}

#endif
