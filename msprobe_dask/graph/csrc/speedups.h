/* The per-node hot path of graph_visualize in C (graph/speedups.py says how it is used).
 *
 * buffer.c: the text being made; text.c: the exported items' JSON text (items.py, section 7.6 of
 * graph_visualize.md); items.c: dump entries into items (items.py); compare.c: the summary compare of
 * a node pair (compare.py); rows.c: tb_nodes rows (rows.py); parse.c: the nodes' items from
 * dump.json's entries (build.py); entry_text.c: the exported items' texts straight from an entry's
 * JSON text (build.py); tree.c: walks over a built graph (model.py, rows.py); module.c: the module,
 * its constants.
 *
 * Each function handles the common values (exact floats, ints, bools, None, lists and printable
 * ASCII strings) and answers None, or calls back into Python, for anything else: the Python path
 * stays the definition. The texts are the ones Python makes: floats by PyOS_double_to_string (as
 * float.__repr__ and format(x, ".6f") make them) or orjson where its text is repr's.
 */
#ifndef MSPROBE_DASK_SPEEDUPS_H
#define MSPROBE_DASK_SPEEDUPS_H

#define _GNU_SOURCE /* memmem */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* 1: added, 0: not a value this code handles (the caller falls back), -1: error */
#define DONE 1
#define UNHANDLED 0

/* character classes: BAD, not printable ASCII (Python's path escapes it as \uXXXX or takes other
 * rules); ESCAPED, a double quote or a backslash (escaped in JSON); QUOTE, a single quote (dropped) */
#define BAD 1
#define ESCAPED 2
#define QUOTE 4
#define CAPITAL_N 8 /* (None starts with it) */

/* the functions' signatures and behaviour: graph/speedups.py refuses a build of another version */
#define SPEEDUPS_API 9

#define N_WRITTEN 11 /* the cells a summary compare writes back into an item */

/* module.c: items.ExportedText, orjson.dumps and items._crc32 (set by configure()), 0, and interned texts */
extern PyObject *exported_text_type, *orjson_dumps, *crc32_text, *zero, *str_max, *str_type,
    *str_process_group, *str_shape, *str_class, *str_true, *str_false, *str_data_name, *str_full_op_name,
    *str_state, *str_requires_grad, *str_dtype, *str_md5, *str_value, *str_no_data_name, *str_id, *str_parent,
    *str_children, *str_stack, *str_precision, *str_overflow, *str_micro, *str_link, *str_merge_info,
    *str_input_data, *str_output_data, *str_type_attr, *str_batch_p2p, *str_distributed, *str_empty,
    *str_empty_map, *str_output_part, *str_int_type, *str_float_type, *str_no_shape, *str_class_type,
    *str_p2p_class, *str_input_part, *str_backward_part;
extern PyObject *stat_names[4], *state_names[5], *written_keys[N_WRITTEN], *rank_params[4], *shaped_kinds[4],
    *sub_keys[5], *sub_suffixes[5], *sub_states[5];

/* ------------------------------------------------------------------ buffer.c */

/* The text being made, with the floats whose texts orjson makes (see add_float) left out: their
 * objects in ``floats``, and where their texts go in ``marks``. */
typedef struct {
    char *p;
    Py_ssize_t len, cap;
    PyObject *floats;
    Py_ssize_t *marks, n_marks, cap_marks;
    char small[8192];
} Buf;

void buf_init(Buf *b);
void buf_free(Buf *b);
int buf_reserve(Buf *b, Py_ssize_t extra);
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

/* whether the short text s[0:n] holds the literal ``lit`` (memmem's setup costs more on names) */
static inline int has_part(const char *s, Py_ssize_t n, const char *part, Py_ssize_t m) {
    for (Py_ssize_t i = 0; i + m <= n; i++)
        if (s[i] == part[0] && memcmp(s + i + 1, part + 1, m - 1) == 0)
            return 1;
    return 0;
}

#define HAS_LIT(s, n, lit) has_part((s), (n), (lit), (Py_ssize_t)(sizeof(lit) - 1))

/* ------------------------------------------------------------------ text.c */

/* the keys an item leaves out (a small set, kept as their texts for a cheap test) */
typedef struct {
    PyObject *set;
    Py_ssize_t n;
    const char *text[8];
    Py_ssize_t len[8];
} Skip;

void init_char_classes(void);
int classes(const char *s, Py_ssize_t n);
const char *ascii_data(PyObject *s, Py_ssize_t *n);
int skip_of(PyObject *set, Skip *out);
PyObject *data_json(PyObject *data, Skip *skip);
int add_str_text(Buf *b, const char *s, Py_ssize_t n);
int add_float_value(Buf *b, double x);

/* ------------------------------------------------------------------ entry_text.c */

void init_entry_text(void);
PyObject *texts_of_entry(const char *s, Py_ssize_t n, const char *node_id, Py_ssize_t id_n);

/* ------------------------------------------------------------------ the module's functions */

/* 0 if configure() was called, else -1 with a RuntimeError (module.c) */
int configured(void);

PyObject *items_json(PyObject *self, PyObject *args);
PyObject *node_rows(PyObject *self, PyObject *args);
PyObject *stat_diffs(PyObject *self, PyObject *args);
PyObject *parse_items(PyObject *self, PyObject *args);
PyObject *summary_pair(PyObject *self, PyObject *args);
PyObject *leaf(PyObject *self, PyObject *args);
PyObject *entry_items(PyObject *self, PyObject *args);
PyObject *entry_texts(PyObject *self, PyObject *args);
PyObject *tree_post_order(PyObject *self, PyObject *args);
PyObject *number_stacks(PyObject *self, PyObject *args);
PyObject *propagate_micro(PyObject *self, PyObject *args);
PyObject *attach_all(PyObject *self, PyObject *args);
PyObject *node_texts(PyObject *self, PyObject *args);

#endif
