/* A kernel's call back into a rule's Python definition whose answer is a tuple of known size (the
 * statistics' diff cells of metrics/stats.py, in graph/csrc/compare.c and writers/csrc/stat_lines.c). */
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

#endif
