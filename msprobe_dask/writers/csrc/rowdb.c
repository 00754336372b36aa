/* The module msprobe_dask.writers._rowdb: rows packed into bytes (writers/packed_rows.py defines the
 * format) and a SQLite connection that binds packed rows without the GIL.
 *
 * Python's sqlite3 binds each value through the interpreter (about 5 us per 22-column row) and holds
 * the GIL while doing so; here the write chain's insert task binds them without it, so that the Dask
 * task threads making the next chunks' rows in this process go on meanwhile (no thread of its own).
 *
 * Over 400 lines: the packer and the inserter are the two ends of one byte format, kept in one file so
 * that its writing and its reading change together. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <sqlite3.h>
#include <stdint.h>
#include <string.h>

#define ROWDB_API 3 /* packed_rows.API: change both with the format or the functions */

enum { TAG_NULL = 0, TAG_INT = 1, TAG_FLOAT = 2, TAG_TEXT = 3 };

static PyObject *RowDbError;

/* ------------------------------------------------------------------ packing */

#include "buffer.h"

static int put_u32(Buffer *b, Py_ssize_t n) {
    if (n > UINT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "a packed text or row count is over 4 GiB");
        return -1;
    }
    uint32_t v = (uint32_t)n;
    return put(b, &v, 4);
}

static int put_value(Buffer *b, PyObject *v) {
    char tag;
    if (v == Py_None) {
        tag = TAG_NULL;
        return put(b, &tag, 1);
    }
    if (PyUnicode_Check(v)) {
        Py_ssize_t n;
        const char *s = PyUnicode_AsUTF8AndSize(v, &n);
        tag = TAG_TEXT;
        if (s == NULL || put(b, &tag, 1) < 0 || put_u32(b, n) < 0)
            return -1;
        return put(b, s, n);
    }
    if (PyLong_Check(v)) {
        int64_t i = PyLong_AsLongLong(v);
        if (i == -1 && PyErr_Occurred())
            return -1;
        tag = TAG_INT;
        return put(b, &tag, 1) < 0 ? -1 : put(b, &i, 8);
    }
    if (PyFloat_Check(v)) {
        double d = PyFloat_AS_DOUBLE(v);
        tag = TAG_FLOAT;
        return put(b, &tag, 1) < 0 ? -1 : put(b, &d, 8);
    }
    PyErr_Format(PyExc_TypeError, "a row value of type %.100s cannot be packed", Py_TYPE(v)->tp_name);
    return -1;
}

/* the bytes put_value puts for v, or -1 for a value it refuses (or on an error: set) */
static Py_ssize_t value_size(PyObject *v) {
    if (v == Py_None)
        return 1;
    if (PyUnicode_Check(v)) {
        Py_ssize_t n;
        return PyUnicode_AsUTF8AndSize(v, &n) != NULL ? 5 + n : -1;
    }
    return PyLong_Check(v) || PyFloat_Check(v) ? 9 : -1;
}

/* the size of the packed rows when every row is a list or tuple of ncols values put_value takes (so
 * that they are written straight into their bytes object), else -1 (and an error if one was set) */
static Py_ssize_t packed_size(PyObject *seq, Py_ssize_t ncols) {
    Py_ssize_t size = 8;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(seq); i++) {
        PyObject *row = PyTuple_GET_ITEM(seq, i);
        if (!(PyList_CheckExact(row) || PyTuple_CheckExact(row)) || PySequence_Fast_GET_SIZE(row) != ncols)
            return -1;
        for (Py_ssize_t j = 0; j < ncols; j++) {
            Py_ssize_t n = value_size(PySequence_Fast_GET_ITEM(row, j));
            if (n < 0)
                return -1;
            size += n;
        }
    }
    return size;
}

