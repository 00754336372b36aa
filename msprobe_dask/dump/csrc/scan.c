/* msprobe_dask.dump._scan: the scan of an indented dump.json's entries (entries.py: _entries) in C.
 *
 * entries(text, lo, hi, indent) -> (spans, one_line) finds the entries of text[lo:hi], data's body,
 * as _entries finds them: spans maps each name to the [start, end) of its value, one_line lists the
 * names whose value is on one line (entries.py parses those, to check them). None where _entries is
 * to decide: anything this code does not take (a name with an escape, a name given twice, a value or
 * line laid out otherwise than json.dump lays it out). It only ever answers what _entries answers.
 */
#define _GNU_SOURCE /* memmem */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#define SCAN_API 1

/* a name at p (its opening quote) followed by '": ', as entries._NAME matches it: the end of the
 * name's characters, or NULL; *escaped set for a name with an escape (_entries decodes those) */
static const char *name_end(const char *p, const char *end, int *escaped) {
    for (p++; p < end; p++) {
        unsigned char c = (unsigned char)*p;
        if (c == '"')
            return end - p >= 3 && p[1] == ':' && p[2] == ' ' ? p : NULL;
        if (c == '\\')
            *escaped = 1;
        if (c < 0x20 || c == '\\')
            return NULL;
    }
    return NULL;
}

typedef struct {
    PyObject *spans, *one_line;
} Found;

static Py_ssize_t count_char(const char *p, const char *stop, char c) {
    Py_ssize_t n = 0;
    while ((p = memchr(p, c, stop - p)) != NULL) {
        n++;
        p++;
    }
    return n;
}

/* whether the value over [start, stop), which opens with ``open`` at the end of its first line, closes
 * at the start of its last line (indented ``indent``) and holds as many '{' as '}' */
static int closes(const char *start, const char *stop, char open, Py_ssize_t indent) {
    if (stop - start < indent + 2 || stop[-1] != (open == '{' ? '}' : ']'))
        return 0;
    const char *last = stop - indent - 2;
    if (*last != '\n')
        return 0;
    for (Py_ssize_t i = 1; i <= indent; i++)
        if (last[i] != ' ')
            return 0;
    return count_char(start, stop, '{') == count_char(start, stop, '}');
}

/* add the entry whose name runs over [name, name_stop) and whose value runs from after its '": ' to
 * ``stop``: 0, 1 if _entries is to decide (a value laid out otherwise, a name given twice), -1 on
 * error; ``opened`` counts the values that open a bracket at the end of their first line */
static int add_value(Found *f, const char *text, const char *name, const char *name_stop, const char *stop,
                     Py_ssize_t indent, Py_ssize_t *opened) {
    const char *start = name_stop + 3;
    char open = start + 1 < stop && (*start == '{' || *start == '[') && start[1] == '\n' ? *start : 0;
    if (open && !closes(start, stop, open, indent))
        return 1;
    *opened += open != 0;
    PyObject *key = PyUnicode_DecodeUTF8(name, name_stop - name, "strict");
    if (key == NULL)
        return -1;
    PyObject *span = Py_BuildValue("(nn)", (Py_ssize_t)(start - text), (Py_ssize_t)(stop - text));
    int rc = span == NULL ? -1 : PyDict_SetDefault(f->spans, key, span) == span ? 0 : 1;
    if (rc == 0 && !open)
        rc = PyList_Append(f->one_line, key);
    Py_XDECREF(span);
    Py_DECREF(key);
    return rc;
}

/* One pass over the lines of data's body [lo, hi): a line indented exactly ``indent`` that starts with a
 * name after a ',' ends the line before (or, at lo, is the first) is an entry's first line, as
 * _entries' regular expressions find them; every other line must be indented deeper, but the last
 * line of each value that opens a bracket on its first line. */
static PyObject *entries(PyObject *self, PyObject *args) {
    PyObject *bytes;
    Py_ssize_t lo, hi, indent;
    if (!PyArg_ParseTuple(args, "O!nnn", &PyBytes_Type, &bytes, &lo, &hi, &indent))
        return NULL;
    const char *text = PyBytes_AS_STRING(bytes);
    if (lo < 0 || hi <= lo || hi > PyBytes_GET_SIZE(bytes) || indent < 0 || text[lo] != '\n')
        Py_RETURN_NONE;
    const char *end = text + hi;
    Found f = {PyDict_New(), PyList_New(0)};
    PyObject *result = NULL;
    if (f.spans == NULL || f.one_line == NULL)
        goto done;
    Py_ssize_t shallow = 0, opened = 0, count = 0;
    const char *name = NULL, *name_stop = NULL; /* the entry being read */
    for (const char *p = text + lo; p != NULL; p = memchr(p + 1, '\n', end - p - 1)) {
        Py_ssize_t i = 1;
        while (i <= indent + 1 && p + i < end && p[i] == ' ')
            i++;
        if (i > indent + 1)
            continue; /* a deeper line */
        shallow++;
        int escaped = 0;
        const char *stop = NULL; /* the end of this line's name, if it starts an entry */
        if (i == indent + 1 && p + i < end && p[i] == '"' && (p == text + lo || p[-1] == ','))
            stop = name_end(p + i, end, &escaped);
        if (escaped || (p == text + lo && stop == NULL))
            goto unhandled;
        if (stop == NULL)
            continue;
        if (name != NULL && add_value(&f, text, name, name_stop, p - 1, indent, &opened) != 0)
            goto check;
        name = p + i + 1;
        name_stop = stop;
        count++;
    }
    if (add_value(&f, text, name, name_stop, end, indent, &opened) != 0 || shallow != count + opened)
        goto unhandled;
    result = PyTuple_Pack(2, f.spans, f.one_line);
    goto done;
check:
    if (PyErr_Occurred())
        goto done;
unhandled:
    result = Py_NewRef(Py_None);
done:
    Py_XDECREF(f.spans);
    Py_XDECREF(f.one_line);
    return result;
}

static PyMethodDef methods[] = {
    {"entries", entries, METH_VARARGS,
     "entries(text, lo, hi, indent) -> (spans, one_line names) of data's body, or None: entries._entries."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_scan", NULL, -1, methods};

PyMODINIT_FUNC PyInit__scan(void) {
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddIntConstant(m, "API", SCAN_API) < 0)
        Py_CLEAR(m);
    return m;
}
