/* msprobe_dask.metrics._pair_pass: one pass over a pair of finite float tensors (metrics/one_shot.py).

pair_pass(n, n_kind, b, b_kind, rtype_is_double, eps, thousandth, five_thousandths, run_ends, order[, loops])
  n, b:    the two tensors' elements (any buffer, C order), of kind 0 float16, 1 bfloat16, 2 float32,
           3 float64 (n_kind, b_kind);
  rtype_is_double: the relative error's dtype (numpy's result_type(n, b, float32)) is float64, else
           float32; eps: that dtype's eps, added to both sides where bench is 0;
  thousandth, five_thousandths: the ratios' limits, in the dtype numpy compares the relative errors in
           (the Python side passes them already rounded to it);
  run_ends: where each run of the dot products ends (metrics/reference_dot.py:thread_runs), the last
           one at the tensors' size; order: the summation order of the dots (0 HASWELL, 1 SKYLAKEX);
  loops:   0 (the default) the widest loops the CPU runs (AVX-512, AVX2 and FMA, or generic C), 1 AVX2 at
           most, 2 the generic ones: the same results from each (the tests check every one).
returns (max |n - b|, max relative error, count below thousandth, count below five_thousandths,
         n.b, n.n, b.b, d.d), n and b widened exactly to float64 and d = n - b in float64: element by
element the arithmetic of the Python definition (metrics/one_shot.py:numpy_finite_float_cells), exact
IEEE float32 / float64, and the four dot products summed as its numpy (OpenBLAS's ddot, one call per
run, metrics/reference_dot.py) sums them, the runs' sums added in order to 0.0. Within a run, OpenBLAS's
x86-64 ddot kernels (kernel/x86_64/ddot.c and its microkernels) sum:
  HASWELL (AVX2): the first size - size mod 16 products, each added with one rounding (fma) into lane
           i mod 16 of 16 (4 accumulators of 4 lanes); each accumulator's lanes l and l + 2 added, the
           accumulators added as (0 + 1) + (2 + 3), then the two lanes; then the last products one by
           one, each rounded as a product and then as a sum;
  SKYLAKEX (AVX-512): the first multiple of 32 products with one rounding into lane i mod 32 of 32,
           folded to 16 (lanes l and l + 4 of each group of 8); one more block of 16 as HASWELL's; the
           16 lanes summed lane by lane as ((a0 + a1) + a2) + a3 over the 4 accumulators, then
           (l0 + l2) + (l1 + l3); then the last size mod 16 products one by one with one rounding (fma).
(Checked against numpy on both kernels, tests/metrics/test_pair_pass.py.) No other product or sum is
fused (fp-contract off). A NaN or Inf in the input makes meaningless numbers, which Python never uses
(it falls back when a sum of squares or the largest relative error is not finite). The GIL is released
during the loop.

The inputs may be memory-mapped files (tensor_file.mapped_run): a file cut while the loop reads it makes
the missing pages fault with SIGBUS, which would kill the process. While any loop runs, SIGBUS goes to a
handler of this module that jumps out of the faulting thread's loop, and pair_pass raises BufferError
(Python names the file); the handler is set when the first loop starts and the one before put back when
the last ends (both with the GIL held). A SIGBUS outside a loop puts the default action back and returns:
the fault repeats and ends the process, as it would have.
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <math.h>
#include <string.h>
#include <signal.h>
#include <setjmp.h>

#include "no_contraction.h"
#include "dot_orders.h"

#define PAIR_PASS_API 4 /* one_shot.PAIR_PASS_API: change both with the function's arguments */
#define MAX_RUNS 64

enum { F16 = 0, BF16 = 1, F32 = 2, F64 = 3 };
enum { DOTS = 4, LANES = 32, STAGED = 512 }; /* STAGED: elements widened at a time (a multiple of LANES) */
static const Py_ssize_t ITEMSIZE[] = {2, 2, 4, 8};

typedef struct {
    double max_abs, max_rel;
    Py_ssize_t under1, under5;
    double dots[DOTS];
} Result;

typedef struct {
    uint64_t max_abs, max_rel; /* the bits of the largest |n - b| (double) and relative error (its dtype) */
    int64_t under1, under5;
} State;

typedef Result (*PassFn)(const void *, const void *, const Py_ssize_t *, int, int, double, double, double);

#define float_abs fabsf
#define double_abs fabs
#define UINT_OF_f uint32_t
#define UINT_OF_d uint64_t
#define CAT(a, b) a##b
#define CAT2(a, b) CAT(a, b)

/* The loops twice: for any CPU, and with AVX2, FMA and F16C (float16 converted by _mm256_cvtph_ps) where
   the compiler can target them, chosen at run time by the CPU (the same IEEE arithmetic: fma is one
   rounding in hardware or in libm, and a float16 widens exactly either way). */
#define NAMED(name) CAT2(name, _base)
#include "pair_pass_loops.h"
#undef NAMED

#if defined(__GNUC__) && defined(__x86_64__)
#define WITH_AVX2 1
#include <immintrin.h>
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#define AVX2_LOOPS 1
#define NAMED(name) CAT2(name, _avx2)
#include "pair_pass_loops.h"
#undef NAMED
#undef AVX2_LOOPS
#pragma GCC pop_options
#pragma GCC push_options
#pragma GCC target("avx512f,avx512dq,avx2,fma,f16c")
#include "pair_pass_avx512.h"
#pragma GCC pop_options
#endif

enum { BEST_LOOPS = 0, AVX2_AT_MOST = 1, GENERIC_LOOPS = 2 }; /* pair_pass's `loops` */

/* The pass for the kinds and the relative error's dtype: the loops of the widest instruction set both the
   CPU and `loops` allow (the AVX-512 ones for float32 relative errors of 16/32-bit pairs only). */