static PyObject *pack_rows(PyObject *self, PyObject *args) {
    PyObject *rows;
    Py_ssize_t ncols;
    if (!PyArg_ParseTuple(args, "On", &rows, &ncols))
        return NULL;
    if (ncols < 0 || ncols > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "a column count must be between 0 and 2**31 - 1");
        return NULL;
    }
    PyObject *seq = PySequence_Tuple(rows); /* a snapshot: a row's own code cannot change it */
    if (seq == NULL)
        return NULL;
    Buffer b = {NULL, 0, 0, 0};
    PyObject *out = NULL;
    Py_ssize_t size = packed_size(seq, ncols);
    if (size < 0 && PyErr_Occurred())
        goto fail;
    if (size >= 0) { /* written in place: no growing, no copy at the end */
        if ((out = PyBytes_FromStringAndSize(NULL, size)) == NULL)
            goto fail;
        b = (Buffer){PyBytes_AS_STRING(out), 0, size, 1};
    }
    Py_ssize_t n = PyTuple_GET_SIZE(seq);
    if (put_u32(&b, n) < 0 || put_u32(&b, ncols) < 0)
        goto fail;
    for (Py_ssize_t i = 0; i < n; i++) {
        /* a list or tuple itself (nothing below runs Python code), else a list made of it */
        PyObject *row = PySequence_Fast(PyTuple_GET_ITEM(seq, i), "a row must be a sequence");
        if (row == NULL)
            goto fail;
        int bad = PySequence_Fast_GET_SIZE(row) != ncols;
        if (bad)
            PyErr_Format(PyExc_ValueError, "a row has %zd values, not %zd", PySequence_Fast_GET_SIZE(row), ncols);
        for (Py_ssize_t j = 0; !bad && j < ncols; j++)
            bad = put_value(&b, PySequence_Fast_GET_ITEM(row, j)) < 0;
        Py_DECREF(row);
        if (bad)
            goto fail;
    }
    Py_DECREF(seq);
    if (b.fixed) {
        if (b.len == size)
            return out;
        PyErr_SetString(PyExc_SystemError, "packed rows of another size than counted");
        Py_DECREF(out);
        return NULL;
    }
    out = PyBytes_FromStringAndSize(b.data, b.len);
    PyMem_Free(b.data);
    return out;
fail:
    Py_DECREF(seq);
    if (b.fixed)
        Py_XDECREF(out);
    else
        PyMem_Free(b.data);
    return NULL;
}

/* ------------------------------------------------------------------ reading packed rows */

/* outcomes of running packed rows that are not SQLite's (its codes are all >= 0) */
enum { E_MALFORMED = -1, E_ROWID = -2, E_COLUMNS = -3, E_NOT_ONE_STATEMENT = -4 };

typedef struct {
    const unsigned char *p, *end;
} Reader;

static int take(Reader *r, void *out, size_t n) {
    if ((size_t)(r->end - r->p) < n)
        return -1;
    memcpy(out, r->p, n);
    r->p += n;
    return 0;
}

/* The next value: bound to parameter ``param`` if stmt is not NULL; its integer into *as_int if it
 * is one (else *is_int is 0). */
static int next_value(Reader *r, sqlite3_stmt *stmt, int param, int64_t *as_int, int *is_int) {
    unsigned char tag;
    *is_int = 0;
    if (take(r, &tag, 1) < 0)
        return E_MALFORMED;
    switch (tag) {
    case TAG_NULL:
        return stmt ? sqlite3_bind_null(stmt, param) : SQLITE_OK;
    case TAG_INT: {
        int64_t i;
        if (take(r, &i, 8) < 0)
            return E_MALFORMED;
        *as_int = i;
        *is_int = 1;
        return stmt ? sqlite3_bind_int64(stmt, param, i) : SQLITE_OK;
    }
    case TAG_FLOAT: {
        double d;
        if (take(r, &d, 8) < 0)
            return E_MALFORMED;
        return stmt ? sqlite3_bind_double(stmt, param, d) : SQLITE_OK;
    }
    case TAG_TEXT: {
        uint32_t n;
        if (take(r, &n, 4) < 0 || n > INT32_MAX || (size_t)(r->end - r->p) < n)
            return E_MALFORMED;
        const char *text = (const char *)r->p;
        r->p += n;
        return stmt ? sqlite3_bind_text(stmt, param, text, (int)n, SQLITE_STATIC) : SQLITE_OK;
    }
    }
    return E_MALFORMED;
}

/* One pass over the packed rows: checks them (stmt NULL), or binds and runs each. With
 * rowid_base >= 0 the first parameter is rowid_base + 1 + (the row's integer at order_col) and the
 * row's values are the next ones. */
