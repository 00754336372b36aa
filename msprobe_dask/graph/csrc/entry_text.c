/* A dump entry's exported items made straight from its JSON text, without the item dicts (a build's
 * rows need nothing else of them): entry_texts(text, start, end, node_id) is
 *
 *     (items_json(inputs, False, False), items_json(outputs, False, False))
 *     where inputs, outputs = items.entry_items(node_id, json.loads(text[start:end]))
 *
 * or None for an entry this code does not take: anything but tensors, plain scalar arguments, process
 * groups, nulls and their lists and dicts (sizes, slices, P2P ops, rank parameters, a name holding
 * text_rules.parameters_grad),
 * strings with escapes or outside printable ASCII, integers of 19 digits or more, duplicate keys,
 * deep nesting, and text json would refuse. The Python path then makes the items, and its errors.
 *
 * The entry is read once into a tape of values (its containers' members linked in order), then
 * walked as items.parse_entry walks the parsed entry, each item's text written as items_json writes
 * it (the keys state, full_op_name and md5 left out).
 *
 * Over 400 lines: the JSON reader (the tape) serves this walk alone (it takes what the walk can write
 * and hands the rest back), so the two are kept together. */
#include "speedups.h"

#define MAX_ITEMS 1024 /* items per entry checked for duplicate keys; more: the Python path */

Text stat_keys[N_STATS];
Text leaf_keys[K_SHAPE + 1];

/* The role of a key by its sign (its length, first and last characters), hashed: role_at[slot] is the
 * role whose key's sign hashes to the slot (or, taken, to a slot before it: linear probing), K_OTHER for
 * none (a key of another sign: mostly one probe, 11 roles in 256 slots). */
#define SIGN(k, n) ((uint32_t)(n) | (uint32_t)(unsigned char)(k)[0] << 8 | (uint32_t)(unsigned char)(k)[(n)-1] << 16)
static unsigned char role_at[256];
static uint32_t role_sign[K_NORM + 1];
static const Text *role_key[K_NORM + 1]; /* the key of each role (leaf_keys', stat_keys'), NULL for none */

static inline unsigned role_slot(uint32_t sign) { return (sign * 0x9E3779B1u) >> 24; }

int named_role(const char *k, Py_ssize_t n) {
    if (n <= 0 || n > 63)
        return K_OTHER;
    uint32_t sign = SIGN(k, n);
    for (unsigned slot = role_slot(sign);; slot = (slot + 1) & 255) {
        int role = role_at[slot];
        if (role == K_OTHER)
            return K_OTHER;
        if (role_sign[role] != sign)
            continue;
        const char *s = role_key[role]->s;
        Py_ssize_t j = 1; /* (the first and last characters are the sign's; a few between: no memcmp call) */
        while (j < n - 1 && k[j] == s[j])
            j++;
        if (j >= n - 1)
            return role;
    }
}

/* role_at, role_sign and role_key of the keys taken (leaf_keys', stat_keys') */
static void place_roles(void) {
    memset(role_at, K_OTHER, sizeof(role_at));
    for (int r = 0; r <= K_NORM; r++) {
        const Text *key = r >= K_MAX ? &stat_keys[r - K_MAX] : r >= K_TYPE && r <= K_SHAPE ? &leaf_keys[r] : NULL;
        role_key[r] = key != NULL && key->n > 0 ? key : NULL;
        if (role_key[r] == NULL)
            continue;
        role_sign[r] = SIGN(key->s, key->n);
        unsigned slot = role_slot(role_sign[r]);
        while (role_at[slot] != K_OTHER)
            slot = (slot + 1) & 255;
        role_at[slot] = (unsigned char)r;
    }
}

/* keys[0 ... count) into taken[from ...]: 0, or -1 (nothing taken) for a key empty, of over 63
 * characters, twice, or one of ``others`` (the other roles' keys) */
static int take_keys(const Text *keys, int count, Text *taken, const Text *others, int n_others) {
    for (int i = 0; i < count; i++) {
        if (keys[i].n <= 0 || keys[i].n > 63 || text_in(keys[i].s, keys[i].n, others, n_others) ||
            text_in(keys[i].s, keys[i].n, keys, i))
            return -1;
    }
    memcpy(taken, keys, (size_t)count * sizeof(Text));
    place_roles();
    return 0;
}

int take_stat_keys(const Text *keys) {
    return take_keys(keys, N_STATS, stat_keys, &leaf_keys[K_TYPE], N_LEAF_ROLES);
}

int take_leaf_keys(const Text *keys) {
    return take_keys(keys, N_LEAF_ROLES, &leaf_keys[K_TYPE], stat_keys, N_STATS);
}

static int key_role(const char *k, Py_ssize_t n) {
    return text_in(k, n, text_rules.left_out, text_rules.n_left_out) ? K_LEFT_OUT : named_role(k, n);
}

/* the role of a key of items.ITEM_KEYS, for configure_text (``r``: the rules being handed): one that
 * add_leaf adds to a leaf without it, or K_LEFT_OUT; -1 for a key it cannot add */
int leaf_key_role(const char *k, Py_ssize_t n, const TextRules *r) {
    if (text_in(k, n, r->left_out, r->n_left_out))
        return K_LEFT_OUT;
    int role = named_role(k, n);
    return role == K_DATA_NAME || role == K_REQUIRES_GRAD || role >= K_MAX ? role : -1;
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }

void skip_ws(Tape *t) {
    /* (most calls find no white space: one test of the first character says so) */
    const char *p = t->p, *end = t->end;
    while (p < end && (unsigned char)*p <= ' ') {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        if (*p == ' ' && end - p >= 8) { /* an indentation's spaces, eight at a time */
            uint64_t w;
            memcpy(&w, p, 8);
            uint64_t other = w ^ 0x2020202020202020ull; /* (its bytes that are not spaces: not 0) */
            p += other == 0 ? 8 : __builtin_ctzll(other) >> 3;
            continue;
        }
#endif
        if (*p != ' ' && *p != '\n' && *p != '\t' && *p != '\r')
            break;
        p++;
    }
    t->p = p;
}

static int is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

/* the string at t->p (its opening quote): its characters, and whether they are plain; 0 if invalid */
static int read_string(Tape *t, const char **s, Py_ssize_t *n, int *plain) {
    const char *p = t->p + 1;
    int ok = 1;
    for (;;) {
        if (p >= t->end)
            return 0;
        unsigned char c = (unsigned char)*p;
        if (c == '"')
            break;
        if (c < 0x20)
            return 0;
        if (c == '\\') {
            ok = 0;
            if (++p >= t->end)
                return 0;
            if (*p == 'u') {
                if (t->end - p < 5 || !is_hex(p[1]) || !is_hex(p[2]) || !is_hex(p[3]) || !is_hex(p[4]))
                    return 0;
                p += 5;
                continue;
            }
            if (*p != '"' && *p != '\\' && *p != '/' && *p != 'b' && *p != 'f' && *p != 'n' && *p != 'r' &&
                *p != 't')
                return 0;
        } else if (c > 0x7e) {
            ok = 0; /* (UTF-8: the scan of dump.json checked the whole file) */
        }
        p++;
    }
    *s = t->p + 1;
    *n = p - *s;
    *plain = ok;
    t->p = p + 1;
    return 1;
}

/* a JSON number at t->p: J_INT or J_FLOAT, its text in v; 0 if invalid */
static int read_number(Tape *t, Val *v) {
    const char *p = t->p, *e = t->end;
    int is_float = 0;
    if (p < e && *p == '-')
        p++;
    if (p >= e || !is_digit(*p))
        return 0;
    if (*p == '0')
        p++;
    else
        while (p < e && is_digit(*p))
            p++;
    if (p < e && *p == '.') {
        if (++p >= e || !is_digit(*p))
            return 0;
        while (p < e && is_digit(*p))
            p++;
        is_float = 1;
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        if (++p < e && (*p == '+' || *p == '-'))
            p++;
        if (p >= e || !is_digit(*p))
            return 0;
        while (p < e && is_digit(*p))
            p++;
        is_float = 1;
    }
    v->kind = is_float ? J_FLOAT : J_INT;
    v->s = t->p;
    v->n = p - t->p;
    t->p = p;
    return 1;
}

static int literal(Tape *t, const char *word, int kind, Val *v) {
    size_t n = strlen(word);
    if ((size_t)(t->end - t->p) < n || memcmp(t->p, word, n) != 0)
        return 0;
    t->p += n;
    v->kind = kind;
    return 1;
}

/* a new value on the tape (its index), or -1 (no memory: no error is set, the GIL may not be held) */
static int new_val(Tape *t) {
    if (t->n == t->cap) {
        int cap = 2 * t->cap;
        Val *v = t->v == t->small ? PyMem_RawMalloc(cap * sizeof(Val)) : PyMem_RawRealloc(t->v, cap * sizeof(Val));
        if (v == NULL)
            return -1;
        if (t->v == t->small)
            memcpy(v, t->small, t->n * sizeof(Val));
        t->v = v;
        t->cap = cap;
    }
    return t->n++; /* (read_value writes the whole value) */
}

/* the value at t->p onto the tape: its index, -2 if the text is not JSON (or nests too deep), -1 on
 * error */
