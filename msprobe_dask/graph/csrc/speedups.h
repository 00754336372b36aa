/* The per-node hot path of graph_visualize in C (graph/speedups.py says how it is used; the README's
 * "C kernels" section what each buys).
 *
 * buffer.c: the text being made; text.c: the exported items' JSON text (item_text.py, section 7.6 of
 * graph_visualize.md); compare.c: the summary compare of a node pair (cells.py, checks.py,
 * compare.py), with row_exceeds.c: whether a compared pair's row has an error over rtol (divergence_rows.py);
 * rows.c: tb_nodes rows (rows.py); entry_text.c and parse.c: the exported items' texts
 * straight from an entry's JSON text (node_items.py: export_texts); leaf_rows.c: a statistics
 * compare's rows straight from an entry's JSON text (dump/rows.py; pipeline/sides.py: rows_of_text),
 * on entry_text.c's tape; entry_items.c: the items of a graph's nodes straight from their entries'
 * texts (node_items.py: parse_items); entry_scan.c: the entries of dump.json's data found in its text
 * (dump/entries_scan.py: entry_lines), and which tokens it holds (DumpEntries.mentions); module.c: the
 * module, its texts.
 *
 * The rules, numbers and column lists are the Python modules' own, handed once at their import:
 * configure_text (item_text.TEXT_RULES), configure_summary (cells.SUMMARY_RULES), configure_rows
 * (rows.ROW_RULES), configure_leaf_rows (dump/rows.LEAF_RULES), each read by field name.
 *
 * Each function handles the common values (exact floats, ints, bools, None, lists and printable
 * ASCII strings) and answers None, or calls back into Python, for anything else: the Python path
 * stays the definition. The texts are the ones Python makes: floats by PyOS_double_to_string (as
 * float.__repr__ and format(x, ".6f") make them) or, for repr, orjson's shortest digits written in
 * repr's notation (msprobe_dask/csrc/deferred_floats.h: repr_text).
 */
#ifndef MSPROBE_DASK_SPEEDUPS_H
#define MSPROBE_DASK_SPEEDUPS_H

#define _GNU_SOURCE /* memmem */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "../../csrc/deferred_floats.h"

/* 1: added, 0: not a value this code handles (the caller falls back), -1: error */
#define DONE 1
#define UNHANDLED 0

/* character classes: BAD, not printable ASCII (Python's path escapes it as \uXXXX or takes other
 * rules); ESCAPED, a double quote or a backslash (escaped in JSON); QUOTE, a single quote (dropped) */
#define BAD 1
#define ESCAPED 2
#define QUOTE 4
#define NONE_START 8 /* the first character of text_rules.none_text (set by configure_text) */

/* the functions' signatures and behaviour: graph/speedups.py refuses a build of another version */
#define SPEEDUPS_API 31

/* an ASCII text of the rules (held by them) */
typedef struct {
    const char *s;
    Py_ssize_t n;
} Text;
#define MAX_TEXTS 8

/* item_text.TEXT_RULES (module.c: configure_text) */
typedef struct {
    int int_digits, min_decimals, max_decimals, decimals; /* a long decimal, and the decimals it keeps */
    Text percent; /* metrics.stats.PERCENT: what follows a relative error's number (1 to MAX_PERCENT chars) */
    Text left_out[MAX_TEXTS], shaped_kinds[MAX_TEXTS], peer_arguments[MAX_TEXTS];
    int n_left_out, n_shaped_kinds, n_peer_arguments;
    Text no_data_name, process_group, p2p_class;
    Text scalar_shape; /* markers.SCALAR_SHAPE: the shape of an argument that is not a tensor */
    Text group_ranks; /* markers.GROUP_RANKS: a process group's member whose str is its statistics and md5 */
    Text process_group_kept[MAX_TEXTS]; /* the keys an exported process group keeps, in its item's order */
    int n_process_group_kept;
    Text parameters_grad; /* markers.PARAMETERS_GRAD (not empty) */
    Text output_part, input_part; /* items.OUTPUT_PART, INPUT_PART (not empty): items.split_items' rule */
    Text sub_key[MAX_TEXTS], sub_suffix[MAX_TEXTS]; /* items.SUB_KEYS: an entry's parts, in order */
    int n_sub_keys;
    int item_keys[MAX_TEXTS], n_item_keys; /* items.ITEM_KEYS, as leaf_key_role()s */
    PyObject *process_group_text; /* the str of process_group */
    /* format_item's rule: an item whose null_key's text is null_text is null_item alone (null_key: a
     * statistic, whose role is null_role) */
    Text null_key, null_item;
    int null_role;
    PyObject *null_key_text; /* the str of null_key */
    Text bool_text[2]; /* items.BOOL_TEXT of False and True */
    /* None's exported text (item_text.NULL_TEXT), which also stands for none_text (NONE_TEXT, not empty)
     * within a string (format_str); printable ASCII without quotes or escapes, any lengths */
    Text null_text, none_text;
} TextRules;
extern TextRules text_rules;
extern unsigned text_rules_version; /* how many times configure_text took rules */
#define MAX_PERCENT 8

