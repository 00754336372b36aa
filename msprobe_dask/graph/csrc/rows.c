/* tb_nodes rows (rows.py: chunk_rows). The columns, their order, the names of the cells this code makes,
 * the cells of the columns it does not make, matched_distributed's text and the texts it tests node ids
 * with are rows.py's ROW_RULES, handed once by configure_rows(rules);
 * what one chunk's rows share comes as rows.py's ChunkOf, read by name. */
#include "speedups.h"

/* the cells this code makes, numbered in the order of rows.ROW_RULES.made (rows.MADE_COLUMNS, in
 * columns.VISDB_NODE_TABLE's order), which names them (tests/graph/test_native.py renames one) */
enum { C_ID, C_GRAPH_ID, C_NODE_ORDER, C_NODE_NAME, C_NODE_TYPE, C_UP_NODE, C_SUB_NODES, C_PRECISION,
       C_OVERFLOW, C_MICRO, C_LINK, C_STACK_ID, C_MERGE_INFO, C_MATCHED_DISTRIBUTED, C_MODIFIED, C_INPUT_DATA,
       C_OUTPUT_DATA, C_DATA_SOURCE, C_DUMP_DATA_DIR, C_STEP, C_RANK, C_IS_DISTRIBUTED, N_CELLS };

#define MAX_COLUMNS 64
#define MAX_ESCAPE 6 /* the longest text of an ASCII character in a JSON string (\u00XX) */

/* rows.ROW_RULES (see RowRules) */
static struct {
    PyObject *rules; /* held: holds the objects below */
    PyObject *extra[MAX_COLUMNS]; /* the Python cell function of a column this code does not make */
    int kind[MAX_COLUMNS];        /* the cell of each column (-1: extra) */
    Py_ssize_t n_columns;
    PyObject *dumps, *batch_ops, *batch_p2p, *distributed, *unlinked, *no_micro, *unmodified;
    const char *escape[128]; /* each ASCII character as dumps writes it in a string (ascii_escapes) */
    Py_ssize_t escape_n[128];
    char as_is[128]; /* whether it is written as it stands */
} RR;

static void release_rows(void) {
    Py_XDECREF(RR.rules);
    memset(&RR, 0, sizeof(RR));
}

/* rows.BATCH_P2P's text (ASCII), or NULL with an error if configure_rows() was not called */
const char *batch_p2p_text(Py_ssize_t *n) {
    const char *s = RR.rules != NULL ? ascii_data(RR.batch_p2p, n) : NULL;
    if (s == NULL)
        PyErr_SetString(PyExc_RuntimeError, "_speedups.configure_rows() was not called");
    return s;
}

