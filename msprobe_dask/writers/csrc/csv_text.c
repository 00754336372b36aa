/* The module msprobe_dask.writers._csv_text: a statistics table part's csv lines straight from its rows
 * (stat_lines.c, writers/stat_lines.py), each cell printed by csv_cells.h's rules (writers/csv_writer.py's,
 * handed with each call). A compare table's csv lines of any other mode are csv_writer.csv_lines' Python
 * path: the C csv_lines that made them bought nothing on the benchmarks, whose statistics csv stat_lines
 * makes, and 11% of an md5 compare's instructions (docs/performance.md section 9: removed). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#define CSV_TEXT_API 7 /* csv_writer.API: change both with the functions */

PyObject *stat_lines(PyObject *self, PyObject *args); /* stat_lines.c */
PyObject *stat_columns(PyObject *self, PyObject *args);

static PyMethodDef methods[] = {
    {"stat_lines", stat_lines, METH_VARARGS, "stat_lines(npus, benches, float_stats, stacks, rules[, slots]): stat_lines.statistics_lines, statistics_part."},
    {"stat_columns", stat_columns, METH_VARARGS, "stat_columns(npus, benches, float_stats, rules): stat_lines.statistics_cells."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_csv_text", NULL, -1, methods};

PyMODINIT_FUNC PyInit__csv_text(void) {
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddIntConstant(m, "API", CSV_TEXT_API) < 0)
        Py_CLEAR(m);
    return m;
}
