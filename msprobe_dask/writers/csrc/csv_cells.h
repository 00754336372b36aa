/* How a compare table cell is printed in the csv (writers/csv_writer.py's rules, handed with each call),
 * shared by csv_text.c (csv_lines) and stat_lines.c (a statistics table part's lines straight from its
 * rows): a finite float deferred (../../csrc/deferred_floats.h), a text neutralise leaves as it is (quoted
 * where it must be); any other cell printed by the Python function handed in (a bool's, an int's and an
 * infinity's text asked once a value). */
#ifndef MSPROBE_DASK_WRITERS_CSV_CELLS_H
#define MSPROBE_DASK_WRITERS_CSV_CELLS_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

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
    PyObject *delimiter, *quote_mark, *line_end; /* str: csv_writer.DIALECT */
    const char *end_text;             /* line_end's ASCII text */
    Py_ssize_t end_n;
    char delimiter_char, quote_char;
    PyObject *fields;                 /* field's text of each int and infinity met (a dict made when met) */
    PyObject *bools[2];               /* field's text of False and True (asked when met) */
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
    /* the csv module's minimal quoting: the text in quotes, each quote doubled */
    const char *mark = &r->quote_char;
    if (put(b, mark, 1) < 0)
        return -1;
    for (const char *p = utf8, *end = utf8 + size; p < end;) {
        const char *q = memchr(p, *mark, end - p);
        if (q == NULL) {
            if (put(b, p, end - p) < 0)
                return -1;
            break;
        }
        if (put(b, p, q - p + 1) < 0 || put(b, mark, 1) < 0)
            return -1;
        p = q + 1;
    }
    return put(b, mark, 1) < 0 ? -1 : 1;
}

/* field(v) (a new reference), asked once a value for the cells that repeat in a table: ints (a part's
 * statistics of integer tensors) and infinities (exact types: 1, 1.0 and True are equal keys that print
 * differently; not NaN, which no key finds) */
static PyObject *field_text(PyObject *v, Rules *r, PyObject *field) {
    if (PyBool_Check(v)) { /* (apart from the ints: True == 1) */
        PyObject **known = &r->bools[v == Py_True];
        if (*known == NULL && (*known = PyObject_CallOneArg(field, v)) == NULL)
            return NULL;
        return Py_NewRef(*known);
    }
    if (!PyLong_CheckExact(v) && !(PyFloat_CheckExact(v) && !isnan(PyFloat_AS_DOUBLE(v))))
        return PyObject_CallOneArg(field, v);
    if (r->fields == NULL && (r->fields = PyDict_New()) == NULL)
        return NULL;
    PyObject *known = PyDict_GetItemWithError(r->fields, v);
    if (known != NULL)
        return Py_NewRef(known);
    if (PyErr_Occurred())
        return NULL;
    PyObject *text = PyObject_CallOneArg(field, v);
    if (text != NULL && PyDict_SetItem(r->fields, v, text) < 0)
        Py_CLEAR(text);
    return text;
}

/* one cell: printed here or by ``field`` */
static int put_cell(Buffer *b, PyObject *v, Rules *r, PyObject *field) {
    if (PyFloat_CheckExact(v)) {
        double x = PyFloat_AS_DOUBLE(v);
        if (x - x == 0.0) /* finite */
            return deferred_add(&r->floats, b->len, v);
    } else if (PyUnicode_CheckExact(v)) {
        int done = put_text(b, v, r);
        if (done != 0)
            return done < 0 ? -1 : 0;
    }
    PyObject *text = field_text(v, r, field);
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

/* what the cells' printing holds after a call: the texts asked of ``field``, the deferred floats */
static void release_cells(Rules *r) {
    Py_CLEAR(r->fields);
    Py_CLEAR(r->bools[0]);
    Py_CLEAR(r->bools[1]);
    deferred_free(&r->floats);
}

/* the rules' character classes of each ASCII character, from their texts, and the dialect's texts: 0, or
 * -1 with an error (a delimiter or quote that is not one ASCII character, a line end not ASCII) */
static int classify(Rules *r) {
    for (Py_UCS4 c = 0; c < 128; c++)
        r->ascii[c] = (holds(r->start, c) ? START : 0) | (holds(r->inside, c) ? INSIDE : 0) | (holds(r->quote, c) ? QUOTE : 0);
    if (PyUnicode_GET_LENGTH(r->delimiter) != 1 || !PyUnicode_IS_ASCII(r->delimiter) ||
        PyUnicode_GET_LENGTH(r->quote_mark) != 1 || !PyUnicode_IS_ASCII(r->quote_mark) ||
        PyUnicode_GET_LENGTH(r->line_end) < 1 || !PyUnicode_IS_ASCII(r->line_end)) {
        PyErr_SetString(PyExc_ValueError, "csv rules: the delimiter and quote must be one ASCII character, the line end ASCII");
        return -1;
    }
    r->delimiter_char = *(const char *)PyUnicode_DATA(r->delimiter);
    r->quote_char = *(const char *)PyUnicode_DATA(r->quote_mark);
    r->end_text = PyUnicode_DATA(r->line_end);
    r->end_n = PyUnicode_GET_LENGTH(r->line_end);
    return 0;
}

#endif