/* configure_rows(rules): take rows.ROW_RULES */
PyObject *configure_rows(PyObject *self, PyObject *rules) {
    release_rows();
    PyObject *columns = PyObject_GetAttrString(rules, "columns");
    PyObject *made = columns != NULL ? PyObject_GetAttrString(rules, "made") : NULL;
    PyObject *extra = made != NULL ? PyObject_GetAttrString(rules, "extra_cells") : NULL;
    PyObject *dumps = extra != NULL ? PyObject_GetAttrString(rules, "dumps") : NULL;
    PyObject *escapes = dumps != NULL ? PyObject_GetAttrString(rules, "ascii_escapes") : NULL;
    PyObject *ops = escapes != NULL ? PyObject_GetAttrString(rules, "batch_p2p_ops") : NULL;
    PyObject *batch = ops != NULL ? PyObject_GetAttrString(rules, "batch_p2p") : NULL;
    PyObject *distributed = batch != NULL ? PyObject_GetAttrString(rules, "distributed") : NULL;
    PyObject *unlinked = distributed != NULL ? PyObject_GetAttrString(rules, "unlinked") : NULL;
    PyObject *no_micro = unlinked != NULL ? PyObject_GetAttrString(rules, "no_micro") : NULL;
    PyObject *unmodified = no_micro != NULL ? PyObject_GetAttrString(rules, "unmodified") : NULL;
    int ok = unmodified != NULL;
    if (ok && (!PyTuple_Check(columns) || PyTuple_GET_SIZE(columns) > MAX_COLUMNS || !PyTuple_Check(made) ||
               PyTuple_GET_SIZE(made) != N_CELLS || !PyDict_Check(extra) || !PyUnicode_CheckExact(batch) ||
               !PyUnicode_IS_ASCII(batch) || !PyUnicode_CheckExact(distributed) || !PyUnicode_CheckExact(unlinked) ||
               !PyTuple_Check(escapes) || PyTuple_GET_SIZE(escapes) != 128)) {
        PyErr_Format(PyExc_TypeError, "configure_rows: rules of the wrong types (made: %d names)", N_CELLS);
        ok = 0;
    }
    for (int c = 0; ok && c < 128; c++) { /* (held by the frozen rules) */
        PyObject *e = PyTuple_GET_ITEM(escapes, c);
        if (!PyUnicode_CheckExact(e) || (RR.escape[c] = ascii_data(e, &RR.escape_n[c])) == NULL ||
            RR.escape_n[c] > MAX_ESCAPE) {
            PyErr_SetString(PyExc_TypeError, "configure_rows: ascii_escapes must be 128 short ASCII texts");
            ok = 0;
        } else {
            RR.as_is[c] = RR.escape_n[c] == 1 && RR.escape[c][0] == c;
        }
    }
    for (Py_ssize_t j = 0; ok && j < PyTuple_GET_SIZE(columns); j++) {
        PyObject *name = PyTuple_GET_ITEM(columns, j);
        RR.kind[j] = -1;
        for (int c = 0; ok && c < N_CELLS; c++) {
            int same = PyObject_RichCompareBool(name, PyTuple_GET_ITEM(made, c), Py_EQ);
            if (same > 0)
                RR.kind[j] = c;
            ok = same >= 0;
        }
        if (ok && RR.kind[j] < 0 && (RR.extra[j] = PyDict_GetItemWithError(extra, name)) == NULL) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_ValueError, "configure_rows: no cell for the column %R", name);
            ok = 0;
        }
    }
    if (ok) {
        RR.n_columns = PyTuple_GET_SIZE(columns);
        RR.dumps = dumps;
        RR.batch_ops = ops;
        RR.batch_p2p = batch;
        RR.distributed = distributed;
        RR.unlinked = unlinked;
        RR.no_micro = no_micro;
        RR.unmodified = unmodified;
        RR.rules = Py_NewRef(rules); /* (the frozen rules hold what the fields point to) */
    } else
        memset(&RR, 0, sizeof(RR));
    Py_XDECREF(columns);
    Py_XDECREF(made);
    Py_XDECREF(extra);
    Py_XDECREF(dumps);
    Py_XDECREF(escapes);
    Py_XDECREF(ops);
    Py_XDECREF(batch);
    Py_XDECREF(distributed);
    Py_XDECREF(unlinked);
    Py_XDECREF(no_micro);
    Py_XDECREF(unmodified);
    if (!ok)
        return NULL;
    Py_RETURN_NONE;
}

/* ASCII text s between the quotes of a JSON string, as dumps writes it (ROW_RULES.ascii_escapes) */
static int add_ascii_string(Buf *b, const char *s, Py_ssize_t n) {
    Py_ssize_t plain = 0;
    while (plain < n && RR.as_is[(unsigned char)s[plain]])
        plain++;
    if (plain == n)
        return buf_add(b, s, n);
    if (buf_reserve(b, plain + MAX_ESCAPE * (n - plain)) < 0)
        return -1;
    char *out = b->p + b->len;
    memcpy(out, s, plain);
    out += plain;
    for (Py_ssize_t i = plain; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (RR.escape_n[c] == 1) {
            *out++ = RR.escape[c][0];
        } else {
            memcpy(out, RR.escape[c], RR.escape_n[c]);
            out += RR.escape_n[c];
        }
    }
    b->len = out - b->p;
    return 0;
}

