/* Reading a forked child's results (graph/forked.py) without the GIL. */
#include "speedups.h"
#include <errno.h>
#include <unistd.h>

/* read_exact(fd, n): up to n bytes from fd, fewer only at end of file. The GIL is released for the
 * whole read: read in Python, each of a pipe's 64 KiB pieces would wait for the GIL, which the thread
 * running jobs holds, while the child writing the pipe waits for room. */
PyObject *read_exact(PyObject *self, PyObject *args) {
    int fd;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "in", &fd, &n))
        return NULL;
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "a negative size");
        return NULL;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, n);
    if (out == NULL)
        return NULL;
    char *buf = PyBytes_AS_STRING(out);
    Py_ssize_t got = 0;
    int err = 0;
    Py_BEGIN_ALLOW_THREADS;
    while (got < n) {
        ssize_t r = read(fd, buf + got, (size_t)(n - got));
        if (r > 0)
            got += r;
        else if (r == 0)
            break;
        else if (errno != EINTR) {
            err = errno;
            break;
        }
    }
    Py_END_ALLOW_THREADS;
    if (err) {
        Py_DECREF(out);
        errno = err;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    if (got < n && _PyBytes_Resize(&out, got) < 0)
        return NULL;
    return out;
}
