/* Whether a row of a compared pair of nodes has an error over rtol, the test the first divergence's rows
 * (graph/divergence_rows.py: node_exceeds) make of every node a chunk task compares: each NPU item with
 * the Bench item of its name, its statistics (markers.STATS, configure_stats' keys) by
 * analysis/row_errors.py's rule (stats_error). Part of the summary compare of a node pair (compare.c:
 * summary_pair, which asks it of the pair it has compared); not an entry point of its own. */
#include "speedups.h"

enum { WITHIN = ROWS_WITHIN, EXCEEDS = ROWS_EXCEED, ASK_PYTHON = ROWS_ASK_PYTHON };

/* row_errors' rule: where in a row's statistics the two are whose larger finite |Bench| is its scale
 * (SCALE_STATS), and the one measured against its own |Bench| (NORM_STAT); configured: 1 once
 * configure_errors was called */
static struct {
    int scale[2], norm, configured;
} E;

/* configure_errors(scale_stats, norm_stat): take row_errors.SCALE_STATS and NORM_STAT (places among
 * the N_STATS statistics) */
PyObject *configure_errors(PyObject *self, PyObject *args) {
    int a, b, norm;
    if (!PyArg_ParseTuple(args, "(ii)i", &a, &b, &norm))
        return NULL;
    if (a < 0 || a >= N_STATS || b < 0 || b >= N_STATS || norm < 0 || norm >= N_STATS) {
        PyErr_Format(PyExc_ValueError, "configure_errors: places among the %d statistics", N_STATS);
        return NULL;
    }
    E.scale[0] = a;
    E.scale[1] = b;
    E.norm = norm;
    E.configured = 1;
    Py_RETURN_NONE;
}

/* the statistics of an item in o (borrowed; None where it has none, as divergence_rows._stats_of reads
 * them): 1, 0 where it is not a dict (the Python path), -1 on error */
static int item_stats(PyObject *item, PyObject *o[N_STATS]) {
    if (!PyDict_CheckExact(item))
        return 0;
    for (int i = 0; i < N_STATS; i++) {
        o[i] = PyDict_GetItemWithError(item, PyTuple_GET_ITEM(stat_keys_held, i));
        if (o[i] == NULL && PyErr_Occurred())
            return -1;
        o[i] = o[i] != NULL ? o[i] : Py_None;
    }
    return 1;
}

/* node_exceeds' test of a row of these statistics: the same statistics (as tuples are equal) are no
 * error; else, where all are floats, whether row_errors.stats_error (no MaxAbsErr, no EucDist) exceeds
 * rtol: a statistic's error is 0 where the two are equal (or both NaN), infinite where one is not finite,
 * else its difference beyond atol over the Bench's larger finite |Max| or |Min| (E.scale: Max, Min,
 * Mean) or its own |Bench| (E.norm: Norm; none where that is not finite), infinite where that is 0. EXCEEDS, WITHIN, ASK_PYTHON
 * where they are not all floats; -1 on error. (atol finite, rtol finite from 0: no error is NaN.) */
static int stats_exceed(PyObject *no[N_STATS], PyObject *bo[N_STATS], double atol, double rtol) {
    int same = 1;
    for (int i = 0; i < N_STATS && same; i++)
        if ((same = PyObject_RichCompareBool(no[i], bo[i], Py_EQ)) < 0)
            return -1;
    if (same)
        return WITHIN;
    double n[N_STATS], b[N_STATS];
    for (int i = 0; i < N_STATS; i++) {
        if (!PyFloat_CheckExact(no[i]) || !PyFloat_CheckExact(bo[i]))
            return ASK_PYTHON;
        n[i] = PyFloat_AS_DOUBLE(no[i]);
        b[i] = PyFloat_AS_DOUBLE(bo[i]);
    }
    double high = isfinite(b[E.scale[0]]) ? fabs(b[E.scale[0]]) : 0.0;
    double low = isfinite(b[E.scale[1]]) ? fabs(b[E.scale[1]]) : 0.0;
    double scale = low > high ? low : high;
    for (int i = 0; i < N_STATS; i++) {
        int norm = i == E.norm;
        if (norm && !isfinite(b[i]))
            continue;
        double base = norm ? fabs(b[i]) : scale, error;
        if (n[i] == b[i] || (isnan(n[i]) && isnan(b[i])))
            error = 0.0;
        else if (!(isfinite(n[i]) && isfinite(b[i])))
            error = INFINITY;
        else {
            double excess = fabs(n[i] - b[i]) - atol;
            error = excess <= 0 ? 0.0 : base > 0 ? excess / base : INFINITY;
        }
        if (error > rtol)
            return EXCEEDS;
    }
    return WITHIN;
}

/* stats_exceed of the row of NPU item ``item`` named ``name`` and the Bench item of that name (the
 * outputs' over the inputs', as a merged dict holds them; WITHIN where there is none) */
static int item_exceeds(PyObject *item, PyObject *name, PyObject *bench_in, PyObject *bench_out, double atol,
                        double rtol) {
    PyObject *partner = PyDict_GetItemWithError(bench_out, name);
    if (partner == NULL && !PyErr_Occurred())
        partner = PyDict_GetItemWithError(bench_in, name);
    if (partner == NULL && PyErr_Occurred())
        return -1;
    if (partner == NULL || partner == Py_None)
        return WITHIN;
    PyObject *no[N_STATS], *bo[N_STATS];
    int rc = item_stats(item, no);
    if (rc > 0)
        rc = item_stats(partner, bo);
    return rc > 0 ? stats_exceed(no, bo, atol, rtol) : rc == 0 ? ASK_PYTHON /* (not dicts) */ : -1;
}

/* node_exceeds of a node whose partner's items have its items' names (npu_*: its input_data and
 * output_data; bench_*: its partner's) in a statistics compare, not a communication node: ROWS_EXCEED
 * where a row's error exceeds rtol, ROWS_WITHIN where none does; ROWS_ASK_PYTHON where a row's
 * statistics differ and are not all floats, the items are not dicts, atol is not finite or rtol not a
 * finite number from 0 (the Python path); -1 on error */
int rows_exceed(PyObject *npu_in, PyObject *npu_out, PyObject *bench_in, PyObject *bench_out, double atol,
                double rtol) {
    if (stat_keys_held == NULL || !E.configured) {
        PyErr_SetString(PyExc_RuntimeError, "_speedups.configure_stats() or configure_errors() was not called");
        return -1;
    }
    if (!(isfinite(atol) && 0 <= rtol && rtol < INFINITY))
        return ASK_PYTHON;
    PyObject *sides[2] = {npu_in, npu_out}, *name, *item;
    Py_ssize_t pos = 0;
    for (int s = 0; s < 2; s++, pos = 0)
        while (PyDict_Next(sides[s], &pos, &name, &item)) {
            int rc = item_exceeds(item, name, bench_in, bench_out, atol, rtol);
            if (rc != WITHIN)
                return rc;
        }
    return WITHIN;
}
