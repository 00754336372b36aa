"""A kernel dump tensor's statistics (``kernel.tensor_stats``: max, min, mean, L2 norm) read chunk by
chunk from its file: memory bounded by the chunk, not the tensor, and the same bits as ``tensor_stats``
gives on the whole array (tests/metrics/test_kernel_stats.py), for the tensors whose sums this module makes
in numpy's order: float16, float32, float64, integer and bool ones of one run in their file, in this
machine's byte order (``chunkable``).

- max, min: of each chunk, then of those (a maximum does not depend on the order).
- mean: numpy sums float32 and float64 pairwise over the whole array (``_pairwise``: halves cut at a
  multiple of 8, down to 8-element blocks), so the chunks are the tree's subtrees of at most
  ``CHUNK_ELEMS`` elements, each summed by numpy, added back up as the tree adds them. A float16 one is
  summed in float32, an integer or bool one in float64, through numpy's 8192-element buffers of the cast
  values, each buffer pairwise, the buffers' sums one after the other (``_buffered_sum``); chunks of a
  multiple of 8192 elements keep those buffers.
- L2 norm: ``np.linalg.norm`` is ``sqrt(x . x)``: for float32 OpenBLAS's sdot (the order of its Haswell
  and SkylakeX kernels made by ``dot_lanes``), for float64, integers and bool OpenBLAS's ddot of the
  float64 values, one run per thread of the reference's (``reference_dot.thread_runs``, each run's order
  made by ``dot_lanes``); on another BLAS those tensors are read whole. For float16 numpy's own dot:
  float32 squares added one by one in float32 (``np.add.accumulate``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from msprobe_dask.dump.tensor_file import read_flat
from msprobe_dask.dump.tensor_handle import TensorHandle
from msprobe_dask.metrics.kernel import Stats, all_zero
from msprobe_dask.metrics.one_shot import Workspace
from msprobe_dask.metrics.reference_dot import kernel_order, thread_runs
from msprobe_dask.native import load

DOT_LANES_API = 2  # DOT_LANES_API in csrc/dot_lanes.c
dot_lanes = load("msprobe_dask.metrics._dot_lanes", DOT_LANES_API)  # None: float32 and wider read whole

CHUNK_ELEMS = 256 * 8192
"""Elements per chunk (2M: 8 MB of float32), a multiple of numpy's 8192-element buffer."""
_BUFFER = 8192
_DDOT_BLOCK = 16  # (a ddot run's last n mod 16 squares are added one by one)
_FLOAT16, _FLOAT32, _FLOAT64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)


def chunkable(handle: TensorHandle) -> bool:
    """Whether ``chunked_stats`` gives ``tensor_stats``' numbers for this tensor."""
    if not handle.is_contiguous or handle.zip_member is not None:
        return False
    dtype = handle.dtype
    if not dtype.isnative:
        return False
    if dtype == _FLOAT16:
        return True
    summed_by_blas = dtype in (_FLOAT32, _FLOAT64) or dtype.kind in "iub"
    return summed_by_blas and dot_lanes is not None and kernel_order() is not None


def chunked_stats(handle: TensorHandle, chunk_elems: int = CHUNK_ELEMS) -> Stats:
    """``tensor_stats`` of a ``chunkable`` tensor of at least one element, read ``chunk_elems`` at a time
    (a multiple of 8192)."""
    workspace = Workspace()
    with np.errstate(all="ignore"):
        if handle.dtype == _FLOAT16:
            return _float16_stats(handle, chunk_elems, workspace)
        if handle.dtype == _FLOAT32:
            return _float32_stats(handle, chunk_elems, workspace)
        return _float64_stats(handle, chunk_elems, workspace)


def is_all_zero(handle: TensorHandle, chunk_elems: int = CHUNK_ELEMS) -> bool:
    """``kernel.all_zero`` of the whole tensor, read chunk by chunk."""
    workspace = Workspace()
    return all(all_zero(chunk) for _, chunk in _chunks(handle, chunk_elems, workspace))


def _chunks(handle: TensorHandle, chunk_elems: int, workspace: Workspace) -> Iterator[tuple[int, np.ndarray]]:
    """(first element, elements) of each chunk in order, read into one reused buffer."""
    for start in range(0, handle.size, chunk_elems):
        yield start, _read(handle, start, min(start + chunk_elems, handle.size), workspace)


def _read(handle: TensorHandle, start: int, stop: int, workspace: Workspace) -> np.ndarray:
    buffer = workspace.array("chunk", (stop - start) * handle.itemsize, np.uint8)
    return read_flat(handle, start, stop, buffer)


def _extremes(chunks: list[tuple[np.generic, np.generic]], dtype: np.dtype) -> tuple[np.generic, np.generic]:
    highs, lows = zip(*chunks)
    return np.max(np.array(highs, dtype)), np.min(np.array(lows, dtype))


def _float16_stats(handle: TensorHandle, chunk_elems: int, workspace: Workspace) -> Stats:
    extremes = []
    total = squares = np.float32(0)
    for _, chunk in _chunks(handle, chunk_elems, workspace):
        extremes.append((np.max(chunk), np.min(chunk)))
        wide = workspace.array("wide", chunk.size, np.float32)
        np.copyto(wide, chunk)
        total = _buffered_sum(total, wide)
        np.multiply(wide, wide, out=wide)
        wide[0] = squares + wide[0]
        squares = np.add.accumulate(wide, out=wide)[-1]
    high, low = _extremes(extremes, handle.dtype)
    return high, low, np.float16(total / handle.size), np.sqrt(np.float16(squares))


