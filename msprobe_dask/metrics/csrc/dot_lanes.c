/* msprobe_dask.metrics._dot_lanes: x . x summed chunk by chunk as one call of OpenBLAS's sdot (float32) or
ddot (float64) kernels for x86-64 sums it (metrics/kernel_stats.py: the L2 norm of a kernel dump's tensor,
whose np.linalg.norm is that dot, without the whole tensor in memory). (Checked against numpy on both
kernels, tests/metrics/test_kernel_stats.py.)

sdot, on n elements (kernel/x86_64/sdot.c and its microkernels):
  SKYLAKEX (AVX-512): the first n64 = (n & -32) & -64 squares, each added with one rounding (fma) into
           lane i mod 64 of 64 float32 lanes (4 accumulators of 16); each accumulator folded to 8 lanes
           (l and l + 8 added); one more block of 32 when n & -32 exceeds n64, element i of it fma'd into
           lane i mod 8 of folded accumulator i / 8; the accumulators added lane by lane as
           ((a0 + a1) + a2) + a3, those 8 lanes' halves added (l and l + 4), then (l0 + l1) + (l2 + l3);
  HASWELL (AVX2): the first n & -32 squares fma'd into lane i mod 32 (4 accumulators of 8); each
           accumulator's halves added (l and l + 4), the accumulators lane by lane as (a0 + a1) + (a2 + a3),
           then (l0 + l1) + (l2 + l3);
then that float widened to double and the last n mod 32 squares, each rounded to float32, added to it one
by one in double; the sum rounded to float32.

ddot (kernel/x86_64/ddot.c, a float64, integer or bool tensor's float64 values): OpenBLAS cuts a ddot of
more than 10,000 elements into one run per thread (metrics/reference_dot.py: thread_runs); each run is one
call of the kernel, and Python adds the runs' dots in order. On a run of n elements (pair_pass.c says the
same of its dots):
  HASWELL (AVX2): the first n & -16 squares, each added with one rounding (fma) into lane i mod 16 of 16;
  SKYLAKEX (AVX-512): the first (n & -16) & -32 squares fma'd into lane i mod 32 of 32, folded to 16
           (lane 4q + l is lanes 8q + l and 8q + 4 + l added); then the squares up to n & -16 fma'd into
           lane i mod 16 of those;
then the 16 lanes summed in the order's tree (dot_orders.h: lanes_sum), and the last n mod 16 squares added
one by one: with one rounding (fma) on SKYLAKEX, rounded as a product and then as a sum on HASWELL.

sdot_add(lanes, x, first, n, order): elements x (a float32 buffer) are the tensor's elements first,
    first + 1, ... of a tensor of n elements; those below the order's blocked count (n64, or n & -32:
    sdot_blocked(n, order)) are fma'd into lanes (a writable buffer of 64 float32), the others ignored.
sdot_blocked(n, order): that count.
sdot_finish(lanes, rest, n, order): the dot, lanes holding the blocked squares and rest the tensor's
    elements from the blocked count to n (fewer than 64), as a float.
ddot_add(lanes, x, first, n, order): elements x (a float64 buffer) are a run's elements first, first + 1,
    ... of a run of n elements; those below n & -16 are fma'd into lanes (a writable buffer of 48 float64:
    32 wide lanes, then the 16 lanes), the others ignored.
ddot_finish(lanes, rest, n, order): the run's dot, lanes holding its squares below n & -16 and rest its
    last n mod 16 elements (float64), as a float.
The adds release the GIL.
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>

#include "no_contraction.h"
#include "dot_orders.h"

#define DOT_LANES_API 2 /* kernel_stats.DOT_LANES_API: change both with the functions' arguments */

enum { LANES = 64, HALF = 32, GROUP = 8 };          /* sdot's lanes */
enum { WIDE = 32, NARROW = 16, STATE = WIDE + NARROW }; /* ddot's */

/* Squares of x (count elements, the first one at position pos) fma'd into lane pos mod width, width
   BIG or SMALL (each a constant loop, which the compiler vectorises). */
