"""The numbers of the static-graph kernel compare (compare.md §2.5), as the reference computes them.

- ``tensor_stats``: max, min, mean and L2 norm of one whole array (no squeeze), as numpy scalars of the
  types numpy returns (float16 stays float16, int max stays int32, bool max is a bool...).
- ``compare_arrays``: the prechecks, the tensor metrics (``metrics.tensor``) and the accuracy verdict
  of two ``.npy`` tensors.
- ``compare_statistics``: the statistic.csv diffs, relative errors and verdict, in float32.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from msprobe_dask.columns import COSINE, MAX_ABS_ERR, NA, NAN, NOT_REACHED, REACHED, TENSOR_METRIC_COLUMNS
from msprobe_dask.metrics.chunked import aggregate_partials, chunk_partials
from msprobe_dask.metrics.one_shot import measure_arrays
from msprobe_dask.metrics.reference_dot import reference_dot
from msprobe_dask.metrics.stats import PERCENT
from msprobe_dask.metrics.tensor import BIG_TENSOR_ELEMS, measure_pair
from msprobe_dask.metrics.tensor_cells import NOT_AVAILABLE, UNSUPPORTED, TensorMetrics

SCALAR = "This is type of scalar data, can not compare.\n"
SHAPE = "Shape of NPU and bench Tensor do not match.\n"
DTYPE = "Dtype of NPU and bench Tensor do not match. Skipped.\n"
EMPTY = "This is an empty tensor, can not compare.\n"  # ours: the reference crashes (D17)
NAN_PLACES = "The position of inf or nan in NPU and bench Tensor do not match.\n"
ONE_ELEMENT = "This is a 1-d tensor of length 1."
ZERO = "Cannot compare by Cosine Similarity, All the data is Zero in {side} dump data."
STAT_SHAPE = "Tensor shapes do not match.\n"

Stats = tuple[Any, Any, Any, Any]
COSINE_AT, MAX_ABS_AT = TENSOR_METRIC_COLUMNS.index(COSINE), TENSOR_METRIC_COLUMNS.index(MAX_ABS_ERR)


@dataclass(frozen=True, slots=True)
class Verdict:
    """What a pair of tensors (or of statistic lines) gets besides its statistics."""

    accuracy: str | None  # REACHED, NOT_REACHED, "None" (metrics not numbers) or None (not compared)
    message: str | None
    cells: tuple[Any, ...] | None = None  # the tensor metrics (their columns), or 4 diffs + 4 relative errors


def tensor_stats(array: np.ndarray) -> Stats:
    """(max, min, mean, l2norm) of the whole array; Nones for an empty one."""
    if array.size == 0:
        return (None, None, None, None)
    with np.errstate(all="ignore"):
        return (np.max(array), np.min(array), np.mean(array), l2_norm(array))


def l2_norm(array: np.ndarray) -> np.generic:
    """``np.linalg.norm(array)`` as the reference's process gives it. Of a float64, integer or bool array it
    is the ddot of the float64 values (in memory order), which OpenBLAS sums in one run per thread: made
    with the reference's threads (``reference_dot``), not this process's (one in a worker)."""
    if array.dtype == np.float64 or array.dtype.kind in "iub":
        flat = array.astype(np.float64, copy=False).ravel(order="K")
        return np.sqrt(reference_dot(flat, flat))
    return np.linalg.norm(array)


def accuracy(cosine: Any, max_abs: Any) -> str:
    """``No`` if (cos < 0.99 and MaxAbsErr > 0.001) or cos < 0.9 or MaxAbsErr > 1; ``None`` if not numbers."""
    try:
        cos, err = float(cosine), float(max_abs)
    except (TypeError, ValueError):
        return "None"
    return NOT_REACHED if (cos < 0.99 and err > 0.001) or cos < 0.9 or err > 1 else REACHED


def _precheck(npu: np.ndarray, bench: np.ndarray) -> str:
    messages = []
    if npu.size == 0 or bench.size == 0:
        messages.append(EMPTY)
    if npu.ndim == 0 or bench.ndim == 0:
        messages.append(SCALAR)
    if npu.shape != bench.shape:
        messages.append(SHAPE)
    if npu.dtype != bench.dtype:
        messages.append(DTYPE)
    return "".join(messages)


def all_zero(array: np.ndarray) -> bool:
    """All elements zero once NaN/Inf (at the same places on both sides by now) count as zero."""
    if array.dtype.kind == "f":
        return not np.any(np.where(np.isfinite(array), array, 0))
    return not np.any(array)


def _metrics(npu: np.ndarray, bench: np.ndarray, paths: tuple[Path, Path], big_elems: int) -> TensorMetrics:
    if npu.size == 1:  # the reference computes every metric but the cosine here
        return aggregate_partials([chunk_partials(npu.reshape(-1), bench.reshape(-1))])
    if npu.size > big_elems:  # chunk by chunk from the files, never a whole copy in memory
        return measure_pair(*paths, big_elems=big_elems)
    return measure_arrays(np.array(npu), np.array(bench))


def compare_arrays(
    npu: np.ndarray,
    bench: np.ndarray,
    paths: tuple[Path, Path],
    big_elems: int = BIG_TENSOR_ELEMS,
    npu_all_zero: Callable[[], bool] | None = None,
) -> Verdict:
    """The verdict of two tensors read from ``paths``. Of more than ``big_elems`` elements, the arrays need
    not hold the tensors' values (their metrics are read from the files), only their dtype and shape;
    whether npu's values are all zero is then ``npu_all_zero()``."""
    problem = _precheck(npu, bench)
    if problem:
        return Verdict(None, problem)
    metrics = _metrics(npu, bench, paths, big_elems)
    if metrics.cells[COSINE_AT] == NOT_AVAILABLE:  # (then every cell is)
        return Verdict(None, NAN_PLACES)
    cells = list(metrics.cells)
    message = None
    if npu.size == 1:
        cells[COSINE_AT], message = UNSUPPORTED, ONE_ELEMENT
    elif cells[COSINE_AT] == NAN:
        zero = npu_all_zero() if npu_all_zero is not None else all_zero(npu)
        message = ZERO.format(side="npu" if zero else "Bench")
    return Verdict(accuracy(cells[COSINE_AT], cells[MAX_ABS_AT]), message, tuple(cells))


def compare_statistics(npu: Stats, bench: Stats) -> tuple[str, list[Any], list[str]]:
    """(accuracy, 4 diffs, 4 relative errors) of two lines' float32 statistics.

    A relative error is ``|diff / bench * 100|`` printed as float32 with ``%``, ``N/A`` when the bench
    value is 0 and ``Nan`` when it is not a number. The verdict is ``Yes`` when
    ``max_diff / (max(npu_max, bench_max) + 1e-10) <= 0.5`` (not absolute: a lower target passes).
    """
    with np.errstate(all="ignore"):
        diffs = [n - b for n, b in zip(npu, bench)]
        relative = []
        for diff, base in zip(diffs, bench):
            if base == 0:
                relative.append(NA)
                continue
            value = abs(diff / base * 100)
            relative.append(NAN if math.isnan(value) else str(value) + PERCENT)
        ratio = diffs[0] / (max(npu[0], bench[0]) + 1e-10)
    return (REACHED if ratio <= 0.5 else NOT_REACHED), diffs, relative
