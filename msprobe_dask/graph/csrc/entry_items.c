/* A dump entry's items made straight from its JSON text, read into a tape (entry_text.c), without
 * json.loads and the Python walk: node_items(nodes, spans, small, text) gives each node
 *
 *     items.entry_items(node.id, json.loads(text[start:end]))
 *
 * or None where this code does not take the entry: it takes what entry_text.c takes (tensors, plain
 * scalar arguments, process groups, nulls and their lists and dicts, printable ASCII strings without
 * escapes), and
 * hands the rest back to the Python path, which makes the items and their errors. The rules, texts
 * and callables are items.ITEM_RULES (configure_items) and item_text.TEXT_RULES: none is written here. */
#include "speedups.h"

#define MAX_SUB_KEYS 8
#define MAX_ITEM_KEYS 16

/* items.ITEM_RULES (see ItemRules) */
static struct {
    PyObject *rules; /* held: holds the objects below */
    PyObject *item_keys, *no_data_name, *bool_text[2], *default_item, *crc32_text, *crc32_empty;
    PyObject *stats[N_STATS], *scalar_shape;
    const char *output_part, *input_part;
    Py_ssize_t output_n, input_n;
    const char *sub_key[MAX_SUB_KEYS], *suffix[MAX_SUB_KEYS];
    Py_ssize_t sub_key_n[MAX_SUB_KEYS], suffix_n[MAX_SUB_KEYS];
    PyObject *sub_state[MAX_SUB_KEYS];
    PyObject *grad_state; /* the state of a parameters_grad entry's items */
    int n_sub;
    /* the key objects of the roles items.py reads by name (borrowed: interned, or held by the rules): a
     * leaf's items keyed by them rather than by new texts, so that later lookups by the rules' keys
     * find the very object; NULL for a role without one */
    PyObject *role_key[K_NORM + 1];
    int item_key_role[MAX_ITEM_KEYS]; /* the named role of each of item_keys (K_OTHER: none) */
} I;

/* I.role_key[role] = key for a key whose text has a named role (named_role) */
static void note_role_key(PyObject *key) {
    Py_ssize_t n;
    const char *s = ascii_data(key, &n);
    int role = s != NULL ? named_role(s, n) : K_OTHER;
    if (role != K_OTHER)
        I.role_key[role] = key;
}

static int ascii_rule(PyObject *v, const char **s, Py_ssize_t *n) {
    *s = PyUnicode_CheckExact(v) ? ascii_data(v, n) : NULL;
    return *s != NULL ? 0 : -1;
}

/* The rules' crc32_text of the scalar values met before, by the value object's address (both held, so
 * that an address is not reused while here): a dump's scalar arguments are a few objects (small ints,
 * True, the cached short strings and floats) met many times (T: 6,472 values, 15 M instructions of
 * calls into Python). */
#define CRC_TEXTS 256
static struct {
    PyObject *value, *text;
} crc_texts[CRC_TEXTS];

static void crc_texts_clear(void) {
    for (int i = 0; i < CRC_TEXTS; i++) {
        Py_CLEAR(crc_texts[i].value);
        Py_CLEAR(crc_texts[i].text);
    }
}

/* I.crc32_text(value), a new reference (NULL on error) */
static PyObject *crc32_text_of(PyObject *value) {
    PyTypeObject *t = Py_TYPE(value);
    int immutable = t == &PyLong_Type || t == &PyFloat_Type || t == &PyUnicode_Type || t == &PyBool_Type ||
                    value == Py_None;
    int at = (int)(((uintptr_t)value >> 4) % CRC_TEXTS);
    if (immutable && crc_texts[at].value == value)
        return Py_NewRef(crc_texts[at].text);
    PyObject *text = PyObject_CallOneArg(I.crc32_text, value);
    if (text != NULL && immutable) {
        Py_XSETREF(crc_texts[at].value, Py_NewRef(value));
        Py_XSETREF(crc_texts[at].text, Py_NewRef(text));
    }
    return text;
}

