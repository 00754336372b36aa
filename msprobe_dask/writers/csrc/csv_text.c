/* The module msprobe_dask.writers._csv_text: a compare table part's csv lines (writers/csv_writer.py's
 * csv_lines), UTF-8. The Python path is the definition; tests/writers/test_cells.py checks that both
 * give the same bytes.
 *
 * The common cells are printed here: a finite float as repr prints it (orjson's shortest digits in
 * repr's notation, made at the end for all floats at once by one orjson.dumps:
 * ../../csrc/deferred_floats.h), a bool as True or False, and a text that neutralise leaves as it is
 * (its first character is none of the rules' start characters, none of its characters is one of their
 * inside characters), quoted where it holds one of their quote characters. Every other cell is
 * printed by the Python function handed in (csv_writer._field). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#define CSV_TEXT_API 6 /* csv_writer.API: change both with the functions */

#include "csv_cells.h"

PyObject *stat_lines(PyObject *self, PyObject *args); /* stat_lines.c */
PyObject *stat_columns(PyObject *self, PyObject *args);

/* csv_lines(rows, rules, field): the UTF-8 csv lines of ``rows`` (each a list or tuple of cells); rules:
 * (start, inside, quote, dumps): str of characters and orjson.dumps;
 * field(cell): the csv field of any other cell */
static PyObject *csv_lines(PyObject *self, PyObject *args) {
    PyObject *rows, *field;
    Rules r = {0};
    if (!PyArg_ParseTuple(args, "O(UUUOUUU)O:csv_lines", &rows, &r.start, &r.inside, &r.quote, &r.dumps,
                          &r.delimiter, &r.quote_mark, &r.line_end, &field) ||
        classify(&r) < 0)
        return NULL;
    PyObject *seq = PySequence_Fast(rows, "csv_lines: rows must be a sequence");
    if (seq == NULL)
        return NULL;
    Buffer b = {0};
    int ok = 0;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t i = 0; ok == 0 && i < n; i++) {
        PyObject *row = PySequence_Fast(PySequence_Fast_GET_ITEM(seq, i), "csv_lines: a row must be a sequence");
        if (row == NULL) {
            ok = -1;
            break;
        }
        Py_ssize_t m = PySequence_Fast_GET_SIZE(row);
        for (Py_ssize_t j = 0; ok == 0 && j < m; j++) {
            if (j > 0)
                ok = put(&b, &r.delimiter_char, 1);
            if (ok == 0)
                ok = put_cell(&b, PySequence_Fast_GET_ITEM(row, j), &r, field);
        }
        if (ok == 0)
            ok = put(&b, r.end_text, r.end_n);
        Py_DECREF(row);
    }
    Py_DECREF(seq);
    PyObject *out = ok == 0 ? deferred_text(&r.floats, r.dumps, b.data, b.len, 1) : NULL;
    PyMem_Free(b.data);
    release_cells(&r);
    return out;
}

static PyMethodDef methods[] = {
    {"csv_lines", csv_lines, METH_VARARGS, "csv_lines(rows, (start, inside, quote, dumps), field): csv_writer.csv_lines."},
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