static inline int text_is(const char *s, Py_ssize_t n, const Text *t) {
    return n == t->n && memcmp(s, t->s, (size_t)n) == 0;
}

static inline int text_in(const char *s, Py_ssize_t n, const Text *ts, int count) {
    for (int i = 0; i < count; i++)
        if (text_is(s, n, &ts[i]))
            return 1;
    return 0;
}

#define N_WRITTEN 11 /* the cells a summary compare writes back into an item (cells.WRITE_BACK) */

/* module.c: item_text.ExportedText and orjson.dumps (set by configure_text()), 0, and interned texts: the
 * Node attributes and texts of rows, and a leaf's keys markers.LEAF_KEYS names (set by configure_keys(),
 * called as graph/speedups.py loads this module, before any rules) */
extern PyObject *exported_text_type, *orjson_dumps, *str_id, *str_parent, *str_children, *str_stack,
    *str_precision, *str_overflow, *str_micro, *str_link, *str_merge_info, *str_input_data, *str_output_data,
    *str_type_attr, *str_empty;
extern PyObject *str_type, *str_data_name, *str_dtype, *str_value, *str_requires_grad, *str_shape, *str_md5,
    *str_full_op_name, *str_state;

/* ------------------------------------------------------------------ buffer.c */

/* The text being made, with the floats whose texts orjson's digits make (see add_float) left out
 * (../../csrc/deferred_floats.h). */
typedef struct {
    char *p;
    Py_ssize_t len, cap;
    Deferred deferred;
    char small[8192];
} Buf;

void buf_init(Buf *b);
void buf_free(Buf *b);
int buf_grow(Buf *b, Py_ssize_t extra);
/* room for ``extra`` more bytes: 0, or -1 with an error (inline: every write asks) */
static inline int buf_reserve(Buf *b, Py_ssize_t extra) {
    return b->len + extra <= b->cap ? 0 : buf_grow(b, extra);
}
int buf_defer(Buf *b, PyObject *x);
int buf_truncate(Buf *b, Py_ssize_t len);
PyObject *buf_text(Buf *b);

static inline int buf_add(Buf *b, const char *s, Py_ssize_t n) {
    if (buf_reserve(b, n) < 0)
        return -1;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    return 0;
}

#define BUF_LIT(b, lit) buf_add((b), (lit), (Py_ssize_t)(sizeof(lit) - 1))

/* the separator ``sep`` and the decimal digits of k appended: the name of a list's k-th element (items._parse,
 * rows._walk) */
static inline int buf_add_index(Buf *b, char sep, unsigned k) {
    char digits[16], *end = digits + sizeof(digits), *p = end;
    do {
        *--p = (char)('0' + k % 10);
        k /= 10;
    } while (k);
    *--p = sep;
    return buf_add(b, p, end - p);
}

/* a hash of the short text s[0:n], eight bytes at a time: the slot of a text in the caches of texts met
 * before (entry_items.c's strings, entry_text.c's floats) */
static inline uint32_t text_hash(const char *s, Py_ssize_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (uint64_t)n, w;
    for (; n >= 8; s += 8, n -= 8) {
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xFF51AFD7ED558CCDull;
        h ^= h >> 32;
    }
    for (w = 0; n > 0; n--)
        w = w << 8 | (unsigned char)s[n - 1];
    h = (h ^ w) * 0xFF51AFD7ED558CCDull;
    return (uint32_t)(h ^ h >> 32);
}

/* whether the short text s[0:n] holds the literal ``lit`` (memmem's setup costs more on names) */
static inline int has_part(const char *s, Py_ssize_t n, const char *part, Py_ssize_t m) {
    for (Py_ssize_t i = 0; i + m <= n; i++)
        if (s[i] == part[0] && memcmp(s + i + 1, part + 1, m - 1) == 0)
            return 1;
    return 0;
}