/* configure_items(rules): take items.ITEM_RULES */
PyObject *configure_items(PyObject *self, PyObject *rules) {
    PyObject *sub = NULL, *bools = NULL, *stats = NULL, *out = NULL, *in = NULL;
    crc_texts_clear(); /* (made by the rules' crc32_text) */
    Py_CLEAR(I.rules);
    memset(&I, 0, sizeof(I));
    int ok = (sub = PyObject_GetAttrString(rules, "sub_keys")) != NULL &&
             (bools = PyObject_GetAttrString(rules, "bool_text")) != NULL &&
             (stats = PyObject_GetAttrString(rules, "stats")) != NULL &&
             (out = PyObject_GetAttrString(rules, "output_part")) != NULL &&
             (in = PyObject_GetAttrString(rules, "input_part")) != NULL &&
             (I.item_keys = PyObject_GetAttrString(rules, "item_keys")) != NULL &&
             (I.no_data_name = PyObject_GetAttrString(rules, "no_data_name")) != NULL &&
             (I.default_item = PyObject_GetAttrString(rules, "default_item")) != NULL &&
             (I.crc32_text = PyObject_GetAttrString(rules, "crc32_text")) != NULL &&
             (I.crc32_empty = PyObject_GetAttrString(rules, "crc32_empty")) != NULL &&
             (I.scalar_shape = PyObject_GetAttrString(rules, "scalar_shape")) != NULL &&
             (I.grad_state = PyObject_GetAttrString(rules, "grad_state")) != NULL;
    /* (the objects stay alive: fields of the frozen rules, held below) */
    Py_XDECREF(I.item_keys);
    Py_XDECREF(I.no_data_name);
    Py_XDECREF(I.default_item);
    Py_XDECREF(I.crc32_text);
    Py_XDECREF(I.crc32_empty);
    Py_XDECREF(I.scalar_shape);
    Py_XDECREF(I.grad_state);
    ok = ok && PyUnicode_CheckExact(I.grad_state) && PyTuple_Check(I.item_keys) && PyUnicode_CheckExact(I.no_data_name) && PyCallable_Check(I.default_item) &&
         PyCallable_Check(I.crc32_text) && PyUnicode_CheckExact(I.crc32_empty) &&
         PyUnicode_CheckExact(I.scalar_shape) && PyTuple_Check(bools) && PyTuple_GET_SIZE(bools) == 2 &&
         PyTuple_Check(stats) && PyTuple_GET_SIZE(stats) == N_STATS && PyTuple_Check(sub) &&
         PyTuple_GET_SIZE(sub) <= MAX_SUB_KEYS && ascii_rule(out, &I.output_part, &I.output_n) == 0 &&
         ascii_rule(in, &I.input_part, &I.input_n) == 0 && I.output_n > 0 && I.input_n > 0;
    for (int i = 0; ok && i < 2; i++)
        ok = PyUnicode_CheckExact(I.bool_text[i] = PyTuple_GET_ITEM(bools, i));
    for (int i = 0; ok && i < N_STATS; i++) { /* (the tape's statistics: configure_stats') */
        Py_ssize_t n;
        const char *s = PyUnicode_CheckExact(I.stats[i] = PyTuple_GET_ITEM(stats, i)) ? ascii_data(I.stats[i], &n) : NULL;
        ok = s != NULL && named_role(s, n) == K_MAX + i;
    }
    for (Py_ssize_t i = 0; ok && i < PyTuple_GET_SIZE(sub); i++) {
        PyObject *k = PyTuple_GET_ITEM(sub, i);
        ok = PyTuple_Check(k) && PyTuple_GET_SIZE(k) == 3 &&
             ascii_rule(PyTuple_GET_ITEM(k, 0), &I.sub_key[i], &I.sub_key_n[i]) == 0 &&
             ascii_rule(PyTuple_GET_ITEM(k, 1), &I.suffix[i], &I.suffix_n[i]) == 0 &&
             PyUnicode_CheckExact(I.sub_state[i] = PyTuple_GET_ITEM(k, 2));
        I.n_sub = (int)i + 1;
    }
    ok = ok && str_type != NULL && PyTuple_GET_SIZE(I.item_keys) <= MAX_ITEM_KEYS; /* (configure_keys') */
    for (Py_ssize_t j = 0; ok && j < PyTuple_GET_SIZE(I.item_keys); j++) {
        PyObject *k = PyTuple_GET_ITEM(I.item_keys, j);
        Py_ssize_t n;
        const char *s = PyUnicode_CheckExact(k) ? ascii_data(k, &n) : NULL;
        ok = s != NULL;
        I.item_key_role[j] = ok ? named_role(s, n) : K_OTHER;
        if (ok)
            note_role_key(k);
    }
    PyObject *named[] = {str_type, str_value, str_data_name, str_dtype, str_shape};
    for (size_t i = 0; ok && i < sizeof(named) / sizeof(named[0]); i++)
        note_role_key(named[i]);
    for (int i = 0; ok && i < N_STATS; i++)
        note_role_key(I.stats[i]);
    Py_XDECREF(sub);
    Py_XDECREF(bools);
    Py_XDECREF(stats);
    Py_XDECREF(out);
    Py_XDECREF(in);
    if (!ok) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "configure_items: rules of the wrong types");
        memset(&I, 0, sizeof(I));
        return NULL;
    }
    I.rules = Py_NewRef(rules);
    Py_RETURN_NONE;
}