static int pass_rows(Reader r, sqlite3_stmt *stmt, int64_t rowid_base, Py_ssize_t order_col) {
    uint32_t nrows, ncols;
    if (take(&r, &nrows, 4) < 0 || take(&r, &ncols, 4) < 0)
        return E_MALFORMED;
    if ((uint64_t)nrows * ncols > (uint64_t)(r.end - r.p)) /* every value takes a byte at least */
        return E_MALFORMED;
    int first = rowid_base >= 0 ? 2 : 1;
    if (stmt != NULL && sqlite3_bind_parameter_count(stmt) != (int)ncols + first - 1)
        return E_COLUMNS;
    if (rowid_base >= 0 && (order_col < 0 || (uint32_t)order_col >= ncols))
        return E_ROWID;
    for (uint32_t i = 0; i < nrows; i++) {
        for (uint32_t j = 0; j < ncols; j++) {
            int64_t v = 0, rowid;
            int is_int, rc = next_value(&r, stmt, first + (int)j, &v, &is_int);
            if (rc != SQLITE_OK)
                return rc;
            if (rowid_base >= 0 && j == (uint32_t)order_col) {
                if (!is_int || __builtin_add_overflow(rowid_base + 1, v, &rowid))
                    return E_ROWID;
                if (stmt != NULL && (rc = sqlite3_bind_int64(stmt, 1, rowid)) != SQLITE_OK)
                    return rc;
            }
        }
        if (stmt != NULL) {
            int rc = sqlite3_step(stmt);
            if (rc != SQLITE_DONE)
                return rc;
            sqlite3_reset(stmt);
        }
    }
    return r.p == r.end ? SQLITE_OK : E_MALFORMED;
}

/* ------------------------------------------------------------------ the connection */

/* The connection is opened without SQLite's own mutex (a lock per bind and step, a tenth of the
 * inserts' time): ``lock`` lets one thread at a time use it, taken with the GIL released. */
typedef struct {
    PyObject_HEAD sqlite3 *db;
    PyThread_type_lock lock;
} RowDb;

static PyObject *db_error(sqlite3 *db, int rc) {
    const char *message;
    switch (rc) {
    case E_MALFORMED:
        message = "packed rows are truncated or malformed";
        break;
    case E_ROWID:
        message = "the rowid column of packed rows is missing or not an integer";
        break;
    case E_COLUMNS:
        message = "packed rows do not have a value for each parameter of the statement";
        break;
    case E_NOT_ONE_STATEMENT:
        message = "the SQL is not one statement";
        break;
    default:
        message = db != NULL ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    }
    PyErr_SetString(RowDbError, message);
    return NULL;
}

/* take the connection (the GIL released while waiting for it) */
static void lock_db(RowDb *self) {
    if (PyThread_acquire_lock(self->lock, NOWAIT_LOCK))
        return;
    Py_BEGIN_ALLOW_THREADS;
    PyThread_acquire_lock(self->lock, WAIT_LOCK);
    Py_END_ALLOW_THREADS;
}

/* 0 with the connection taken, or -1 (released) if it is closed */
static int lock_open_db(RowDb *self) {
    if (self->lock == NULL) { /* (never initialised) */
        PyErr_SetString(RowDbError, "the database is closed");
        return -1;
    }
    lock_db(self);
    if (self->db != NULL)
        return 0;
    PyThread_release_lock(self->lock);
    PyErr_SetString(RowDbError, "the database is closed");
    return -1;
}

static int rowdb_init(RowDb *self, PyObject *args, PyObject *kwds) {
    PyObject *path; /* bytes, as os.fsencode gives them (a str with surrogate escapes, a PathLike) */
    double busy_timeout; /* seconds: packed_rows.BUSY_TIMEOUT */
    if (!PyArg_ParseTuple(args, "O&d", PyUnicode_FSConverter, &path, &busy_timeout))
        return -1;
    if (!(busy_timeout >= 0 && busy_timeout * 1000 <= INT_MAX)) {
        Py_DECREF(path);
        PyErr_SetString(PyExc_ValueError, "RowDb: busy_timeout must be 0 to INT_MAX / 1000 seconds");
        return -1;
    }
    if (self->lock == NULL && (self->lock = PyThread_allocate_lock()) == NULL) {
        Py_DECREF(path);
        PyErr_NoMemory();
        return -1;
    }
    lock_db(self);
    if (self->db != NULL)
        sqlite3_close_v2(self->db);
    self->db = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS;
    rc = sqlite3_open_v2(PyBytes_AS_STRING(path), &self->db,
                         SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc == SQLITE_OK)
        sqlite3_busy_timeout(self->db, (int)(busy_timeout * 1000));
    Py_END_ALLOW_THREADS;
    Py_DECREF(path);
    if (rc != SQLITE_OK) {
        db_error(self->db, rc);
        sqlite3_close_v2(self->db);
        self->db = NULL;
    }
    PyThread_release_lock(self->lock);
    return rc == SQLITE_OK ? 0 : -1;
}