int read_value(Tape *t, int depth) {
    skip_ws(t);
    if (t->p >= t->end || depth > MAX_NEST)
        return -2;
    int at = new_val(t);
    if (at < 0)
        return -1;
    Val v = {.first = -1, .next = -1};
    char c = *t->p;
    int ok = 1;
    if (c == '"') {
        v.kind = J_STR;
        ok = read_string(t, &v.s, &v.n, &v.plain);
    } else if (c == '{' || c == '[') {
        v.kind = c == '{' ? J_OBJ : J_LIST;
        char close = c == '{' ? '}' : ']';
        t->p++;
        skip_ws(t);
        int last = -1;
        if (t->p < t->end && *t->p == close) {
            t->p++;
        } else {
            for (;;) {
                const char *k = NULL;
                Py_ssize_t kn = 0;
                int kplain = 0;
                if (v.kind == J_OBJ) {
                    skip_ws(t);
                    if (t->p >= t->end || *t->p != '"' || !read_string(t, &k, &kn, &kplain))
                        return -2;
                    skip_ws(t);
                    if (t->p >= t->end || *t->p != ':')
                        return -2;
                    t->p++;
                }
                int child = read_value(t, depth + 1);
                if (child < 0)
                    return child;
                t->v[child].k = k;
                t->v[child].kn = kn;
                t->v[child].kplain = kplain;
                t->v[child].role = kplain ? key_role(k, kn) : K_OTHER;
                if (last < 0)
                    v.first = child;
                else
                    t->v[last].next = child;
                last = child;
                v.count++;
                skip_ws(t);
                if (t->p >= t->end)
                    return -2;
                if (*t->p == ',') {
                    t->p++;
                    continue;
                }
                if (*t->p != close)
                    return -2;
                t->p++;
                break;
            }
        }
    } else if (c == 't') {
        ok = literal(t, "true", J_TRUE, &v);
    } else if (c == 'f') {
        ok = literal(t, "false", J_FALSE, &v);
    } else if (c == 'n') {
        ok = literal(t, "null", J_NULL, &v);
    } else if (c == 'N') {
        ok = literal(t, "NaN", J_NAN, &v);
    } else if (c == 'I') {
        ok = literal(t, "Infinity", J_INF, &v);
    } else if (c == '-' && t->end - t->p > 1 && t->p[1] == 'I') {
        ok = literal(t, "-Infinity", J_NINF, &v);
    } else {
        ok = read_number(t, &v);
    }
    if (!ok)
        return -2;
    v.first = v.kind == J_OBJ || v.kind == J_LIST ? v.first : -1;
    v.next = -1;
    t->v[at] = v;
    return at;
}

/* ------------------------------------------------------------------ the items' texts */

/* the keys of the items of one side: where each starts in the side's text, and its length */
typedef struct {
    Py_ssize_t *at, *len, n, cap;
    Py_ssize_t small_at[32], small_len[32];
} Keys;

typedef struct {
    Tape t;
    Buf in, out; /* the two texts being made */
    Buf name;    /* the name of the value being walked (no floats deferred in it) */
    Keys keys[2]; /* of ``in`` and ``out`` */
} Walk;

static int add_key_at(Keys *k, Py_ssize_t at, Py_ssize_t len) {
    if (k->n == k->cap) {
        Py_ssize_t cap = 2 * k->cap;
        Py_ssize_t *a = PyMem_Malloc(cap * sizeof(Py_ssize_t)), *l = PyMem_Malloc(cap * sizeof(Py_ssize_t));
        if (a == NULL || l == NULL) {
            PyMem_Free(a);
            PyMem_Free(l);
            PyErr_NoMemory();
            return -1;
        }
        memcpy(a, k->at, k->n * sizeof(Py_ssize_t));
        memcpy(l, k->len, k->n * sizeof(Py_ssize_t));
        if (k->at != k->small_at) {
            PyMem_Free(k->at);
            PyMem_Free(k->len);
        }
        k->at = a;
        k->len = l;
        k->cap = cap;
    }
    k->at[k->n] = at;
    k->len[k->n++] = len;
    return 0;
}



/* the text of a JSON integer as Python's int repr ("-0" is 0); UNHANDLED beyond 18 digits */
static int add_int(Buf *b, const Val *v) {
    int neg = v->s[0] == '-';
    if (v->n - neg > 18)
        return UNHANDLED;
    if (neg && v->n == 2 && v->s[1] == '0')
        return BUF_LIT(b, "0") < 0 ? -1 : DONE;
    return buf_add(b, v->s, v->n) < 0 ? -1 : DONE;
}

/* float(text) for a JSON number of at most 19 significant digits and a decimal exponent within
 * +-27, exactly, in integers: the significand w times 5^e (both below 2^64, the product exact in 128
 * bits), or w shifted to the top of 128 bits over 5^e (a quotient of at least 65 bits, and whether a
 * remainder was left); then rounded to 53 bits, half to even, and scaled by the power of two. Such
 * values lie far inside the normal doubles. 0 where it cannot tell (no 128-bit integers). */
