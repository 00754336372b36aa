/* The per-node hot path of graph_visualize in C: the JSON text of a node's exported items
 * (items.py, export formatting of graph_visualize.md section 7.6) and the statistics diffs of a
 * summary compare (compare.py, _diffs).
 *
 * Each function handles the common values (exact floats, ints, bools, None, lists and printable
 * ASCII strings) and answers None for anything else; the caller then takes the Python path, which
 * stays the definition. The texts are the ones Python makes: floats by PyOS_double_to_string, as
 * float.__repr__ and format(x, ".6f") make them.
 */
#define _GNU_SOURCE /* memmem */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <string.h>

static PyObject *exported_text_type; /* items.ExportedText, set by configure() */
static PyObject *str_max, *str_type, *str_process_group, *str_shape, *str_class;
static PyObject *str_true, *str_false, *str_data_name, *str_full_op_name, *str_state, *str_requires_grad,
    *str_dtype, *str_md5, *str_value, *str_no_data_name, *stat_names[4];


/* ------------------------------------------------------------------ a growing byte buffer */

/* The text being made, with the floats whose texts orjson makes (see add_float) left out: their
 * objects in ``floats``, and where their texts go in ``marks``. */
typedef struct {
    char *p;
    Py_ssize_t len, cap;
    PyObject *floats;
    Py_ssize_t *marks, n_marks, cap_marks;
    char small[8192];
} Buf;

static void buf_init(Buf *b) {
    b->p = b->small;
    b->len = 0;
    b->cap = sizeof(b->small);
    b->floats = NULL;
    b->marks = NULL;
    b->n_marks = b->cap_marks = 0;
}

static void buf_free(Buf *b) {
    if (b->p != b->small)
        PyMem_Free(b->p);
    PyMem_Free(b->marks);
    Py_XDECREF(b->floats);
}