#define STR_CACHE 1024 /* short strings made before (keys, dtypes ...), by a hash of their text */
#define STR_CACHED 32  /* the longest cached */
static PyObject *str_cache[STR_CACHE];

/* the str of an ASCII text (a new reference): a short one made once, as json's decoders do */
static PyObject *ascii_str(const char *s, Py_ssize_t n) {
    if (n > STR_CACHED)
        return PyUnicode_FromStringAndSize(s, n);
    PyObject **slot = &str_cache[text_hash(s, n) & (STR_CACHE - 1)], *c = *slot;
    if (c != NULL && PyUnicode_GET_LENGTH(c) == n && memcmp(PyUnicode_DATA(c), s, (size_t)n) == 0)
        return Py_NewRef(c);
    PyObject *x = PyUnicode_FromStringAndSize(s, n);
    if (x != NULL)
        Py_XSETREF(*slot, Py_NewRef(x));
    return x;
}

/* the Python value json.loads gives for a tape value (a new reference), or NULL: with an error set,
 * or without one for a value this code does not take (a string with escapes or not ASCII, a number
 * out of range) */
static PyObject *value_of(const Tape *t, const Val *v) {
    switch (v->kind) {
    case J_STR:
        return v->plain ? ascii_str(v->s, v->n) : NULL;
    case J_TRUE:
        return Py_NewRef(Py_True);
    case J_FALSE:
        return Py_NewRef(Py_False);
    case J_NULL:
        return Py_NewRef(Py_None);
    case J_LIST: {
        PyObject *list = PyList_New(v->count);
        int k = 0;
        for (int i = v->first; list != NULL && i >= 0; i = t->v[i].next, k++) {
            PyObject *x = value_of(t, &t->v[i]);
            if (x == NULL)
                Py_CLEAR(list);
            else
                PyList_SET_ITEM(list, k, x);
        }
        return list;
    }
    case J_OBJ: { /* the last value of a key given twice, in its first place (as json) */
        PyObject *dict = PyDict_New();
        for (int i = v->first; dict != NULL && i >= 0; i = t->v[i].next) {
            const Val *m = &t->v[i];
            PyObject *k = m->kplain ? ascii_str(m->k, m->kn) : NULL;
            PyObject *x = k != NULL ? value_of(t, m) : NULL;
            if (x == NULL || PyDict_SetItem(dict, k, x) < 0)
                Py_CLEAR(dict);
            Py_XDECREF(k);
            Py_XDECREF(x);
        }
        return dict;
    }
    default: /* a number */
        return number_of(v);
    }
}

typedef struct {
    Tape t;
    Buf name;           /* the name of the value being walked */
    PyObject *state;    /* of the part being walked (borrowed) */
    PyObject *in, *out; /* input_data and output_data */
} Walk;

/* whether an item of full_op_name s[0:n] goes into output_data (items.split_items) */
static int is_output(const char *s, Py_ssize_t n) {
    return has_part(s, n, I.output_part, I.output_n) && !has_part(s, n, I.input_part, I.input_n);
}

