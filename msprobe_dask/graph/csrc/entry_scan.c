/* dump/entries.py's entry_lines in C: the entries of dump.json's data body found and checked in one
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

typedef struct {
    PyObject *names, *starts, *ends, *opens, *heads;
} Found;

/* the entry whose name's quote is at q, matched up to end: 1 added, 0 no match there, -1 error */
static int add_entry(Found *f, PyObject *text, Py_ssize_t q, Py_ssize_t end, Py_ssize_t *after) {
    const char *s = PyBytes_AS_STRING(text);
    Py_ssize_t e = name_end(s, q, end);
    if (e < 0)
        return 0;
    /* (?=([{\[])\n|): the bracket the value opens at the end of the line, else None */
    int opens = e + 1 < end && (s[e] == '{' || s[e] == '[') && s[e + 1] == '\n';
    PyObject *name = PyBytes_FromStringAndSize(s + q + 1, e - 3 - (q + 1));
    PyObject *open = opens ? PyBytes_FromStringAndSize(s + e, 1) : Py_NewRef(Py_None);
    PyObject *start = PyLong_FromSsize_t(e), *head = PyLong_FromSsize_t(q);
    int rc = name != NULL && open != NULL && start != NULL && head != NULL &&
                     PyList_Append(f->names, name) == 0 && PyList_Append(f->opens, open) == 0 &&
                     PyList_Append(f->starts, start) == 0 && PyList_Append(f->heads, head) == 0
                 ? 1
                 : -1;
    Py_XDECREF(name);
    Py_XDECREF(open);
    Py_XDECREF(start);
    Py_XDECREF(head);
    *after = e;
    return rc;
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
 * or less (count("\n") - count(pad + " ") in [lo, hi)): 1 laid out so, 0 not, -1 error */
static int checked(Found *f, const char *s, Py_ssize_t len, Py_ssize_t indent, Py_ssize_t shallow) {
    Py_ssize_t n = PyList_GET_SIZE(f->names), multi = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *open = PyList_GET_ITEM(f->opens, k);
        if (open == Py_None)
            continue;
        multi++;
        Py_ssize_t start = PyLong_AsSsize_t(PyList_GET_ITEM(f->starts, k));
        Py_ssize_t end = PyLong_AsSsize_t(PyList_GET_ITEM(f->ends, k));
        if (PyErr_Occurred())
            return -1;
        /* its last line: pad and the bracket that closes it */
        Py_ssize_t c = slice_index(end - (indent + 2), len);
        char closing = PyBytes_AS_STRING(open)[0] == '{' ? '}' : ']';
        if (c + indent + 2 > len || !is_pad(s, c, len, indent) || s[c + 1 + indent] != closing)
            return 0;
        /* as many "{" as "}" in between */
        Py_ssize_t a = slice_index(start, len), b = slice_index(end, len);
        if (a < b && count_of('{', s + a, b - a) != count_of('}', s + a, b - a))
            return 0;
    }
    /* the lines indented indent spaces or less: the entries' first lines, and the last ones of those
     * of several lines */
    return shallow == n + multi;
}

/* entry_lines(text, lo, hi, indent) -> (names, starts, ends, opens, heads) or None (see the file) */
PyObject *entry_lines(PyObject *self, PyObject *args) {
    PyObject *text;
    Py_ssize_t lo, hi, indent;
    if (!PyArg_ParseTuple(args, "O!nnn", &PyBytes_Type, &text, &lo, &hi, &indent))
        return NULL;
    const char *s = PyBytes_AS_STRING(text);
    Py_ssize_t len = PyBytes_GET_SIZE(text);
    if (lo < 0 || hi > len || lo >= hi || indent < 0) {
        PyErr_SetString(PyExc_ValueError, "entry_lines: 0 <= lo < hi <= len(text) and indent >= 0");
        return NULL;
    }
    Found f = {PyList_New(0), PyList_New(0), PyList_New(0), PyList_New(0), PyList_New(0)};
    PyObject *result = NULL;
    if (f.names == NULL || f.starts == NULL || f.ends == NULL || f.opens == NULL || f.heads == NULL)
        goto done;
    /* the first entry: pad + NAME at lo (matched in the whole text) */
    Py_ssize_t at = lo;
    int rc = is_pad(s, lo, len, indent) ? add_entry(&f, text, lo + 1 + indent, len, &at) : 0;
    if (rc <= 0) {
        if (rc == 0)
            result = Py_NewRef(Py_None);
        goto done;
    }
    /* the later ones: "," + pad + NAME, searched from the end of the one before, before hi; and the
     * lines not indented deeper than pad */
    Py_ssize_t shallow = 0;
    const char *p = s + lo, *stop = s + hi;
    while (p < stop && (p = memchr(p, '\n', (size_t)(stop - p))) != NULL) {
        Py_ssize_t nl = p - s, after = nl + 1;
        if (!(is_pad(s, nl, hi, indent) && nl + indent + 1 < hi && s[nl + indent + 1] == ' ')) {
            shallow++;
            if (nl - 1 >= at && s[nl - 1] == ',' && is_pad(s, nl, hi, indent)) {
                rc = add_entry(&f, text, nl + 1 + indent, hi, &after);
                if (rc < 0)
                    goto done;
                if (rc > 0) {
                    PyObject *end = PyLong_FromSsize_t(nl - 1);
                    if (end == NULL || PyList_Append(f.ends, end) < 0) {
                        Py_XDECREF(end);
                        goto done;
                    }
                    Py_DECREF(end);
                    at = after;
                } else {
                    after = nl + 1;
                }
            }
        }
        p = s + after;
    }
    PyObject *last = PyLong_FromSsize_t(hi);
    if (last == NULL || PyList_Append(f.ends, last) < 0) {
        Py_XDECREF(last);
        goto done;
    }
    Py_DECREF(last);
    rc = checked(&f, s, len, indent, shallow);
    if (rc >= 0)
        result = rc ? PyTuple_Pack(5, f.names, f.starts, f.ends, f.opens, f.heads) : Py_NewRef(Py_None);
done:
    Py_XDECREF(f.names);
    Py_XDECREF(f.starts);
    Py_XDECREF(f.ends);
    Py_XDECREF(f.opens);
    Py_XDECREF(f.heads);
    return result;
}

/* mentions(text, tokens) -> a bool for each token: whether text holds it (``token in text``), by
 * glibc's memmem: as many instructions as bytes' search, but in a fifth of its time on a dump.json of
 * megabytes (fewer branches taken) */
PyObject *mentions(PyObject *self, PyObject *args) {
    PyObject *text, *tokens;
    if (!PyArg_ParseTuple(args, "O!O!", &PyBytes_Type, &text, &PyTuple_Type, &tokens))
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(tokens);
    PyObject *out = PyTuple_New(n);
    for (Py_ssize_t i = 0; out != NULL && i < n; i++) {
        PyObject *token = PyTuple_GET_ITEM(tokens, i);
        if (!PyBytes_Check(token)) {
            PyErr_SetString(PyExc_TypeError, "mentions: the tokens must be bytes");
            Py_CLEAR(out);
            break;
        }
        const void *at = memmem(PyBytes_AS_STRING(text), (size_t)PyBytes_GET_SIZE(text),
                                PyBytes_AS_STRING(token), (size_t)PyBytes_GET_SIZE(token));
        PyTuple_SET_ITEM(out, i, Py_NewRef(at != NULL ? Py_True : Py_False));
    }
    return out;
}
