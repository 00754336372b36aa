"""One row of a kernel compare from a paired (target, golden) tensor, in the columns of ``kernel_table``.

Cells hold what the reference's table holds before it is written: numpy scalars for statistics (of the
tensor's own type), Python floats or marker strings for metrics, None where the reference has nothing.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from msprobe_dask.columns import TENSOR_METRIC_COLUMNS
from msprobe_dask.dump.kernel import KernelTensor, StatisticLine, shape_text
from msprobe_dask.dump.tensor_file import open_tensor, read_array
from msprobe_dask.metrics.kernel import (
    DTYPE,
    STAT_SHAPE,
    Verdict,
    compare_arrays,
    compare_statistics,
    tensor_stats,
)
from msprobe_dask.metrics.kernel_stats import chunkable, chunked_stats, is_all_zero
from msprobe_dask.metrics.tensor import BIG_TENSOR_ELEMS

UNMATCHED = "Dump file is not ndarray.\n"
NONE4 = (None, None, None, None)
NAN4 = (np.float32("nan"),) * 4  # a statistic.csv side without the line: float32 NaN, as the reference has


@functools.lru_cache(maxsize=256)
def _real_folder(folder: Path) -> str:
    return os.path.realpath(folder)


def _real_path(path: Path) -> str:
    """The file's real path, resolving each folder once (thousands of files share a few folders)."""
    return os.path.join(_real_folder(path.parent), path.name)


def _npy_side(tensor: KernelTensor | None) -> tuple[list[Any], Any, Callable[[], bool] | None]:
    """([name, dtype, shape, max, min, mean, l2norm], array, all_zero) of one side; Nones when not dumped.

    A tensor of more than ``BIG_TENSOR_ELEMS`` elements whose statistics ``kernel_stats`` makes is never
    read whole: its array holds no values (``compare_arrays`` reads its metrics from the files) and
    ``all_zero`` reads it chunk by chunk."""
    if tensor is None:
        return [None, None, None, *NONE4], None, None
    handle = open_tensor(tensor.path)
    name = _real_path(tensor.path)
    if handle.size > BIG_TENSOR_ELEMS and chunkable(handle):
        shape_only = np.broadcast_to(np.zeros((), handle.dtype), handle.shape)
        stats, zero = chunked_stats(handle), functools.partial(is_all_zero, handle)
        return [name, str(handle.dtype), shape_text(handle.shape), *stats], shape_only, zero
    array = read_array(handle)
    return [name, str(array.dtype), shape_text(array.shape), *tensor_stats(array)], array, None


def npy_row(npu: KernelTensor | None, bench: KernelTensor | None) -> list[Any]:
    (n_name, n_dtype, n_shape, *n_stats), n_array, n_zero = _npy_side(npu)
    (b_name, b_dtype, b_shape, *b_stats), b_array, _ = _npy_side(bench)
    if npu is None or bench is None:
        verdict = Verdict(None, UNMATCHED)
    else:
        verdict = compare_arrays(n_array, b_array, (npu.path, bench.path), BIG_TENSOR_ELEMS, n_zero)
    cells = verdict.cells or (None,) * len(TENSOR_METRIC_COLUMNS)
    return [n_name, b_name, n_dtype, b_dtype, n_shape, b_shape, *n_stats, *b_stats, verdict.accuracy,
            verdict.message, *cells]  # fmt: skip


def _mismatch(npu: StatisticLine | None, bench: StatisticLine | None) -> str:
    """The reference's prechecks; a side without the line (or without the column) never matches."""

    def differ(attr: str) -> bool:
        if npu is None or bench is None:
            return True
        mine, other = getattr(npu, attr), getattr(bench, attr)
        return mine is None or other is None or mine != other

    return (STAT_SHAPE if differ("shape") else "") + (DTYPE if differ("dtype") else "")


def statistic_row(npu: StatisticLine | None, bench: StatisticLine | None) -> list[Any]:
    cells: list[Any] = []
    for line in (npu, bench):
        cells.append(line.tensor.key if line else None)
    for attr in ("dtype", "shape"):
        for line in (npu, bench):
            value = getattr(line, attr) if line else None
            cells.append(shape_text(value) if attr == "shape" and value is not None else value)
    n_stats = npu.stats if npu else NAN4
    b_stats = bench.stats if bench else NAN4
    message = _mismatch(npu, bench)
    verdict: str | None = None
    diffs: list[Any] = [None] * 4
    relative: list[Any] = [None] * 4
    if not message and npu is not None and bench is not None:
        verdict, diffs, relative = compare_statistics(n_stats, b_stats)
    files = [_real_path(line.tensor.path) if line else None for line in (npu, bench)]
    return [*cells, *n_stats, *b_stats, verdict, message or None, *diffs, *relative, *files]