/* the item into input_data or output_data (items.split_items): 1, or -1 */
static int place(Walk *w, PyObject *item) {
    PyObject *full = PyDict_GetItemWithError(item, str_full_op_name);
    Py_ssize_t n;
    const char *s = full != NULL && PyUnicode_CheckExact(full) ? ascii_data(full, &n) : NULL;
    if (s == NULL)
        return PyErr_Occurred() ? -1 : UNHANDLED;
    if (is_output(s, n))
        return PyDict_SetItem(w->out, full, item) < 0 ? -1 : DONE;
    PyObject *dn = PyDict_GetItemWithError(item, str_data_name);
    if (dn == NULL || !PyUnicode_CheckExact(dn))
        return PyErr_Occurred() ? -1 : UNHANDLED;
    int none = PyUnicode_Compare(dn, I.no_data_name);
    if (none == -1 && PyErr_Occurred())
        return -1;
    if (none == 0)
        return PyDict_SetItem(w->in, full, item) < 0 ? -1 : DONE;
    Py_ssize_t dot = PyUnicode_FindChar(dn, '.', 0, PyUnicode_GET_LENGTH(dn), -1);
    PyObject *key = dot >= 0 ? PyUnicode_Substring(dn, 0, dot) : Py_NewRef(dn);
    int rc = key == NULL || PyDict_SetItem(w->in, key, item) < 0 ? -1 : DONE;
    Py_XDECREF(key);
    return rc;
}

/* place() of an item make_leaf made, whose full_op_name is ``full``: an input's key, its data_name cut
 * at the last dot, is the text make_leaf made full_op_name of */
static int place_made(Walk *w, PyObject *item, PyObject *full) {
    Py_ssize_t n;
    const char *s = full != NULL ? ascii_data(full, &n) : NULL;
    if (s == NULL)
        return place(w, item);
    return PyDict_SetItem(is_output(s, n) ? w->out : w->in, full, item) < 0 ? -1 : DONE;
}

/* items._default_item of a null, placed */
static int add_null_item(void *walker) {
    Walk *w = (Walk *)walker;
    PyObject *name = PyUnicode_FromStringAndSize(w->name.p, w->name.len);
    PyObject *item = name != NULL ? PyObject_CallFunctionObjArgs(I.default_item, name, w->state, NULL) : NULL;
    int rc = item == NULL ? -1 : PyDict_CheckExact(item) ? place(w, item) : UNHANDLED;
    Py_XDECREF(name);
    Py_XDECREF(item);
    return rc;
}

/* item[key] = value, stealing value (NULL: handed on) */
static int set_new(PyObject *item, PyObject *key, PyObject *value) {
    if (value == NULL)
        return PyErr_Occurred() ? -1 : UNHANDLED;
    int rc = PyDict_SetItem(item, key, value);
    Py_DECREF(value);
    return rc < 0 ? -1 : DONE;
}

/* a process group's dtype (its type), shape and statistics and md5 (the str of its ranks member, or
 * "None" without one): items._fill_non_tensor */
static int fill_group(const Tape *t, const Val *ranks, PyObject *item) {
    PyObject *kind = PyDict_GetItemWithError(item, str_type); /* (borrowed: the leaf's type, a str) */
    if (kind == NULL)
        return PyErr_Occurred() ? -1 : UNHANDLED;
    PyObject *value = ranks != NULL ? value_of(t, ranks) : Py_NewRef(Py_None);
    if (value == NULL)
        return PyErr_Occurred() ? -1 : UNHANDLED;
    PyObject *text = PyObject_Str(value);
    Py_DECREF(value);
    if (text == NULL)
        return -1;
    int rc = PyDict_SetItem(item, str_dtype, kind) < 0 || PyDict_SetItem(item, str_shape, I.scalar_shape) < 0 ? -1 : DONE;
    for (int s = 0; rc == DONE && s < N_STATS; s++)
        if (PyDict_SetItem(item, I.stats[s], text) < 0)
            rc = -1;
    if (rc == DONE && PyDict_SetItem(item, str_md5, text) < 0)
        rc = -1;
    Py_DECREF(text);
    return rc;
}

