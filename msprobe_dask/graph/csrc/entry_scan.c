/* dump/entries_scan.py's entry_lines in C: the entries of dump.json's data body found and checked in one
 * walk of its lines, for graph_visualize, whose entries' items are then made from their spans
 * (entry_items.c). The Python function is the definition: the same entries, the same refusals
 * (tests/graph/test_entry_scan.py compares both on every tests/data dump and on edited layouts).
 *
 * entry_lines(text, lo, hi, indent) -> (names, starts, ends, opens, heads) or None, as the Python
 * function: an entry is "," + pad + NAME (pad: a newline and indent spaces; the first one at lo
 * without the ","), NAME being a JSON string without raw control characters followed by ": ", and the
 * bracket of a value that opens one at the end of its first line. */
#include "speedups.h"

/* where the name at s[q] (its opening quote) ends: the position after its closing quote's ": ", or -1
 * where there is none before end (re: "[^"\\\x00-\x1f]*(?:\\.[^"\\\x00-\x1f]*)*": ) */
static Py_ssize_t name_end(const char *s, Py_ssize_t q, Py_ssize_t end) {
    if (q >= end || s[q] != '"')
        return -1;
    Py_ssize_t i = q + 1;
    while (i < end) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"')
            return i + 2 < end && s[i + 1] == ':' && s[i + 2] == ' ' ? i + 3 : -1;
        if (c < 0x20)
            return -1;
        if (c == '\\') { /* an escape: any character but a newline after it */
            if (i + 1 >= end || s[i + 1] == '\n')
                return -1;
            i += 2;
        } else {
            i++;
        }
    }
    return -1;
}

/* whether s[at:] is pad (a newline and indent spaces), all before end */
static int is_pad(const char *s, Py_ssize_t at, Py_ssize_t end, Py_ssize_t indent) {
    if (at < 0 || at + 1 + indent > end || s[at] != '\n')
        return 0;
    for (Py_ssize_t i = 1; i <= indent; i++)
        if (s[at + i] != ' ')
            return 0;
    return 1;
}

/* the entries found: for each, where its name's quote is (head), where its value starts (after the
 * name's ": ") and ends, and whether that value opens a bracket at the end of its first line */
typedef struct {
    Py_ssize_t *head, *start, *end;
    char *opens;
    Py_ssize_t n, cap;
} Found;

/* room for one more entry: 0, or -1 without memory (no error set: the scan runs without the GIL) */
static int room(Found *f) {
    if (f->n < f->cap)
        return 0;
    Py_ssize_t cap = f->cap ? 2 * f->cap : 1024;
    Py_ssize_t *head = PyMem_RawRealloc(f->head, (size_t)cap * sizeof(Py_ssize_t));
    if (head != NULL)
        f->head = head;
    Py_ssize_t *start = head != NULL ? PyMem_RawRealloc(f->start, (size_t)cap * sizeof(Py_ssize_t)) : NULL;
    if (start != NULL)
        f->start = start;
    Py_ssize_t *end = start != NULL ? PyMem_RawRealloc(f->end, (size_t)cap * sizeof(Py_ssize_t)) : NULL;
    if (end != NULL)
        f->end = end;
    char *opens = end != NULL ? PyMem_RawRealloc(f->opens, (size_t)cap) : NULL;
    if (opens == NULL)
        return -1;
    f->opens = opens;
    f->cap = cap;
    return 0;
}

/* the entry whose name's quote is at s[q], matched up to end: 1 added, 0 no match there, -1 without
 * memory */
static int add_entry(Found *f, const char *s, Py_ssize_t q, Py_ssize_t end, Py_ssize_t *after) {
    Py_ssize_t e = name_end(s, q, end);
    if (e < 0)
        return 0;
    if (room(f) < 0)
        return -1;
    /* (?=([{\[])\n|): the bracket the value opens at the end of the line, else None */
    f->opens[f->n] = e + 1 < end && (s[e] == '{' || s[e] == '[') && s[e + 1] == '\n' ? s[e] : 0;
    f->head[f->n] = q;
    f->start[f->n] = e;
    f->end[f->n] = -1;
    f->n++;
    *after = e;
    return 1;
}

/* bytes.startswith(prefix, at) and bytes.count's bounds: a negative position counts from the end */
static Py_ssize_t slice_index(Py_ssize_t at, Py_ssize_t len) {
    if (at < 0)
        at = at + len < 0 ? 0 : at + len;
    return at > len ? len : at;
}