int fast_double(const char *s, Py_ssize_t n, double *x) {
#if defined(__SIZEOF_INT128__)
    typedef unsigned __int128 u128;
    static const unsigned long long pow5[28] = {
        1ULL, 5ULL, 25ULL, 125ULL, 625ULL, 3125ULL, 15625ULL, 78125ULL, 390625ULL, 1953125ULL,
        9765625ULL, 48828125ULL, 244140625ULL, 1220703125ULL, 6103515625ULL, 30517578125ULL,
        152587890625ULL, 762939453125ULL, 3814697265625ULL, 19073486328125ULL, 95367431640625ULL,
        476837158203125ULL, 2384185791015625ULL, 11920928955078125ULL, 59604644775390625ULL,
        298023223876953125ULL, 1490116119384765625ULL, 7450580596923828125ULL};
    const char *p = s, *e = s + n;
    int neg = *p == '-', digits = 0, exp10 = 0;
    p += neg;
    unsigned long long w = 0;
    while (p < e && *p == '0')
        p++; /* (leading zeros) */
    for (; p < e && is_digit(*p); p++) {
        if (++digits > 19)
            return 0;
        w = 10 * w + (unsigned long long)(*p - '0');
    }
    if (p < e && *p == '.') {
        for (p++; w == 0 && p < e && *p == '0'; p++)
            exp10--; /* (leading zeros of the fraction) */
        for (; p < e && is_digit(*p); p++, exp10--) {
            if (++digits > 19)
                return 0;
            w = 10 * w + (unsigned long long)(*p - '0');
        }
    }
    if (p < e) { /* the exponent: at most a few digits count */
        int sign = 1, k = 0;
        if (++p < e && (*p == '+' || *p == '-'))
            sign = *p++ == '-' ? -1 : 1;
        for (; p < e; p++) {
            if (k > 1000)
                return 0;
            k = 10 * k + (*p - '0');
        }
        exp10 += sign * k;
    }
    if (w == 0) {
        *x = neg ? -0.0 : 0.0;
        return 1;
    }
    if (exp10 < -27 || exp10 > 27)
        return 0;
    u128 q;
    int e2, sticky = 0;
    if (exp10 >= 0) {
        q = (u128)w * pow5[exp10]; /* the value is q * 2^e2 */
        e2 = exp10;
    } else {
        int shift = 64 + __builtin_clzll(w);
        u128 top = (u128)w << shift; /* its highest bit set */
        q = top / pow5[-exp10];      /* the value is (q + a fraction) * 2^e2 */
        sticky = q * pow5[-exp10] != top;
        e2 = exp10 - shift;
    }
    unsigned long long high = (unsigned long long)(q >> 64);
    int bits = high ? 128 - __builtin_clzll(high) : 64 - __builtin_clzll((unsigned long long)q);
    unsigned long long m = (unsigned long long)q; /* (53 bits or fewer: a product, exact) */
    if (bits > 53) {
        int drop = bits - 53;
        u128 rest = q & (((u128)1 << drop) - 1), half = (u128)1 << (drop - 1);
        m = (unsigned long long)(q >> drop);
        if (rest > half || (rest == half && (sticky || (m & 1))))
            m++; /* (2^53 at most: still exact in a double) */
        e2 += drop;
    }
    double r = ldexp((double)m, e2);
    *x = neg ? -r : r;
    return 1;
#else
    return 0;
#endif
}

int json_double(const Val *v, double *x) {
    if (!fast_double(v->s, v->n, x)) {
        char digits[64], *end;
        if (v->n >= (Py_ssize_t)sizeof(digits))
            return UNHANDLED;
        memcpy(digits, v->s, v->n);
        digits[v->n] = '\0';
        *x = PyOS_string_to_double(digits, &end, NULL);
        if (*x == -1.0 && PyErr_Occurred()) {
            PyErr_Clear();
            return UNHANDLED;
        }
        if (end != digits + v->n || !isfinite(*x))
            return UNHANDLED;
    }
    return DONE;
}

/* repr(float(text)) of a finite JSON number; UNHANDLED for one out of range */
static int add_json_float(Buf *b, const Val *v) {
    double x;
    if (json_double(v, &x) != DONE)
        return UNHANDLED;
    return add_float_value(b, x) < 0 ? -1 : DONE;
}

/* list.__repr__ of a list of ints and lists of them (a shape); UNHANDLED for others */
static int add_int_list(Buf *b, const Tape *t, const Val *v, int depth) {
    if (depth > MAX_NEST || BUF_LIT(b, "[") < 0)
        return depth > MAX_NEST ? UNHANDLED : -1;
    for (int i = v->first, k = 0; i >= 0; i = t->v[i].next, k++) {
        const Val *x = &t->v[i];
        if (k > 0 && BUF_LIT(b, ", ") < 0)
            return -1;
        int rc = x->kind == J_INT ? add_int(b, x) : x->kind == J_LIST ? add_int_list(b, t, x, depth + 1) : UNHANDLED;
        if (rc <= 0)
            return rc;
    }
    return BUF_LIT(b, "]") < 0 ? -1 : DONE;
}

/* the exported text of a value (item_text._JSON_TEXT by the class json gives it), JSON-ready; NULL: None.
 * The JSON constants: null None's (text_rules.null_text), true and false the bools' (bool_text), NaN
 * and Infinity as repr writes the floats json reads them as */
static int add_text(Buf *b, const Tape *t, const Val *v) {
    if (v == NULL)
        return buf_add(b, text_rules.null_text.s, text_rules.null_text.n) < 0 ? -1 : DONE;
    switch (v->kind) {
    case J_STR:
        return v->plain ? add_str_text(b, v->s, v->n) : UNHANDLED;
    case J_INT:
        return add_int(b, v);
    case J_FLOAT:
        return add_json_float(b, v);
    case J_TRUE:
    case J_FALSE:
        return buf_add(b, text_rules.bool_text[v->kind == J_TRUE].s, text_rules.bool_text[v->kind == J_TRUE].n) < 0
                   ? -1
                   : DONE;
    case J_NULL:
        return buf_add(b, text_rules.null_text.s, text_rules.null_text.n) < 0 ? -1 : DONE;
    case J_NAN:
        return add_float_value(b, Py_NAN) < 0 ? -1 : DONE;
    case J_INF:
    case J_NINF:
        return add_float_value(b, v->kind == J_INF ? Py_HUGE_VAL : -Py_HUGE_VAL) < 0 ? -1 : DONE;
    case J_LIST:
        return add_int_list(b, t, v, 0);
    default:
        return UNHANDLED; /* a dict: str(dict) in Python */
    }
}