/* the item of a leaf (an object whose "type" is a string): items._leaf; *full its full_op_name
 * (borrowed: the item holds it) */
static int make_leaf(Walk *w, const Val *leaf, PyObject *item, PyObject **full_out) {
    const Tape *t = &w->t;
    const Val *kind = NULL, *data_name = NULL, *value = NULL, *ranks = NULL;
    int rc;
    unsigned seen = 0; /* the roles of the leaf's keys */
    /* item = leaf.copy(), its bools as their texts */
    for (int i = leaf->first; i >= 0; i = t->v[i].next) {
        const Val *m = &t->v[i];
        if (m->role == K_TYPE)
            kind = m;
        else if (m->role == K_DATA_NAME)
            data_name = m;
        else if (m->role == K_VALUE)
            value = m;
        else if (text_is(m->k, m->kn, &text_rules.group_ranks))
            ranks = m;
        seen |= 1u << m->role;
        PyObject *k = I.role_key[m->role] != NULL ? Py_NewRef(I.role_key[m->role]) : ascii_str(m->k, m->kn), *x;
        if (k == NULL)
            return -1;
        if (m->kind == J_TRUE || m->kind == J_FALSE)
            x = Py_NewRef(I.bool_text[m->kind == J_TRUE]);
        else
            x = value_of(t, m);
        rc = set_new(item, k, x);
        Py_DECREF(k);
        if (rc <= 0)
            return rc;
    }
    if (kind == NULL || !kind->plain)
        return UNHANDLED;
    for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(I.item_keys); j++) { /* in their order, None */
        PyObject *k = PyTuple_GET_ITEM(I.item_keys, j);
        int role = I.item_key_role[j];
        /* (the leaf holds a key of a named role if a member has that role; a member of a key the export
         * leaves out, K_LEFT_OUT on the tape, may be of any: then the item is asked) */
        int has = role != K_OTHER && !(seen & 1u << K_LEFT_OUT) ? (int)(seen >> role & 1u) : PyDict_Contains(item, k);
        if (has < 0 || (!has && PyDict_SetItem(item, k, Py_None) < 0))
            return -1;
    }
    /* data_name: the leaf's if truthy (a str), else items.NO_DATA_NAME; full_op_name from it */
    PyObject *dn = I.no_data_name;
    if (data_name != NULL && !(data_name->kind == J_NULL || data_name->kind == J_FALSE ||
                               (data_name->kind == J_STR && data_name->n == 0))) {
        if (data_name->kind != J_STR || !data_name->plain)
            return UNHANDLED; /* (a DumpError of the Python path) */
        dn = NULL;
    }
    PyObject *full;
    if (dn == NULL) {
        const char *s = data_name->s;
        Py_ssize_t n = data_name->n, cut = n;
        for (Py_ssize_t i = n - 1; i >= 0; i--)
            if (s[i] == '.') {
                cut = i;
                break;
            }
        if (text_is(s, n, &text_rules.no_data_name)) {
            dn = I.no_data_name;
        } else {
            if (set_new(item, str_data_name, PyUnicode_FromStringAndSize(s, n)) < 0)
                return -1;
            if (set_new(item, str_full_op_name, *full_out = PyUnicode_FromStringAndSize(s, cut)) < 0)
                return -1;
        }
    }
    if (dn != NULL) {
        full = *full_out = PyUnicode_FromStringAndSize(w->name.p, w->name.len);
        if (PyDict_SetItem(item, str_data_name, dn) < 0 || set_new(item, str_full_op_name, full) < 0)
            return -1;
    }
    if (PyDict_SetItem(item, str_state, w->state) < 0)
        return -1;
    PyObject *dtype = PyDict_GetItemWithError(item, str_dtype);
    int tensor = dtype == NULL ? (PyErr_Occurred() ? -1 : 0) : PyObject_IsTrue(dtype);
    if (tensor < 0)
        return -1;
    PyObject *original = NULL; /* the leaf's value as json gives it (a bool stays a bool) */
    if (value != NULL && (original = value_of(t, value)) == NULL)
        return PyErr_Occurred() ? -1 : UNHANDLED;
    rc = DONE;
    if (!tensor) { /* items._fill_non_tensor's general case and process groups only */
        const char *name = w->name.p, *dot = name + w->name.len;
        while (dot > name && dot[-1] != '.')
            dot--;
        if (text_in(kind->s, kind->n, text_rules.shaped_kinds, text_rules.n_shaped_kinds) ||
            text_in(dot, name + w->name.len - dot, text_rules.peer_arguments, text_rules.n_peer_arguments)) {
            rc = UNHANDLED;
        } else if (text_is(kind->s, kind->n, &text_rules.process_group)) {
            rc = fill_group(t, ranks, item);
        } else {
            const char *type = type_text(value);
            PyObject *stat = original != NULL ? original : Py_None;
            rc = type == NULL ? -1 : set_new(item, str_dtype, PyUnicode_FromString(type));
            if (rc == DONE && PyDict_SetItem(item, str_shape, I.scalar_shape) < 0)
                rc = -1;
            for (int s = 0; rc == DONE && s < N_STATS; s++)
                if (PyDict_SetItem(item, I.stats[s], stat) < 0)
                    rc = -1;
        }
    }
    if (rc == DONE) { /* md5: the leaf's if truthy, else the CRC-32 of its value's text */
        PyObject *md5 = PyDict_GetItemWithError(item, str_md5);
        int has = md5 == NULL ? (PyErr_Occurred() ? -1 : 0) : PyObject_IsTrue(md5);
        if (has < 0)
            rc = -1;
        else if (!has && original != NULL)
            rc = set_new(item, str_md5, crc32_text_of(original));
        else if (!has && PyDict_SetItem(item, str_md5, I.crc32_empty) < 0)
            rc = -1;
    }
    Py_XDECREF(original);
    return rc;
}

