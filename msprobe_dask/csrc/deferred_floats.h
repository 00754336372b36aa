/* Floats whose texts are made at the end of a text, for all of them at once: repr's text of each, from
 * orjson's shortest digits (one orjson.dumps call on them all) written in repr's notation. One
 * definition, included by the extensions that print floats as repr does: graph/csrc (buffer.c) and
 * writers/csrc (csv_text.c). Each keeps its text in its own buffer and notes here, for each float, the
 * object and where its text goes; deferred_text then gives the whole text (a str or bytes). */
#ifndef MSPROBE_DASK_DEFERRED_FLOATS_H
#define MSPROBE_DASK_DEFERRED_FLOATS_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define FLOAT_TEXT 40 /* room for a float's text (at most 24 bytes: -1.2345678901234567e-308) */

typedef struct {
    PyObject *floats;     /* list: the floats whose texts are not known yet, in order (NULL until one) */
    Py_ssize_t *marks;    /* where each float's text goes in the text without them */
    char *texts;          /* FLOAT_TEXT bytes a float: its text, once known */
    unsigned char *lens;  /* its length; 0 until known */
    Py_ssize_t n, cap;
} Deferred;

/* The texts made before, by the float's bits: a dump's statistics repeat (an output's stand again as
 * the next API's input's, layers repeat), so most floats' texts are copied from here instead of made
 * by orjson again. One per C file that writes floats, filled as their texts are made (the GIL held). */
#define TEXT_CACHE_BITS 15 /* 32,768 texts (T: 11,000 values in 260,000 floats written; with 16,384 slots
                            * they evicted one another more: graph_visualize on T +8.5 M instructions) */
static struct {
    uint64_t bits;
    unsigned char n; /* 0: empty */
    char text[FLOAT_TEXT - 8];
} text_cache[1 << TEXT_CACHE_BITS];

static inline int text_slot(uint64_t bits) { return (int)((bits * 0x9E3779B97F4A7C15ull) >> (64 - TEXT_CACHE_BITS)); }

static inline uint64_t bits_of(PyObject *x) {
    double v = PyFloat_AS_DOUBLE(x);
    uint64_t bits;
    memcpy(&bits, &v, sizeof(bits));
    return bits;
}

static inline void deferred_free(Deferred *d) {
    PyMem_Free(d->marks);
    PyMem_Free(d->texts);
    PyMem_Free(d->lens);
    Py_CLEAR(d->floats);
    d->marks = NULL;
    d->texts = NULL;
    d->lens = NULL;
    d->n = d->cap = 0;
}