/* whether the short text s[0:n] holds the rules' text t */
static inline int has_text(const char *s, Py_ssize_t n, const Text *t) {
    return has_part(s, n, t->s, t->n);
}

/* ------------------------------------------------------------------ text.c */

/* the keys an item leaves out (a small set, kept as their texts for a cheap test) */
typedef struct {
    PyObject *set;
    Py_ssize_t n;
    const char *text[8];
    Py_ssize_t len[8];
} Skip;

void init_char_classes(void);
/* the characters' classes under text_rules (NONE_START: its none_text's first character), and nothing
 * remembered under other rules; called when configure_text takes rules */
void text_rules_taken(void);
int classes(const char *s, Py_ssize_t n);
/* the ASCII data of a str, else NULL (inline: asked of every key and text written) */
static inline const char *ascii_data(PyObject *s, Py_ssize_t *n) {
    if (!PyUnicode_IS_ASCII(s))
        return NULL;
    *n = PyUnicode_GET_LENGTH(s);
    return (const char *)PyUnicode_1BYTE_DATA(s);
}
int skip_of(PyObject *set, Skip *out);
PyObject *data_json(PyObject *data, Skip *skip);
int add_str_text(Buf *b, const char *s, Py_ssize_t n);
int add_float_value(Buf *b, double x);

/* ------------------------------------------------------------------ entry_text.c */

/* An entry's JSON text read once into a tape of values, its containers' members linked in order
 * (read_value; used by entry_text.c's item texts and leaf_rows.c's compare rows). */

#define MAX_NEST 64 /* deeper values: the Python path (json_limits.MAX_DEPTH is 400) */

enum { J_STR, J_INT, J_FLOAT, J_TRUE, J_FALSE, J_NULL, J_NAN, J_INF, J_NINF, J_LIST, J_OBJ };

/* the keys of a leaf that items._leaf reads or sets (K_MAX + i: stat_keys[i]); K_LEFT_OUT: the keys the
 * export leaves out (text_rules.left_out: state, full_op_name, md5) */
enum { K_OTHER, K_TYPE, K_CLASS_TYPE, K_DATA_NAME, K_DTYPE, K_VALUE, K_REQUIRES_GRAD, K_SHAPE, K_LEFT_OUT,
       K_MAX, K_MIN, K_MEAN, K_NORM };
#define N_STATS (K_NORM - K_MAX + 1)
/* markers.STATS, a leaf's statistics in their order (module.c: configure_stats, called as graph/speedups.py
 * loads this module, before any rules): the keys of roles K_MAX + i, those entry_text.c adds to a leaf */
extern Text stat_keys[N_STATS];
extern PyObject *stat_keys_held; /* markers.STATS itself, the tuple whose texts stat_keys points into */
/* markers.LEAF_KEYS' first N_LEAF_ROLES, the keys of roles K_TYPE ... K_SHAPE (module.c: configure_keys) */
#define N_LEAF_ROLES (K_SHAPE - K_TYPE + 1)
extern Text leaf_keys[K_SHAPE + 1];
extern Text md5_key; /* markers.LEAF_KEYS.md5 (module.c: configure_keys) */

/* one value of the entry: a string's characters (between the quotes) or a number's text in s/n; a
 * container's members from ``first`` along ``next``; a member of an object has its key in k/kn */
typedef struct {
    int kind, plain, kplain; /* plain: printable ASCII without a backslash (string, key) */
    int role;                /* a member's key, if one items.py reads (K_...) */
    const char *s, *k;
    Py_ssize_t n, kn;
    int first, next, count;
} Val;

#define TAPE_SMALL 256 /* values held on the stack (an entry of a dozen tensors holds about 150) */

typedef struct {
    Val *v;
    int n, cap;
    const char *p, *end;
    Val small[TAPE_SMALL];
} Tape;

/* the members of a list or an object on tape t, each walked by walk(walker, member, depth + 1) with
 * ``name`` (the walked path, restored after each) extended by the separator ``sep`` and the key for an
 * object's member and by ``sep`` and i for a list's where number_lists (else left as it is); an object
 * member whose key holds ``refused`` (if not NULL) hands the value back (UNHANDLED). DONE, UNHANDLED or
 * -1 (error), as walk returns. */