static int walk_value(void *w, const Val *v, int depth);

/* the value's members (an object's, a list's), each named after the walked name: ".key", and ".i"
 * unless a part of the name is parameters_grad (items._parse_list) */
static int walk_members(void *walker, const Val *v, int depth) {
    Walk *w = (Walk *)walker;
    int number = v->kind == J_LIST ? !has_dot_part(w->name.p, w->name.len, '.', &text_rules.parameters_grad) : 1;
    return walk_members_of(w, &w->t, &w->name, '.', v, depth, number, NULL, walk_value);
}

/* a leaf's item (items._leaf), placed */
static int add_leaf(void *walker, const Val *leaf) {
    Walk *w = (Walk *)walker;
    /* room for the leaf's keys, those items._leaf adds and those a summary compare writes back */
    PyObject *item = _PyDict_NewPresized(leaf->count + PyTuple_GET_SIZE(I.item_keys) + 3 + N_WRITTEN);
    if (item == NULL)
        return -1;
    PyObject *full = NULL;
    int rc = make_leaf(w, leaf, item, &full);
    if (rc == DONE)
        rc = place_made(w, item, full);
    Py_DECREF(item);
    return rc;
}

/* items._parse of one value, named w->name */
static int walk_value(void *w, const Val *v, int depth) {
    return walk_value_of(w, &((Walk *)w)->t, v, depth, add_null_item, add_leaf, walk_members);
}

/* the walk of the entry w->t.v[root] (items.parse_entry): DONE, UNHANDLED or -1 */
static int walk_entry(Walk *w, int root, const char *node_id, Py_ssize_t id_n) {
    const Val *entry = &w->t.v[root];
    if (entry->kind != J_OBJ)
        return DONE; /* (no items) */
    if (last_parts_hold(node_id, id_n, '.', &text_rules.parameters_grad)) { /* the whole entry, named node_id */
        w->name.len = 0;
        w->state = I.grad_state;
        return buf_add(&w->name, node_id, id_n) < 0 ? -1 : walk_value(w, entry, 0);
    }
    for (int k = 0; k < I.n_sub; k++) {
        const Val *part;
        if (entry_part(&w->t, entry, I.sub_key[k], I.sub_key_n[k], &part) == UNHANDLED)
            return UNHANDLED;
        if (part == NULL)
            continue;
        w->name.len = 0;
        w->state = I.sub_state[k];
        if (buf_add(&w->name, node_id, id_n) < 0 || buf_add(&w->name, I.suffix[k], I.suffix_n[k]) < 0)
            return -1;
        int rc = part->kind == J_LIST ? walk_members(w, part, 0) : walk_value(w, part, 0);
        if (rc <= 0)
            return rc;
    }
    return DONE;
}

