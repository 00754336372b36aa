/* The rows' item texts made ahead (graph/texts_ahead.py): make_texts_ahead(region, spans, small, text)
 * writes the texts of dump.json's entries, in file order, into a region of memory shared with the
 * process that builds the tree; node_texts (parse.c) takes them from there by the entry's span.
 *
 * The region: a header, then one row per entry (in the spans' order, their starts increasing), then
 * the texts. ``done`` counts the rows complete: it is raised after each row is written, so a writer
 * killed at any moment leaves a complete prefix (the reader looks at it only once the writer has
 * ended). A row's texts are texts_of_entry's answer for the entry, under its name: the input text then
 * the output text at ``data``, or NONE where it answered None, or LATER for an entry left to the jobs
 * (a one-line entry, a name that is not ASCII or names a batch_isend_irecv, as node_texts would).
 */
#include "speedups.h"

enum { NONE = -1, LATER = -2 };

typedef struct {
    int64_t done;    /* rows complete, from the first */
    int64_t count;   /* rows laid out */
    int64_t data_at; /* where the texts begin */
    int64_t unused;
} Header;

typedef struct Row {
    int64_t start; /* the entry's span in dump.json's text starts here */
    int64_t data;  /* its input text, then its output text */
    int32_t in_len, out_len; /* in_len: NONE or LATER for an entry without texts here */
} Row;

/* whether node_texts would make the texts of the entry named ``name`` (a str): 1, 0, -1 on error */
static int takes(PyObject *name, PyObject *small) {
    Py_ssize_t n;
    const char *s = PyUnicode_CheckExact(name) ? ascii_data(name, &n) : NULL;
    if (s == NULL || HAS_LIT(s, n, "batch_isend_irecv"))
        return 0;
    int one_line = PyDict_Contains(small, name);
    return one_line < 0 ? -1 : !one_line;
}

/* the span (start, end) of an entry within a text of ``size`` bytes: 1, or 0 for anything else */
static int span_of(PyObject *span, Py_ssize_t size, Py_ssize_t *start, Py_ssize_t *end) {
    if (!PyTuple_CheckExact(span) || PyTuple_GET_SIZE(span) != 2)
        return 0;
    *start = PyLong_AsSsize_t(PyTuple_GET_ITEM(span, 0));
    *end = PyLong_AsSsize_t(PyTuple_GET_ITEM(span, 1));
    if (PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    return *start >= 0 && *end >= *start && *end <= size;
}

/* one entry's row and texts, its texts written at ``*at`` (moved past them): 1, 0 if they do not fit
 * before ``end``, -1 on error */
static int fill_row(Row *row, PyObject *name, const char *s, Py_ssize_t n, int take, char *base, int64_t *at,
                    int64_t end) {
    row->data = *at;
    row->in_len = row->out_len = LATER;
    if (!take)
        return 1;
    Py_ssize_t id_n;
    const char *id = ascii_data(name, &id_n);
    PyObject *texts = texts_of_entry(s, n, id, id_n);
    if (texts == NULL) { /* (the job makes them again, and gives the error) */
        PyErr_Clear();
        return 1;
    }
    if (texts == Py_None) {
        row->in_len = NONE;
        Py_DECREF(texts);
        return 1;
    }
    Py_ssize_t in_n, out_n;
    const char *in = ascii_data(PyTuple_GET_ITEM(texts, 0), &in_n);
    const char *out = ascii_data(PyTuple_GET_ITEM(texts, 1), &out_n);
    int rc = 1;
    if (in == NULL || out == NULL || in_n > INT32_MAX || out_n > INT32_MAX) {
        /* left LATER */
    } else if (in_n + out_n > end - *at) {
        rc = 0;
    } else {
        memcpy(base + *at, in, in_n);
        memcpy(base + *at + in_n, out, out_n);
        *at += in_n + out_n;
        row->in_len = (int32_t)in_n;
        row->out_len = (int32_t)out_n;
    }
    Py_DECREF(texts);
    return rc;
}

/* make_texts_ahead(region, spans, small, text) -> the number of rows made: the rows and texts of
 * the entries (see above), until the region is full or a span does not start after the one before */
PyObject *make_texts_ahead(PyObject *self, PyObject *args) {
    PyObject *region, *spans, *small, *text;
    if (!PyArg_ParseTuple(args, "OO!O!O!", &region, &PyDict_Type, &spans, &PyDict_Type, &small, &PyBytes_Type,
                          &text) ||
        configured() < 0)
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(region, &view, PyBUF_WRITABLE) < 0)
        return NULL;
    char *base = view.buf;
    Header *h = view.buf;
    Py_ssize_t count = PyDict_GET_SIZE(spans), made = 0;
    int64_t rows_end = (int64_t)sizeof(Header) + (int64_t)count * (int64_t)sizeof(Row);
    int failed = 0;
    if (view.len < (Py_ssize_t)sizeof(Header) || rows_end > view.len) {
        PyBuffer_Release(&view);
        return PyLong_FromLong(0);
    }
    Row *rows = (Row *)(base + sizeof(Header));
    h->count = count;
    h->data_at = rows_end;
    __atomic_store_n(&h->done, 0, __ATOMIC_RELEASE);
    int64_t at = rows_end;
    Py_ssize_t pos = 0, start, end, before = -1;
    PyObject *name, *span;
    while (PyDict_Next(spans, &pos, &name, &span)) {
        if (!span_of(span, PyBytes_GET_SIZE(text), &start, &end) || start <= before)
            break;
        before = start;
        int take = takes(name, small);
        int rc = take < 0 ? -1 : fill_row(&rows[made], name, PyBytes_AS_STRING(text) + start, end - start, take,
                                          base, &at, view.len);
        if (rc < 0)
            failed = 1;
        if (rc <= 0)
            break;
        rows[made].start = start;
        made++;
        __atomic_store_n(&h->done, made, __ATOMIC_RELEASE);
    }
    PyBuffer_Release(&view);
    return failed ? NULL : PyLong_FromSsize_t(made);
}

