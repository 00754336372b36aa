/* The summation orders of OpenBLAS's x86-64 dot kernels that the metrics kernels make (pair_pass.c: ddot;
   dot_lanes.c: sdot and ddot chunk by chunk), by the numbers metrics/reference_dot.py's
   KERNEL_ORDERS gives them, and the ddot kernels' sum of their 16 lanes. Included after Python.h. */
#ifndef MSPROBE_DOT_ORDERS_H
#define MSPROBE_DOT_ORDERS_H

enum { HASWELL = 0, SKYLAKEX = 1 };

static inline int check_order(int order) {
    if (order == HASWELL || order == SKYLAKEX) return 0;
    PyErr_SetString(PyExc_ValueError, "the order is 0 (Haswell) or 1 (SkylakeX)");
    return -1;
}

/* The 16 lanes of a ddot summed as the order's kernel sums them. */
static inline double lanes_sum(const double *a, int order) {
    if (order == SKYLAKEX) { /* the four accumulators added lane by lane, then the lanes */
        double l4[4];
        for (int l = 0; l < 4; l++) l4[l] = ((a[l] + a[4 + l]) + a[8 + l]) + a[12 + l];
        return (l4[0] + l4[2]) + (l4[1] + l4[3]);
    }
    double h[4][2]; /* HASWELL: each accumulator's halves added, then the accumulators, then the lanes */
    for (int q = 0; q < 4; q++) {
        h[q][0] = a[4 * q] + a[4 * q + 2];
        h[q][1] = a[4 * q + 1] + a[4 * q + 3];
    }
    return ((h[0][0] + h[1][0]) + (h[2][0] + h[3][0])) + ((h[0][1] + h[1][1]) + (h[2][1] + h[3][1]));
}

#endif
