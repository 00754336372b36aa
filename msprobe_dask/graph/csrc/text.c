/* The exported items' JSON text (item_text.py: items_json; graph_visualize.md section 7.6); the
 * numbers of its rules are item_text.TEXT_RULES' (text_rules). Just over 400 lines: the writers of
 * each kind of value share one buffer and its deferred floats, for one job (an item's text). */
#include "speedups.h"

static unsigned char char_class[256];

void init_char_classes(void) {
    for (int c = 0; c < 256; c++)
        char_class[c] = c < 0x20 || c > 0x7e ? BAD : 0;
    char_class['"'] = char_class['\\'] = ESCAPED;
    char_class['\''] = QUOTE;
}

/* the classes of the characters of s, or'ed */
int classes(const char *s, Py_ssize_t n) {
    int c = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        c |= char_class[(unsigned char)s[i]];
    return c;
}

static int add_double(Buf *b, double x, char code, int precision, int flags) {
    char *t = PyOS_double_to_string(x, code, precision, flags, NULL);
    if (t == NULL)
        return -1;
    int rc = buf_add(b, t, (Py_ssize_t)strlen(t));
    PyMem_Free(t);
    return rc;
}

/* repr(x): a finite float's text made at the end from orjson's, for all of them at once (buf_text);
 * inf and nan Python's */
static int add_float(Buf *b, PyObject *v) {
    double x = PyFloat_AS_DOUBLE(v);
    if (isfinite(x))
        return buf_defer(b, v);
    return add_double(b, x, 'r', 0, Py_DTSF_ADD_DOT_0);
}