static inline int walk_members_of(void *walker, const Tape *t, Buf *name, char sep, const Val *v, int depth,
                                  int number_lists, const Text *refused,
                                  int (*walk)(void *walker, const Val *member, int depth)) {
    Py_ssize_t len = name->len;
    int k = 0;
    for (int i = v->first; i >= 0; i = t->v[i].next, k++) {
        const Val *m = &t->v[i];
        int rc = DONE;
        if (v->kind == J_OBJ) {
            if (refused && has_text(m->k, m->kn, refused))
                return UNHANDLED;
            rc = buf_add(name, &sep, 1) < 0 || buf_add(name, m->k, m->kn) < 0 ? -1 : DONE;
        } else if (number_lists) {
            rc = buf_add_index(name, sep, (unsigned)k) < 0 ? -1 : DONE;
        }
        if (rc == DONE)
            rc = walk(walker, m, depth + 1);
        name->len = len;
        if (rc <= 0)
            return rc;
    }
    return DONE;
}

/* whether the name s[0:n] has a part (between separators ``sep``) that is exactly the rules' text t
 * (items._parse_list: a list under such a name keeps its elements unnumbered) */
static inline int has_dot_part(const char *s, Py_ssize_t n, char sep, const Text *t) {
    for (Py_ssize_t i = 0; i + t->n <= n; i++)
        if ((i == 0 || s[i - 1] == sep) && memcmp(s + i, t->s, t->n) == 0 && (i + t->n == n || s[i + t->n] == sep))
            return 1;
    return 0;
}

/* whether the last or the last but one part (between separators ``sep``) of the name s[0:n] is the text t
 * (items.parse_entry: an entry so named is a parameters_grad one) */
static inline int last_parts_hold(const char *s, Py_ssize_t n, char sep, const Text *t) {
    Py_ssize_t end = n;
    for (int part = 0; part < 2 && end >= 0; part++) {
        Py_ssize_t start = end;
        while (start > 0 && s[start - 1] != sep)
            start--;
        if (text_is(s + start, end - start, t))
            return 1;
        end = start - 1;
    }
    return 0;
}

/* the member keyed "type" of an object value v on tape t (NULL: none) in *kind: DONE, or UNHANDLED for an
 * object the walks hand back to the Python path (a key not plain or given twice, a P2P op) */
static inline int object_kind(const Tape *t, const Val *v, const Val **kind) {
    *kind = NULL;
    for (int i = v->first; i >= 0; i = t->v[i].next) {
        const Val *m = &t->v[i];
        if (!m->kplain)
            return UNHANDLED;
        for (int j = v->first; j != i; j = t->v[j].next) /* a key given twice */
            if (t->v[j].kn == m->kn && t->v[j].k[0] == m->k[0] && memcmp(t->v[j].k, m->k, m->kn) == 0)
                return UNHANDLED;
        if (m->role == K_CLASS_TYPE && m->kind == J_STR && (!m->plain || text_is(m->s, m->n, &text_rules.p2p_class)))
            return UNHANDLED; /* a P2P op */
        if (m->role == K_TYPE)
            *kind = m;
    }
    return DONE;
}

/* items._parse of one value v on tape t, for a walker: a null by null(walker), a leaf (an object whose
 * "type" is a string) by leaf(walker, v), a list's or another object's members by members(walker, v,
 * depth); a bare scalar makes nothing. DONE, UNHANDLED (deeper than MAX_NEST, see object_kind) or -1. */
static inline int walk_value_of(void *walker, const Tape *t, const Val *v, int depth, int (*null)(void *walker),
                                int (*leaf)(void *walker, const Val *v),
                                int (*members)(void *walker, const Val *v, int depth)) {
    if (depth > MAX_NEST)
        return UNHANDLED;
    if (v->kind == J_NULL)
        return null(walker);
    if (v->kind == J_LIST)
        return members(walker, v, depth);
    if (v->kind != J_OBJ)
        return DONE;
    const Val *kind;
    if (object_kind(t, v, &kind) == UNHANDLED)
        return UNHANDLED;
    if (kind != NULL && kind->kind == J_STR)
        return leaf(walker, v);
    return members(walker, v, depth);
}

/* the member of the entry object on tape t keyed key[0:kn] in *part (NULL: none): DONE, or UNHANDLED
 * where the Python path decides (a key not plain: it may read as this one; the key given twice) */
static inline int entry_part(const Tape *t, const Val *entry, const char *key, Py_ssize_t kn, const Val **part) {
    *part = NULL;
    for (int i = entry->first; i >= 0; i = t->v[i].next) {
        const Val *m = &t->v[i];
        if (!m->kplain)
            return UNHANDLED;
        if (m->kn == kn && memcmp(m->k, key, kn) == 0) {
            if (*part != NULL)
                return UNHANDLED;
            *part = m;
        }
    }
    return DONE;
}