/* how many times c is in s[0:n] */
static Py_ssize_t count_of(char c, const char *s, Py_ssize_t n) {
    Py_ssize_t k = 0;
    for (const char *p = s, *stop = s + n; (p = memchr(p, c, (size_t)(stop - p))) != NULL; p++)
        k++;
    return k;
}

/* the entries' checks (see entry_lines), ``shallow`` the lines of data's body indented indent spaces
 * or less (count("\n") - count(pad + " ") in [lo, hi)): 1 laid out so, 0 not */
static int checked(const Found *f, const char *s, Py_ssize_t len, Py_ssize_t indent, Py_ssize_t shallow) {
    Py_ssize_t multi = 0;
    for (Py_ssize_t k = 0; k < f->n; k++) {
        if (!f->opens[k])
            continue;
        multi++;
        Py_ssize_t start = f->start[k], end = f->end[k];
        /* its last line: pad and the bracket that closes it */
        Py_ssize_t c = slice_index(end - (indent + 2), len);
        char closing = f->opens[k] == '{' ? '}' : ']';
        if (c + indent + 2 > len || !is_pad(s, c, len, indent) || s[c + 1 + indent] != closing)
            return 0;
        /* as many "{" as "}" in between */
        Py_ssize_t a = slice_index(start, len), b = slice_index(end, len);
        if (a < b && count_of('{', s + a, b - a) != count_of('}', s + a, b - a))
            return 0;
    }
    /* the lines indented indent spaces or less: the entries' first lines, and the last ones of those
     * of several lines */
    return shallow == f->n + multi;
}

/* the entries of s[lo:hi] into f, checked: 1, 0 where they are not laid out so, -1 without memory (no
 * error set: it runs without the GIL) */
static int scan(Found *f, const char *s, Py_ssize_t len, Py_ssize_t lo, Py_ssize_t hi, Py_ssize_t indent) {
    /* the first entry: pad + NAME at lo (matched in the whole text) */
    Py_ssize_t at = lo;
    int rc = is_pad(s, lo, len, indent) ? add_entry(f, s, lo + 1 + indent, len, &at) : 0;
    if (rc <= 0)
        return rc;
    /* the later ones: "," + pad + NAME, searched from the end of the one before, before hi; and the
     * lines not indented deeper than pad */
    Py_ssize_t shallow = 0;
    const char *p = s + lo, *stop = s + hi;
    while (p < stop && (p = memchr(p, '\n', (size_t)(stop - p))) != NULL) {
        Py_ssize_t nl = p - s, after = nl + 1;
        if (!(is_pad(s, nl, hi, indent) && nl + indent + 1 < hi && s[nl + indent + 1] == ' ')) {
            shallow++;
            if (nl - 1 >= at && s[nl - 1] == ',' && is_pad(s, nl, hi, indent)) {
                rc = add_entry(f, s, nl + 1 + indent, hi, &after);
                if (rc < 0)
                    return -1;
                if (rc > 0) {
                    f->end[f->n - 2] = nl - 1;
                    at = after;
                } else {
                    after = nl + 1;
                }
            }
        }
        p = s + after;
    }
    f->end[f->n - 1] = hi;
    return checked(f, s, len, indent, shallow);
}

/* the lists of the entries found (see entry_lines) */
static PyObject *found_lists(const Found *f, const char *s) {
    PyObject *lists[5];
    for (int j = 0; j < 5; j++)
        lists[j] = PyList_New(f->n);
    PyObject *names = lists[0], *starts = lists[1], *ends = lists[2], *opens = lists[3], *heads = lists[4];
    int ok = names != NULL && starts != NULL && ends != NULL && opens != NULL && heads != NULL;
    for (Py_ssize_t k = 0; ok && k < f->n; k++) {
        PyObject *name = PyBytes_FromStringAndSize(s + f->head[k] + 1, f->start[k] - 3 - (f->head[k] + 1));
        PyObject *open = f->opens[k] ? PyBytes_FromStringAndSize(&f->opens[k], 1) : Py_NewRef(Py_None);
        PyObject *start = PyLong_FromSsize_t(f->start[k]), *end = PyLong_FromSsize_t(f->end[k]);
        PyObject *head = PyLong_FromSsize_t(f->head[k]);
        PyObject *made[5] = {name, start, end, open, head};
        for (int j = 0; j < 5; j++) {
            if (made[j] == NULL)
                ok = 0;
            else
                PyList_SET_ITEM(lists[j], k, made[j]);
        }
    }
    PyObject *result = ok ? PyTuple_Pack(5, names, starts, ends, opens, heads) : NULL;
    for (int j = 0; j < 5; j++)
        Py_XDECREF(lists[j]);
    return result;
}