#if defined(__GNUC__) && defined(__x86_64__)
#define CLONES __attribute__((target_clones("arch=skylake-avx512", "fma", "default")))
#else
#define CLONES
#endif
#define FMA_LANES(NAME, T, FMA, BIG, SMALL)                                                            \
    CLONES static void NAME(T *restrict lanes, const T *restrict x, Py_ssize_t count, Py_ssize_t pos,  \
                            int width) {                                                               \
        Py_ssize_t i = 0;                                                                              \
        for (; i < count && (pos + i) % width; i++) {                                                  \
            int l = (int)((pos + i) % width);                                                          \
            lanes[l] = FMA(x[i], x[i], lanes[l]);                                                      \
        }                                                                                              \
        if (width == BIG) {                                                                            \
            for (; i + BIG <= count; i += BIG)                                                         \
                for (int l = 0; l < BIG; l++) lanes[l] = FMA(x[i + l], x[i + l], lanes[l]);            \
        } else {                                                                                       \
            for (; i + SMALL <= count; i += SMALL)                                                     \
                for (int l = 0; l < SMALL; l++) lanes[l] = FMA(x[i + l], x[i + l], lanes[l]);          \
        }                                                                                              \
        for (int l = 0; i < count; i++, l++) lanes[l] = FMA(x[i], x[i], lanes[l]);                     \
    }
FMA_LANES(fma_lanes_f, float, fmaf, LANES, HALF)
FMA_LANES(fma_lanes_d, double, fma, WIDE, NARROW)

typedef struct {
    Py_buffer lanes, x; /* x: the elements (add), or the last ones (finish) */
    Py_ssize_t first, n;
    int order;
} Args;

/* The arguments of an add (lanes, x, first, n, order: `with_first`) or a finish (lanes, rest, n, order),
   lanes a writable buffer of `lanes_bytes`; -1 with an exception set, else release them with release(). */
static int parse(PyObject *args, int with_first, Py_ssize_t lanes_bytes, Args *a) {
    PyObject *lanes_obj;
    a->first = 0;
    int ok = with_first ? PyArg_ParseTuple(args, "Oy*nni", &lanes_obj, &a->x, &a->first, &a->n, &a->order)
                        : PyArg_ParseTuple(args, "Oy*ni", &lanes_obj, &a->x, &a->n, &a->order);
    if (!ok) return -1;
    if (check_order(a->order) < 0 || a->first < 0 || a->n < 0 ||
        PyObject_GetBuffer(lanes_obj, &a->lanes, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "first and n are not negative");
        PyBuffer_Release(&a->x);
        return -1;
    }
    if (a->lanes.len != lanes_bytes) {
        PyErr_Format(PyExc_ValueError, "lanes is a buffer of %zd bytes", lanes_bytes);
        PyBuffer_Release(&a->lanes);
        PyBuffer_Release(&a->x);
        return -1;
    }
    return 0;
}

static void release(Args *a) {
    PyBuffer_Release(&a->lanes);
    PyBuffer_Release(&a->x);
}

static Py_ssize_t blocked_count(Py_ssize_t n, int order) {
    Py_ssize_t n32 = n & -(Py_ssize_t)HALF;
    return order == SKYLAKEX ? n32 & -(Py_ssize_t)LANES : n32;
}

static PyObject *sdot_add(PyObject *self, PyObject *args) {
    Args a;
    (void)self;
    if (parse(args, 1, LANES * (Py_ssize_t)sizeof(float), &a) < 0) return NULL;
    Py_ssize_t count = a.x.len / (Py_ssize_t)sizeof(float), end = blocked_count(a.n, a.order);
    if (a.first + count > end) count = a.first >= end ? 0 : end - a.first;
    int width = a.order == SKYLAKEX ? LANES : HALF;
    Py_BEGIN_ALLOW_THREADS
    fma_lanes_f((float *)a.lanes.buf, (const float *)a.x.buf, count, a.first, width);
    Py_END_ALLOW_THREADS
    release(&a);
    Py_RETURN_NONE;
}