/* the value at t->p onto the tape: its index, -2 if the text is not JSON (or nests deeper than
 * MAX_NEST), -1 without memory (no error set: it runs without the GIL too) */
int read_value(Tape *t, int depth);
void skip_ws(Tape *t);
/* a whole entry's text s[0:n] onto tape t, its storage set (tape_free frees it): DONE, UNHANDLED (not one
 * JSON value, or nested deeper than MAX_NEST) or -1 on error */
int read_entry(Tape *t, const char *s, Py_ssize_t n);
/* the entry text s[0:n] added to tape t after the values it holds (without the GIL, which it does not
 * need): the index of its value, -2 for a text read_entry finds UNHANDLED (nothing added), or -1
 * without memory (no error set) */
int read_more(Tape *t, const char *s, Py_ssize_t n);
/* whether the values t->v[from:] (an entry read_more read) are read as json.loads reads them, without
 * a doubt: no string or key with an escape or outside printable ASCII, no integer of 19 digits or more
 * (a text the reader takes is JSON, as json.loads takes it, but for these: the UTF-8 of the strings,
 * json's bound on an integer's digits) */
int plainly_read(const Tape *t, int from);
void tape_free(Tape *t);
/* float() of a JSON number's text s[0:n] where integer arithmetic computes it exactly: 1, else 0 */
int fast_double(const char *s, Py_ssize_t n, double *x);

/* str(type(value)) for the value json gives (absent: None), asked of Python once a type; NULL with an error */
const char *type_text(const Val *v);
/* float(text) of a finite JSON number (J_INT or J_FLOAT) in *x: DONE, or UNHANDLED for one out of range */
int json_double(const Val *v, double *x);
/* a JSON number's value as json.loads reads it, or NULL without an error where this code does not take it */
PyObject *number_of(const Val *v);
PyObject *texts_of_entry(const char *s, Py_ssize_t n, const char *node_id, Py_ssize_t id_n);

/* ------------------------------------------------------------------ the module's functions */

/* 0 if configure_text() was called, else -1 with a RuntimeError (module.c) */
int configured(void);

PyObject *items_json(PyObject *self, PyObject *args);
PyObject *node_rows(PyObject *self, PyObject *args);
PyObject *stat_diffs(PyObject *self, PyObject *args);
PyObject *summary_pair(PyObject *self, PyObject *args);
/* row_exceeds.c: divergence_rows.node_exceeds of a summary-compared pair (summary_pair asks it) */
enum { ROWS_WITHIN, ROWS_EXCEED, ROWS_ASK_PYTHON };
int rows_exceed(PyObject *npu_in, PyObject *npu_out, PyObject *bench_in, PyObject *bench_out, double atol,
                double rtol);
PyObject *configure_errors(PyObject *self, PyObject *args); /* row_exceeds.c: row_errors' rule */
PyObject *configure_summary(PyObject *self, PyObject *rules);
PyObject *configure_rows(PyObject *self, PyObject *rules);
const char *batch_p2p_text(Py_ssize_t *n); /* rows.c */
PyObject *entry_texts(PyObject *self, PyObject *args);
int leaf_key_role(const char *k, Py_ssize_t n, const TextRules *r);
/* the role (K_TYPE ... K_NORM) of a key whose text is one items.py reads by name, else K_OTHER (a key of
 * text_rules.left_out has K_LEFT_OUT on the tape instead) */
int named_role(const char *k, Py_ssize_t n);
/* stat_keys = keys (N_STATS, held by the caller): 0, or -1 for an empty key, one of another role, or one
 * twice */
int take_stat_keys(const Text *keys);
/* leaf_keys[K_TYPE ...] = keys (N_LEAF_ROLES, held by the caller): 0, or -1 as take_stat_keys */
int take_leaf_keys(const Text *keys);
PyObject *node_texts(PyObject *self, PyObject *args);
PyObject *configure_leaf_rows(PyObject *self, PyObject *rules);
PyObject *leaf_rows(PyObject *self, PyObject *args);
PyObject *configure_items(PyObject *self, PyObject *rules); /* entry_items.c */
PyObject *node_items(PyObject *self, PyObject *args);
PyObject *entries_to_parse(PyObject *self, PyObject *args);
PyObject *entry_lines(PyObject *self, PyObject *args); /* entry_scan.c */
PyObject *entry_spans(PyObject *self, PyObject *args); /* entry_scan.c */
PyObject *mentions(PyObject *self, PyObject *args);    /* entry_scan.c */

#endif
