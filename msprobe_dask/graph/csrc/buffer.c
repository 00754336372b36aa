/* The text being made: a growing byte buffer, with floats whose texts orjson's digits make at the end. */
#include "speedups.h"

void buf_init(Buf *b) {
    b->p = b->small;
    b->len = 0;
    b->cap = sizeof(b->small);
    b->deferred = (Deferred){0};
}

void buf_free(Buf *b) {
    if (b->p != b->small)
        PyMem_Free(b->p);
    deferred_free(&b->deferred);
}

/* room for ``extra`` more bytes where buf_reserve found too little */
int buf_grow(Buf *b, Py_ssize_t extra) {
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
    return deferred_add(&b->deferred, b->len, x);
}

/* back to length ``len``, with the deferred floats after it */
int buf_truncate(Buf *b, Py_ssize_t len) {
    b->len = len;
    return deferred_truncate(&b->deferred, len);
}

/* the text, with the deferred floats' texts: repr's, from one orjson call on all of them */
PyObject *buf_text(Buf *b) {
    return deferred_text(&b->deferred, orjson_dumps, b->p, b->len, 0);
}