static int buf_reserve(Buf *b, Py_ssize_t extra) {
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

static inline int buf_add(Buf *b, const char *s, Py_ssize_t n) {
    if (buf_reserve(b, n) < 0)
        return -1;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    return 0;
}

#define BUF_LIT(b, lit) buf_add((b), (lit), (Py_ssize_t)(sizeof(lit) - 1))

/* a float whose text orjson makes, to go at the current end */
static int buf_defer(Buf *b, PyObject *x) {
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
static int buf_truncate(Buf *b, Py_ssize_t len) {
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

static PyObject *orjson_dumps; /* orjson.dumps, set by configure() */

/* the text, with the deferred floats' texts from one orjson call on all of them ("[t1,t2,...]") */
static PyObject *buf_text(Buf *b) {
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

/* ------------------------------------------------------------------ texts of values */

/* 1: added, 0: not a value this code handles (the caller falls back), -1: error */
#define DONE 1
#define UNHANDLED 0

/* character classes: BAD, not printable ASCII (Python's path escapes it as \uXXXX or takes other
 * rules); ESCAPED, a double quote or a backslash (escaped in JSON); QUOTE, a single quote (dropped) */
#define BAD 1
#define ESCAPED 2
#define QUOTE 4
#define CAPITAL_N 8 /* (None starts with it) */
static unsigned char char_class[256];

static void init_char_classes(void) {
    for (int c = 0; c < 256; c++)
        char_class[c] = c < 0x20 || c > 0x7e ? BAD : 0;
    char_class['"'] = char_class['\\'] = ESCAPED;
    char_class['\''] = QUOTE;
    char_class['N'] = CAPITAL_N;
}

/* the classes of the characters of s, or'ed */
static int classes(const char *s, Py_ssize_t n) {
    int c = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        c |= char_class[(unsigned char)s[i]];
    return c;
}

/* the ASCII data of a str, else NULL */
static const char *ascii_data(PyObject *s, Py_ssize_t *n) {
    if (!PyUnicode_IS_ASCII(s))
        return NULL;
    *n = PyUnicode_GET_LENGTH(s);
    return (const char *)PyUnicode_1BYTE_DATA(s);
}

static int add_double(Buf *b, double x, char code, int precision, int flags) {
    char *t = PyOS_double_to_string(x, code, precision, flags, NULL);
    if (t == NULL)
        return -1;
    int rc = buf_add(b, t, (Py_ssize_t)strlen(t));
    PyMem_Free(t);
    return rc;
}

/* repr(x): orjson's text where it is repr's, 1e-4 <= |x| < 1e16 (see jsontext.float_text), made at
 * the end for all such floats at once; elsewhere Python's */
static int add_float(Buf *b, PyObject *v) {
    double x = PyFloat_AS_DOUBLE(v);
    if ((x >= 1e-4 && x < 1e16) || (x > -1e16 && x <= -1e-4))
        return buf_defer(b, v);
    return add_double(b, x, 'r', 0, Py_DTSF_ADD_DOT_0);
}

/* the decimal digits of x */
static int add_long_long(Buf *b, long long x) {
    char digits[24], *end = digits + sizeof(digits), *p = end;
    unsigned long long u = x < 0 ? 0ULL - (unsigned long long)x : (unsigned long long)x;
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (x < 0)
        *--p = '-';
    return buf_add(b, p, end - p);
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* s matches ^\d{1,20}\.\d{7,20}%?$ (ASCII, no newline): a decimal the export rounds */
static int long_decimal(const char *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    while (i < n && is_digit(s[i]))
        i++;
    if (i < 1 || i > 20 || i >= n || s[i] != '.')
        return 0;
    Py_ssize_t j = ++i;
    while (i < n && is_digit(s[i]))
        i++;
    if (i - j < 7 || i - j > 20)
        return 0;
    return i == n || (i == n - 1 && s[i] == '%');
}

/* printable ASCII as it stands between the quotes of a JSON string (``escape``: it has a double
 * quote or a backslash) */
static int add_escaped(Buf *b, const char *s, Py_ssize_t n, int escape) {
    if (!escape)
        return buf_add(b, s, n) < 0 ? -1 : DONE;
    if (buf_reserve(b, 2 * n) < 0)
        return -1;
    char *out = b->p + b->len;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (s[i] == '"' || s[i] == '\\')
            *out++ = '\\';
        *out++ = s[i];
    }
    b->len = out - b->p;
    return DONE;
}

/* the text s (n printable ASCII characters) takes by items._fmt_str's first steps, into t (n bytes):
 * quotes dropped, then None -> null, left to right; returns its length */
static Py_ssize_t quotes_and_nones(const char *s, Py_ssize_t n, char *t) {
    Py_ssize_t m = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        if (s[i] != '\'')
            t[m++] = s[i];
    for (Py_ssize_t i = 0; i + 4 <= m; i++) {
        if (t[i] == 'N' && memcmp(t + i, "None", 4) == 0) {
            memcpy(t + i, "null", 4);
            i += 3;
        }
    }
    return m;
}

/* a long decimal (see long_decimal), rounded to 6 decimals: f"{float(s):.6f}" (and its %) */
static int add_rounded(Buf *b, const char *s, Py_ssize_t n) {
    int pct = s[n - 1] == '%';
    char digits[48];
    Py_ssize_t k = pct ? n - 1 : n;
    memcpy(digits, s, k);
    digits[k] = '\0';
    double x = PyOS_string_to_double(digits, NULL, NULL);
    if (x == -1.0 && PyErr_Occurred())
        return -1;
    if (add_double(b, x, 'f', 6, 0) < 0)
        return -1;
    return pct ? (BUF_LIT(b, "%") < 0 ? -1 : DONE) : DONE;
}

/* the exported text of a str (items._fmt_str, then JSON escaping): quotes dropped, None -> null, a
 * long decimal rounded to 6 decimals; UNHANDLED if it is not printable ASCII */
static int add_str(Buf *b, PyObject *v) {
    Py_ssize_t n;
    const char *s = ascii_data(v, &n);
    if (s == NULL)
        return UNHANDLED;
    int c = classes(s, n);
    if (c & BAD)
        return UNHANDLED;
    int none = (c & CAPITAL_N) && n >= 4 && memmem(s, n, "None", 4) != NULL;
    if (!(c & QUOTE) && !none) {
        if (n >= 9 && is_digit(s[0]) && long_decimal(s, n))
            return add_rounded(b, s, n);
        return add_escaped(b, s, n, c & ESCAPED);
    }
    char small[256], *t = n <= (Py_ssize_t)sizeof(small) ? small : PyMem_Malloc(n);
    if (t == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t m = quotes_and_nones(s, n, t);
    int rc = m >= 9 && is_digit(t[0]) && long_decimal(t, m) ? add_rounded(b, t, m) : add_escaped(b, t, m, c & ESCAPED);
    if (t != small)
        PyMem_Free(t);
    return rc;
}

/* list.__repr__ of a list of ints (a shape), else of anything through Python (UNHANDLED unless
 * printable ASCII without escapes) */
static int add_list(Buf *b, PyObject *v) {
    Py_ssize_t n = PyList_GET_SIZE(v), i;
    Py_ssize_t start = b->len;
    if (BUF_LIT(b, "[") < 0)
        return -1;
    for (i = 0; i < n; i++) {
        PyObject *x = PyList_GET_ITEM(v, i);
        if (!PyLong_CheckExact(x))
            break;
        int overflow;
        long long k = PyLong_AsLongLongAndOverflow(x, &overflow);
        if ((k == -1 && PyErr_Occurred()) || overflow)
            break;
        if ((i > 0 && BUF_LIT(b, ", ") < 0) || add_long_long(b, k) < 0)
            return -1;
    }
    if (i == n)
        return BUF_LIT(b, "]") < 0 ? -1 : DONE;
    if (PyErr_Occurred())
        return -1;
    b->len = start; /* (no deferred float was added) */
    PyObject *r = PyObject_Repr(v);
    if (r == NULL)
        return -1;
    Py_ssize_t m;
    const char *s = ascii_data(r, &m);
    int rc = UNHANDLED;
    if (s != NULL && !(classes(s, m) & (BAD | ESCAPED)))
        rc = buf_add(b, s, m) < 0 ? -1 : DONE;
    Py_DECREF(r);
    return rc;
}

/* the JSON-ready exported text of one item value, by its exact class */
static int add_value(Buf *b, PyObject *v) {
    PyTypeObject *t = Py_TYPE(v);
    if (t == &PyFloat_Type)
        return add_float(b, v) < 0 ? -1 : DONE;
    if (t == &PyUnicode_Type)
        return add_str(b, v);
    if ((PyObject *)t == exported_text_type) {
        Py_ssize_t n;
        const char *s = ascii_data(v, &n);
        if (s == NULL || classes(s, n) & (BAD | ESCAPED))
            return UNHANDLED;
        return buf_add(b, s, n) < 0 ? -1 : DONE;
    }
    if (v == Py_None)
        return BUF_LIT(b, "null") < 0 ? -1 : DONE;
    if (t == &PyBool_Type)
        return (v == Py_True ? BUF_LIT(b, "True") : BUF_LIT(b, "False")) < 0 ? -1 : DONE;
    if (t == &PyLong_Type) {
        int overflow;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (x == -1 && PyErr_Occurred())
            return -1;
        if (!overflow)
            return add_long_long(b, x) < 0 ? -1 : DONE;
        PyObject *r = PyObject_Repr(v);
        if (r == NULL)
            return -1;
        int rc = buf_add(b, PyUnicode_AsUTF8(r), PyUnicode_GET_LENGTH(r));
        Py_DECREF(r);
        return rc < 0 ? -1 : DONE;
    }
    if (t == &PyList_Type)
        return add_list(b, v);
    return UNHANDLED;
}

/* key objects seen to be printable ASCII without escapes, by their address (held, so that an
 * address is not reused while here): item keys are few objects, shared by many items */
#define GOOD_KEYS 512
static PyObject *good_keys[GOOD_KEYS];

/* a key as it stands in JSON, after ``before``: printable ASCII without escapes only (others:
 * UNHANDLED) */
static int add_key(Buf *b, const char *before, Py_ssize_t m, PyObject *k) {
    if (!PyUnicode_CheckExact(k))
        return UNHANDLED;
    Py_ssize_t n;
    const char *s = ascii_data(k, &n);
    if (s == NULL)
        return UNHANDLED;
    PyObject **seen = &good_keys[((uintptr_t)k >> 4) % GOOD_KEYS];
    if (*seen != k) {
        if (classes(s, n) & (BAD | ESCAPED))
            return UNHANDLED;
        Py_XSETREF(*seen, Py_NewRef(k));
    }
    if (buf_reserve(b, m + n + 2) < 0)
        return -1;
    char *out = b->p + b->len;
    memcpy(out, before, m);
    out[m] = '"';
    memcpy(out + m + 1, s, n);
    out[m + n + 1] = '"';
    b->len += m + n + 2;
    return DONE;
}

/* the keys an item leaves out (a small set, kept as their texts for a cheap test) */
typedef struct {
    PyObject *set;
    Py_ssize_t n;
    const char *text[8];
    Py_ssize_t len[8];
} Skip;

static Skip skip_cache[4];

/* the Skip of a set of keys (remembered: the callers pass a few module constants), NULL on error */
static Skip *skip_of(PyObject *set) {
    for (int i = 0; i < 4; i++)
        if (skip_cache[i].set == set)
            return &skip_cache[i];
    if (!PyAnySet_Check(set) || PySet_GET_SIZE(set) > 8) {
        PyErr_SetString(PyExc_ValueError, "skip: a set of at most 8 str keys");
        return NULL;
    }
    Skip sk = {.set = set, .n = 0};
    PyObject *it = PyObject_GetIter(set), *k;
    if (it == NULL)
        return NULL;
    while ((k = PyIter_Next(it)) != NULL) {
        const char *s = PyUnicode_Check(k) ? ascii_data(k, &sk.len[sk.n]) : NULL;
        Py_DECREF(k); /* (the set holds it) */
        if (s == NULL) {
            Py_DECREF(it);
            PyErr_SetString(PyExc_ValueError, "skip: a set of ASCII str keys");
            return NULL;
        }
        sk.text[sk.n++] = s;
    }
    Py_DECREF(it);
    if (PyErr_Occurred())
        return NULL;
    for (int i = 0; i < 4; i++) {
        if (skip_cache[i].set == NULL) {
            Py_INCREF(set); /* (kept alive with the texts it holds) */
            skip_cache[i] = sk;
            return &skip_cache[i];
        }
    }
    PyErr_SetString(PyExc_ValueError, "skip: at most 4 distinct sets");
    return NULL;
}

static int skipped(Skip *sk, PyObject *k) {
    Py_ssize_t n;
    const char *s = PyUnicode_CheckExact(k) ? ascii_data(k, &n) : NULL;
    if (s == NULL)
        return -2; /* not a key this code takes */
    for (Py_ssize_t i = 0; i < sk->n; i++)
        if (sk->len[i] == n && memcmp(sk->text[i], s, n) == 0)
            return 1;
    return 0;
}

/* {"key": "text", ...} of one item, or {"value": "null"} when its Max text is null */
static int add_item(Buf *b, PyObject *item, Skip *skip) {
    if (!PyDict_CheckExact(item))
        return UNHANDLED;
    PyObject *kind = PyDict_GetItemWithError(item, str_type);
    if (kind == NULL && PyErr_Occurred())
        return -1;
    if (kind != NULL && PyUnicode_Check(kind)) {
        int pg = PyUnicode_Compare(kind, str_process_group);
        if (pg == -1 && PyErr_Occurred())
            return -1;
        if (pg == 0)
            return UNHANDLED; /* a process group keeps a few keys: the Python path */
    }
    Py_ssize_t start = b->len, pos = 0;
    PyObject *k, *v;
    int first = 1, null_max = 0;
    while (PyDict_Next(item, &pos, &k, &v)) {
        int skip_it = skipped(skip, k);
        if (skip_it == -2)
            return UNHANDLED;
        if (skip_it)
            continue;
        int rc = first ? add_key(b, "{", 1, k) : add_key(b, "\", ", 3, k);
        if (rc <= 0)
            return rc;
        first = 0;
        if (BUF_LIT(b, ": \"") < 0)
            return -1;
        Py_ssize_t at = b->len;
        rc = add_value(b, v);
        if (rc <= 0)
            return rc;
        /* (as format_item: the text of a float, int, bool or list is never null) */
        if ((v == Py_None || PyUnicode_Check(v)) && b->len - at == 4 && memcmp(b->p + at, "null", 4) == 0) {
            int is_max = PyUnicode_Compare(k, str_max);
            if (is_max == -1 && PyErr_Occurred())
                return -1;
            null_max |= is_max == 0;
        }
    }
    if (null_max) {
        if (buf_truncate(b, start) < 0)
            return -1;
        return BUF_LIT(b, "{\"value\": \"null\"}") < 0 ? -1 : DONE;
    }
    return (first ? BUF_LIT(b, "{}") : BUF_LIT(b, "\"}")) < 0 ? -1 : DONE;
}

/* the JSON text of a node's exported items, or None where this code does not take them */
static PyObject *data_json(PyObject *data, Skip *skip) {
    Buf b;
    buf_init(&b);
    Py_ssize_t pos = 0;
    PyObject *k, *item, *result = NULL;
    int rc = DONE;
    while (rc == DONE && PyDict_Next(data, &pos, &k, &item)) {
        rc = b.len == 0 ? add_key(&b, "{", 1, k) : add_key(&b, ", ", 2, k);
        if (rc == DONE)
            rc = BUF_LIT(&b, ": ") < 0 ? -1 : DONE;
        if (rc == DONE)
            rc = add_item(&b, item, skip);
    }
    if (rc == DONE && (b.len == 0 ? BUF_LIT(&b, "{}") : BUF_LIT(&b, "}")) == 0)
        result = buf_text(&b);
    else if (rc == UNHANDLED)
        result = Py_NewRef(Py_None);
    buf_free(&b);
    return result;
}

/* items_json(data, skip) -> the JSON text of the exported items, or None (take the Python path) */
static PyObject *items_json(PyObject *self, PyObject *args) {
    PyObject *data, *skip_set;
    if (!PyArg_ParseTuple(args, "O!O", &PyDict_Type, &data, &skip_set))
        return NULL;
    if (exported_text_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_speedups.configure() was not called");
        return NULL;
    }
    Skip *skip = skip_of(skip_set);
    return skip != NULL ? data_json(data, skip) : NULL;
}

/* ------------------------------------------------------------------ tb_nodes rows */

/* json.dumps of a list of str, where each is printable ASCII without escapes; UNHANDLED else */
static int add_str_list(Buf *b, PyObject *list) {
    if (BUF_LIT(b, "[") < 0)
        return -1;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++) {
        PyObject *x = PyList_GET_ITEM(list, i);
        Py_ssize_t n;
        const char *s = PyUnicode_CheckExact(x) ? ascii_data(x, &n) : NULL;
        if (s == NULL || classes(s, n) & (BAD | ESCAPED))
            return UNHANDLED;
        if ((i > 0 && BUF_LIT(b, ", ") < 0) || BUF_LIT(b, "\"") < 0 || buf_add(b, s, n) < 0 || BUF_LIT(b, "\"") < 0)
            return -1;
    }
    return BUF_LIT(b, "]") < 0 ? -1 : DONE;
}

/* the JSON text of a list of str (dumps(list) where the fast path does not take it) */
static PyObject *str_list_json(PyObject *list, PyObject *dumps) {
    if (PyList_CheckExact(list)) {
        Buf b;
        buf_init(&b);
        int rc = add_str_list(&b, list);
        PyObject *text = rc == DONE ? buf_text(&b) : NULL;
        buf_free(&b);
        if (rc != UNHANDLED)
            return text;
    }
    return PyObject_CallOneArg(dumps, list);
}

static PyObject *str_id, *str_parent, *str_children, *str_stack, *str_precision, *str_overflow, *str_micro,
    *str_link, *str_merge_info, *str_input_data, *str_output_data, *str_type_attr, *str_batch_p2p,
    *str_distributed, *str_empty, *str_empty_map, *zero;

/* the items' JSON text: data_json, else the Python to_json */
static PyObject *items_text(PyObject *data, Skip *skip, PyObject *to_json) {
    if (PyDict_CheckExact(data)) {
        PyObject *text = data_json(data, skip);
        if (text != Py_None)
            return text;
        Py_DECREF(text);
    }
    return PyObject_CallOneArg(to_json, data);
}

/* node_rows(nodes, start, how, stacks, p2p) -> rows.chunk_rows' rows of ``nodes`` (a run of
 * sorted_nodes() from position ``start``), its first stack uses appended to ``stacks`` and the
 * batch_isend_irecv ops put in ``p2p``. ``how``: (row_id, graph_id, source, data_path, step, rank,
 * stack numbers by id(stack), ids of the nodes that use a number first, the item skip sets
 * (plain, batch), the Python to_json functions (plain, batch), dumps, batch_p2p_ops). */
static PyObject *node_rows(PyObject *self, PyObject *args) {
    PyObject *nodes, *how, *stacks_out, *p2p_out;
    Py_ssize_t start;
    PyObject *row_id, *graph_id, *source, *data_path, *step, *rank, *number_of, *first, *skip_set,
        *batch_skip_set, *to_json, *batch_to_json, *dumps, *batch_ops;
    if (!PyArg_ParseTuple(args, "O!nO!O!O!", &PyList_Type, &nodes, &start, &PyTuple_Type, &how, &PyList_Type,
                          &stacks_out, &PyDict_Type, &p2p_out) ||
        !PyArg_ParseTuple(how, "UUUOOOO!O!OOOOOO", &row_id, &graph_id, &source, &data_path, &step, &rank,
                          &PyDict_Type, &number_of, &PyDict_Type, &first, &skip_set, &batch_skip_set, &to_json,
                          &batch_to_json, &dumps, &batch_ops))
        return NULL;
    Skip *skip = skip_of(skip_set), *batch_skip = skip ? skip_of(batch_skip_set) : NULL;
    if (batch_skip == NULL)
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(nodes);
    PyObject *rows = PyList_New(n), *sids = PyDict_New();
    if (rows == NULL || sids == NULL)
        goto fail;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *node = PyList_GET_ITEM(nodes, i);
        PyObject *cells[22] = {NULL};
        PyObject *stack = PyObject_GetAttr(node, str_stack), *key = NULL, *number = NULL;
        if (stack == NULL)
            goto fail;
        key = PyLong_FromVoidPtr(stack);
        number = key != NULL ? PyDict_GetItemWithError(number_of, key) : NULL;
        Py_XDECREF(key);
        if (number == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_KeyError, "a node's stack has no number");
            Py_DECREF(stack);
            goto fail;
        }
        PyObject *sid = PyDict_GetItemWithError(sids, number); /* f"{row_id}{n}" */
        if (sid == NULL) {
            sid = PyErr_Occurred() ? NULL : PyUnicode_FromFormat("%U%S", row_id, number);
            if (sid == NULL || PyDict_SetItem(sids, number, sid) < 0) {
                Py_XDECREF(sid);
                Py_DECREF(stack);
                goto fail;
            }
            Py_DECREF(sid);
        }
        cells[11] = Py_NewRef(sid);
        key = PyLong_FromVoidPtr(node);
        int is_first = key != NULL ? PyDict_Contains(first, key) : -1;
        Py_XDECREF(key);
        if (is_first) { /* (first use of a stack number, or an error) */
            PyObject *text = is_first > 0 ? PyObject_CallOneArg(dumps, stack) : NULL;
            PyObject *pair = text != NULL ? PyTuple_Pack(2, number, text) : NULL;
            int rc = pair != NULL ? PyList_Append(stacks_out, pair) : -1;
            Py_XDECREF(text);
            Py_XDECREF(pair);
            if (rc < 0) {
                Py_DECREF(stack);
                goto row_fail;
            }
        }
        Py_DECREF(stack);
        PyObject *node_id = cells[3] = PyObject_GetAttr(node, str_id);
        if (node_id == NULL)
            goto row_fail;
        if (!PyUnicode_Check(node_id)) {
            PyErr_SetString(PyExc_TypeError, "a node id is not a str");
            goto row_fail;
        }
        int batch = PyUnicode_Find(node_id, str_batch_p2p, 0, PyUnicode_GET_LENGTH(node_id), 1) >= 0;
        if (PyErr_Occurred())
            goto row_fail;
        if (batch) {
            PyObject *ops = PyObject_CallOneArg(batch_ops, node);
            int rc = ops != NULL ? PyDict_SetItem(p2p_out, node_id, ops) : -1;
            Py_XDECREF(ops);
            if (rc < 0)
                goto row_fail;
        }
        PyObject *parent = PyObject_GetAttr(node, str_parent);
        if (parent == NULL)
            goto row_fail;
        cells[5] = parent == Py_None ? Py_NewRef(str_empty) : PyObject_GetAttr(parent, str_id);
        Py_DECREF(parent);
        PyObject *children = PyObject_GetAttr(node, str_children);
        if (cells[5] == NULL || children == NULL) {
            Py_XDECREF(children);
            goto row_fail;
        }
        int has_children = PyObject_IsTrue(children);
        if (has_children > 0) { /* dumps([c.id for c in children]) */
            PyObject *ids = PySequence_List(children);
            for (Py_ssize_t j = 0; ids != NULL && j < PyList_GET_SIZE(ids); j++) {
                PyObject *id = PyObject_GetAttr(PyList_GET_ITEM(ids, j), str_id);
                if (id == NULL)
                    Py_CLEAR(ids);
                else
                    PyList_SetItem(ids, j, id);
            }
            cells[6] = ids != NULL ? str_list_json(ids, dumps) : NULL;
            Py_XDECREF(ids);
        } else if (has_children == 0)
            cells[6] = Py_NewRef(str_empty);
        Py_DECREF(children);
        if (cells[6] == NULL)
            goto row_fail;
        PyObject *link = PyObject_GetAttr(node, str_link);
        cells[10] = link != NULL ? str_list_json(link, dumps) : NULL;
        Py_XDECREF(link);
        PyObject *merge = cells[10] != NULL ? PyObject_GetAttr(node, str_merge_info) : NULL;
        if (merge == NULL)
            goto row_fail;
        int has_merge = PyObject_IsTrue(merge);
        cells[12] = has_merge > 0 ? PyObject_CallOneArg(dumps, merge) : has_merge == 0 ? Py_NewRef(str_empty) : NULL;
        Py_DECREF(merge);
        PyObject *micro = cells[12] != NULL ? PyObject_GetAttr(node, str_micro) : NULL;
        if (micro == NULL)
            goto row_fail;
        cells[9] = micro == Py_None ? Py_NewRef(zero) : micro;
        if ((cells[4] = PyObject_GetAttr(node, str_type_attr)) == NULL ||
            (cells[7] = PyObject_GetAttr(node, str_precision)) == NULL ||
            (cells[8] = PyObject_GetAttr(node, str_overflow)) == NULL)
            goto row_fail;
        PyObject *data = PyObject_GetAttr(node, str_input_data);
        cells[15] = data != NULL ? items_text(data, batch ? batch_skip : skip, batch ? batch_to_json : to_json) : NULL;
        Py_XDECREF(data);
        data = cells[15] != NULL ? PyObject_GetAttr(node, str_output_data) : NULL;
        cells[16] = data != NULL ? items_text(data, batch ? batch_skip : skip, batch ? batch_to_json : to_json) : NULL;
        Py_XDECREF(data);
        if (cells[16] == NULL || (cells[0] = PyUnicode_Concat(row_id, node_id)) == NULL ||
            (cells[2] = PyLong_FromSsize_t(start + i)) == NULL)
            goto row_fail;
        int distributed = PyUnicode_Tailmatch(node_id, str_distributed, 0, PY_SSIZE_T_MAX, -1);
        if (distributed < 0)
            goto row_fail;
        cells[1] = Py_NewRef(graph_id);
        cells[13] = Py_NewRef(str_empty_map);
        cells[14] = Py_NewRef(zero);
        cells[17] = Py_NewRef(source);
        cells[18] = Py_NewRef(data_path);
        cells[19] = Py_NewRef(step);
        cells[20] = Py_NewRef(rank);
        cells[21] = PyLong_FromLong(distributed);
        PyObject *row = cells[21] != NULL ? PyList_New(22) : NULL;
        if (row == NULL)
            goto row_fail;
        for (int c = 0; c < 22; c++)
            PyList_SET_ITEM(row, c, cells[c]);
        PyList_SET_ITEM(rows, i, row);
        continue;
    row_fail:
        for (int c = 0; c < 22; c++)
            Py_XDECREF(cells[c]);
        goto fail;
    }
    Py_DECREF(sids);
    return rows;
fail:
    Py_XDECREF(rows);
    Py_XDECREF(sids);
    return NULL;
}

/* ------------------------------------------------------------------ statistics diffs */

/* str(r) + "%" in its exported form, for 1e-4 <= r < 2**33 (compare._rel_text): r to 6 decimals,
 * or repr(r) where that has fewer decimals (the rounded text ends with 0 and round(r, 6) == r:
 * round() and format(r, ".6f") take the same correctly rounded digits) */
static PyObject *rel_text(double r) {
    char *t = PyOS_double_to_string(r, 'f', 6, 0, NULL);
    if (t == NULL)
        return NULL;
    size_t n = strlen(t);
    char text[64];
    if (t[n - 1] == '0' && PyOS_string_to_double(t, NULL, NULL) == r) {
        PyMem_Free(t);
        t = PyOS_double_to_string(r, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
        if (t == NULL)
            return NULL;
        n = strlen(t);
    }
    memcpy(text, t, n); /* (at most 17 digits, a point and an exponent) */
    PyMem_Free(t);
    text[n] = '%';
    PyObject *s = PyUnicode_FromStringAndSize(text, (Py_ssize_t)n + 1);
    if (s == NULL)
        return NULL;
    PyObject *exported = PyObject_CallOneArg(exported_text_type, s);
    Py_DECREF(s);
    return exported;
}

/* the diff cell, relative-error cell and ratio (new references) of one NPU/Bench statistic: two
 * floats (the Bench one not 0) or two equal ints here, the others by stat_diff(x, y) */
static int diff_cells(PyObject *x, PyObject *y, PyObject *stat_diff, PyObject **d, PyObject **t, PyObject **ratio) {
    *d = *t = *ratio = NULL;
    if (PyFloat_CheckExact(x) && PyFloat_CheckExact(y) && PyFloat_AS_DOUBLE(y) != 0.0) {
        double dx = PyFloat_AS_DOUBLE(x) - PyFloat_AS_DOUBLE(y);
        double r = fabs(dx / PyFloat_AS_DOUBLE(y) * 100);
        if (r >= 1e-4 && r < 8589934592.0)
            *t = rel_text(r);
        else if (r == 0.0)
            *t = PyUnicode_FromString("0.0%");
        else
            goto general; /* (r is not finite, or below 1e-4) */
        *d = PyFloat_FromDouble(dx);
        *ratio = PyFloat_FromDouble(r / 100);
        goto made;
    }
    if (PyLong_CheckExact(x) && PyLong_CheckExact(y)) {
        int equal = PyObject_RichCompareBool(x, y, Py_EQ);
        int nonzero = equal > 0 ? PyObject_IsTrue(y) : 0;
        if (equal < 0 || nonzero < 0)
            return -1;
        if (nonzero) {
            *d = PyLong_FromLong(0);
            *t = PyUnicode_FromString("0.0%");
            *ratio = PyFloat_FromDouble(0.0);
            goto made;
        }
    }
general:; /* the general rule, in Python */
    PyObject *cells = PyObject_CallFunctionObjArgs(stat_diff, x, y, NULL);
    if (cells == NULL)
        return -1;
    if (!PyTuple_Check(cells) || PyTuple_GET_SIZE(cells) != 3) {
        Py_DECREF(cells);
        PyErr_SetString(PyExc_TypeError, "stat_diff must return a 3-tuple");
        return -1;
    }
    *d = Py_NewRef(PyTuple_GET_ITEM(cells, 0));
    *t = Py_NewRef(PyTuple_GET_ITEM(cells, 1));
    *ratio = Py_NewRef(PyTuple_GET_ITEM(cells, 2));
    Py_DECREF(cells);
made:
    if (*d != NULL && *t != NULL && *ratio != NULL)
        return 0;
    Py_CLEAR(*d);
    Py_CLEAR(*t);
    Py_CLEAR(*ratio);
    return -1;
}

/* stat_diffs(ns, bs, stat_diff) -> (diffs, rels, ratio): compare._diffs for two tuples of
 * statistics (ratio: the last one's) */
static PyObject *stat_diffs(PyObject *self, PyObject *args) {
    PyObject *ns, *bs, *stat_diff;
    if (!PyArg_ParseTuple(args, "O!O!O", &PyTuple_Type, &ns, &PyTuple_Type, &bs, &stat_diff))
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(ns) < PyTuple_GET_SIZE(bs) ? PyTuple_GET_SIZE(ns) : PyTuple_GET_SIZE(bs);
    if (n == 0) {
        PyErr_SetString(PyExc_ValueError, "stat_diffs of no statistics");
        return NULL;
    }
    PyObject *diffs = PyList_New(n), *rels = PyList_New(n), *ratio = NULL;
    if (diffs == NULL || rels == NULL)
        goto fail;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *d, *t;
        Py_CLEAR(ratio);
        if (diff_cells(PyTuple_GET_ITEM(ns, i), PyTuple_GET_ITEM(bs, i), stat_diff, &d, &t, &ratio) < 0)
            goto fail;
        PyList_SET_ITEM(diffs, i, d);
        PyList_SET_ITEM(rels, i, t);
    }
    return Py_BuildValue("(NNN)", diffs, rels, ratio);
fail:
    Py_XDECREF(diffs);
    Py_XDECREF(rels);
    Py_XDECREF(ratio);
    return NULL;
}

/* ------------------------------------------------------------------ a summary compare of a node pair */

#define MAX_ROWS 32 /* items per state group (more: the Python path) */
#define N_WRITTEN 11

static PyObject *str_state_key, *str_full_key, *str_output_part, *state_names[5], *written_keys[N_WRITTEN];
static const int state_group[5] = {0, 0, 1, 2, 3}; /* input, kwargs, parameters, output, parameters_grad */

typedef struct {
    PyObject *n, *b; /* the NPU item and its Bench partner (borrowed) */
    PyObject *cells[N_WRITTEN]; /* the cells written back (new references) */
    double ratio; /* NormRelativeErr as a ratio, NAN where None */
    int out, has_ratio;
} Row;

/* the items of one side's node by compare.STATE_GROUPS, inputs before outputs; -1 error, 0 a value
 * this code does not take, else 1 */
static int grouped(PyObject *in, PyObject *out, PyObject *groups[4][MAX_ROWS], int counts[4]) {
    PyObject *datas[2] = {in, out};
    for (int g = 0; g < 4; g++)
        counts[g] = 0;
    for (int i = 0; i < 2; i++) {
        Py_ssize_t pos = 0;
        PyObject *k, *item;
        while (PyDict_Next(datas[i], &pos, &k, &item)) {
            if (!PyDict_CheckExact(item))
                return UNHANDLED;
            PyObject *state = PyDict_GetItemWithError(item, str_state_key);
            if (state == NULL && PyErr_Occurred())
                return -1;
            if (state == NULL || state == Py_None)
                continue;
            if (!PyUnicode_CheckExact(state))
                return UNHANDLED;
            int g = -1;
            for (int j = 0; j < 5 && g < 0; j++) {
                int eq = PyUnicode_Compare(state, state_names[j]);
                if (eq == -1 && PyErr_Occurred())
                    return -1;
                if (eq == 0)
                    g = state_group[j];
            }
            if (g < 0)
                continue;
            if (counts[g] == MAX_ROWS)
                return UNHANDLED;
            groups[g][counts[g]++] = item;
        }
    }
    return DONE;
}

/* the four statistics of an item: all exact floats with a finite sum, or all exact ints (what
 * compare._cells leaves as they are); 1 as ints, 2 as floats, 0 otherwise */
static int plain_stats(PyObject *item, PyObject *stats[4]) {
    int ints = 0, floats = 0;
    double total = 0.0;
    for (int i = 0; i < 4; i++) {
        stats[i] = PyDict_GetItemWithError(item, stat_names[i]);
        if (stats[i] == NULL)
            return PyErr_Occurred() ? -1 : 0;
        if (PyFloat_CheckExact(stats[i])) {
            floats++;
            total += PyFloat_AS_DOUBLE(stats[i]);
        } else if (PyLong_CheckExact(stats[i]))
            ints++;
    }
    if (ints == 4)
        return 1;
    return floats == 4 && isfinite(total) ? 2 : 0;
}

/* 1 if a == b (Python's ==), 0 if not, -1 error; a or b NULL: missing (None) */
static int same(PyObject *a, PyObject *b) {
    PyObject *eq = PyObject_RichCompare(a ? a : Py_None, b ? b : Py_None, Py_EQ);
    if (eq == NULL)
        return -1;
    int truth = PyObject_IsTrue(eq);
    Py_DECREF(eq);
    return truth;
}

static PyObject *get(PyObject *item, PyObject *key) { /* item.get(key), borrowed; NULL: missing or error */
    return PyDict_GetItemWithError(item, key);
}

/* a QUIET summary row (compare.summary_row) for the pair: 1 made, 0 not quiet, -1 error */
static int quiet_row(Row *r, PyObject *stat_diff) {
    PyObject *ns[4], *bs[4];
    int nk = plain_stats(r->n, ns), bk = plain_stats(r->b, bs);
    if (nk <= 0 || bk <= 0)
        return nk < 0 || bk < 0 ? -1 : 0;
    PyObject *keys[3] = {str_requires_grad, str_dtype, str_shape};
    PyObject *rg_same = NULL;
    for (int i = 0; i < 3; i++) {
        PyObject *a = get(r->n, keys[i]);
        if (a == NULL && PyErr_Occurred())
            goto fail;
        PyObject *b = get(r->b, keys[i]);
        if (b == NULL && PyErr_Occurred())
            goto fail;
        if (i == 0) {
            rg_same = PyObject_RichCompare(a ? a : Py_None, b ? b : Py_None, Py_EQ);
            if (rg_same == NULL)
                return -1;
            int truth = PyObject_IsTrue(rg_same);
            if (truth <= 0)
                goto not_quiet_or_fail;
        } else {
            int eq = same(a, b);
            if (eq <= 0)
                goto not_quiet_or_fail;
        }
    }
    int max_same = same(ns[0], bs[0]);
    if (max_same < 0)
        goto fail;
    if (!max_same) { /* then the dtype must be a str without "class" */
        PyObject *dtype = get(r->n, str_dtype);
        if (dtype == NULL || !PyUnicode_CheckExact(dtype))
            goto not_quiet_or_fail;
        int has_class = PyUnicode_Find(dtype, str_class, 0, PyUnicode_GET_LENGTH(dtype), 1) >= 0;
        if (has_class)
            goto not_quiet_or_fail;
    }
    PyObject *ratio = NULL;
    for (int i = 0; i < 4; i++) {
        Py_XDECREF(ratio);
        if (diff_cells(ns[i], bs[i], stat_diff, &r->cells[i], &r->cells[4 + i], &ratio) < 0)
            goto fail;
    }
    r->has_ratio = ratio != Py_None;
    r->ratio = r->has_ratio ? PyFloat_AsDouble(ratio) : NAN;
    Py_DECREF(ratio);
    if (r->has_ratio && r->ratio == -1.0 && PyErr_Occurred())
        goto fail;
    r->cells[8] = rg_same;
    return DONE;
not_quiet_or_fail:
    Py_XDECREF(rg_same);
    return PyErr_Occurred() ? -1 : UNHANDLED;
fail:
    Py_XDECREF(rg_same);
    return -1;
}

/* "" (0), "input" (1) or "all" (2): the class of ignored APIs of the first input row's API name */
static int ignore_class(Row *rows, int n, PyObject *all_ignored, PyObject *input_ignored) {
    for (int i = 0; i < n; i++) {
        if (rows[i].out)
            continue;
        PyObject *name = get(rows[i].n, str_full_key);
        Py_ssize_t len = PyUnicode_GET_LENGTH(name);
        Py_ssize_t a = PyUnicode_FindChar(name, '.', 0, len, 1), b = -1;
        if (a >= 0)
            b = PyUnicode_FindChar(name, '.', a + 1, len, 1);
        if (a == -2 || b == -2)
            return -1;
        /* name.split(".", 2)[1], or "" */
        PyObject *api = a < 0 ? PyUnicode_New(0, 0) : PyUnicode_Substring(name, a + 1, b >= 0 ? b : len);
        if (api == NULL)
            return -1;
        int all = PySet_Contains(all_ignored, api);
        int input = all == 0 ? PySet_Contains(input_ignored, api) : 0;
        Py_DECREF(api);
        if (all < 0 || input < 0)
            return -1;
        return all ? 2 : input;
    }
    return 0;
}

/* summary_pair(npu_in, npu_out, bench_in, bench_out, how) -> the node's worst level (0, 1, 2), its
 * items given their compare cells: compare_pair in summary mode (not merged) when every row is
 * QUIET, else None (the Python path, nothing changed). ``how``: (stat_diff, ALL_IGNORE,
 * INPUT_IGNORE, (the Err_message texts: none, RelativeErr, RelativeWarn, both), (the Result texts
 * of pass, warning, error)). */
static PyObject *summary_pair(PyObject *self, PyObject *args) {
    PyObject *npu_in, *npu_out, *bench_in, *bench_out, *stat_diff, *all_ignored, *input_ignored, *errs,
        *results;
    if (!PyArg_ParseTuple(args, "O!O!O!O!(OOOO!O!)", &PyDict_Type, &npu_in, &PyDict_Type, &npu_out,
                          &PyDict_Type, &bench_in, &PyDict_Type, &bench_out, &stat_diff, &all_ignored,
                          &input_ignored, &PyTuple_Type, &errs, &PyTuple_Type, &results))
        return NULL;
    if (PyTuple_GET_SIZE(errs) != 4 || PyTuple_GET_SIZE(results) != 3) {
        PyErr_SetString(PyExc_ValueError, "summary_pair: 4 messages and 3 results");
        return NULL;
    }
    PyObject *ng[4][MAX_ROWS], *bg[4][MAX_ROWS];
    Row rows[4 * MAX_ROWS];
    int nc[4], bc[4], n = 0, rc;
    if ((rc = grouped(npu_in, npu_out, ng, nc)) <= 0 || (rc = grouped(bench_in, bench_out, bg, bc)) <= 0)
        return rc < 0 ? NULL : Py_NewRef(Py_None);
    PyObject *result = NULL, *by_name = NULL;
    for (int g = 0; g < 4; g++) {
        for (int i = 0; i < nc[g]; i++) {
            if (i >= bc[g])
                goto unhandled; /* an item without a partner */
            Row *r = &rows[n];
            memset(r, 0, sizeof(Row));
            r->n = ng[g][i];
            r->b = bg[g][i];
            n++;
            PyObject *name = get(r->n, str_full_key);
            if (name == NULL || !PyUnicode_CheckExact(name))
                goto unhandled_or_error;
            Py_ssize_t at = PyUnicode_Find(name, str_output_part, 0, PyUnicode_GET_LENGTH(name), 1);
            if (at == -2)
                goto done;
            r->out = at >= 0;
            if ((rc = quiet_row(r, stat_diff)) <= 0)
                goto unhandled_or_error;
        }
    }
    if (n == 0)
        goto unhandled;
    int ignore = ignore_class(rows, n, all_ignored, input_ignored);
    if (ignore < 0)
        goto done;
    int relerr = 0, warn = 0, first_out = -1, worst = 0;
    if (ignore == 0) { /* the node-wide RelativeErr and RelativeWarn checkers */
        double a = 0.0, b = 0.0;
        for (int i = 0; i < n; i++) {
            if (rows[i].out && first_out < 0)
                first_out = i;
            if (!rows[i].has_ratio)
                continue;
            if (rows[i].out) {
                if (rows[i].ratio > b)
                    b = rows[i].ratio;
            } else if (rows[i].ratio > a)
                a = rows[i].ratio;
        }
        a = fabs(a);
        b = fabs(b);
        relerr = a < 0.1;
        warn = first_out >= 0 && ((a == 0 && b > 0.1) || (a != 0 && b / a > 10));
    }
    for (int i = 0; i < n; i++) {
        Row *r = &rows[i];
        int e = ignore != 2 && relerr && r->out && r->has_ratio && fabs(r->ratio) > 0.5;
        int w = ignore != 2 && warn && i == first_out;
        int level = e ? 2 : w ? 1 : 0;
        if (level > worst)
            worst = level;
        r->cells[9] = Py_NewRef(PyTuple_GET_ITEM(results, level));
        r->cells[10] = Py_NewRef(PyTuple_GET_ITEM(errs, e + 2 * w));
    }
    /* write back: the cells of each row into the NPU item of its name (the last row of a name wins) */
    by_name = PyDict_New();
    if (by_name == NULL)
        goto done;
    for (int i = 0; i < n; i++) {
        PyObject *index = PyLong_FromLong(i);
        if (index == NULL || PyDict_SetItem(by_name, get(rows[i].n, str_full_key), index) < 0) {
            Py_XDECREF(index);
            goto done;
        }
        Py_DECREF(index);
    }
    PyObject *datas[2] = {npu_in, npu_out};
    for (int d = 0; d < 2; d++) {
        Py_ssize_t pos = 0;
        PyObject *k, *item;
        while (PyDict_Next(datas[d], &pos, &k, &item)) {
            PyObject *index = PyDict_GetItemWithError(by_name, k);
            if (index == NULL) {
                if (PyErr_Occurred())
                    goto done;
                continue;
            }
            Row *r = &rows[PyLong_AsLong(index)];
            for (int j = 0; j < N_WRITTEN; j++)
                if (PyDict_SetItem(item, written_keys[j], r->cells[j]) < 0)
                    goto done;
        }
    }
    result = PyLong_FromLong(worst);
    goto done;
unhandled_or_error:
    if (PyErr_Occurred())
        goto done;
unhandled:
    result = Py_NewRef(Py_None);
done:
    Py_XDECREF(by_name);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < N_WRITTEN; j++)
            Py_CLEAR(rows[i].cells[j]);
    return result;
}

/* ------------------------------------------------------------------ items of dump entries */


/* leaf(leaf, name, state, crc_empty) -> items._leaf's item for a tensor leaf (a truthy dtype, and an
 * md5 or no value), or None for the others (the Python path: scalars, sizes, groups ...) */
static PyObject *crc32_text;                    /* items._crc32, set by configure() */
static PyObject *str_int_type, *str_float_type, *str_no_shape, *rank_params[4], *shaped_kinds[4];

/* str(type(value)) of a leaf that is a plain int or float argument (items._fill_non_tensor's
 * general case: not a size, slice, ellipsis or process group, nor a rank parameter), else NULL */
static PyObject *plain_scalar_type(PyObject *src, PyObject *value, PyObject *name) {
    if (value == NULL || !(PyLong_CheckExact(value) || PyFloat_CheckExact(value)))
        return NULL;
    PyObject *kind = PyDict_GetItemWithError(src, str_type);
    if (kind == NULL || !PyUnicode_CheckExact(kind))
        return NULL;
    for (int i = 0; i < 4; i++) {
        int eq = PyUnicode_Compare(kind, shaped_kinds[i]);
        if (eq == 0 || (eq == -1 && PyErr_Occurred()))
            return NULL;
    }
    Py_ssize_t n = PyUnicode_GET_LENGTH(name);
    Py_ssize_t dot = PyUnicode_FindChar(name, '.', 0, n, -1);
    if (dot == -2)
        return NULL;
    PyObject *last = PyUnicode_Substring(name, dot + 1, n); /* name.rpartition(".")[2] */
    if (last == NULL)
        return NULL;
    int rank = 0;
    for (int i = 0; i < 4 && !rank; i++)
        rank = PyUnicode_Compare(last, rank_params[i]) == 0;
    Py_DECREF(last);
    if (rank || PyErr_Occurred())
        return NULL;
    return PyLong_CheckExact(value) ? str_int_type : str_float_type;
}

static PyObject *leaf_of(PyObject *src, PyObject *name, PyObject *state, PyObject *crc_empty) {
    if (!PyDict_CheckExact(src))
        Py_RETURN_NONE;
    PyObject *dtype = PyDict_GetItemWithError(src, str_dtype);
    if (dtype == NULL && PyErr_Occurred())
        return NULL;
    /* (the item's dtype and md5 are tested after bools became "True"/"False": both truthy) */
    int truthy = dtype == NULL ? 0 : PyBool_Check(dtype) ? 1 : PyObject_IsTrue(dtype);
    if (truthy < 0)
        return NULL;
    PyObject *value = PyDict_GetItemWithError(src, str_value), *scalar_type = NULL;
    if (value == NULL && PyErr_Occurred())
        return NULL;
    if (!truthy) { /* not a tensor: a plain int or float argument here, the others in Python */
        scalar_type = plain_scalar_type(src, value, name);
        if (scalar_type == NULL)
            return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    }
    PyObject *md5 = PyDict_GetItemWithError(src, str_md5);
    if (md5 == NULL && PyErr_Occurred())
        return NULL;
    int has_md5 = md5 == NULL ? 0 : PyBool_Check(md5) ? 1 : PyObject_IsTrue(md5);
    if (has_md5 < 0)
        return NULL;
    if (!has_md5 && value != NULL && scalar_type == NULL) /* (a tensor with a value: Python) */
        Py_RETURN_NONE;
    PyObject *data_name = PyDict_GetItemWithError(src, str_data_name);
    if (data_name == NULL && PyErr_Occurred())
        return NULL;
    truthy = data_name != NULL ? PyObject_IsTrue(data_name) : 0;
    if (truthy < 0)
        return NULL;
    if (!truthy)
        data_name = str_no_data_name;
    else if (!PyUnicode_CheckExact(data_name))
        Py_RETURN_NONE;
    PyObject *item = PyDict_Copy(src), *full = NULL;
    if (item == NULL)
        return NULL;
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (PyDict_Next(src, &pos, &k, &v)) /* bools as their text */
        if (PyBool_Check(v) && PyDict_SetItem(item, k, v == Py_True ? str_true : str_false) < 0)
            goto fail;
    if (PyDict_SetItem(item, str_data_name, data_name) < 0)
        goto fail;
    int no_name = PyUnicode_Compare(data_name, str_no_data_name);
    if (no_name == -1 && PyErr_Occurred())
        goto fail;
    if (no_name == 0) {
        full = Py_NewRef(name);
    } else {
        Py_ssize_t n = PyUnicode_GET_LENGTH(data_name);
        Py_ssize_t dot = PyUnicode_FindChar(data_name, '.', 0, n, -1);
        if (dot == -2)
            goto fail;
        full = PyUnicode_Substring(data_name, 0, dot >= 0 ? dot : n);
        if (full == NULL)
            goto fail;
    }
    if (PyDict_SetItem(item, str_full_op_name, full) < 0 || PyDict_SetItem(item, str_state, state) < 0)
        goto fail;
    PyObject *defaults[5] = {str_requires_grad, stat_names[0], stat_names[1], stat_names[2], stat_names[3]};
    for (int i = 0; i < 5; i++) {
        int has = PyDict_Contains(item, defaults[i]);
        if (has < 0 || (!has && PyDict_SetItem(item, defaults[i], Py_None) < 0))
            goto fail;
    }
    if (scalar_type != NULL) { /* items._fill_non_tensor's general case */
        if (PyDict_SetItem(item, str_dtype, scalar_type) < 0 || PyDict_SetItem(item, str_shape, str_no_shape) < 0)
            goto fail;
        for (int i = 0; i < 4; i++)
            if (PyDict_SetItem(item, stat_names[i], value) < 0)
                goto fail;
    }
    if (!has_md5) {
        PyObject *crc = value != NULL ? PyObject_CallOneArg(crc32_text, value) : Py_NewRef(crc_empty);
        if (crc == NULL)
            goto fail;
        int rc = PyDict_SetItem(item, str_md5, crc);
        Py_DECREF(crc);
        if (rc < 0)
            goto fail;
    }
    Py_DECREF(full);
    return item;
fail:
    Py_XDECREF(full);
    Py_DECREF(item);
    return NULL;
}

static PyObject *leaf(PyObject *self, PyObject *args) {
    PyObject *src, *name, *state, *crc_empty;
    if (!PyArg_ParseTuple(args, "OUUU", &src, &name, &state, &crc_empty))
        return NULL;
    return leaf_of(src, name, state, crc_empty);
}

static PyObject *str_class_type, *str_p2p_class, *str_input_part, *sub_keys[5], *sub_suffixes[5], *sub_states[5];

/* name + "." + str(i), for an ASCII name */
static PyObject *element_name(PyObject *name, Py_ssize_t i) {
    char digits[24], *end = digits + sizeof(digits), *p = end;
    size_t u = (size_t)i;
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    Py_ssize_t n = PyUnicode_GET_LENGTH(name), k = end - p;
    PyObject *s = PyUnicode_New(n + 1 + k, 127);
    if (s == NULL)
        return NULL;
    char *out = (char *)PyUnicode_1BYTE_DATA(s);
    memcpy(out, PyUnicode_1BYTE_DATA(name), n);
    out[n] = '.';
    memcpy(out + n + 1, p, k);
    return s;
}

/* the item of one leaf of an entry (C's leaf, else python_leaf); NULL: error or (*handled = 0) a
 * value this code does not take */
static PyObject *leaf_item(PyObject *v, PyObject *name, PyObject *state, PyObject *crc_empty,
                           PyObject *python_leaf, int *handled) {
    *handled = 0;
    if (!PyDict_CheckExact(v))
        return NULL;
    PyObject *kind = PyDict_GetItemWithError(v, str_type);
    if (kind == NULL || !PyUnicode_CheckExact(kind))
        return NULL;
    PyObject *class_type = PyDict_GetItemWithError(v, str_class_type);
    if (class_type == NULL && PyErr_Occurred())
        return NULL;
    if (class_type != NULL) { /* (a P2P op is unpacked by the Python path) */
        int p2p = PyObject_RichCompareBool(class_type, str_p2p_class, Py_EQ);
        if (p2p != 0)
            return NULL;
    }
    *handled = 1;
    PyObject *item = leaf_of(v, name, state, crc_empty);
    if (item == Py_None) {
        Py_DECREF(item);
        item = PyObject_CallFunctionObjArgs(python_leaf, v, name, state, NULL);
    }
    return item;
}

/* split_items: an item goes to the outputs (by its full name) if that holds ".output." and not
 * ".input.", else to the inputs (by its data name without the last part, or its full name) */
static int split_item(PyObject *item, PyObject *inputs, PyObject *outputs) {
    PyObject *full = PyDict_GetItemWithError(item, str_full_key);
    PyObject *data_name = full != NULL ? PyDict_GetItemWithError(item, str_data_name) : NULL;
    if (full == NULL || data_name == NULL || !PyUnicode_CheckExact(full) || !PyUnicode_CheckExact(data_name))
        return PyErr_Occurred() ? -1 : UNHANDLED;
    Py_ssize_t n = PyUnicode_GET_LENGTH(full);
    Py_ssize_t out = PyUnicode_Find(full, str_output_part, 0, n, 1);
    Py_ssize_t in = out >= 0 ? PyUnicode_Find(full, str_input_part, 0, n, 1) : -1;
    if (out == -2 || in == -2)
        return -1;
    if (out >= 0 && in < 0)
        return PyDict_SetItem(outputs, full, item) < 0 ? -1 : DONE;
    int no_name = PyUnicode_Compare(data_name, str_no_data_name);
    if (no_name == -1 && PyErr_Occurred())
        return -1;
    if (no_name == 0)
        return PyDict_SetItem(inputs, full, item) < 0 ? -1 : DONE;
    Py_ssize_t m = PyUnicode_GET_LENGTH(data_name);
    Py_ssize_t dot = PyUnicode_FindChar(data_name, '.', 0, m, -1);
    if (dot == -2)
        return -1;
    PyObject *key = PyUnicode_Substring(data_name, 0, dot >= 0 ? dot : m);
    if (key == NULL)
        return -1;
    int rc = PyDict_SetItem(inputs, key, item);
    Py_DECREF(key);
    return rc < 0 ? -1 : DONE;
}

/* entry_items(node_id, entry, crc_empty, python_leaf) -> (input_data, output_data):
 * split_items(parse_entry(node_id, entry)) for an entry whose parts are lists of leaves (or empty
 * dicts), else None (the Python path: nested values, None, P2P ops, parameters_grad) */
static PyObject *entry_items(PyObject *self, PyObject *args) {
    PyObject *node_id, *entry, *crc_empty, *python_leaf;
    if (!PyArg_ParseTuple(args, "UOUO", &node_id, &entry, &crc_empty, &python_leaf))
        return NULL;
    if (!PyDict_CheckExact(entry) || !PyUnicode_IS_ASCII(node_id))
        Py_RETURN_NONE;
    Py_ssize_t n = PyUnicode_GET_LENGTH(node_id);
    if (n >= 15 && memmem(PyUnicode_1BYTE_DATA(node_id), n, "parameters_grad", 15) != NULL)
        Py_RETURN_NONE;
    PyObject *inputs = PyDict_New(), *outputs = PyDict_New(), *name = NULL, *sub = NULL, *item = NULL;
    if (inputs == NULL || outputs == NULL)
        goto fail;
    for (int k = 0; k < 5; k++) {
        PyObject *value = PyDict_GetItemWithError(entry, sub_keys[k]);
        if (value == NULL) {
            if (PyErr_Occurred())
                goto fail;
            continue;
        }
        if (PyDict_CheckExact(value) && PyDict_GET_SIZE(value) == 0)
            continue;
        if (!PyList_CheckExact(value))
            goto unhandled;
        name = PyUnicode_Concat(node_id, sub_suffixes[k]);
        if (name == NULL)
            goto fail;
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(value); i++) {
            int handled;
            if ((sub = element_name(name, i)) == NULL)
                goto fail;
            item = leaf_item(PyList_GET_ITEM(value, i), sub, sub_states[k], crc_empty, python_leaf, &handled);
            Py_CLEAR(sub);
            if (item == NULL) {
                if (handled || PyErr_Occurred())
                    goto fail;
                goto unhandled;
            }
            int rc = PyDict_CheckExact(item) ? split_item(item, inputs, outputs) : UNHANDLED;
            Py_CLEAR(item);
            if (rc < 0)
                goto fail;
            if (rc == UNHANDLED)
                goto unhandled;
        }
        Py_CLEAR(name);
    }
    return Py_BuildValue("(NN)", inputs, outputs);
unhandled:
    Py_XDECREF(inputs);
    Py_XDECREF(outputs);
    Py_XDECREF(name);
    Py_RETURN_NONE;
fail:
    Py_XDECREF(inputs);
    Py_XDECREF(outputs);
    Py_XDECREF(name);
    return NULL;
}