/* dumps of a list of str, where each is ASCII; UNHANDLED else */
static int add_str_list(Buf *b, PyObject *list) {
    if (BUF_LIT(b, "[") < 0)
        return -1;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++) {
        PyObject *x = PyList_GET_ITEM(list, i);
        Py_ssize_t n;
        const char *s = PyUnicode_CheckExact(x) ? ascii_data(x, &n) : NULL;
        if (s == NULL)
            return UNHANDLED;
        if ((i > 0 && BUF_LIT(b, ", ") < 0) || BUF_LIT(b, "\"") < 0 || add_ascii_string(b, s, n) < 0 ||
            BUF_LIT(b, "\"") < 0)
            return -1;
    }
    return BUF_LIT(b, "]") < 0 ? -1 : DONE;
}

/* the JSON text of a list of str, or of anything else (dumps(list) where the fast path does not take it) */
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

/* the exported text of a cell the summary reads (item_text._FORMAT), a new reference: a str that
 * format_str leaves as it is (printable ASCII without a quote or "None", not a long decimal), or an
 * ExportedText's str; NULL without an error set for the other values (the Python path) */
static PyObject *summary_text(PyObject *v) {
    if (Py_TYPE(v) == (PyTypeObject *)exported_text_type)
        return PyUnicode_FromObject(v); /* (str.__str__: the text as a str) */
    Py_ssize_t n;
    const char *s = PyUnicode_CheckExact(v) ? ascii_data(v, &n) : NULL;
    int c = s != NULL ? classes(s, n) : 0;
    if (s == NULL || c & QUOTE || (c & NONE_START && has_text(s, n, &text_rules.none_text)) ||
        (n >= 2 + text_rules.min_decimals && s[0] >= '0' && s[0] <= '9')) /* (_fmt_text's tests) */
        return NULL;
    return Py_NewRef(v);
}

/* item_text.exported_cells(item, keys, ...) of an item holding no process group and a number or no
 * null_key (a statistic whose text is never null): a new dict, or NULL (an error set, or UNHANDLED in *rc) */
static PyObject *summary_cells(PyObject *item, PyObject *keys, Skip *skip, int *rc) {
    *rc = UNHANDLED;
    if (!PyDict_CheckExact(item))
        return NULL;
    PyObject *type = PyDict_GetItemWithError(item, str_type);
    PyObject *top = type != NULL || !PyErr_Occurred() ? PyDict_GetItemWithError(item, text_rules.null_key_text) : NULL;
    if (PyErr_Occurred())
        goto error;
    if (type != NULL) {
        Py_ssize_t n;
        const char *t = PyUnicode_CheckExact(type) ? ascii_data(type, &n) : NULL;
        if (t == NULL || text_is(t, n, &text_rules.process_group))
            return NULL;
    }
    if (top != NULL && !PyFloat_CheckExact(top) && !PyLong_CheckExact(top))
        return NULL;
    PyObject *out = PyDict_New();
    for (Py_ssize_t j = 0; out != NULL && j < PyTuple_GET_SIZE(keys); j++) {
        PyObject *key = PyTuple_GET_ITEM(keys, j);
        int left_out = PySet_Contains(skip->set, key);
        PyObject *v = left_out == 0 ? PyDict_GetItemWithError(item, key) : NULL;
        if (left_out < 0 || PyErr_Occurred()) {
            Py_CLEAR(out);
            goto error;
        }
        if (v == NULL)
            continue;
        PyObject *text = summary_text(v);
        if (text == NULL) {
            Py_CLEAR(out);
            if (PyErr_Occurred())
                goto error;
            return NULL;
        }
        int set = PyDict_SetItem(out, key, text);
        Py_DECREF(text);
        if (set < 0) {
            Py_CLEAR(out);
            goto error;
        }
    }
    if (out == NULL)
        goto error;
    *rc = DONE;
    return out;
error:
    *rc = -1;
    return NULL;
}