const char *type_text(const Val *v) {
    static const char *texts[J_OBJ + 1]; /* Python's str of each type, asked once (held by the str) */
    int kind = v == NULL ? J_NULL : v->kind;
    if (texts[kind] != NULL)
        return texts[kind];
    PyTypeObject *type = kind == J_STR   ? &PyUnicode_Type
                         : kind == J_INT ? &PyLong_Type
                         : kind == J_TRUE || kind == J_FALSE ? &PyBool_Type
                         : kind == J_NULL ? Py_TYPE(Py_None)
                         : kind == J_LIST ? &PyList_Type
                         : kind == J_OBJ  ? &PyDict_Type
                                          : &PyFloat_Type;
    PyObject *text = PyObject_Str((PyObject *)type);
    if (text == NULL)
        return NULL;
    PyUnicode_InternInPlace(&text); /* (kept for the process's life, as the texts are) */
    return texts[kind] = PyUnicode_AsUTF8(text);
}

/* the start of an item keyed ``key`` (ASCII without escapes): into the outputs if the key holds
 * the rules' output_part and not their input_part, else the inputs (items.split_items); its buffer, or NULL with *rc
 * UNHANDLED (a key given twice: Python keeps the first place and the last item) or -1 */
static Buf *start_item(Walk *w, const char *key, Py_ssize_t n, int *rc) {
    int side = has_text(key, n, &text_rules.output_part) && !has_text(key, n, &text_rules.input_part);
    Buf *b = side ? &w->out : &w->in;
    Keys *keys = &w->keys[side];
    *rc = UNHANDLED;
    if (keys->n == MAX_ITEMS)
        return NULL;
    for (Py_ssize_t i = 0; i < keys->n; i++)
        if (keys->len[i] == n && memcmp(b->p + keys->at[i], key, n) == 0)
            return NULL;
    *rc = -1;
    if ((keys->n == 0 ? BUF_LIT(b, "{\"") : BUF_LIT(b, ", \"")) < 0 || add_key_at(keys, b->len, n) < 0 ||
        buf_add(b, key, n) < 0 || BUF_LIT(b, "\": ") < 0)
        return NULL;
    return b;
}

/* an item that exports as text_rules.null_item (a null in the entry: items._default_item, whose null_key
 * is null) */
static int add_null_item(void *walker) {
    Walk *w = (Walk *)walker;
    int rc;
    Buf *b = start_item(w, w->name.p, w->name.len, &rc);
    if (b == NULL)
        return rc;
    return buf_add(b, text_rules.null_item.s, text_rules.null_item.n) < 0 ? -1 : DONE;
}

/* one key and value of an item: ``"key": "`` (or ``{"key": "`` first) and the value's text */
static int add_cell(Buf *b, int *first, const char *key, Py_ssize_t kn) {
    if ((*first ? BUF_LIT(b, "{\"") : BUF_LIT(b, "\", \"")) < 0 || buf_add(b, key, kn) < 0 ||
        BUF_LIT(b, "\": \"") < 0)
        return -1;
    *first = 0;
    return 0;
}

/* add_cell of the key of a leaf's ``role`` (leaf_keys) */
static int add_key(Buf *b, int *first, int role) {
    return add_cell(b, first, leaf_keys[role].s, leaf_keys[role].n);
}

/* a process group's exported item: its members of the kept keys in their order, its data name ``dn``
 * (the leaf's or items.NO_DATA_NAME), added last if it has none (items._leaf adds it after its keys) */
static int add_group(Buf *b, const Tape *t, const Val *leaf, const Val *data_name, const char *dn, Py_ssize_t dn_n) {
    int first = 1, rc = DONE;
    for (int i = leaf->first; rc == DONE && i >= 0; i = t->v[i].next) {
        const Val *m = &t->v[i];
        if (m->role == K_LEFT_OUT || !text_in(m->k, m->kn, text_rules.process_group_kept, text_rules.n_process_group_kept))
            continue;
        if (add_cell(b, &first, m->k, m->kn) < 0)
            return -1;
        rc = m == data_name ? add_str_text(b, dn, dn_n) : add_text(b, t, m);
    }
    if (rc != DONE)
        return rc;
    const Text *dn_key = &leaf_keys[K_DATA_NAME];
    if (data_name == NULL && text_in(dn_key->s, dn_key->n, text_rules.process_group_kept, text_rules.n_process_group_kept) &&
        (add_cell(b, &first, dn_key->s, dn_key->n) < 0 || add_str_text(b, dn, dn_n) < 0))
        return -1;
    return (first ? BUF_LIT(b, "{}") : BUF_LIT(b, "\"}")) < 0 ? -1 : DONE;
}