static PyObject *configure(PyObject *self, PyObject *args) {
    PyObject *exported, *dumps, *crc32;
    if (!PyArg_ParseTuple(args, "O!OO", &PyType_Type, &exported, &dumps, &crc32))
        return NULL;
    Py_XSETREF(crc32_text, Py_NewRef(crc32));
    Py_XSETREF(exported_text_type, Py_NewRef(exported));
    Py_XSETREF(orjson_dumps, Py_NewRef(dumps));
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"configure", configure, METH_VARARGS, "configure(ExportedText, orjson.dumps, _crc32): ready texts, the float writer, md5 of scalars."},
    {"items_json", items_json, METH_VARARGS,
     "items_json(data, skip): the JSON text of a node's exported items, or None."},
    {"entry_items", entry_items, METH_VARARGS,
     "entry_items(node_id, entry, crc_empty, python_leaf): split_items(parse_entry(...)), or None."},
    {"node_rows", node_rows, METH_VARARGS, "node_rows(nodes, start, how, stacks, p2p): rows.chunk_rows' rows."},
    {"leaf", leaf, METH_VARARGS, "leaf(leaf, name, state, crc_empty): items._leaf for a tensor, or None."},
    {"summary_pair", summary_pair, METH_VARARGS, "summary_pair(npu_in, npu_out, bench_in, bench_out, how)."},
    {"stat_diffs", stat_diffs, METH_VARARGS, "stat_diffs(ns, bs, stat_diff): compare._diffs."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_speedups", NULL, -1, methods};

PyMODINIT_FUNC PyInit__speedups(void) {
    str_max = PyUnicode_InternFromString("Max");
    str_type = PyUnicode_InternFromString("type");
    str_process_group = PyUnicode_InternFromString("torch.ProcessGroup");
    init_char_classes();
    str_true = PyUnicode_InternFromString("True");
    str_false = PyUnicode_InternFromString("False");
    str_data_name = PyUnicode_InternFromString("data_name");
    str_full_op_name = PyUnicode_InternFromString("full_op_name");
    str_state = PyUnicode_InternFromString("state");
    str_requires_grad = PyUnicode_InternFromString("requires_grad");
    str_dtype = PyUnicode_InternFromString("dtype");
    str_md5 = PyUnicode_InternFromString("md5");
    str_value = PyUnicode_InternFromString("value");
    str_no_data_name = PyUnicode_InternFromString("-1");
    str_state_key = PyUnicode_InternFromString("state");
    str_full_key = PyUnicode_InternFromString("full_op_name");
    str_output_part = PyUnicode_InternFromString(".output.");
    str_shape = PyUnicode_InternFromString("shape");
    str_class = PyUnicode_InternFromString("class");
    if (str_state_key == NULL || str_full_key == NULL || str_output_part == NULL || str_shape == NULL ||
        str_class == NULL)
        return NULL;
    const char *states[5] = {"input", "kwargs", "parameters", "output", "parameters_grad"};
    for (int i = 0; i < 5; i++)
        if ((state_names[i] = PyUnicode_InternFromString(states[i])) == NULL)
            return NULL;
    const char *written[N_WRITTEN] = {"Max diff", "Min diff", "Mean diff", "L2norm diff", "MaxRelativeErr",
                                      "MinRelativeErr", "MeanRelativeErr", "NormRelativeErr",
                                      "Requires_grad Consistent", "Result", "Err_message"};
    for (int i = 0; i < N_WRITTEN; i++)
        if ((written_keys[i] = PyUnicode_InternFromString(written[i])) == NULL)
            return NULL;
    const char *attrs[] = {"id", "parent", "children", "stack", "precision", "overflow", "micro", "link",
                           "merge_info", "input_data", "output_data", "type", "batch_isend_irecv",
                           "Distributed", "", "{}"};
    PyObject **attr_strs[] = {&str_id, &str_parent, &str_children, &str_stack, &str_precision, &str_overflow,
                              &str_micro, &str_link, &str_merge_info, &str_input_data, &str_output_data,
                              &str_type_attr, &str_batch_p2p, &str_distributed, &str_empty, &str_empty_map};
    for (size_t i = 0; i < sizeof(attrs) / sizeof(attrs[0]); i++)
        if ((*attr_strs[i] = PyUnicode_InternFromString(attrs[i])) == NULL)
            return NULL;
    if ((zero = PyLong_FromLong(0)) == NULL)
        return NULL;
    str_class_type = PyUnicode_InternFromString("class_type");
    str_p2p_class = PyUnicode_InternFromString("torch.distributed.P2POp");
    str_input_part = PyUnicode_InternFromString(".input.");
    if (str_class_type == NULL || str_p2p_class == NULL || str_input_part == NULL)
        return NULL;
    /* items.SUB_KEYS */
    const char *keys[5] = {"input_args", "input_kwargs", "input", "output", "parameters"};
    const char *suffixes[5] = {".input", ".input", ".input", ".output", ".parameters"};
    const char *sub_state[5] = {"input", "input", "input", "output", "parameters"};
    for (int i = 0; i < 5; i++)
        if ((sub_keys[i] = PyUnicode_InternFromString(keys[i])) == NULL ||
            (sub_suffixes[i] = PyUnicode_InternFromString(suffixes[i])) == NULL ||
            (sub_states[i] = PyUnicode_InternFromString(sub_state[i])) == NULL)
            return NULL;
    str_int_type = PyUnicode_InternFromString("<class 'int'>");
    str_float_type = PyUnicode_InternFromString("<class 'float'>");
    str_no_shape = PyUnicode_InternFromString("[]");
    if (str_int_type == NULL || str_float_type == NULL || str_no_shape == NULL)
        return NULL;
    const char *ranks[4] = {"src", "dst", "group_src", "group_dst"}; /* items.RANK_PARAMS */
    const char *shaped[4] = {"torch.Size", "slice", "ellipsis", "torch.ProcessGroup"};
    for (int i = 0; i < 4; i++)
        if ((rank_params[i] = PyUnicode_InternFromString(ranks[i])) == NULL ||
            (shaped_kinds[i] = PyUnicode_InternFromString(shaped[i])) == NULL)
            return NULL;
    const char *stats[4] = {"Max", "Min", "Mean", "Norm"};
    for (int i = 0; i < 4; i++)
        if ((stat_names[i] = PyUnicode_InternFromString(stats[i])) == NULL)
            return NULL;
    if (str_max == NULL || str_type == NULL || str_process_group == NULL || str_true == NULL ||
        str_false == NULL || str_data_name == NULL || str_full_op_name == NULL || str_state == NULL ||
        str_requires_grad == NULL || str_dtype == NULL || str_md5 == NULL || str_value == NULL ||
        str_no_data_name == NULL)
        return NULL;
    return PyModule_Create(&module);
}