/* rows.summarise_rows' items_of of a node (the summary_cells of its items, inputs then outputs): a new
 * list, Py_None where this code does not take one of them, or NULL on error */
static PyObject *node_summary_cells(PyObject *node, PyObject *keys, Skip *skip) {
    PyObject *out = PyList_New(0);
    for (int k = 0; out != NULL && k < 2; k++) {
        PyObject *data = PyObject_GetAttr(node, k ? str_output_data : str_input_data);
        if (data == NULL || !PyDict_CheckExact(data)) {
            Py_CLEAR(out);
            if (data != NULL) {
                Py_DECREF(data);
                return Py_NewRef(Py_None);
            }
            return NULL;
        }
        Py_ssize_t pos = 0;
        PyObject *name, *item;
        while (PyDict_Next(data, &pos, &name, &item)) {
            int rc;
            PyObject *cells = summary_cells(item, keys, skip, &rc);
            if (cells == NULL || PyList_Append(out, cells) < 0) {
                Py_XDECREF(cells);
                Py_DECREF(data);
                Py_DECREF(out);
                return rc == UNHANDLED ? Py_NewRef(Py_None) : NULL;
            }
            Py_DECREF(cells);
        }
        Py_DECREF(data);
    }
    return out;
}

/* the attributes of a ChunkOf, read by name */
static const char *const chunk_fields[] = {"row_id",      "graph_id",   "source", "data_path",
                                           "step",        "rank",       "stack_numbers", "first_uses",
                                           "skip",        "batch_skip", "to_json", "batch_to_json",
                                           "summary_keys", "judged"};
#define N_CHUNK_FIELDS 14

/* node_rows(nodes, start, chunk, stacks, p2p, texts=None, summarised=None) -> rows.chunk_rows' rows of
 * ``nodes`` (a run of sorted_nodes() from position ``start``), in ROW_RULES.columns' order, its first
 * stack uses appended to ``stacks`` and the batch_isend_irecv ops put in ``p2p``. ``chunk``: a
 * rows.ChunkOf. ``texts``: for each node, its (input_data, output_data) texts if made already
 * (node_items.export_texts), else None. ``summarised``: a dict given, for each node i of a
 * precision in chunk.judged whose items it holds, what rows.summarise_rows reads of them (the
 * exported cells of chunk.summary_keys of each item) where this code takes them all. */