/* (input_data, output_data) of the entry tape->v[root] of node_id (ASCII) */
static PyObject *items_of_entry(const Tape *tape, int root, const char *node_id, Py_ssize_t id_n) {
    Walk w;
    w.t.v = tape->v; /* (a view: the walk reads the tape, it does not own it) */
    w.t.n = tape->n;
    w.t.cap = tape->cap;
    buf_init(&w.name);
    w.in = PyDict_New();
    w.out = PyDict_New();
    PyObject *result = NULL;
    int rc = w.in == NULL || w.out == NULL ? -1 : walk_entry(&w, root, node_id, id_n);
    if (rc == DONE)
        result = PyTuple_Pack(2, w.in, w.out);
    else if (rc == UNHANDLED)
        result = Py_NewRef(Py_None);
    buf_free(&w.name);
    Py_XDECREF(w.in);
    Py_XDECREF(w.out);
    return result;
}

/* Spans of at least this many bytes in all are read without the GIL (the tape needs no Python
 * object), so that another task's thread runs meanwhile; fewer, their reading costs less than a
 * release of the GIL and the wait to take it back. */
#define NOGIL_BYTES (64 << 10)
#define TEXT_PER_VALUE 16   /* the bytes of text a value is given room for at first */
#define MAX_ROOM (1 << 24) /* values given room at first, at most */

/* each of ``ids``' span in text (at[2 * i], at[2 * i + 1]; start -1: none, a one-line entry in
 * ``small``, or an id this code does not take), their bytes in *total: 0, or -1 with an error */
static int spans_of(PyObject *ids, PyObject *spans, PyObject *small, PyObject *text, Py_ssize_t *at,
                    Py_ssize_t *total) {
    *total = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(ids); i++) {
        PyObject *id = PyList_GET_ITEM(ids, i);
        Py_ssize_t id_n = 0, start = -1, end = -1;
        const char *id_text = PyUnicode_CheckExact(id) ? ascii_data(id, &id_n) : NULL;
        PyObject *span = id_text != NULL ? PyDict_GetItemWithError(spans, id) : NULL;
        int in_small = span != NULL ? PyDict_Contains(small, id) : 0;
        if (span != NULL && in_small == 0 && PyTuple_CheckExact(span) && PyTuple_GET_SIZE(span) == 2) {
            start = PyLong_AsSsize_t(PyTuple_GET_ITEM(span, 0));
            end = PyLong_AsSsize_t(PyTuple_GET_ITEM(span, 1));
            if (PyErr_Occurred() && PyErr_ExceptionMatches(PyExc_OverflowError))
                PyErr_Clear();
        }
        if (PyErr_Occurred() || in_small < 0)
            return -1;
        if (!(start >= 0 && end >= start && end <= PyBytes_GET_SIZE(text)) || classes(id_text, id_n) & (BAD | ESCAPED))
            start = -1;
        else
            *total += end - start;
        at[2 * i] = start;
        at[2 * i + 1] = end;
    }
    return 0;
}

/* the entries of node_items' or entries_to_parse's ``args`` (ids, spans, small, text) read */
typedef struct {
    PyObject *ids;
    Py_ssize_t count;
    int *root; /* each entry's value on the tape, or < 0: no span, one this code does not take */
    Tape tape;
} Read;

static void read_free(Read *r) {
    PyMem_Free(r->root);
    tape_free(&r->tape);
}

/* ``args``' entries read onto r->tape (spans_of), without the GIL where they are many (NOGIL_BYTES):
 * all of them (``judged`` 0), or each on its own, its values let go once found plainly read (judged 1:
 * root[i] 0) or not (-2). 0, or -1 with an error (r freed) */