def _float32_stats(handle: TensorHandle, chunk_elems: int, workspace: Workspace) -> Stats:
    assert dot_lanes is not None  # (chunkable)
    size, order = handle.size, kernel_order()
    blocked = dot_lanes.sdot_blocked(size, order)  # the squares summed in the lanes
    lanes = np.zeros(dot_lanes.SDOT_LANES, np.float32)  # (SkylakeX fills them all, Haswell half)
    extremes = []

    def subtree(start: int, stop: int) -> np.float32:
        chunk = _read(handle, start, stop, workspace)
        extremes.append((np.max(chunk), np.min(chunk)))
        dot_lanes.sdot_add(lanes, chunk, start, size, order)
        return np.add.reduce(chunk)

    total = _pairwise(0, size, chunk_elems, subtree)
    rest = np.ascontiguousarray(_read(handle, blocked, size, workspace))
    squares = np.float32(dot_lanes.sdot_finish(lanes, rest, size, order))
    high, low = _extremes(extremes, handle.dtype)
    return high, low, np.float32(total / size), np.sqrt(squares)


def _float64_stats(handle: TensorHandle, chunk_elems: int, workspace: Workspace) -> Stats:
    """A float64, integer or bool tensor: its sums in float64 (an integer mean in numpy's buffers)."""
    assert dot_lanes is not None  # (chunkable)
    size, order = handle.size, kernel_order()
    squares = _RunSquares(size, order)
    extremes = []

    def values(start: int, stop: int) -> np.ndarray:
        chunk = _read(handle, start, stop, workspace)
        extremes.append((np.max(chunk), np.min(chunk)))
        wide = chunk if chunk.dtype == _FLOAT64 else workspace.array("wide", chunk.size, np.float64)
        if wide is not chunk:
            np.copyto(wide, chunk)
        squares.add(start, wide)
        return wide

    if handle.dtype == _FLOAT64:
        total = _pairwise(0, size, chunk_elems, lambda start, stop: np.add.reduce(values(start, stop)))
    else:
        total = np.float64(0)
        for start in range(0, size, chunk_elems):
            total = _buffered_sum(total, values(start, min(start + chunk_elems, size)))
    dot = squares.finish(lambda start, stop: np.array(_read(handle, start, stop, workspace), np.float64))
    high, low = _extremes(extremes, handle.dtype)
    return high, low, np.float64(total / size), np.sqrt(np.float64(dot))


class _RunSquares:
    """x . x of a tensor's float64 values as OpenBLAS's ddot sums it: one run per thread of the reference's,
    each in the order of this process's kernel (``dot_lanes``), the runs' dots added in order to 0.0."""

    def __init__(self, size: int, order: int | None) -> None:
        assert dot_lanes is not None  # (chunkable)
        self.order = order
        self.runs = [(start, stop, np.zeros(dot_lanes.DDOT_STATE)) for start, stop in thread_runs(size)]

    def add(self, first: int, wide: np.ndarray) -> None:
        """The squares of ``wide``, the float64 values of elements ``first``, ``first + 1``, ..."""
        assert dot_lanes is not None
        for start, stop, lanes in self.runs:
            lo, hi = max(start, first), min(stop, first + wide.size)
            if lo < hi:
                dot_lanes.ddot_add(lanes, wide[lo - first : hi - first], lo - start, stop - start, self.order)

    def finish(self, read: Callable[[int, int], np.ndarray]) -> float:
        """The dot, once every element is added; ``read(start, stop)`` gives the float64 values of a run's
        last elements (fewer than 16)."""
        assert dot_lanes is not None
        dot = 0.0
        for start, stop, lanes in self.runs:
            rest = start + (stop - start) // _DDOT_BLOCK * _DDOT_BLOCK
            dot += dot_lanes.ddot_finish(lanes, read(rest, stop), stop - start, self.order)
        return dot


def _buffered_sum(total: Any, wide: np.ndarray) -> Any:
    """``total`` plus the sum of ``wide`` (values cast to the sum's dtype) as numpy sums a cast input: its
    8192-element buffers each pairwise, their sums added one after the other."""
    whole = wide.size - wide.size % _BUFFER
    buffers = np.add.reduce(wide[:whole].reshape(-1, _BUFFER), axis=1)
    sums = [total, *buffers, *([np.add.reduce(wide[whole:])] if whole < wide.size else [])]
    return np.add.accumulate(np.array(sums, wide.dtype))[-1]


def _pairwise(start: int, count: int, limit: int, leaf: Callable[[int, int], Any]) -> Any:
    """numpy's pairwise sum of ``count`` elements from ``start``: subtrees of at most ``limit`` elements
    summed by ``leaf(start, stop)``, in order, and added as numpy adds them."""
    if count <= limit:
        return leaf(start, start + count)
    half = count // 2
    half -= half % 8
    return _pairwise(start, half, limit, leaf) + _pairwise(start + half, count - half, limit, leaf)