int add_float_value(Buf *b, double x) {
    if (!isfinite(x))
        return add_double(b, x, 'r', 0, Py_DTSF_ADD_DOT_0);
    PyObject *v = PyFloat_FromDouble(x);
    if (v == NULL)
        return -1;
    int rc = buf_defer(b, v);
    Py_DECREF(v);
    return rc;
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

/* s matches item_text._LONG_DECIMAL (^\d{1,I}\.\d{L,H}(PERCENT)?$, text_rules.long_decimal = (I, L, H);
 * ASCII, no newline): a decimal the export rounds */
static int long_decimal(const char *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    while (i < n && is_digit(s[i]))
        i++;
    if (i < 1 || i > text_rules.int_digits || i >= n || s[i] != '.')
        return 0;
    Py_ssize_t j = ++i;
    while (i < n && is_digit(s[i]))
        i++;
    if (i - j < text_rules.min_decimals || i - j > text_rules.max_decimals)
        return 0;
    return i == n || text_is(s + i, n - i, &text_rules.percent);
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

/* the bytes quotes_and_nones may write of a text of n characters */
static Py_ssize_t nones_room(Py_ssize_t n) {
    const Text *none = &text_rules.none_text, *null = &text_rules.null_text;
    return n + (null->n > none->n ? n / none->n * (null->n - none->n) : 0);
}

/* the text s (n printable ASCII characters) takes by item_text.format_str's first steps, into t
 * (nones_room(n) bytes), by way of u (n bytes): quotes dropped, then each text_rules.none_text replaced
 * by its null_text, left to right (str.replace); returns its length */
static Py_ssize_t quotes_and_nones(const char *s, Py_ssize_t n, char *u, char *t) {
    const Text *none = &text_rules.none_text, *null = &text_rules.null_text;
    Py_ssize_t m = 0, k = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        if (s[i] != '\'')
            u[m++] = s[i];
    for (Py_ssize_t i = 0; i < m;) {
        if (u[i] == none->s[0] && i + none->n <= m && memcmp(u + i, none->s, none->n) == 0) {
            memcpy(t + k, null->s, null->n);
            k += null->n;
            i += none->n;
        } else
            t[k++] = u[i++];
    }
    return k;
}

/* whether s (n characters of classes c) holds text_rules.none_text */
static int has_none(const char *s, Py_ssize_t n, int c) {
    const Text *none = &text_rules.none_text;
    return (c & NONE_START) && n >= none->n && memmem(s, n, none->s, none->n) != NULL;
}

/* a long decimal (see long_decimal), rounded to text_rules.decimals: f"{float(s):.6f}" (and its %) */
static int add_rounded(Buf *b, const char *s, Py_ssize_t n) {
    const Text *percent = &text_rules.percent;
    int pct = n > percent->n && text_is(s + n - percent->n, percent->n, percent);
    char digits[48];
    Py_ssize_t k = pct ? n - percent->n : n;
    memcpy(digits, s, k);
    digits[k] = '\0';
    double x = PyOS_string_to_double(digits, NULL, NULL);
    if (x == -1.0 && PyErr_Occurred())
        return -1;
    if (add_double(b, x, 'f', text_rules.decimals, 0) < 0)
        return -1;
    return pct ? (buf_add(b, percent->s, percent->n) < 0 ? -1 : DONE) : DONE;
}

/* The slot of the str v in a cache of ``slots`` slots (a power of two), by its hash (its content's,
 * made once and kept in the str; a dict's keys have theirs already), not by its object's address: the
 * same slots run to run under one PYTHONHASHSEED, whatever else the process allocated (by address, two
 * hot texts sharing a slot in one run and not in another made T's instructions swing by +-0.3%) */
static inline size_t cache_slot(PyObject *v, size_t slots) {
    Py_hash_t h = ((PyASCIIObject *)v)->hash;
    return (size_t)(h != -1 ? h : PyObject_Hash(v)) & (slots - 1); /* (a str's hash does not fail) */
}

/* whether the object c a cache holds stands for v, the ASCII text s[0:n]: v itself, or an object of
 * its class with its text */
static inline int same_text(PyObject *c, PyObject *v, const char *s, Py_ssize_t n) {
    if (c == v)
        return 1;
    Py_ssize_t m;
    const char *t = c != NULL && Py_TYPE(c) == Py_TYPE(v) ? ascii_data(c, &m) : NULL;
    return t != NULL && m == n && memcmp(t, s, (size_t)n) == 0;
}

/* Text objects seen to be written as they stand, by their text (held): an item's texts (dtypes,
 * states, messages, relative errors) are mostly objects shared by many items (T: 273,000 str values
 * written), each tested once. A str is written as it stands when it is printable ASCII without
 * escapes, quotes or None and does not start with a digit (whatever the text rules), an ExportedText
 * when it is printable ASCII without escapes. */
#define PLAIN_TEXTS 4096
static PyObject *plain_texts[PLAIN_TEXTS];

/* whether v, the ASCII text s[0:n], has no character to escape or not printable: remembered in
 * ``cache`` (of ``slots``), else tested and remembered if so */
static int plain_seen(PyObject **cache, size_t slots, PyObject *v, const char *s, Py_ssize_t n) {
    PyObject **slot = &cache[cache_slot(v, slots)];
    if (same_text(*slot, v, s, n))
        return 1;
    if (classes(s, n) & (BAD | ESCAPED))
        return 0;
    Py_XSETREF(*slot, Py_NewRef(v));
    return 1;
}

void text_rules_taken(void) {
    for (int c = 0; c < 256; c++)
        char_class[c] &= ~NONE_START;
    char_class[(unsigned char)text_rules.none_text.s[0]] |= NONE_START;
    for (int i = 0; i < PLAIN_TEXTS; i++)
        Py_CLEAR(plain_texts[i]);
}

/* the exported text of a str (item_text.format_str, then JSON escaping): quotes dropped, None -> null, a
 * long decimal rounded to 6 decimals; UNHANDLED if it is not printable ASCII */
static int add_str(Buf *b, PyObject *v) {
    Py_ssize_t n;
    const char *s = ascii_data(v, &n);
    if (s == NULL)
        return UNHANDLED;
    PyObject **slot = &plain_texts[cache_slot(v, PLAIN_TEXTS)];
    if (!same_text(*slot, v, s, n)) {
        int c = n > 0 && !is_digit(s[0]) ? classes(s, n) : BAD;
        if (c & (BAD | ESCAPED | QUOTE) || has_none(s, n, c))
            return add_str_text(b, s, n);
        Py_XSETREF(*slot, Py_NewRef(v));
    }
    return buf_add(b, s, n) < 0 ? -1 : DONE;
}

/* add_str of the str of the n ASCII characters s */
int add_str_text(Buf *b, const char *s, Py_ssize_t n) {
    int c = classes(s, n);
    if (c & BAD)
        return UNHANDLED;
    int none = has_none(s, n, c);
    if (!(c & QUOTE) && !none) {
        if (n >= 2 + text_rules.min_decimals && is_digit(s[0]) && long_decimal(s, n))
            return add_rounded(b, s, n);
        return add_escaped(b, s, n, c & ESCAPED);
    }
    Py_ssize_t room = n + nones_room(n);
    char small[512], *u = room <= (Py_ssize_t)sizeof(small) ? small : PyMem_Malloc(room);
    if (u == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    char *t = u + n;
    Py_ssize_t m = quotes_and_nones(s, n, u, t);
    int rounded = m >= 2 + text_rules.min_decimals && is_digit(t[0]) && long_decimal(t, m);
    int rc = rounded ? add_rounded(b, t, m) : add_escaped(b, t, m, c & ESCAPED);
    if (u != small)
        PyMem_Free(u);
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
        if (s == NULL || !plain_seen(plain_texts, PLAIN_TEXTS, v, s, n))
            return UNHANDLED;
        return buf_add(b, s, n) < 0 ? -1 : DONE;
    }
    if (v == Py_None)
        return buf_add(b, text_rules.null_text.s, text_rules.null_text.n) < 0 ? -1 : DONE;
    if (t == &PyBool_Type)
        return buf_add(b, text_rules.bool_text[v == Py_True].s, text_rules.bool_text[v == Py_True].n) < 0 ? -1 : DONE;
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
        const char *digits = PyUnicode_AsUTF8(r);
        int rc = digits != NULL ? buf_add(b, digits, PyUnicode_GET_LENGTH(r)) : -1;
        Py_DECREF(r);
        return rc < 0 ? -1 : DONE;
    }
    if (t == &PyList_Type)
        return add_list(b, v);
    return UNHANDLED;
}

/* key objects seen to be printable ASCII without escapes, by their text (held): item keys are few
 * objects, shared by many items */
#define GOOD_KEYS 512
static PyObject *good_keys[GOOD_KEYS];

/* a key as it stands in JSON, after ``before``: printable ASCII without escapes only (others:
 * UNHANDLED) */
static int add_key(Buf *b, const char *before, Py_ssize_t m, PyObject *k) {
    if (!PyUnicode_CheckExact(k))
        return UNHANDLED;
    Py_ssize_t n;
    const char *s = ascii_data(k, &n);
    if (s == NULL || !plain_seen(good_keys, GOOD_KEYS, k, s, n))
        return UNHANDLED;
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

#define SKIP_CACHE 8
static Skip skip_cache[SKIP_CACHE]; /* the sets seen first (held, with the texts they hold) */

/* ``out``: the Skip of a set of keys, whose texts live as long as the set; -1 on error. The callers
 * pass a few module constants: the first sets seen are remembered. */
int skip_of(PyObject *set, Skip *out) {
    for (int i = 0; i < SKIP_CACHE; i++) {
        if (skip_cache[i].set == set) {
            *out = skip_cache[i];
            return 0;
        }
    }
    if (!PyAnySet_Check(set) || PySet_GET_SIZE(set) > 8) {
        PyErr_SetString(PyExc_ValueError, "skip: a set of at most 8 str keys");
        return -1;
    }
    Skip sk = {.set = set, .n = 0};
    PyObject *it = PyObject_GetIter(set), *k;
    if (it == NULL)
        return -1;
    while ((k = PyIter_Next(it)) != NULL) {
        const char *s = PyUnicode_Check(k) ? ascii_data(k, &sk.len[sk.n]) : NULL;
        Py_DECREF(k); /* (the set holds it) */
        if (s == NULL) {
            Py_DECREF(it);
            PyErr_SetString(PyExc_ValueError, "skip: a set of ASCII str keys");
            return -1;
        }
        sk.text[sk.n++] = s;
    }
    Py_DECREF(it);
    if (PyErr_Occurred())
        return -1;
    *out = sk;
    for (int i = 0; i < SKIP_CACHE; i++) {
        if (skip_cache[i].set == NULL) {
            skip_cache[i] = sk;
            Py_INCREF(set);
            break;
        }
    }
    return 0;
}

static int skipped(Skip *sk, PyObject *k) {
    Py_ssize_t n;
    const char *s = PyUnicode_CheckExact(k) ? ascii_data(k, &n) : NULL;
    if (s == NULL)
        return -2; /* not a key this code takes */
    for (Py_ssize_t i = 0; i < sk->n; i++)
        if (sk->len[i] == n && sk->text[i][0] == s[0] && memcmp(sk->text[i], s, n) == 0)
            return 1;
    return 0;
}

/* What an item's key writes, by the key's text and the address of the set of keys left out (held, so
 * that it is not reused while here): nothing (a key left out), or ``"key": "`` (the key printable
 * ASCII without escapes). An item's keys are a few objects shared by all items (T: 742,755 keys
 * written of 30,880 nodes' items): each is tested once, not at each item. */
#define KEY_PARTS 2048
#define KEY_PART_TEXT 40 /* longer keys: asked each time (skipped, add_key) */
static struct {
    PyObject *key, *skip;
    int left_out;
    Py_ssize_t n;
    char text[KEY_PART_TEXT];
} key_parts[KEY_PARTS];

/* DONE with *slot_at the slot of key k and skip's set, found or made (-1: a long key, asked each
 * time), or UNHANDLED for a key this code does not take */
static int key_part_of(PyObject *k, Skip *skip, int *slot_at) {
    if (!PyUnicode_CheckExact(k))
        return UNHANDLED;
    int at = (int)cache_slot(k, KEY_PARTS);
    *slot_at = at;
    if (key_parts[at].key == k && key_parts[at].skip == skip->set)
        return DONE;
    Py_ssize_t n;
    const char *s = ascii_data(k, &n);
    if (s == NULL)
        return UNHANDLED;
    if (n + 5 > KEY_PART_TEXT) {
        *slot_at = -1; /* (a long key: asked each time) */
        return DONE;
    }
    if (key_parts[at].skip == skip->set && key_parts[at].n == n + 5 && memcmp(key_parts[at].text + 1, s, (size_t)n) == 0)
        return DONE; /* (another object of the same text) */
    int left_out = skipped(skip, k);
    if (!left_out && classes(s, n) & (BAD | ESCAPED))
        return UNHANDLED;
    key_parts[at].left_out = left_out;
    key_parts[at].text[0] = '"';
    memcpy(key_parts[at].text + 1, s, n);
    memcpy(key_parts[at].text + 1 + n, "\": \"", 4);
    key_parts[at].n = n + 5;
    Py_XSETREF(key_parts[at].skip, Py_NewRef(skip->set));
    Py_XSETREF(key_parts[at].key, Py_NewRef(k));
    return DONE;
}

/* {"key": "text", ...} of one item, or text_rules.null_item when its null_key's text is null */
static int add_item(Buf *b, PyObject *item, Skip *skip) {
    if (!PyDict_CheckExact(item))
        return UNHANDLED;
    PyObject *kind = PyDict_GetItemWithError(item, str_type);
    if (kind == NULL && PyErr_Occurred())
        return -1;
    int group = 0; /* a process group: only the keys text_rules.process_group_kept (item_text._PG_KEEP) */
    if (kind != NULL && PyUnicode_Check(kind)) {
        int pg = PyUnicode_Compare(kind, text_rules.process_group_text);
        if (pg == -1 && PyErr_Occurred())
            return -1;
        group = pg == 0;
    }
    Py_ssize_t start = b->len, pos = 0;
    PyObject *k, *v;
    int first = 1, null_item = 0;
    while (PyDict_Next(item, &pos, &k, &v)) {
        if (group) {
            Py_ssize_t n;
            const char *s = PyUnicode_CheckExact(k) ? ascii_data(k, &n) : NULL;
            if (s == NULL)
                return UNHANDLED;
            if (!text_in(s, n, text_rules.process_group_kept, text_rules.n_process_group_kept))
                continue;
        }
        int slot, rc = key_part_of(k, skip, &slot);
        if (rc <= 0)
            return rc;
        if (slot >= 0) {
            if (key_parts[slot].left_out)
                continue;
            Py_ssize_t n = key_parts[slot].n;
            if (buf_reserve(b, 3 + n) < 0)
                return -1;
            char *out = b->p + b->len;
            if (first) {
                *out++ = '{';
            } else {
                memcpy(out, "\", ", 3);
                out += 3;
            }
            memcpy(out, key_parts[slot].text, n);
            b->len = out + n - b->p;
        } else {
            int skip_it = skipped(skip, k);
            if (skip_it)
                continue;
            rc = first ? add_key(b, "{", 1, k) : add_key(b, "\", ", 3, k);
            if (rc <= 0)
                return rc;
            if (BUF_LIT(b, ": \"") < 0)
                return -1;
        }
        first = 0;
        Py_ssize_t at = b->len;
        rc = add_value(b, v);
        if (rc <= 0)
            return rc;
        /* (as format_item: the text of a float, int, bool or list is never null) */
        if ((v == Py_None || PyUnicode_Check(v)) && text_is(b->p + at, b->len - at, &text_rules.null_text)) {
            int is_null_key = PyUnicode_Compare(k, text_rules.null_key_text);
            if (is_null_key == -1 && PyErr_Occurred())
                return -1;
            null_item |= is_null_key == 0;
        }
    }
    if (null_item) {
        if (buf_truncate(b, start) < 0)
            return -1;
        return buf_add(b, text_rules.null_item.s, text_rules.null_item.n) < 0 ? -1 : DONE;
    }
    return (first ? BUF_LIT(b, "{}") : BUF_LIT(b, "\"}")) < 0 ? -1 : DONE;
}

/* the JSON text of a node's exported items, or None where this code does not take them */
PyObject *data_json(PyObject *data, Skip *skip) {
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
PyObject *items_json(PyObject *self, PyObject *args) {
    PyObject *data, *skip_set;
    Skip skip;
    if (!PyArg_ParseTuple(args, "OO", &data, &skip_set) || configured() < 0 || skip_of(skip_set, &skip) < 0)
        return NULL;
    if (!PyDict_CheckExact(data))
        Py_RETURN_NONE;
    return data_json(data, &skip);
}
