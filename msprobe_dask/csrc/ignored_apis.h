/* The class of the ignored APIs (judge/rules.py's, handed to each kernel with its rules) that an entry's
 * API falls in, for the statistics checks of graph/csrc/compare.c and writers/csrc/stat_lines.c. */
#ifndef MSPROBE_DASK_IGNORED_APIS_H
#define MSPROBE_DASK_IGNORED_APIS_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* "" (0), "input" (1) or "all" (2): the class of the API of the entry ``name`` (name.split(".", 2)[1],
 * or "" where it has no dot), by the sets all_ignored and input_ignored; -1 with an exception set */
static inline int api_ignore_class(PyObject *name, PyObject *all_ignored, PyObject *input_ignored) {
    Py_ssize_t len = PyUnicode_GET_LENGTH(name);
    Py_ssize_t a = PyUnicode_FindChar(name, '.', 0, len, 1), b = -1;
    if (a >= 0)
        b = PyUnicode_FindChar(name, '.', a + 1, len, 1);
    if (a == -2 || b == -2)
        return -1;
    PyObject *api = a < 0 ? PyUnicode_New(0, 0) : PyUnicode_Substring(name, a + 1, b >= 0 ? b : len);
    if (api == NULL)
        return -1;
    int all = PySet_Contains(all_ignored, api);
    int input = all == 0 ? PySet_Contains(input_ignored, api) : 0;
    Py_DECREF(api);
    if (all < 0 || input < 0)
        return -1;
    return all ? 2 : input;
}

#endif