static PyObject *rowdb_execute(RowDb *self, PyObject *args) {
    const char *sql;
    if (!PyArg_ParseTuple(args, "s", &sql) || lock_open_db(self) < 0)
        return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS;
    rc = sqlite3_exec(self->db, sql, NULL, NULL, NULL);
    Py_END_ALLOW_THREADS;
    PyObject *result = rc != SQLITE_OK ? db_error(self->db, rc) : Py_NewRef(Py_None);
    PyThread_release_lock(self->lock);
    return result;
}

/* sql run once per packed row of r (see pass_rows), the rows checked whole before the first goes in:
 * a bad part inserts nothing (called without the GIL) */
static int insert_packed(sqlite3 *db, const char *sql, Reader r, int64_t rowid_base, Py_ssize_t order_col) {
    sqlite3_stmt *stmt = NULL;
    const char *tail = NULL;
    int rc = pass_rows(r, NULL, rowid_base, order_col);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(db, sql, -1, &stmt, &tail);
    if (rc == SQLITE_OK && (stmt == NULL || tail[strspn(tail, " \t\r\n;")] != '\0'))
        rc = E_NOT_ONE_STATEMENT;
    if (rc == SQLITE_OK)
        rc = pass_rows(r, stmt, rowid_base, order_col);
    sqlite3_finalize(stmt);
    return rc;
}

typedef struct {
    const char *sql;
    Py_buffer packed;
    long long rowid_base;
    Py_ssize_t order_col;
} Part;

/* parts: (sql, packed[, rowid_base[, order_col]]) each, inserted one after the other in one call (the
 * GIL released once: a task thread that waits for it again waits for the others' switch interval) */
static PyObject *rowdb_executemany_each(RowDb *self, PyObject *args) {
    PyObject *seq;
    if (!PyArg_ParseTuple(args, "O", &seq))
        return NULL;
    PyObject *items = PySequence_Tuple(seq); /* (held: a list could change while the GIL is released) */
    if (items == NULL)
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(items), taken = 0;
    Part *parts = PyMem_Calloc(n > 0 ? n : 1, sizeof(Part));
    if (parts == NULL) {
        Py_DECREF(items);
        return PyErr_NoMemory();
    }
    for (; taken < n; taken++) {
        Part *p = &parts[taken];
        p->rowid_base = -1;
        PyObject *item = PyTuple_GET_ITEM(items, taken);
        if (!PyTuple_Check(item)) {
            PyErr_SetString(PyExc_TypeError, "each part is a tuple (sql, packed[, rowid_base[, order_col]])");
            break;
        }
        if (!PyArg_ParseTuple(item, "sy*|Ln", &p->sql, &p->packed, &p->rowid_base, &p->order_col))
            break;
    }
    PyObject *result = NULL;
    if (taken == n && lock_open_db(self) == 0) {
        int rc = SQLITE_OK;
        Py_BEGIN_ALLOW_THREADS;
        for (Py_ssize_t i = 0; i < n && rc == SQLITE_OK; i++) {
            Reader r = {parts[i].packed.buf, (const unsigned char *)parts[i].packed.buf + parts[i].packed.len};
            rc = insert_packed(self->db, parts[i].sql, r, parts[i].rowid_base, parts[i].order_col);
        }
        Py_END_ALLOW_THREADS;
        result = rc != SQLITE_OK ? db_error(self->db, rc) : Py_NewRef(Py_None);
        PyThread_release_lock(self->lock);
    }
    for (Py_ssize_t i = 0; i < taken; i++)
        PyBuffer_Release(&parts[i].packed);
    PyMem_Free(parts);
    Py_DECREF(items);
    return result;
}

