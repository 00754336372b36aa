"""The reference's float64 dot products, digit for digit, whatever the BLAS threads of this process.

The reference computes Cosine and EucDist with ``np.dot`` / ``np.linalg.norm`` on float64 arrays: one
OpenBLAS ``ddot`` call. Above ``PARALLEL_ABOVE`` elements OpenBLAS cuts that dot into one run per BLAS
thread (the first runs ``ceil(rest / threads left)`` elements long), sums each run on its thread and adds
the runs' sums in order to 0.0; so the last digit of EucDist depends on the machine's thread count.
The corpus's reference outputs were made on a 2-CPU machine (``REFERENCE_THREADS``).

``reference_dot`` makes those same runs itself, each one ``ddot`` on one BLAS thread, and adds them the
same way: the same bits in this process, in a dask worker (which starts with ``OPENBLAS_NUM_THREADS=1``)
and on a machine of any size. BLAS is pinned to one thread in every process that calls it (dask's
threads already use the CPUs; BLAS threads under them only contend for them).

The C pass of finite float pairs (``csrc/pair_pass.c``) sums the same runs itself, in the order of the
OpenBLAS kernel this process runs (``kernel_order``), without the float64 copies BLAS needs.
"""

from __future__ import annotations

import functools
import os
import threading

import numpy as np

PARALLEL_ABOVE = 10_000
"""OpenBLAS's ddot runs on one thread up to this many elements."""
REFERENCE_THREADS = 2

KERNEL_ORDERS = {"haswell": 0, "skylakex": 1}
"""OpenBLAS's ddot kernels (by the core name OpenBLAS reports) whose summation order the C pass
(``csrc/pair_pass.c``) makes itself, by the number it knows each by; checked against numpy on both."""

_PIN_LOCK = threading.Lock()
_pinned_in: int | None = None  # the process id where BLAS was pinned (a forked child pins again)


def pin_blas_to_one_thread() -> None:
    """Limit this process's BLAS to one thread (once per process)."""
    global _pinned_in
    if _pinned_in == os.getpid():
        return
    with _PIN_LOCK:
        if _pinned_in != os.getpid():
            from threadpoolctl import threadpool_limits

            threadpool_limits(1, user_api="blas")
            _pinned_in = os.getpid()


def thread_runs(size: int, threads: int = REFERENCE_THREADS) -> list[tuple[int, int]]:
    """The (start, stop) of each run OpenBLAS gives a thread, for a dot of ``size`` elements."""
    if size <= PARALLEL_ABOVE:
        return [(0, size)]
    runs, start = [], 0
    for left in range(threads, 0, -1):
        width = min(-(-(size - start) // left), size - start)
        runs.append((start, start + width))
        start += width
    return runs


def reference_dot(x: np.ndarray, y: np.ndarray) -> np.float64:
    """``x . y`` of two contiguous 1-D float64 arrays, as the reference's ``np.dot`` sums it."""
    pin_blas_to_one_thread()
    total = np.float64(0.0)
    for start, stop in thread_runs(x.size):
        total = total + np.dot(x[start:stop], y[start:stop])
    return total


@functools.cache
def kernel_order() -> int | None:
    """The summation order of this process's ``np.dot`` as the C pass knows it (``KERNEL_ORDERS``), or None
    for a BLAS whose order it does not make (the dots are then taken by BLAS on float64 copies)."""
    from threadpoolctl import threadpool_info

    cores = {
        str(info.get("architecture", "")).lower()
        for info in threadpool_info()
        if info.get("user_api") == "blas"
    }
    return KERNEL_ORDERS.get(cores.pop()) if len(cores) == 1 else None