/* the item of a leaf (an object whose "type" is a string): items._leaf, then item_text.format_item */
static int add_leaf(void *walker, const Val *leaf) {
    Walk *w = (Walk *)walker;
    const Tape *t = &w->t;
    const Val *kind = NULL, *data_name = NULL, *dtype = NULL, *value = NULL;
    int has_requires_grad = 0, has_shape = 0, has_stat[N_STATS] = {0};
    for (int i = leaf->first; i >= 0; i = t->v[i].next) { /* (walk_value checked the keys) */
        const Val *m = &t->v[i];
        switch (m->role) {
        case K_TYPE:
            kind = m;
            break;
        case K_DATA_NAME:
            data_name = m;
            break;
        case K_DTYPE:
            dtype = m;
            break;
        case K_VALUE:
            value = m;
            break;
        case K_REQUIRES_GRAD:
            has_requires_grad = 1;
            break;
        case K_SHAPE:
            has_shape = 1;
            break;
        case K_MAX:
        case K_MIN:
        case K_MEAN:
        case K_NORM:
            has_stat[m->role - K_MAX] = 1;
            break;
        }
    }
    if (kind == NULL || kind->kind != J_STR || !kind->plain)
        return UNHANDLED;
    /* a process group's item keeps only the keys text_rules.process_group_kept (item_text._PG_KEEP) */
    int group = text_is(kind->s, kind->n, &text_rules.process_group);
    /* data_name: the entry's, if truthy (a string), else items.NO_DATA_NAME */
    const char *dn = text_rules.no_data_name.s;
    Py_ssize_t dn_n = text_rules.no_data_name.n;
    if (data_name != NULL && !(data_name->kind == J_NULL || data_name->kind == J_FALSE ||
                               (data_name->kind == J_STR && data_name->n == 0))) {
        if (data_name->kind != J_STR || !data_name->plain)
            return UNHANDLED;
        dn = data_name->s;
        dn_n = data_name->n;
    }
    /* a tensor has a truthy dtype (a bool counts: the item holds its text); a scalar argument has none */
    int scalar;
    if (dtype == NULL || dtype->kind == J_NULL)
        scalar = 1;
    else if (dtype->kind == J_STR)
        scalar = dtype->n == 0;
    else if (dtype->kind == J_TRUE || dtype->kind == J_FALSE)
        scalar = 0;
    else
        return UNHANDLED;
    const char *name = w->name.p;
    Py_ssize_t name_n = w->name.len;
    if (scalar && !group) { /* items._fill_non_tensor's general case only (a group's cells are left out) */
        if (text_in(kind->s, kind->n, text_rules.shaped_kinds, text_rules.n_shaped_kinds))
            return UNHANDLED;
        const char *dot = name + name_n;
        while (dot > name && dot[-1] != '.')
            dot--;
        Py_ssize_t last_n = name + name_n - dot;
        if (text_in(dot, last_n, text_rules.peer_arguments, text_rules.n_peer_arguments))
            return UNHANDLED;
        if (value != NULL && value->kind == J_OBJ)
            return UNHANDLED;
    }
    /* the key: the data name without its last part, or the item's name */
    const char *key = name;
    Py_ssize_t key_n = name_n;
    if (!text_is(dn, dn_n, &text_rules.no_data_name)) {
        key = dn;
        key_n = dn_n;
        for (Py_ssize_t i = dn_n - 1; i >= 0; i--) {
            if (dn[i] == '.') {
                key_n = i;
                break;
            }
        }
    }
    int rc;
    Buf *b = start_item(w, key, key_n, &rc);
    if (b == NULL)
        return rc;
    Py_ssize_t start = b->len, null_at = -1;
    int first = 1;
    const char *scalar_type = scalar ? type_text(value) : NULL;
    if (scalar && scalar_type == NULL)
        return -1;
    if (group)
        return add_group(b, t, leaf, data_name, dn, dn_n);
    for (int i = leaf->first; i >= 0; i = t->v[i].next) {
        const Val *m = &t->v[i];
        if (m->role == K_LEFT_OUT)
            continue;
        if (add_cell(b, &first, m->k, m->kn) < 0)
            return -1;
        int stat = m->role >= K_MAX ? m->role - K_MAX : -1;
        if (m->role == text_rules.null_role)
            null_at = b->len;
        if (m == data_name)
            rc = add_str_text(b, dn, dn_n);
        else if (scalar && stat >= 0)
            rc = add_text(b, t, value);
        else if (scalar && m == dtype)
            rc = add_str_text(b, scalar_type, (Py_ssize_t)strlen(scalar_type));
        else if (scalar && m->role == K_SHAPE)
            rc = add_str_text(b, text_rules.scalar_shape.s, text_rules.scalar_shape.n) < 0 ? -1 : DONE;
        else
            rc = add_text(b, t, m);
        if (rc <= 0)
            return rc;
        if (m->role == text_rules.null_role && !text_is(b->p + null_at, b->len - null_at, &text_rules.null_text))
            null_at = -1; /* (a null_key whose text is not null) */
    }
    /* the keys items._leaf adds to a leaf without them, in the order of items.ITEM_KEYS (text_rules.
     * item_keys; those the export leaves out are not in the text) */
    for (int j = 0; j < text_rules.n_item_keys; j++) {
        int role = text_rules.item_keys[j];
        if (role == K_DATA_NAME) {
            if (data_name == NULL && (add_key(b, &first, K_DATA_NAME) < 0 ||
                                      add_str_text(b, text_rules.no_data_name.s, text_rules.no_data_name.n) < 0))
                return -1;
        } else if (role == K_REQUIRES_GRAD) {
            if (!has_requires_grad && (add_key(b, &first, K_REQUIRES_GRAD) < 0 ||
                                       buf_add(b, text_rules.null_text.s, text_rules.null_text.n) < 0))
                return -1;
        } else if (role >= K_MAX && !has_stat[role - K_MAX]) {
            int s = role - K_MAX;
            if (add_cell(b, &first, stat_keys[s].s, stat_keys[s].n) < 0)
                return -1;
            Py_ssize_t at = b->len;
            rc = add_text(b, t, scalar ? value : NULL);
            if (rc <= 0)
                return rc;
            if (role == text_rules.null_role && text_is(b->p + at, b->len - at, &text_rules.null_text))
                null_at = at;
        }
    }
    if (scalar && dtype == NULL &&
        (add_key(b, &first, K_DTYPE) < 0 || add_str_text(b, scalar_type, (Py_ssize_t)strlen(scalar_type)) < 0))
        return -1;
    if (scalar && !has_shape &&
        (add_key(b, &first, K_SHAPE) < 0 || add_str_text(b, text_rules.scalar_shape.s, text_rules.scalar_shape.n) < 0))
        return -1;
    if (null_at >= 0) { /* format_item: a null null_key makes the whole item null_item */
        if (buf_truncate(b, start) < 0)
            return -1;
        return buf_add(b, text_rules.null_item.s, text_rules.null_item.n) < 0 ? -1 : DONE;
    }
    return (first ? BUF_LIT(b, "{}") : BUF_LIT(b, "\"}")) < 0 ? -1 : DONE;
}

