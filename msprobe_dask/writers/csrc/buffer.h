/* A growing byte buffer (PyMem), shared by the writers' kernels (csv_text.c, rowdb.c). */
#ifndef MSPROBE_DASK_WRITERS_BUFFER_H
#define MSPROBE_DASK_WRITERS_BUFFER_H
#include <Python.h>
#include <string.h>

typedef struct {
    char *data;
    Py_ssize_t len, cap;
    int fixed; /* data is not the buffer's own (a bytes object's, sized before): it never grows */
} Buffer;

static int reserve(Buffer *b, Py_ssize_t more) {
    if (b->len + more <= b->cap)
        return 0;
    if (b->fixed) {
        PyErr_SetString(PyExc_SystemError, "a buffer sized before outgrew its size");
        return -1;
    }
    Py_ssize_t cap = b->cap ? b->cap : 1 << 16;
    while (cap < b->len + more)
        cap *= 2;
    char *data = PyMem_Realloc(b->data, cap);
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->data = data;
    b->cap = cap;
    return 0;
}

static int put(Buffer *b, const void *p, Py_ssize_t n) {
    if (reserve(b, n) < 0)
        return -1;
    memcpy(b->data + b->len, p, n);
    b->len += n;
    return 0;
}

#endif
