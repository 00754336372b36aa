/* The text being made: a growing byte buffer, with floats whose texts orjson's digits make at the end. */
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


/* repr's text of the finite float whose text orjson wrote at t[0:n] (its shortest digits, which are
 * repr's, in another notation at some magnitudes: 0.00001 for 1e-05, 1e-7 for 1e-07): written at out
 * (FLOAT_TEXT bytes), its length returned. Python's rule (format_float_short, 'r'): an exponent below
 * -4 or from 16 on is written, with a sign and two digits at least; else the point, ".0" if whole. */
static Py_ssize_t repr_text(const char *t, Py_ssize_t n, char *out) {
    char d[FLOAT_TEXT];
    int nd = 0, decpt = 0, point = 0;
    Py_ssize_t i = 0, k = 0;
    if (i < n && t[i] == '-')
        out[k++] = t[i++];
    for (; i < n && t[i] != 'e' && t[i] != 'E'; i++) {
        if (t[i] == '.')
            point = 1;
        else if (nd == 0 && t[i] == '0')
            decpt -= point;
        else if (nd < FLOAT_TEXT - 8) {
            d[nd++] = t[i];
            decpt += !point;
        }
    }
    if (i < n) { /* the exponent */
        int sign = 1, e = 0;
        if (++i < n && (t[i] == '-' || t[i] == '+'))
            sign = t[i++] == '-' ? -1 : 1;
        for (; i < n; i++)
            e = 10 * e + (t[i] - '0');
        decpt += sign * e;
    }
    while (nd > 0 && d[nd - 1] == '0')
        nd--;
    if (nd == 0) {
        memcpy(out + k, "0.0", 3);
        return k + 3;
    }
    if (decpt <= -4 || decpt > 16) {
        int e = decpt - 1;
        out[k++] = d[0];
        if (nd > 1) {
            out[k++] = '.';
            memcpy(out + k, d + 1, nd - 1);
            k += nd - 1;
        }
        out[k++] = 'e';
        out[k++] = e < 0 ? '-' : '+';
        e = e < 0 ? -e : e;
        if (e >= 100)
            out[k++] = (char)('0' + e / 100);
        out[k++] = (char)('0' + e / 10 % 10);
        out[k++] = (char)('0' + e % 10);
        return k;
    }
    if (decpt <= 0) {
        out[k++] = '0';
        out[k++] = '.';
        memset(out + k, '0', -decpt);
        k += -decpt;
        memcpy(out + k, d, nd);
        return k + nd;
    }
    if (decpt >= nd) {
        memcpy(out + k, d, nd);
        k += nd;
        memset(out + k, '0', decpt - nd);
        k += decpt - nd;
        memcpy(out + k, ".0", 2);
        return k + 2;
    }
    memcpy(out + k, d, decpt);
    k += decpt;
    out[k++] = '.';
    memcpy(out + k, d + decpt, nd - decpt);
    return k + nd - decpt;
}

/* orjson's text of a float below 1e-4 in magnitude without an exponent (0.00001): repr writes one */
static int starts_tiny(const char *t, Py_ssize_t n) {
    Py_ssize_t sign = n > 0 && t[0] == '-';
    return n - sign > 6 && memcmp(t + sign, "0.0000", 6) == 0;
}

/* the text, with the deferred floats' texts: repr's, from one orjson call on all of them
 * ("[t1,t2,...]") */
PyObject *buf_text(Buf *b) {
    PyObject *json = NULL, *s = NULL;
    char *texts = NULL;
    Py_ssize_t *lens = NULL, extra = 0;
    if (b->n_marks > 0) {
        json = PyObject_CallOneArg(orjson_dumps, b->floats);
        if (json == NULL)
            return NULL;
        if (!PyBytes_Check(json)) {
            PyErr_SetString(PyExc_TypeError, "orjson.dumps did not return bytes");
            goto done;
        }
        texts = PyMem_Malloc(b->n_marks * FLOAT_TEXT);
        lens = PyMem_Malloc(b->n_marks * sizeof(Py_ssize_t));
        if (texts == NULL || lens == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        const char *token = PyBytes_AS_STRING(json) + 1;
        for (Py_ssize_t i = 0; i < b->n_marks; i++) {
            Py_ssize_t n = 0;
            while (token[n] != ',' && token[n] != ']')
                n++;
            if (n >= FLOAT_TEXT) {
                PyErr_SetString(PyExc_ValueError, "orjson.dumps wrote a float's text of unexpected length");
                goto done;
            }
            if (memchr(token, 'e', n) == NULL && !starts_tiny(token, n)) { /* repr's text already */
                memcpy(texts + i * FLOAT_TEXT, token, n);
                lens[i] = n;
            } else
                lens[i] = repr_text(token, n, texts + i * FLOAT_TEXT);
            extra += lens[i];
            token += n + 1;
        }
    }
    s = PyUnicode_New(b->len + extra, 127);
    if (s != NULL) {
        char *out = (char *)PyUnicode_1BYTE_DATA(s);
        Py_ssize_t at = 0;
        for (Py_ssize_t i = 0; i < b->n_marks; i++) {
            memcpy(out, b->p + at, b->marks[i] - at);
            out += b->marks[i] - at;
            at = b->marks[i];
            memcpy(out, texts + i * FLOAT_TEXT, lens[i]);
            out += lens[i];
        }
        memcpy(out, b->p + at, b->len - at);
    }
done:
    PyMem_Free(texts);
    PyMem_Free(lens);
    Py_XDECREF(json);
    return s;
}