static int walk_value(void *w, const Val *v, int depth);

/* the value's members (an object's, a list's), each named after the walked name: ".key" or ".i"; a
 * name holding parameters_grad is handed back (it keeps its lists' elements unnumbered) */
static int walk_members(void *w, const Val *v, int depth) {
    return walk_members_of(w, &((Walk *)w)->t, &((Walk *)w)->name, '.', v, depth, 1, &text_rules.parameters_grad,
                           walk_value);
}

/* items._parse of one value, named w->name */
static int walk_value(void *w, const Val *v, int depth) {
    return walk_value_of(w, &((Walk *)w)->t, v, depth, add_null_item, add_leaf, walk_members);
}

/* the walk of an entry (items.parse_entry): DONE, UNHANDLED or -1 */
static int walk_entry(Walk *w, const char *node_id, Py_ssize_t id_n) {
    const Val *entry = &w->t.v[0];
    if (entry->kind != J_OBJ)
        return UNHANDLED;
    for (int k = 0; k < text_rules.n_sub_keys; k++) {
        const Text *key = &text_rules.sub_key[k], *suffix = &text_rules.sub_suffix[k];
        const Val *part;
        if (entry_part(&w->t, entry, key->s, key->n, &part) == UNHANDLED)
            return UNHANDLED;
        if (part == NULL)
            continue;
        w->name.len = 0;
        if (buf_add(&w->name, node_id, id_n) < 0 ||
            buf_add(&w->name, suffix->s, suffix->n) < 0)
            return -1;
        int rc = part->kind == J_LIST ? walk_members(w, part, 0) : walk_value(w, part, 0);
        if (rc <= 0)
            return rc;
    }
    return DONE;
}

/* whether a J_INT value is one this code takes: 18 digits at most (a long long) */
static int short_int(const Val *v) { return v->n - (v->s[0] == '-') <= 18; }

/* a JSON integer as a Python int, or NULL without an error beyond 18 digits */
static PyObject *int_of(const Val *v) {
    int neg = v->s[0] == '-';
    if (!short_int(v))
        return NULL;
    long long x = 0;
    for (Py_ssize_t i = neg; i < v->n; i++)
        x = 10 * x + (v->s[i] - '0');
    return PyLong_FromLongLong(neg ? -x : x);
}

/* floats made before, by a hash of their JSON text: a dump's statistics repeat. 16,384 slots (T's
 * texts evict one another: 23,952 floats made for 173,112 numbers read, 44,894 with 4,096 slots) */
#define FLOAT_CACHE 16384
#define FLOAT_CACHED 30  /* the longest text cached (a float's repr takes at most 24 characters) */
static struct {
    PyObject *value; /* held */
    unsigned char n;
    char text[FLOAT_CACHED];
} float_cache[FLOAT_CACHE];

/* float() of a J_FLOAT value's text, a new reference or NULL without an error (out of range) */
static PyObject *float_of(const Val *v) {
    double x;
    if (fast_double(v->s, v->n, &x))
        return PyFloat_FromDouble(x);
    char digits[64];
    if (v->n >= (Py_ssize_t)sizeof(digits))
        return NULL;
    memcpy(digits, v->s, (size_t)v->n);
    digits[v->n] = '\0';
    x = PyOS_string_to_double(digits, NULL, NULL);
    if (x == -1.0 && PyErr_Occurred())
        return NULL; /* (the reader checked the text: not reached) */
    return PyFloat_FromDouble(x);
}

/* a JSON number's value as json.loads reads it (float() of its text, NaN and the infinities), or
 * NULL without an error where this code does not take it. A float's text seen before gives the float
 * made then (floats do not change): an output's statistics stand again as the next API's input's and
 * layers repeat (T's dump.json holds 79,756 statistics a side in 5,267 and 5,904 texts). */