/* ------------------------------------------------------------------ reading them */

int ahead_open(PyObject *region, Ahead *a) {
    a->rows = NULL;
    a->done = 0;
    a->held = 0;
    if (region == Py_None)
        return 0;
    if (PyObject_GetBuffer(region, &a->view, PyBUF_SIMPLE) < 0)
        return -1;
    a->held = 1;
    const Header *h = a->view.buf;
    int64_t done = a->view.len >= (Py_ssize_t)sizeof(Header) ? __atomic_load_n(&h->done, __ATOMIC_ACQUIRE) : 0;
    if (done <= 0 || done > h->count ||
        h->data_at != (int64_t)sizeof(Header) + h->count * (int64_t)sizeof(Row) || h->data_at > a->view.len)
        return 0;
    a->rows = (const Row *)((const char *)a->view.buf + sizeof(Header));
    a->done = done;
    return 0;
}

void ahead_close(Ahead *a) {
    if (a->held)
        PyBuffer_Release(&a->view);
    a->held = 0;
}

PyObject *ahead_texts(const Ahead *a, Py_ssize_t start) {
    int64_t lo = 0, hi = a->done;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (a->rows[mid].start < start)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == a->done || a->rows[lo].start != start)
        return NULL;
    const Row *row = &a->rows[lo];
    if (row->in_len == NONE)
        Py_RETURN_NONE;
    if (row->in_len < 0 || row->out_len < 0 || row->data < 0 ||
        row->data + (int64_t)row->in_len + row->out_len > a->view.len)
        return NULL;
    const char *p = (const char *)a->view.buf + row->data;
    PyObject *in = PyUnicode_New(row->in_len, 127), *out = in != NULL ? PyUnicode_New(row->out_len, 127) : NULL;
    PyObject *texts = NULL;
    if (out != NULL) {
        memcpy(PyUnicode_1BYTE_DATA(in), p, row->in_len);
        memcpy(PyUnicode_1BYTE_DATA(out), p + row->in_len, row->out_len);
        texts = PyTuple_Pack(2, in, out);
    }
    Py_XDECREF(in);
    Py_XDECREF(out);
    return texts;
}
