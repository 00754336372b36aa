/* msprobe_dask.metrics._sdot_lanes: a float32 x . x summed chunk by chunk as OpenBLAS's sdot kernels for
x86-64 sum it in one call (metrics/kernel_stats.py: the L2 norm of a kernel dump's float32 tensor, whose
np.linalg.norm is that sdot, without the whole tensor in memory). On n elements (kernel/x86_64/sdot.c and
its microkernels):
  SKYLAKEX (AVX-512): the first n64 = (n & -32) & -64 squares, each added with one rounding (fma) into
           lane i mod 64 of 64 float32 lanes (4 accumulators of 16); each accumulator folded to 8 lanes
           (l and l + 8 added); one more block of 32 when n & -32 exceeds n64, element i of it fma'd into
           lane i mod 8 of folded accumulator i / 8; the accumulators added lane by lane as
           ((a0 + a1) + a2) + a3, those 8 lanes' halves added (l and l + 4), then (l0 + l1) + (l2 + l3);
  HASWELL (AVX2): the first n & -32 squares fma'd into lane i mod 32 (4 accumulators of 8); each
           accumulator's halves added (l and l + 4), the accumulators lane by lane as (a0 + a1) + (a2 + a3),
           then (l0 + l1) + (l2 + l3);
then that float widened to double and the last n mod 32 squares, each rounded to float32, added to it one
by one in double; the sum rounded to float32. (Checked against numpy on both kernels, tests/metrics/
test_kernel_stats.py.)

add(lanes, x, first, order): elements x (a float32 buffer) are the tensor's elements first, first + 1, ...
    of a tensor of n elements; those below the order's blocked count (n64, or n & -32: blocked(n, order))
    are fma'd into lanes (a writable buffer of 64 float32), the others ignored. The GIL is released.
blocked(n, order): that count.
finish(lanes, rest, n, order): the dot, lanes holding the blocked squares and rest the tensor's elements
    from the blocked count to n (fewer than 64), as a float.
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>

#include "no_contraction.h"

#define SDOT_LANES_API 1 /* kernel_stats.SDOT_LANES_API: change both with the functions' arguments */

enum { LANES = 64, HALF = 32, GROUP = 8 };
enum { HASWELL = 0, SKYLAKEX = 1 }; /* as metrics/reference_dot.py:KERNEL_ORDERS numbers them */

static Py_ssize_t blocked_count(Py_ssize_t n, int order) {
    Py_ssize_t n32 = n & -(Py_ssize_t)HALF;
    return order == SKYLAKEX ? n32 & -(Py_ssize_t)LANES : n32;
}

#if defined(__GNUC__) && defined(__x86_64__)
__attribute__((target_clones("arch=skylake-avx512", "fma", "default")))
#endif
static void fma_lanes(float *restrict lanes, const float *restrict x, Py_ssize_t count, Py_ssize_t first,
                      int width) {
    Py_ssize_t i = 0;
    for (; i < count && (first + i) % width; i++) {
        int l = (int)((first + i) % width);
        lanes[l] = fmaf(x[i], x[i], lanes[l]);
    }
    if (width == LANES) {
        for (; i + LANES <= count; i += LANES)
            for (int l = 0; l < LANES; l++) lanes[l] = fmaf(x[i + l], x[i + l], lanes[l]);
    } else {
        for (; i + HALF <= count; i += HALF)
            for (int l = 0; l < HALF; l++) lanes[l] = fmaf(x[i + l], x[i + l], lanes[l]);
    }
    for (int l = 0; i < count; i++, l++) lanes[l] = fmaf(x[i], x[i], lanes[l]);
}

static int lanes_buffer(PyObject *obj, Py_buffer *view) {
    if (PyObject_GetBuffer(obj, view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) return -1;
    if (view->len != LANES * (Py_ssize_t)sizeof(float)) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_ValueError, "lanes is a buffer of 64 float32");
        return -1;
    }
    return 0;
}

static int check_order(int order) {
    if (order == HASWELL || order == SKYLAKEX) return 0;
    PyErr_SetString(PyExc_ValueError, "the order is 0 (Haswell) or 1 (SkylakeX)");
    return -1;
}

