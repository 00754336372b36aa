/* The text being made: a growing byte buffer, with floats whose texts orjson makes at the end. */
#include "speedups.h"

void buf_init(Buf *b) {
    b->p = b->small;
    b->len = 0;
    b->cap = sizeof(b->small);
    b->floats = NULL;
    b->marks = NULL;
    b->n_marks = b->cap_marks = 0;
}

void buf_free(Buf *b) {
    if (b->p != b->small)
        PyMem_Free(b->p);
    PyMem_Free(b->marks);
    Py_XDECREF(b->floats);
}

int buf_reserve(Buf *b, Py_ssize_t extra) {
    if (b->len + extra <= b->cap)
        return 0;
    Py_ssize_t cap = b->cap * 2;
    while (cap < b->len + extra)
        cap *= 2;
    char *p = PyMem_Malloc(cap);
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    memcpy(p, b->p, b->len);
    if (b->p != b->small)
        PyMem_Free(b->p);
    b->p = p;
    b->cap = cap;
    return 0;
}

/* a float whose text orjson makes, to go at the current end */
int buf_defer(Buf *b, PyObject *x) {
    if (b->floats == NULL && (b->floats = PyList_New(0)) == NULL)
        return -1;
    if (b->n_marks == b->cap_marks) {
        Py_ssize_t cap = b->cap_marks ? 2 * b->cap_marks : 64;
        Py_ssize_t *marks = PyMem_Realloc(b->marks, cap * sizeof(Py_ssize_t));
        if (marks == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        b->marks = marks;
        b->cap_marks = cap;
    }
    b->marks[b->n_marks++] = b->len;
    return PyList_Append(b->floats, x);
}

/* back to length ``len``, with the deferred floats after it */
int buf_truncate(Buf *b, Py_ssize_t len) {
    b->len = len;
    Py_ssize_t n = b->n_marks;
    while (n > 0 && b->marks[n - 1] >= len)
        n--;
    if (n < b->n_marks) {
        b->n_marks = n;
        return PyList_SetSlice(b->floats, n, PyList_GET_SIZE(b->floats), NULL);
    }
    return 0;
}


/* the text, with the deferred floats' texts from one orjson call on all of them ("[t1,t2,...]") */
PyObject *buf_text(Buf *b) {
    PyObject *json = NULL;
    const char *tokens = NULL;
    Py_ssize_t extra = 0;
    if (b->n_marks > 0) {
        json = PyObject_CallOneArg(orjson_dumps, b->floats);
        if (json == NULL)
            return NULL;
        if (!PyBytes_Check(json)) {
            Py_DECREF(json);
            PyErr_SetString(PyExc_TypeError, "orjson.dumps did not return bytes");
            return NULL;
        }
        tokens = PyBytes_AS_STRING(json) + 1;
        extra = PyBytes_GET_SIZE(json) - 2 - (b->n_marks - 1); /* less the brackets and commas */
    }
    PyObject *s = PyUnicode_New(b->len + extra, 127);
    if (s != NULL) {
        char *out = (char *)PyUnicode_1BYTE_DATA(s);
        Py_ssize_t at = 0;
        for (Py_ssize_t i = 0; i < b->n_marks; i++) {
            memcpy(out, b->p + at, b->marks[i] - at);
            out += b->marks[i] - at;
            at = b->marks[i];
            while (*tokens != ',' && *tokens != ']')
                *out++ = *tokens++;
            tokens++;
        }
        memcpy(out, b->p + at, b->len - at);
    }
    Py_XDECREF(json);
    return s;
}