static int read_entries(PyObject *args, Read *r, int judged) {
    PyObject *spans, *small, *text;
    r->root = NULL;
    r->tape.v = r->tape.small;
    r->tape.n = 0;
    r->tape.cap = TAPE_SMALL;
    if (!PyArg_ParseTuple(args, "O!O!O!O!", &PyList_Type, &r->ids, &PyDict_Type, &spans, &PyDict_Type, &small,
                          &PyBytes_Type, &text) ||
        configured() < 0)
        return -1;
    if (I.rules == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_speedups.configure_items() was not called");
        return -1;
    }
    r->count = PyList_GET_SIZE(r->ids);
    Py_ssize_t total = 0, *at = PyMem_Malloc((size_t)(2 * r->count + 1) * sizeof(Py_ssize_t));
    r->root = PyMem_Malloc((size_t)(r->count + 1) * sizeof(int));
    int rc = at == NULL || r->root == NULL ? -1 : spans_of(r->ids, spans, small, text, at, &total);
    /* room for the values of the texts as dump.json lays them out (a value every 24 bytes or so with
     * its indentation), so that the tape is rarely made bigger (which copies it) */
    Py_ssize_t want = judged ? 0 : total / TEXT_PER_VALUE;
    if (rc == 0 && want > TAPE_SMALL) {
        r->tape.cap = want > MAX_ROOM ? MAX_ROOM : (int)want;
        if ((r->tape.v = PyMem_RawMalloc((size_t)r->tape.cap * sizeof(Val))) == NULL)
            rc = -1;
    }
    if (rc == 0) {
        const char *s = PyBytes_AS_STRING(text);
        PyThreadState *released = total >= NOGIL_BYTES ? PyEval_SaveThread() : NULL;
        for (Py_ssize_t i = 0; i < r->count && rc == 0; i++) {
            r->tape.n = judged ? 0 : r->tape.n;
            int root = at[2 * i] < 0 ? -2 : read_more(&r->tape, s + at[2 * i], at[2 * i + 1] - at[2 * i]);
            rc = root == -1 ? -1 : 0;
            r->root[i] = judged && root >= 0 ? (plainly_read(&r->tape, root) ? 0 : -2) : root;
        }
        if (released != NULL)
            PyEval_RestoreThread(released);
    }
    PyMem_Free(at);
    if (rc < 0) {
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        read_free(r);
    }
    return rc;
}

/* node_items(ids, spans, small, text) -> for each node id, its (input_data, output_data) made from
 * its entry's span, or None where the Python path makes them (no span, a one-line entry, an entry
 * this code does not take). Each entry's text is read onto one tape first, all of them without the
 * GIL where they are many (NOGIL_BYTES), then walked with it into items. */
PyObject *node_items(PyObject *self, PyObject *args) {
    Read r;
    if (read_entries(args, &r, 0) < 0)
        return NULL;
    PyObject *out = PyList_New(r.count);
    for (Py_ssize_t i = 0; out != NULL && i < r.count; i++) {
        Py_ssize_t id_n = 0;
        const char *id_text = ascii_data(PyList_GET_ITEM(r.ids, i), &id_n);
        PyObject *items = r.root[i] < 0 ? Py_NewRef(Py_None) : items_of_entry(&r.tape, r.root[i], id_text, id_n);
        if (items == NULL)
            Py_CLEAR(out);
        else
            PyList_SET_ITEM(out, i, items);
    }
    read_free(&r);
    return out;
}

/* entries_to_parse(ids, spans, small, text) -> those of ``ids`` whose entries json.loads must parse to
 * know whether they are JSON (node_items.parse_unused): the others' texts are read here onto a tape,
 * one after the other, without the GIL where they are many (NOGIL_BYTES), and found to be JSON that
 * json.loads reads (plainly_read). */
PyObject *entries_to_parse(PyObject *self, PyObject *args) {
    Read r;
    if (read_entries(args, &r, 1) < 0)
        return NULL;
    PyObject *out = PyList_New(0);
    for (Py_ssize_t i = 0; out != NULL && i < r.count; i++)
        if (r.root[i] < 0 && PyList_Append(out, PyList_GET_ITEM(r.ids, i)) < 0)
            Py_CLEAR(out);
    read_free(&r);
    return out;
}