PyObject *node_rows(PyObject *self, PyObject *args) {
    PyObject *nodes, *chunk, *stacks_out, *p2p_out, *texts = Py_None, *summarised = Py_None;
    Py_ssize_t start;
    if (!PyArg_ParseTuple(args, "O!nOO!O!|OO", &PyList_Type, &nodes, &start, &chunk, &PyList_Type, &stacks_out,
                          &PyDict_Type, &p2p_out, &texts, &summarised))
        return NULL;
    if (RR.rules == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_speedups.configure_rows() was not called");
        return NULL;
    }
    PyObject *field[N_CHUNK_FIELDS] = {NULL};
    for (int f = 0; f < N_CHUNK_FIELDS; f++)
        if ((field[f] = PyObject_GetAttrString(chunk, chunk_fields[f])) == NULL) {
            for (int g = 0; g < f; g++)
                Py_DECREF(field[g]);
            return NULL;
        }
    /* (the chunk holds them while the call runs) */
    for (int f = 0; f < N_CHUNK_FIELDS; f++)
        Py_DECREF(field[f]);
    PyObject *row_id = field[0], *graph_id = field[1], *source = field[2], *data_path = field[3],
             *step = field[4], *rank = field[5], *number_of = field[6], *first = field[7], *skip_set = field[8],
             *batch_skip_set = field[9], *to_json = field[10], *batch_to_json = field[11],
             *summary_keys = field[12], *judged = field[13], *dumps = RR.dumps, *batch_ops = RR.batch_ops;
    if (!PyUnicode_Check(row_id) || !PyDict_Check(number_of) || !PyDict_Check(first) ||
        (summarised != Py_None &&
         (!PyDict_Check(summarised) || !PyTuple_Check(summary_keys) || !PyAnySet_Check(judged)))) {
        PyErr_SetString(PyExc_TypeError, "node_rows: a ChunkOf of the wrong types");
        return NULL;
    }
    Skip skip, batch_skip;
    if (configured() < 0 || skip_of(skip_set, &skip) < 0 || skip_of(batch_skip_set, &batch_skip) < 0)
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(nodes);
    if (texts != Py_None && (!PyList_CheckExact(texts) || PyList_GET_SIZE(texts) != n)) {
        PyErr_SetString(PyExc_TypeError, "texts must be None or a list with one entry per node");
        return NULL;
    }
    PyObject *rows = PyList_New(n), *sids = PyDict_New();
    if (rows == NULL || sids == NULL)
        goto fail;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *node = PyList_GET_ITEM(nodes, i);
        PyObject *cells[N_CELLS] = {NULL};
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
        cells[C_STACK_ID] = Py_NewRef(sid);
        key = PyLong_FromVoidPtr(node);
        int is_first = key != NULL ? PyDict_Contains(first, key) : -1;
        Py_XDECREF(key);
        if (is_first) { /* (first use of a stack number, or an error) */
            PyObject *text = is_first > 0 ? str_list_json(stack, dumps) : NULL;
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
        PyObject *node_id = cells[C_NODE_NAME] = PyObject_GetAttr(node, str_id);
        if (node_id == NULL)
            goto row_fail;
        if (!PyUnicode_Check(node_id)) {
            PyErr_SetString(PyExc_TypeError, "a node id is not a str");
            goto row_fail;
        }
        int batch = PyUnicode_Find(node_id, RR.batch_p2p, 0, PyUnicode_GET_LENGTH(node_id), 1) >= 0;
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
        cells[C_UP_NODE] = parent == Py_None ? Py_NewRef(str_empty) : PyObject_GetAttr(parent, str_id);
        Py_DECREF(parent);
        PyObject *children = PyObject_GetAttr(node, str_children);
        if (cells[C_UP_NODE] == NULL || children == NULL) {
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
            cells[C_SUB_NODES] = ids != NULL ? str_list_json(ids, dumps) : NULL;
            Py_XDECREF(ids);
        } else if (has_children == 0)
            cells[C_SUB_NODES] = Py_NewRef(str_empty);
        Py_DECREF(children);
        if (cells[C_SUB_NODES] == NULL)
            goto row_fail;
        PyObject *link = PyObject_GetAttr(node, str_link);
        cells[C_LINK] = link != NULL ? str_list_json(link, dumps) : NULL;
        Py_XDECREF(link);
        PyObject *merge = cells[C_LINK] != NULL ? PyObject_GetAttr(node, str_merge_info) : NULL;
        if (merge == NULL)
            goto row_fail;
        int has_merge = PyObject_IsTrue(merge);
        cells[C_MERGE_INFO] = has_merge > 0    ? PyObject_CallOneArg(dumps, merge)
                    : has_merge == 0 ? Py_NewRef(str_empty)
                                     : NULL;
        Py_DECREF(merge);
        PyObject *micro = cells[C_MERGE_INFO] != NULL ? PyObject_GetAttr(node, str_micro) : NULL;
        if (micro == NULL)
            goto row_fail;
        if (micro == Py_None)
            Py_SETREF(micro, Py_NewRef(RR.no_micro));
        cells[C_MICRO] = micro;
        if ((cells[C_NODE_TYPE] = PyObject_GetAttr(node, str_type_attr)) == NULL ||
            (cells[C_PRECISION] = PyObject_GetAttr(node, str_precision)) == NULL ||
            (cells[C_OVERFLOW] = PyObject_GetAttr(node, str_overflow)) == NULL)
            goto row_fail;
        Skip *node_skip = batch ? &batch_skip : &skip;
        PyObject *node_to_json = batch ? batch_to_json : to_json;
        PyObject *made = texts != Py_None ? PyList_GET_ITEM(texts, i) : Py_None;
        if (made != Py_None) { /* (input_data, output_data) texts made already */
            if (!PyTuple_CheckExact(made) || PyTuple_GET_SIZE(made) != 2) {
                PyErr_SetString(PyExc_TypeError, "a node's texts must be a pair");
                goto row_fail;
            }
            cells[C_INPUT_DATA] = Py_NewRef(PyTuple_GET_ITEM(made, 0));
            cells[C_OUTPUT_DATA] = Py_NewRef(PyTuple_GET_ITEM(made, 1));
        } else {
            PyObject *data = PyObject_GetAttr(node, str_input_data);
            cells[C_INPUT_DATA] = data != NULL ? items_text(data, node_skip, node_to_json) : NULL;
            Py_XDECREF(data);
            data = cells[C_INPUT_DATA] != NULL ? PyObject_GetAttr(node, str_output_data) : NULL;
            cells[C_OUTPUT_DATA] = data != NULL ? items_text(data, node_skip, node_to_json) : NULL;
            Py_XDECREF(data);
            int read = cells[C_OUTPUT_DATA] != NULL && summarised != Py_None
                           ? PySet_Contains(judged, cells[C_PRECISION])
                           : 0; /* (a node the summary reads the items of) */
            PyObject *items = read > 0 ? node_summary_cells(node, summary_keys, node_skip) : NULL;
            if (read < 0 || (read > 0 && items == NULL))
                goto row_fail;
            if (items != NULL && items != Py_None) {
                PyObject *index = PyLong_FromSsize_t(i);
                int set = index != NULL ? PyDict_SetItem(summarised, index, items) : -1;
                Py_XDECREF(index);
                if (set < 0) {
                    Py_DECREF(items);
                    goto row_fail;
                }
            }
            Py_XDECREF(items);
        }
        if (cells[C_OUTPUT_DATA] == NULL || (cells[C_ID] = PyUnicode_Concat(row_id, node_id)) == NULL ||
            (cells[C_NODE_ORDER] = PyLong_FromSsize_t(start + i)) == NULL)
            goto row_fail;
        int distributed = PyUnicode_Tailmatch(node_id, RR.distributed, 0, PY_SSIZE_T_MAX, -1);
        if (distributed < 0)
            goto row_fail;
        cells[C_GRAPH_ID] = Py_NewRef(graph_id);
        cells[C_MATCHED_DISTRIBUTED] = Py_NewRef(RR.unlinked);
        cells[C_MODIFIED] = Py_NewRef(RR.unmodified);
        cells[C_DATA_SOURCE] = Py_NewRef(source);
        cells[C_DUMP_DATA_DIR] = Py_NewRef(data_path);
        cells[C_STEP] = Py_NewRef(step);
        cells[C_RANK] = Py_NewRef(rank);
        cells[C_IS_DISTRIBUTED] = PyLong_FromLong(distributed);
        PyObject *row = cells[C_IS_DISTRIBUTED] != NULL ? PyList_New(RR.n_columns) : NULL;
        if (row == NULL)
            goto row_fail;
        for (Py_ssize_t j = 0; j < RR.n_columns; j++) {
            PyObject *cell = RR.kind[j] >= 0 ? Py_NewRef(cells[RR.kind[j]]) : PyObject_CallOneArg(RR.extra[j], node);
            if (cell == NULL) {
                Py_DECREF(row);
                goto row_fail;
            }
            PyList_SET_ITEM(row, j, cell);
        }
        for (int c = 0; c < N_CELLS; c++)
            Py_DECREF(cells[c]);
        PyList_SET_ITEM(rows, i, row);
        continue;
    row_fail:
        for (int c = 0; c < N_CELLS; c++)
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