PyObject *number_of(const Val *v) {
    switch (v->kind) {
    case J_INT:
        return int_of(v);
    case J_NAN:
        return PyFloat_FromDouble(Py_NAN);
    case J_INF:
        return PyFloat_FromDouble(Py_HUGE_VAL);
    case J_NINF:
        return PyFloat_FromDouble(-Py_HUGE_VAL);
    case J_FLOAT: {
        if (v->n > FLOAT_CACHED)
            return float_of(v);
        int slot = (int)(text_hash(v->s, v->n) % FLOAT_CACHE);
        if (float_cache[slot].value != NULL && float_cache[slot].n == v->n &&
            memcmp(float_cache[slot].text, v->s, (size_t)v->n) == 0)
            return Py_NewRef(float_cache[slot].value);
        PyObject *x = float_of(v);
        if (x != NULL) {
            Py_XSETREF(float_cache[slot].value, Py_NewRef(x));
            float_cache[slot].n = (unsigned char)v->n;
            memcpy(float_cache[slot].text, v->s, (size_t)v->n);
        }
        return x;
    }
    default:
        return NULL;
    }
}

/* the entry text s[0:n] onto tape t, its storage set here (tape_free frees it): DONE, UNHANDLED (not
 * one JSON value, or nested deeper than MAX_NEST) or -1 on error */
int read_entry(Tape *t, const char *s, Py_ssize_t n) {
    t->v = t->small;
    t->n = 0;
    t->cap = TAPE_SMALL;
    int rc = read_more(t, s, n);
    if (rc == -1) {
        PyErr_NoMemory();
        return -1;
    }
    return rc == -2 ? UNHANDLED : DONE;
}

int read_more(Tape *t, const char *s, Py_ssize_t n) {
    int at = t->n;
    t->p = s;
    t->end = s + n;
    int rc = read_value(t, 0);
    if (rc == -1)
        return -1;
    if (rc >= 0)
        skip_ws(t);
    if (rc >= 0 && t->p == t->end)
        return at;
    t->n = at; /* (the values read of it let go) */
    return -2;
}

int plainly_read(const Tape *t, int from) {
    for (int i = from; i < t->n; i++) {
        const Val *v = &t->v[i];
        if ((v->kind == J_STR && !v->plain) || (v->k != NULL && !v->kplain) || (v->kind == J_INT && !short_int(v)))
            return 0;
    }
    return 1;
}

void tape_free(Tape *t) {
    if (t->v != t->small)
        PyMem_RawFree(t->v);
}

/* the texts of the entry text s[0:n] of node_id (ASCII), or None */
PyObject *texts_of_entry(const char *s, Py_ssize_t n, const char *node_id, Py_ssize_t id_n) {
    if (has_text(node_id, id_n, &text_rules.parameters_grad) || classes(node_id, id_n) & (BAD | ESCAPED))
        Py_RETURN_NONE;
    Walk w;
    for (int side = 0; side < 2; side++) {
        Keys *k = &w.keys[side];
        k->at = k->small_at;
        k->len = k->small_len;
        k->n = 0;
        k->cap = 32;
    }
    buf_init(&w.in);
    buf_init(&w.out);
    buf_init(&w.name);
    PyObject *result = NULL;
    int rc = read_entry(&w.t, s, n);
    if (rc == DONE)
        rc = walk_entry(&w, node_id, id_n);
    for (int side = 0; side < 2 && rc == DONE; side++) {
        Buf *b = side ? &w.out : &w.in;
        if ((w.keys[side].n ? BUF_LIT(b, "}") : BUF_LIT(b, "{}")) < 0)
            rc = -1;
    }
    if (rc == DONE) {
        PyObject *in = buf_text(&w.in), *out = in != NULL ? buf_text(&w.out) : NULL;
        result = out != NULL ? PyTuple_Pack(2, in, out) : NULL;
        Py_XDECREF(in);
        Py_XDECREF(out);
    } else if (rc == UNHANDLED) {
        result = Py_NewRef(Py_None);
    }
    for (int side = 0; side < 2; side++) {
        if (w.keys[side].at != w.keys[side].small_at) {
            PyMem_Free(w.keys[side].at);
            PyMem_Free(w.keys[side].len);
        }
    }
    tape_free(&w.t);
    buf_free(&w.in);
    buf_free(&w.out);
    buf_free(&w.name);
    return result;
}

/* entry_texts(text, start, end, node_id) -> (input_json, output_json) of the entry text[start:end],
 * or None (see above) */
PyObject *entry_texts(PyObject *self, PyObject *args) {
    PyObject *text, *node_id;
    Py_ssize_t start, end;
    if (!PyArg_ParseTuple(args, "O!nnU", &PyBytes_Type, &text, &start, &end, &node_id) || configured() < 0)
        return NULL;
    if (start < 0 || end < start || end > PyBytes_GET_SIZE(text)) {
        PyErr_SetString(PyExc_ValueError, "entry_texts: a span outside the text");
        return NULL;
    }
    Py_ssize_t id_n;
    const char *id = ascii_data(node_id, &id_n);
    if (id == NULL)
        Py_RETURN_NONE;
    return texts_of_entry(PyBytes_AS_STRING(text) + start, end - start, id, id_n);
}
