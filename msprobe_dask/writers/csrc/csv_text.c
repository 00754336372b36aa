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

#define CSV_TEXT_API 2 /* csv_writer.API: change both with the function */

#include "../../csrc/deferred_floats.h"
#include "buffer.h"

/* whether the str ``chars`` holds the code point c */
static int holds(PyObject *chars, Py_UCS4 c) {
    Py_ssize_t n = PyUnicode_GET_LENGTH(chars);
    int kind = PyUnicode_KIND(chars);
    const void *data = PyUnicode_DATA(chars);
    for (Py_ssize_t i = 0; i < n; i++)
        if (PyUnicode_READ(kind, data, i) == c)
            return 1;
    return 0;
}

typedef struct {
    PyObject *start, *inside, *quote; /* str: the rules' characters */
    PyObject *dumps;                  /* orjson.dumps */
    Deferred floats;                  /* the finite floats, their texts made at the end */
    unsigned char ascii[128];         /* of each ASCII character: START | INSIDE | QUOTE */
} Rules;

enum { START = 1, INSIDE = 2, QUOTE = 4 };

/* the rules' classes of a character */
static int char_class(const Rules *r, Py_UCS4 c) {
    if (c < 128)
        return r->ascii[c];
    return (holds(r->start, c) ? START : 0) | (holds(r->inside, c) ? INSIDE : 0) | (holds(r->quote, c) ? QUOTE : 0);
}

/* a text cell: 1 printed, 0 left to the Python function, -1 error */
static int put_text(Buffer *b, PyObject *s, const Rules *r) {
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    if (n > 0 && char_class(r, PyUnicode_READ(kind, data, 0)) & START)
        return 0;
    int classes = 0;
    if (kind == PyUnicode_1BYTE_KIND && PyUnicode_IS_ASCII(s)) {
        const unsigned char *t = data;
        for (Py_ssize_t i = 0; i < n; i++)
            classes |= r->ascii[t[i]];
    } else {
        for (Py_ssize_t i = 0; i < n; i++)
            classes |= char_class(r, PyUnicode_READ(kind, data, i));
    }
    if (classes & INSIDE)
        return 0;
    int quoted = classes & QUOTE;
    Py_ssize_t size;
    const char *utf8 = PyUnicode_AsUTF8AndSize(s, &size);
    if (utf8 == NULL)
        return -1;
    if (!quoted)
        return put(b, utf8, size) < 0 ? -1 : 1;
    /* the csv module's minimal quoting: the text in double quotes, each double quote doubled */
    if (put(b, "\"", 1) < 0)
        return -1;
    for (const char *p = utf8, *end = utf8 + size; p < end;) {
        const char *q = memchr(p, '"', end - p);
        if (q == NULL) {
            if (put(b, p, end - p) < 0)
                return -1;
            break;
        }
        if (put(b, p, q - p + 1) < 0 || put(b, "\"", 1) < 0)
            return -1;
        p = q + 1;
    }
    return put(b, "\"", 1) < 0 ? -1 : 1;
}

/* one cell: printed here or by ``field`` */
static int put_cell(Buffer *b, PyObject *v, Rules *r, PyObject *field) {
    if (PyFloat_CheckExact(v)) {
        double x = PyFloat_AS_DOUBLE(v);
        if (x - x == 0.0) /* finite */
            return deferred_add(&r->floats, b->len, v);
    } else if (v == Py_True) {
        return put(b, "True", 4);
    } else if (v == Py_False) {
        return put(b, "False", 5);
    } else if (PyUnicode_CheckExact(v)) {
        int done = put_text(b, v, r);
        if (done != 0)
            return done < 0 ? -1 : 0;
    }
    PyObject *text = PyObject_CallOneArg(field, v);
    if (text == NULL)
        return -1;
    int ok = -1;
    if (!PyUnicode_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "csv_lines: the field function must return a str");
    } else {
        Py_ssize_t size;
        const char *utf8 = PyUnicode_AsUTF8AndSize(text, &size);
        ok = utf8 == NULL ? -1 : put(b, utf8, size);
    }
    Py_DECREF(text);
    return ok;
}

/* csv_lines(rows, rules, field): the UTF-8 csv lines of ``rows`` (each a list or tuple of cells); rules:
 * (start, inside, quote, dumps): str of characters and orjson.dumps;
 * field(cell): the csv field of any other cell */
static PyObject *csv_lines(PyObject *self, PyObject *args) {
    PyObject *rows, *field;
    Rules r = {0};
    if (!PyArg_ParseTuple(args, "O(UUUO)O:csv_lines", &rows, &r.start, &r.inside, &r.quote, &r.dumps, &field))
        return NULL;
    for (Py_UCS4 c = 0; c < 128; c++)
        r.ascii[c] = (holds(r.start, c) ? START : 0) | (holds(r.inside, c) ? INSIDE : 0) | (holds(r.quote, c) ? QUOTE : 0);
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
                ok = put(&b, ",", 1);
            if (ok == 0)
                ok = put_cell(&b, PySequence_Fast_GET_ITEM(row, j), &r, field);
        }
        if (ok == 0)
            ok = put(&b, "\n", 1);
        Py_DECREF(row);
    }
    Py_DECREF(seq);
    PyObject *out = ok == 0 ? deferred_text(&r.floats, r.dumps, b.data, b.len, 1) : NULL;
    PyMem_Free(b.data);
    deferred_free(&r.floats);
    return out;
}

static PyMethodDef methods[] = {
    {"csv_lines", csv_lines, METH_VARARGS, "csv_lines(rows, (start, inside, quote, dumps), field): csv_writer.csv_lines."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_csv_text", NULL, -1, methods};

PyMODINIT_FUNC PyInit__csv_text(void) {
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddIntConstant(m, "API", CSV_TEXT_API) < 0)
        Py_CLEAR(m);
    return m;
}