/* the finite float x (a float object), whose text goes at ``at`` */
static inline int deferred_add(Deferred *d, Py_ssize_t at, PyObject *x) {
    if (d->n == d->cap) {
        Py_ssize_t cap = d->cap ? 2 * d->cap : 64;
        Py_ssize_t *marks = PyMem_Realloc(d->marks, cap * sizeof(Py_ssize_t));
        if (marks != NULL)
            d->marks = marks;
        char *texts = marks != NULL ? PyMem_Realloc(d->texts, cap * FLOAT_TEXT) : NULL;
        if (texts != NULL)
            d->texts = texts;
        unsigned char *lens = texts != NULL ? PyMem_Realloc(d->lens, cap) : NULL;
        if (lens == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        d->lens = lens;
        d->cap = cap;
    }
    uint64_t bits = bits_of(x);
    int slot = text_slot(bits);
    Py_ssize_t i = d->n;
    if (text_cache[slot].n > 0 && text_cache[slot].bits == bits) {
        memcpy(d->texts + i * FLOAT_TEXT, text_cache[slot].text, text_cache[slot].n);
        d->lens[i] = text_cache[slot].n;
    } else {
        if (d->floats == NULL && (d->floats = PyList_New(0)) == NULL)
            return -1;
        if (PyList_Append(d->floats, x) < 0)
            return -1;
        d->lens[i] = 0;
    }
    d->marks[i] = at;
    d->n = i + 1;
    return 0;
}

/* the floats whose texts go at ``len`` or after dropped (the text cut back to ``len``) */
static inline int deferred_truncate(Deferred *d, Py_ssize_t len) {
    Py_ssize_t n = d->n, unknown = 0;
    while (n > 0 && d->marks[n - 1] >= len)
        unknown += d->lens[--n] == 0;
    d->n = n;
    if (unknown > 0) {
        Py_ssize_t size = PyList_GET_SIZE(d->floats);
        return PyList_SetSlice(d->floats, size - unknown, size, NULL);
    }
    return 0;
}

/* repr's text of the finite float whose text orjson wrote at t[0:n] (its shortest digits, which are
 * repr's, in another notation at some magnitudes: 0.00001 for 1e-05, 1e-7 for 1e-07): written at out
 * (FLOAT_TEXT bytes), its length returned. Python's rule (format_float_short, 'r'): an exponent below
 * -4 or from 16 on is written, with a sign and two digits at least; else the point, ".0" if whole. */
static inline Py_ssize_t repr_text(const char *t, Py_ssize_t n, char *out) {
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
static inline int starts_tiny(const char *t, Py_ssize_t n) {
    Py_ssize_t sign = n > 0 && t[0] == '-';
    return n - sign > 6 && memcmp(t + sign, "0.0000", 6) == 0;
}

/* text[0:len] with the deferred floats' texts in their places, as a str (ASCII) or, ``as_bytes``,
 * bytes; ``dumps``: orjson.dumps, which writes the floats whose texts are not known yet as
 * "[t1,t2,...]" (their texts then known, and kept in text_cache) */
static inline PyObject *deferred_text(Deferred *d, PyObject *dumps, const char *text, Py_ssize_t len, int as_bytes) {
    PyObject *json = NULL, *s = NULL;
    Py_ssize_t extra = 0;
    if (d->floats != NULL && PyList_GET_SIZE(d->floats) > 0) {
        json = PyObject_CallOneArg(dumps, d->floats);
        if (json == NULL)
            return NULL;
        if (!PyBytes_Check(json)) {
            PyErr_SetString(PyExc_TypeError, "orjson.dumps did not return bytes");
            goto done;
        }
        const char *token = PyBytes_AS_STRING(json) + 1;
        Py_ssize_t k = 0;
        for (Py_ssize_t i = 0; i < d->n; i++) {
            if (d->lens[i] > 0)
                continue;
            Py_ssize_t n = 0;
            while (token[n] != ',' && token[n] != ']')
                n++;
            if (n >= FLOAT_TEXT) {
                PyErr_SetString(PyExc_ValueError, "orjson.dumps wrote a float's text of unexpected length");
                goto done;
            }
            char *out = d->texts + i * FLOAT_TEXT;
            if (memchr(token, 'e', n) == NULL && !starts_tiny(token, n)) { /* repr's text already */
                memcpy(out, token, n);
                d->lens[i] = (unsigned char)n;
            } else
                d->lens[i] = (unsigned char)repr_text(token, n, out);
            if (d->lens[i] <= (Py_ssize_t)sizeof(text_cache[0].text)) {
                uint64_t bits = bits_of(PyList_GET_ITEM(d->floats, k));
                int slot = text_slot(bits);
                text_cache[slot].bits = bits;
                text_cache[slot].n = d->lens[i];
                memcpy(text_cache[slot].text, out, d->lens[i]);
            }
            k++;
            token += n + 1;
        }
        Py_CLEAR(d->floats); /* (their texts known now) */
    }
    for (Py_ssize_t i = 0; i < d->n; i++)
        extra += d->lens[i];
    s = as_bytes ? PyBytes_FromStringAndSize(NULL, len + extra) : PyUnicode_New(len + extra, 127);
    if (s != NULL) {
        char *out = as_bytes ? PyBytes_AS_STRING(s) : (char *)PyUnicode_1BYTE_DATA(s);
        Py_ssize_t at = 0;
        for (Py_ssize_t i = 0; i < d->n; i++) {
            memcpy(out, text + at, d->marks[i] - at);
            out += d->marks[i] - at;
            at = d->marks[i];
            memcpy(out, d->texts + i * FLOAT_TEXT, d->lens[i]);
            out += d->lens[i];
        }
        if (len > at)
            memcpy(out, text + at, len - at);
    }
done:
    Py_XDECREF(json);
    return s;
}

#endif