/* the entries of text[lo:hi] found into f (who: the function, for the error): 1, 0 where they are not
 * laid out so, -1 with an error set; the scan without the GIL (the build of the other side's graph
 * runs meanwhile). The caller frees f (found_free) either way. */
static int scanned(Found *f, PyObject *text, Py_ssize_t lo, Py_ssize_t hi, Py_ssize_t indent, const char *who) {
    const char *s = PyBytes_AS_STRING(text);
    Py_ssize_t len = PyBytes_GET_SIZE(text);
    if (lo < 0 || hi > len || lo >= hi || indent < 0) {
        PyErr_Format(PyExc_ValueError, "%s: 0 <= lo < hi <= len(text) and indent >= 0", who);
        return -1;
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS;
    rc = scan(f, s, len, lo, hi, indent);
    Py_END_ALLOW_THREADS;
    if (rc < 0)
        PyErr_NoMemory();
    return rc;
}

static void found_free(Found *f) {
    PyMem_RawFree(f->head);
    PyMem_RawFree(f->start);
    PyMem_RawFree(f->end);
    PyMem_RawFree(f->opens);
}

/* entry_lines(text, lo, hi, indent) -> (names, starts, ends, opens, heads) or None (see the file) */
PyObject *entry_lines(PyObject *self, PyObject *args) {
    PyObject *text;
    Py_ssize_t lo, hi, indent;
    if (!PyArg_ParseTuple(args, "O!nnn", &PyBytes_Type, &text, &lo, &hi, &indent))
        return NULL;
    Found f = {NULL, NULL, NULL, NULL, 0, 0};
    int rc = scanned(&f, text, lo, hi, indent, "entry_lines");
    PyObject *result = rc < 0 ? NULL : rc == 0 ? Py_NewRef(Py_None) : found_lists(&f, PyBytes_AS_STRING(text));
    found_free(&f);
    return result;
}

/* mentions(text, tokens) -> a bool for each token: whether text holds it (``token in text``), by
 * glibc's memmem: as many instructions as bytes' search, but in a fifth of its time on a dump.json of
 * megabytes (fewer branches taken); the searches without the GIL (the build of the other side's
 * graph runs meanwhile) */
PyObject *mentions(PyObject *self, PyObject *args) {
    PyObject *text, *tokens;
    if (!PyArg_ParseTuple(args, "O!O!", &PyBytes_Type, &text, &PyTuple_Type, &tokens))
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(tokens);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!PyBytes_Check(PyTuple_GET_ITEM(tokens, i))) {
            PyErr_SetString(PyExc_TypeError, "mentions: the tokens must be bytes");
            return NULL;
        }
    }
    char *found = PyMem_Malloc((size_t)n + 1);
    if (found == NULL)
        return PyErr_NoMemory();
    const char *s = PyBytes_AS_STRING(text);
    size_t len = (size_t)PyBytes_GET_SIZE(text);
    /* (the text and the tokens are bytes, which do not change, held by the call's arguments) */
    Py_BEGIN_ALLOW_THREADS;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *token = PyTuple_GET_ITEM(tokens, i);
        found[i] = memmem(s, len, PyBytes_AS_STRING(token), (size_t)PyBytes_GET_SIZE(token)) != NULL;
    }
    Py_END_ALLOW_THREADS;
    PyObject *out = PyTuple_New(n);
    for (Py_ssize_t i = 0; out != NULL && i < n; i++)
        PyTuple_SET_ITEM(out, i, Py_NewRef(found[i] ? Py_True : Py_False));
    PyMem_Free(found);
    return out;
}

/* entry k's span as dump/entries_scan.py's entry_spans gives it: (start + base, end + base), or
 * (shift >= 0) one int, (start + base) << shift | length; NULL on an error */