static PyObject *sdot_blocked(PyObject *self, PyObject *args) {
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

static PyObject *sdot_finish(PyObject *self, PyObject *args) {
    Args a;
    (void)self;
    if (parse(args, 0, LANES * (Py_ssize_t)sizeof(float), &a) < 0) return NULL;
    Py_ssize_t end = blocked_count(a.n, a.order), n32 = a.n & -(Py_ssize_t)HALF;
    PyObject *out = NULL;
    if (a.x.len != (a.n - end) * (Py_ssize_t)sizeof(float)) {
        PyErr_SetString(PyExc_ValueError, "rest holds the elements from the blocked count to n");
    } else {
        const float *r = (const float *)a.x.buf;
        float lanes_sum = a.order == SKYLAKEX ? skylakex_sum((const float *)a.lanes.buf, r, n32 - end)
                                              : haswell_sum(a.lanes.buf);
        double dot = (double)lanes_sum;
        for (Py_ssize_t i = n32 - end; i < a.n - end; i++) {
            float square = r[i] * r[i];
            dot += (double)square;
        }
        out = PyFloat_FromDouble((double)(float)dot);
    }
    release(&a);
    return out;
}

static PyObject *ddot_add(PyObject *self, PyObject *args) {
    Args a;
    (void)self;
    if (parse(args, 1, STATE * (Py_ssize_t)sizeof(double), &a) < 0) return NULL;
    Py_ssize_t count = a.x.len / (Py_ssize_t)sizeof(double);
    Py_ssize_t with16 = a.n & -(Py_ssize_t)NARROW, wide_end = a.order == SKYLAKEX ? with16 & -(Py_ssize_t)WIDE : 0;
    double *wide = (double *)a.lanes.buf, *narrow = wide + WIDE;
    const double *v = (const double *)a.x.buf;
    Py_BEGIN_ALLOW_THREADS
    Py_ssize_t pos = a.first, end = a.first + count;
    if (pos < wide_end) {
        Py_ssize_t upto = end < wide_end ? end : wide_end;
        fma_lanes_d(wide, v, upto - pos, pos, WIDE);
        v += upto - pos;
        pos = upto;
        if (pos == wide_end) /* the wide lanes folded to 16, once */
            for (int q = 0; q < 4; q++)
                for (int l = 0; l < 4; l++) narrow[4 * q + l] = wide[8 * q + l] + wide[8 * q + 4 + l];
    }
    if (pos < with16) fma_lanes_d(narrow, v, (end < with16 ? end : with16) - pos, pos, NARROW);
    Py_END_ALLOW_THREADS
    release(&a);
    Py_RETURN_NONE;
}

static PyObject *ddot_finish(PyObject *self, PyObject *args) {
    Args a;
    (void)self;
    if (parse(args, 0, STATE * (Py_ssize_t)sizeof(double), &a) < 0) return NULL;
    Py_ssize_t with16 = a.n & -(Py_ssize_t)NARROW;
    PyObject *out = NULL;
    if (a.x.len != (a.n - with16) * (Py_ssize_t)sizeof(double)) {
        PyErr_SetString(PyExc_ValueError, "rest holds the run's last n mod 16 elements");
    } else {
        const double *r = (const double *)a.x.buf;
        double dot = with16 ? lanes_sum((const double *)a.lanes.buf + WIDE, a.order) : 0.0;
        for (Py_ssize_t i = 0; i < a.n - with16; i++) {
            if (a.order == SKYLAKEX) {
                dot = fma(r[i], r[i], dot);
            } else {
                double square = r[i] * r[i];
                dot += square;
            }
        }
        out = PyFloat_FromDouble(dot);
    }
    release(&a);
    return out;
}

static PyMethodDef methods[] = {
    {"sdot_add", sdot_add, METH_VARARGS, "Fma a float32 chunk's squares into the lanes (see the source)."},
    {"sdot_blocked", sdot_blocked, METH_VARARGS, "The elements sdot sums in the lanes (see the source)."},
    {"sdot_finish", sdot_finish, METH_VARARGS, "sdot from the lanes and the last elements (see the source)."},
    {"ddot_add", ddot_add, METH_VARARGS, "Fma a float64 chunk's squares into a run's lanes (see the source)."},
    {"ddot_finish", ddot_finish, METH_VARARGS, "A run's ddot from its lanes and last elements (see the source)."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_dot_lanes", NULL, -1, methods};

PyMODINIT_FUNC PyInit__dot_lanes(void) {
    PyObject *m = PyModule_Create(&module);
    /* (the sizes of the lanes buffers sdot_add and ddot_add take: kernel_stats.py makes them) */
    if (m != NULL && (PyModule_AddIntConstant(m, "API", DOT_LANES_API) < 0 ||
                      PyModule_AddIntConstant(m, "SDOT_LANES", LANES) < 0 ||
                      PyModule_AddIntConstant(m, "DDOT_STATE", STATE) < 0))
        Py_CLEAR(m);
    return m;
}
