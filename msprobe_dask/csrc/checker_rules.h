/* The statistics checkers' rules, judge/rules.py's CHECKERS (CheckerRules): the one definition that
 * writers/csrc/stat_lines.c and graph/csrc/compare.c take, each from the rules handed to it (their
 * ``checkers``), read by name here; and the bits of a row's messages, in the order of its messages. */
#ifndef MSPROBE_DASK_CHECKER_RULES_H
#define MSPROBE_DASK_CHECKER_RULES_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#include "py_calls.h"

#define N_MESSAGES 7 /* CheckerRules.messages: NaN/Inf, NormOutput, RequiresGrad, Scalar, DType, Shape, Tenfold */
enum { NAN_INF = 1, NORM_OUTPUT = 2, REQUIRES_GRAD = 4, SCALAR = 8, DTYPE = 16, SHAPE = 32, TENFOLD = 64 };

/* borrowed from the record taken (its fields), which the kernel keeps alive while it reads them */
typedef struct {
    PyObject *output_part, *all_ignored, *input_ignored, *fused, *not_a_tensor, *scalar_shape;
    PyObject *messages[N_MESSAGES];
    double small_input_norm, big_output_norm, tenfold, output_norm_over_zero;
} CheckerRules;

/* rules.<name>, borrowed (``rules`` holds it: a field of the record), if ``ok`` says it is of its type;
 * NULL with an exception naming it (``what``: the kernel) */
static inline PyObject *checker_rule(PyObject *rules, const char *name, int (*ok)(PyObject *), const char *what) {
    PyObject *v = PyObject_GetAttrString(rules, name);
    if (v == NULL) {
        PyErr_Format(PyExc_TypeError, "%s: the checkers' rules have no %s", what, name);
        return NULL;
    }
    Py_DECREF(v);
    if (!ok(v)) {
        PyErr_Format(PyExc_TypeError, "%s: the checkers' %s is of the wrong type", what, name);
        return NULL;
    }
    return v;
}

static inline int is_str(PyObject *v) { return PyUnicode_CheckExact(v); }
static inline int is_set(PyObject *v) { return PyAnySet_Check(v); }
static inline int is_texts(PyObject *v) { /* a tuple of str */
    if (!PyTuple_Check(v))
        return 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(v); i++)
        if (!PyUnicode_CheckExact(PyTuple_GET_ITEM(v, i)))
            return 0;
    return 1;
}

/* the checkers' rules ``rules`` (a CheckerRules) into *C; -1 with an exception set, *C then empty */
static inline int take_checker_rules(PyObject *rules, CheckerRules *C, const char *what) {
    PyObject *messages, *limits;
    if ((C->output_part = checker_rule(rules, "output_part", is_str, what)) == NULL ||
        (C->all_ignored = checker_rule(rules, "all_ignored", is_set, what)) == NULL ||
        (C->input_ignored = checker_rule(rules, "input_ignored", is_set, what)) == NULL ||
        (C->fused = checker_rule(rules, "fused_weights", is_texts, what)) == NULL ||
        (C->not_a_tensor = checker_rule(rules, "not_a_tensor", is_str, what)) == NULL ||
        (C->scalar_shape = checker_rule(rules, "scalar_shape", is_str, what)) == NULL ||
        (messages = checker_rule(rules, "messages", is_texts, what)) == NULL ||
        (limits = PyObject_GetAttrString(rules, "limits")) == NULL)
        goto fail;
    int numbers = rule_number(limits, "small_input_norm", &C->small_input_norm, what) < 0 ||
                  rule_number(limits, "big_output_norm", &C->big_output_norm, what) < 0 ||
                  rule_number(limits, "tenfold", &C->tenfold, what) < 0 ||
                  rule_number(limits, "output_norm_over_zero", &C->output_norm_over_zero, what) < 0
                      ? -1
                      : 0;
    Py_DECREF(limits);
    if (numbers < 0)
        goto fail;
    if (PyTuple_GET_SIZE(messages) != N_MESSAGES) {
        PyErr_Format(PyExc_TypeError, "%s: the checkers' messages must be %d", what, N_MESSAGES);
        goto fail;
    }
    for (int i = 0; i < N_MESSAGES; i++)
        C->messages[i] = PyTuple_GET_ITEM(messages, i);
    return 0;
fail:
    memset(C, 0, sizeof(*C));
    return -1;
}

#endif
