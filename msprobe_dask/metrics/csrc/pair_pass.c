/* msprobe_dask.metrics._pair_pass: one pass over a pair of finite float tensors (metrics/one_shot.py).

pair_pass(n, n_kind, b, b_kind, n64, b64, diff64, rtype_is_double, eps, thousandth, five_thousandths)
  n, b:    the two tensors' elements (any buffer, C order), of kind 0 float16, 1 bfloat16, 2 float32,
           3 float64 (n_kind, b_kind);
  n64, b64, diff64: writable float64 buffers of as many elements: n and b widened exactly, and n64 - b64
           (the arrays the float64 dot products of Cosine and EucDist are taken on, by BLAS, in Python);
  rtype_is_double: the relative error's dtype (numpy's result_type(n, b, float32)) is float64, else
           float32; eps: that dtype's eps, added to both sides where bench is 0;
  thousandth, five_thousandths: the ratios' limits, in the dtype numpy compares the relative errors in
           (the Python side passes them already rounded to it).
returns (max |n64 - b64|, max relative error, count below thousandth, count below five_thousandths),
element by element the arithmetic of the Python definition (metrics/one_shot.py:finite_float_cells),
which is exact IEEE float32 / float64 (no fused multiply-add: there is no multiply). A NaN or Inf in
the input makes meaningless numbers, which Python never uses (it falls back when a sum of squares or
the largest relative error is not finite). The GIL is released during the loop.
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <math.h>
#include <string.h>

#define PAIR_PASS_API 1 /* one_shot.PAIR_PASS_API: change both with the function's arguments */

enum { F16 = 0, BF16 = 1, F32 = 2, F64 = 3 };
static const Py_ssize_t ITEMSIZE[] = {2, 2, 4, 8};

typedef struct {
    double max_abs, max_rel;
    Py_ssize_t under1, under5;
} Result;

typedef Result (*PassFn)(const void *, const void *, double *, double *, double *, Py_ssize_t, double,
                         double, double);

#define float_abs fabsf
#define double_abs fabs
#define CAT(a, b) a##b
#define CAT2(a, b) CAT(a, b)

/* The loops twice: for any x86-64 (or other) CPU, and with AVX2 where the compiler can target it,
   chosen at run time by the CPU (the same IEEE arithmetic: AVX2 has no fused multiply-add, and there is
   no multiply anyway). */
#define NAMED(name) CAT2(name, _base)
#include "pair_pass_loops.h"
#undef NAMED

#if defined(__GNUC__) && defined(__x86_64__)
#define WITH_AVX2 1
#pragma GCC push_options
#pragma GCC target("avx2")
#define NAMED(name) CAT2(name, _avx2)
#include "pair_pass_loops.h"
#undef NAMED
#pragma GCC pop_options
#endif

static int check_output(Py_buffer *buf, Py_ssize_t size, const char *name) {
    if (buf->len < size * (Py_ssize_t)sizeof(double)) {
        PyErr_Format(PyExc_ValueError, "%s holds fewer than %zd float64 elements", name, size);
        return -1;
    }
    return 0;
}

static PyObject *pair_pass(PyObject *self, PyObject *args) {
    Py_buffer n, b, n64, b64, diff64;
    int nk, bk, rdouble;
    double eps, t1, t5;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*iy*iw*w*w*pddd", &n, &nk, &b, &bk, &n64, &b64, &diff64, &rdouble, &eps,
                          &t1, &t5))
        return NULL;
    PyObject *out = NULL;
    Py_ssize_t size = 0;
    if (nk < 0 || nk > 3 || bk < 0 || bk > 3) {
        PyErr_SetString(PyExc_ValueError, "a kind is 0 (float16), 1 (bfloat16), 2 (float32) or 3 (float64)");
        goto done;
    }
    size = n.len / ITEMSIZE[nk];
    if (n.len % ITEMSIZE[nk] || b.len != size * ITEMSIZE[bk]) {
        PyErr_SetString(PyExc_ValueError, "the two tensors hold different numbers of elements");
        goto done;
    }
    if (check_output(&n64, size, "n64") || check_output(&b64, size, "b64") ||
        check_output(&diff64, size, "diff64"))
        goto done;
    Result res;
    PassFn fn = (rdouble ? passes_d_base : passes_f_base)[nk][bk];
#ifdef WITH_AVX2
    if (__builtin_cpu_supports("avx2")) fn = (rdouble ? passes_d_avx2 : passes_f_avx2)[nk][bk];
#endif
    Py_BEGIN_ALLOW_THREADS
    res = fn(n.buf, b.buf, n64.buf, b64.buf, diff64.buf, size, eps, t1, t5);
    Py_END_ALLOW_THREADS
    out = Py_BuildValue("ddnn", res.max_abs, res.max_rel, res.under1, res.under5);
done:
    PyBuffer_Release(&n);
    PyBuffer_Release(&b);
    PyBuffer_Release(&n64);
    PyBuffer_Release(&b64);
    PyBuffer_Release(&diff64);
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