static PyObject *add(PyObject *self, PyObject *args) {
    PyObject *lanes_obj;
    Py_buffer lanes, x;
    Py_ssize_t first, n;
    int order;
    (void)self;
    if (!PyArg_ParseTuple(args, "Oy*nni", &lanes_obj, &x, &first, &n, &order)) return NULL;
    if (check_order(order) < 0 || lanes_buffer(lanes_obj, &lanes) < 0) {
        PyBuffer_Release(&x);
        return NULL;
    }
    Py_ssize_t count = x.len / (Py_ssize_t)sizeof(float), end = blocked_count(n, order);
    if (first < 0) {
        PyErr_SetString(PyExc_ValueError, "first is negative");
    } else {
        if (first + count > end) count = first >= end ? 0 : end - first;
        int width = order == SKYLAKEX ? LANES : HALF;
        Py_BEGIN_ALLOW_THREADS
        fma_lanes((float *)lanes.buf, (const float *)x.buf, count, first, width);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&lanes);
    PyBuffer_Release(&x);
    if (PyErr_Occurred()) return NULL;
    Py_RETURN_NONE;
}

static PyObject *blocked(PyObject *self, PyObject *args) {
    Py_ssize_t n;
    int order;
    (void)self;
    if (!PyArg_ParseTuple(args, "ni", &n, &order) || check_order(order) < 0) return NULL;
    return PyLong_FromSsize_t(blocked_count(n, order));
}

/* The lanes of SKYLAKEX folded and summed, with the block of 32 after them (r, n32 - n64 elements). */
static float skylakex_sum(const float *l64, const float *r, Py_ssize_t extra) {
    float acc[4][GROUP], sum[GROUP], half[4];
    for (int a = 0; a < 4; a++)
        for (int l = 0; l < GROUP; l++) acc[a][l] = l64[16 * a + l] + l64[16 * a + GROUP + l];
    for (Py_ssize_t i = 0; i < extra; i++) {
        float *lane = &acc[i / GROUP][i % GROUP];
        *lane = fmaf(r[i], r[i], *lane);
    }
    for (int l = 0; l < GROUP; l++) sum[l] = ((acc[0][l] + acc[1][l]) + acc[2][l]) + acc[3][l];
    for (int l = 0; l < 4; l++) half[l] = sum[l] + sum[l + 4];
    return (half[0] + half[1]) + (half[2] + half[3]);
}

/* The 32 lanes of HASWELL summed. */
static float haswell_sum(const float *l32) {
    float half[4][4], sum[4];
    for (int a = 0; a < 4; a++)
        for (int l = 0; l < 4; l++) half[a][l] = l32[GROUP * a + l] + l32[GROUP * a + 4 + l];
    for (int l = 0; l < 4; l++) sum[l] = (half[0][l] + half[1][l]) + (half[2][l] + half[3][l]);
    return (sum[0] + sum[1]) + (sum[2] + sum[3]);
}

static PyObject *finish(PyObject *self, PyObject *args) {
    PyObject *lanes_obj;
    Py_buffer lanes, rest;
    Py_ssize_t n;
    int order;
    (void)self;
    if (!PyArg_ParseTuple(args, "Oy*ni", &lanes_obj, &rest, &n, &order)) return NULL;
    if (check_order(order) < 0 || lanes_buffer(lanes_obj, &lanes) < 0) {
        PyBuffer_Release(&rest);
        return NULL;
    }
    Py_ssize_t end = blocked_count(n, order), n32 = n & -(Py_ssize_t)HALF;
    PyObject *out = NULL;
    if (n < 0 || rest.len != (n - end) * (Py_ssize_t)sizeof(float)) {
        PyErr_SetString(PyExc_ValueError, "rest holds the elements from the blocked count to n");
    } else {
        const float *r = (const float *)rest.buf;
        float lanes_sum =
            order == SKYLAKEX ? skylakex_sum((const float *)lanes.buf, r, n32 - end) : haswell_sum(lanes.buf);
        double dot = (double)lanes_sum;
        for (Py_ssize_t i = n32 - end; i < n - end; i++) {
            float square = r[i] * r[i];
            dot += (double)square;
        }
        out = PyFloat_FromDouble((double)(float)dot);
    }
    PyBuffer_Release(&lanes);
    PyBuffer_Release(&rest);
    return out;
}

static PyMethodDef methods[] = {
    {"add", add, METH_VARARGS, "Fma a chunk's squares into the 64 lanes (see the source)."},
    {"blocked", blocked, METH_VARARGS, "The elements summed in the lanes (see the source)."},
    {"finish", finish, METH_VARARGS, "The dot from the lanes and the last elements (see the source)."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_sdot_lanes", NULL, -1, methods};

PyMODINIT_FUNC PyInit__sdot_lanes(void) {
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddIntConstant(m, "API", SDOT_LANES_API) < 0) Py_CLEAR(m);
    return m;
}