static PassFn pass_for(int rdouble, int nk, int bk, int loops) {
#ifdef WITH_AVX2
    if (loops == BEST_LOOPS && !rdouble && nk != F64 && bk != F64 && __builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("avx512dq"))
        return passes_f_avx512[nk][bk];
    if (loops <= AVX2_AT_MOST && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
        __builtin_cpu_supports("f16c"))
        return (rdouble ? passes_d_avx2 : passes_f_avx2)[nk][bk];
#endif
    return (rdouble ? passes_d_base : passes_f_base)[nk][bk];
}

/* run_ends as a C array: increasing, the last at size. */
static int read_ends(PyObject *seq, Py_ssize_t size, Py_ssize_t *ends, int *runs) {
    PyObject *fast = PySequence_Fast(seq, "run_ends must be a sequence of ints");
    if (fast == NULL) return -1;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(fast), previous = 0;
    int ok = count >= 1 && count <= MAX_RUNS;
    for (Py_ssize_t r = 0; ok && r < count; r++) {
        ends[r] = PyLong_AsSsize_t(PySequence_Fast_GET_ITEM(fast, r));
        ok = !(ends[r] == -1 && PyErr_Occurred()) && ends[r] >= previous;
        previous = ends[r];
    }
    Py_DECREF(fast);
    if (!ok || previous != size) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_ValueError, "run_ends: 1 to %d increasing ends, the last at %zd", MAX_RUNS, size);
        return -1;
    }
    *runs = (int)count;
    return 0;
}

static _Thread_local sigjmp_buf *guard_jump; /* the running loop's way out, NULL outside a loop */
static struct sigaction before_guard;          /* SIGBUS's handler before the first loop started */
static int loops_running;                      /* changed with the GIL held */

static void on_sigbus(int sig, siginfo_t *info, void *context) {
    (void)info;
    (void)context;
    sigjmp_buf *jump = guard_jump;
    if (jump != NULL) {
        guard_jump = NULL;
        siglongjmp(*jump, 1);
    }
    signal(sig, SIG_DFL);
}

/* The handler set while a loop runs; -1 with an exception if it cannot be. */
static int guard_begin(void) {
    if (loops_running++ > 0) return 0;
    struct sigaction ours;
    memset(&ours, 0, sizeof ours);
    ours.sa_sigaction = on_sigbus;
    ours.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK; /* NODEFER: jumping out leaves the mask as it was */
    sigemptyset(&ours.sa_mask);
    if (sigaction(SIGBUS, &ours, &before_guard) == 0) return 0;
    loops_running--;
    PyErr_SetFromErrno(PyExc_OSError);
    return -1;
}

static void guard_end(void) {
    if (--loops_running == 0) sigaction(SIGBUS, &before_guard, NULL);
}

/* fn over the tensors; 0, or 1 when a page of them could not be read (SIGBUS). */
static int guarded_pass(PassFn fn, const void *n, const void *b, const Py_ssize_t *ends, int runs, int order,
                        double eps, double t1, double t5, Result *res) {
    sigjmp_buf jump;
    if (sigsetjmp(jump, 0) != 0) return 1;
    guard_jump = &jump;
    *res = fn(n, b, ends, runs, order, eps, t1, t5);
    guard_jump = NULL;
    return 0;
}

static PyObject *pair_pass(PyObject *self, PyObject *args) {
    Py_buffer n, b;
    int nk, bk, rdouble, order, loops = BEST_LOOPS, runs = 0;
    double eps, t1, t5;
    PyObject *run_ends;
    Py_ssize_t ends[MAX_RUNS];
    (void)self;
    if (!PyArg_ParseTuple(args, "y*iy*ipdddOi|i", &n, &nk, &b, &bk, &rdouble, &eps, &t1, &t5, &run_ends,
                          &order, &loops))
        return NULL;
    PyObject *out = NULL;
    if (nk < 0 || nk > 3 || bk < 0 || bk > 3) {
        PyErr_SetString(PyExc_ValueError, "a kind is 0 (float16), 1 (bfloat16), 2 (float32) or 3 (float64)");
        goto done;
    }
    if (check_order(order) < 0) goto done;
    Py_ssize_t size = n.len / ITEMSIZE[nk];
    if (n.len % ITEMSIZE[nk] || b.len != size * ITEMSIZE[bk]) {
        PyErr_SetString(PyExc_ValueError, "the two tensors hold different numbers of elements");
        goto done;
    }
    if (read_ends(run_ends, size, ends, &runs) < 0) goto done;
    Result res;
    int faulted;
    PassFn fn = pass_for(rdouble, nk, bk, loops);
    if (guard_begin() < 0) goto done;
    Py_BEGIN_ALLOW_THREADS
    faulted = guarded_pass(fn, n.buf, b.buf, ends, runs, order, eps, t1, t5, &res);
    Py_END_ALLOW_THREADS
    guard_end();
    if (faulted) {
        PyErr_SetString(PyExc_BufferError, "a page of the tensors could not be read (SIGBUS: a file cut?)");
        goto done;
    }
    out = Py_BuildValue("ddnndddd", res.max_abs, res.max_rel, res.under1, res.under5, res.dots[0],
                        res.dots[1], res.dots[2], res.dots[3]);
done:
    PyBuffer_Release(&n);
    PyBuffer_Release(&b);
    return out;
}

static PyMethodDef methods[] = {
    {"pair_pass", pair_pass, METH_VARARGS, "One pass over a pair of finite float tensors (see the source)."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_pair_pass", NULL, -1, methods};

PyMODINIT_FUNC PyInit__pair_pass(void) {
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddIntConstant(m, "API", PAIR_PASS_API) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