static PyObject *span_value(const Found *f, Py_ssize_t k, Py_ssize_t base, Py_ssize_t shift) {
    long long at = (long long)f->start[k] + base, length = (long long)(f->end[k] - f->start[k]);
    if (shift < 0)
        return Py_BuildValue("(nn)", (Py_ssize_t)at, (Py_ssize_t)(f->end[k] + base));
    if (shift < 62 && at < (1LL << (62 - shift)) && length < (1LL << shift))
        return PyLong_FromLongLong(at << shift | length);
    PyObject *start = PyLong_FromLongLong(at), *by = PyLong_FromSsize_t(shift);
    PyObject *moved = start != NULL && by != NULL ? PyNumber_Lshift(start, by) : NULL;
    PyObject *len = moved != NULL ? PyLong_FromLongLong(length) : NULL;
    PyObject *value = len != NULL ? PyNumber_Or(moved, len) : NULL;
    Py_XDECREF(start);
    Py_XDECREF(by);
    Py_XDECREF(moved);
    Py_XDECREF(len);
    return value;
}

/* entry k's name (as entries_scan.entry_names reads it): its UTF-8 text, or, if it holds an escape,
 * what escaped(its bytes) gives (a str, or None: invalid); NULL on an error */
static PyObject *entry_name(const Found *f, const char *s, Py_ssize_t k, PyObject *escaped) {
    const char *raw = s + f->head[k] + 1;
    Py_ssize_t n = f->start[k] - 3 - (f->head[k] + 1);
    if (memchr(raw, '\\', (size_t)n) == NULL)
        return PyUnicode_DecodeUTF8(raw, n, NULL);
    PyObject *bytes = PyBytes_FromStringAndSize(raw, n);
    PyObject *name = bytes != NULL ? PyObject_CallOneArg(escaped, bytes) : NULL;
    Py_XDECREF(bytes);
    if (name != NULL && name != Py_None && !PyUnicode_CheckExact(name)) {
        Py_DECREF(name);
        PyErr_SetString(PyExc_TypeError, "entry_spans: escaped must give a str or None");
        return NULL;
    }
    return name;
}

/* the entries found added to spans (see entry_spans): the list of the one-line ones, None where a name
 * is invalid or one spans holds, NULL on an error */
static PyObject *added_spans(const Found *f, const char *s, Py_ssize_t base, Py_ssize_t shift, PyObject *spans,
                             PyObject *escaped) {
    PyObject *one_line = PyList_New(0);
    for (Py_ssize_t k = 0; one_line != NULL && k < f->n; k++) {
        PyObject *name = entry_name(f, s, k, escaped);
        if (name == NULL || name == Py_None) {
            Py_XDECREF(name);
            Py_SETREF(one_line, name == NULL ? NULL : Py_NewRef(Py_None));
            break;
        }
        if (shift >= 0)
            PyUnicode_InternInPlace(&name);
        int held = PyDict_Contains(spans, name);
        PyObject *value = held == 0 ? span_value(f, k, base, shift) : NULL;
        int ok = value != NULL && PyDict_SetItem(spans, name, value) == 0;
        Py_XDECREF(value);
        if (ok && !f->opens[k]) {
            PyObject *entry = Py_BuildValue("(Onn)", name, f->start[k], f->end[k]);
            ok = entry != NULL && PyList_Append(one_line, entry) == 0;
            Py_XDECREF(entry);
        }
        Py_DECREF(name);
        if (!ok) {
            Py_SETREF(one_line, held == 1 ? Py_NewRef(Py_None) : NULL);
            break;
        }
    }
    return one_line;
}

/* entry_spans(text, lo, hi, indent, base, shift, spans, escaped) -> the one-line entries [(name, start,
 * end)] or None: dump/entries_scan.py's entry_spans (without find and heads), the entries added to the
 * dict spans, a name holding an escape decoded by escaped; the scan without the GIL, the names and spans
 * made here rather than lists of each of their parts for Python to join */
PyObject *entry_spans(PyObject *self, PyObject *args) {
    PyObject *text, *spans, *escaped;
    Py_ssize_t lo, hi, indent, base, shift;
    if (!PyArg_ParseTuple(args, "O!nnnnnO!O", &PyBytes_Type, &text, &lo, &hi, &indent, &base, &shift,
                          &PyDict_Type, &spans, &escaped))
        return NULL;
    if (base < 0) {
        PyErr_SetString(PyExc_ValueError, "entry_spans: base >= 0");
        return NULL;
    }
    Found f = {NULL, NULL, NULL, NULL, 0, 0};
    int rc = scanned(&f, text, lo, hi, indent, "entry_spans");
    PyObject *result = rc < 0    ? NULL
                       : rc == 0 ? Py_NewRef(Py_None)
                                 : added_spans(&f, PyBytes_AS_STRING(text), base, shift, spans, escaped);
    found_free(&f);
    return result;
}