static PyObject *rowdb_executemany(RowDb *self, PyObject *args) {
    const char *sql;
    Py_buffer packed;
    long long rowid_base = -1;
    Py_ssize_t order_col = 0;
    if (!PyArg_ParseTuple(args, "sy*|Ln", &sql, &packed, &rowid_base, &order_col))
        return NULL;
    if (lock_open_db(self) < 0) {
        PyBuffer_Release(&packed);
        return NULL;
    }
    Reader r = {packed.buf, (const unsigned char *)packed.buf + packed.len};
    int rc;
    Py_BEGIN_ALLOW_THREADS;
    rc = insert_packed(self->db, sql, r, rowid_base, order_col);
    Py_END_ALLOW_THREADS;
    PyBuffer_Release(&packed);
    PyObject *result = rc != SQLITE_OK ? db_error(self->db, rc) : Py_NewRef(Py_None);
    PyThread_release_lock(self->lock);
    return result;
}

/* whether the query (one statement, no parameters) gives a row */
static PyObject *rowdb_has_row(RowDb *self, PyObject *args) {
    const char *sql;
    if (!PyArg_ParseTuple(args, "s", &sql) || lock_open_db(self) < 0)
        return NULL;
    sqlite3_stmt *stmt = NULL;
    const char *tail = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS;
    rc = sqlite3_prepare_v2(self->db, sql, -1, &stmt, &tail);
    if (rc == SQLITE_OK && (stmt == NULL || tail[strspn(tail, " \t\r\n;")] != '\0'))
        rc = E_NOT_ONE_STATEMENT;
    if (rc == SQLITE_OK)
        rc = sqlite3_step(stmt);
    sqlite3_finalize(stmt);
    Py_END_ALLOW_THREADS;
    PyObject *result = rc == SQLITE_ROW    ? Py_NewRef(Py_True)
                       : rc == SQLITE_DONE ? Py_NewRef(Py_False)
                                           : db_error(self->db, rc);
    PyThread_release_lock(self->lock);
    return result;
}

static PyObject *rowdb_close(RowDb *self, PyObject *unused) {
    if (self->lock == NULL)
        Py_RETURN_NONE; /* (never opened) */
    lock_db(self);
    int rc = SQLITE_OK;
    if (self->db != NULL) {
        Py_BEGIN_ALLOW_THREADS;
        rc = sqlite3_close_v2(self->db);
        Py_END_ALLOW_THREADS;
        self->db = NULL;
    }
    PyThread_release_lock(self->lock);
    if (rc != SQLITE_OK)
        return db_error(NULL, rc);
    Py_RETURN_NONE;
}

static void rowdb_dealloc(RowDb *self) {
    if (self->db != NULL)
        sqlite3_close_v2(self->db);
    if (self->lock != NULL)
        PyThread_free_lock(self->lock);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef rowdb_methods[] = {
    {"execute", (PyCFunction)rowdb_execute, METH_VARARGS, "execute(sql): run SQL without parameters."},
    {"executemany", (PyCFunction)rowdb_executemany, METH_VARARGS,
     "executemany(sql, packed, rowid_base=-1, order_col=0): run sql once per packed row."},
    {"executemany_each", (PyCFunction)rowdb_executemany_each, METH_VARARGS,
     "executemany_each(parts): executemany(*part) of each part, in one call."},
    {"has_row", (PyCFunction)rowdb_has_row, METH_VARARGS, "has_row(sql) -> whether the query gives a row."},
    {"close", (PyCFunction)rowdb_close, METH_NOARGS, "close()"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject RowDbType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "msprobe_dask.writers._rowdb.RowDb",
    .tp_basicsize = sizeof(RowDb),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)rowdb_init,
    .tp_dealloc = (destructor)rowdb_dealloc,
    .tp_methods = rowdb_methods,
    .tp_doc = "RowDb(path, busy_timeout): a SQLite connection (its busy timeout in seconds) that runs packed rows.",
};

static PyMethodDef methods[] = {
    {"pack_rows", pack_rows, METH_VARARGS, "pack_rows(rows, ncols) -> bytes (packed_rows.pack_rows)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_rowdb", NULL, -1, methods};

PyMODINIT_FUNC PyInit__rowdb(void) {
    if (PyType_Ready(&RowDbType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    RowDbError = PyErr_NewException("msprobe_dask.writers._rowdb.Error", PyExc_RuntimeError, NULL);
    if (RowDbError == NULL || PyModule_AddObjectRef(m, "Error", RowDbError) < 0 ||
        PyModule_AddObjectRef(m, "RowDb", (PyObject *)&RowDbType) < 0 ||
        PyModule_AddIntConstant(m, "API", ROWDB_API) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
