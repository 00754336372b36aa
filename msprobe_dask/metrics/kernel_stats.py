"""A kernel dump tensor's statistics (``kernel.tensor_stats``: max, min, mean, L2 norm) read chunk by
chunk from its file: memory bounded by the chunk, not the tensor, and the same bits as numpy gives on the
whole array (tests/metrics/test_kernel_stats.py), for the tensors whose sums this module makes in numpy's
order: float16 and float32 ones of one run in their file, in this machine's byte order (``chunkable``).

- max, min: of each chunk, then of those (a maximum does not depend on the order).
- mean: numpy sums float32 pairwise over the whole array (``_pairwise``: halves cut at a multiple of 8,
  down to 8-element blocks), so the chunks are the tree's subtrees of at most ``CHUNK_ELEMS`` elements, each
  summed by numpy, added back up as the tree adds them. A float16 one is summed in float32 through numpy's
  8192-element buffers, each buffer pairwise, the buffers' sums one after the other; chunks of a multiple of
  8192 elements keep those buffers.
- L2 norm: ``np.linalg.norm`` is ``sqrt(x . x)``: for float32 OpenBLAS's sdot (the order of its Haswell
  and SkylakeX kernels made by ``sdot_lanes``; on another BLAS the tensor is read whole), for float16
  numpy's own dot: float32 squares added one by one in float32 (``np.add.accumulate``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from msprobe_dask.dump.tensor_file import read_flat
from msprobe_dask.dump.tensor_handle import TensorHandle
from msprobe_dask.metrics.kernel import Stats, all_zero
from msprobe_dask.metrics.one_shot import Workspace
from msprobe_dask.metrics.reference_dot import kernel_order
from msprobe_dask.native import load

SDOT_LANES_API = 1  # SDOT_LANES_API in csrc/sdot_lanes.c
sdot_lanes = load("msprobe_dask.metrics._sdot_lanes", SDOT_LANES_API)  # None: float32 tensors read whole

CHUNK_ELEMS = 256 * 8192
"""Elements per chunk (2M: 8 MB of float32), a multiple of numpy's 8192-element buffer."""
_BUFFER = 8192
_LANES = 64  # (the lanes' buffer: SkylakeX uses 64, Haswell 32)
_FLOAT16, _FLOAT32 = np.dtype(np.float16), np.dtype(np.float32)


def chunkable(handle: TensorHandle) -> bool:
    """Whether ``chunked_stats`` gives ``tensor_stats``' numbers for this tensor."""
    if not handle.is_contiguous or handle.zip_member is not None:
        return False
    dtype = handle.dtype
    if dtype == _FLOAT16 and dtype.isnative:
        return True
    return dtype == _FLOAT32 and dtype.isnative and sdot_lanes is not None and kernel_order() is not None


def chunked_stats(handle: TensorHandle, chunk_elems: int = CHUNK_ELEMS) -> Stats:
    """``tensor_stats`` of a ``chunkable`` tensor of at least one element, read ``chunk_elems`` at a time
    (a multiple of 8192)."""
    workspace = Workspace()
    with np.errstate(all="ignore"):
        if handle.dtype == _FLOAT16:
            return _float16_stats(handle, chunk_elems, workspace)
        return _float32_stats(handle, chunk_elems, workspace)


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
        whole = chunk.size - chunk.size % _BUFFER
        buffers = np.add.reduce(wide[:whole].reshape(-1, _BUFFER), axis=1)
        sums = [total, *buffers, *([np.add.reduce(wide[whole:])] if whole < chunk.size else [])]
        total = np.add.accumulate(np.array(sums, np.float32))[-1]
        np.multiply(wide, wide, out=wide)
        wide[0] = squares + wide[0]
        squares = np.add.accumulate(wide, out=wide)[-1]
    high, low = _extremes(extremes, handle.dtype)
    return high, low, np.float16(total / handle.size), np.sqrt(np.float16(squares))


def _float32_stats(handle: TensorHandle, chunk_elems: int, workspace: Workspace) -> Stats:
    assert sdot_lanes is not None  # (chunkable)
    size, order = handle.size, kernel_order()
    blocked = sdot_lanes.blocked(size, order)  # the squares summed in the lanes
    lanes = np.zeros(_LANES, np.float32)
    extremes = []

    def subtree(start: int, stop: int) -> np.float32:
        chunk = _read(handle, start, stop, workspace)
        extremes.append((np.max(chunk), np.min(chunk)))
        sdot_lanes.add(lanes, chunk, start, size, order)
        return np.add.reduce(chunk)

    total = _pairwise(0, size, chunk_elems, subtree)
    rest = np.ascontiguousarray(_read(handle, blocked, size, workspace))
    squares = np.float32(sdot_lanes.finish(lanes, rest, size, order))
    high, low = _extremes(extremes, handle.dtype)
    return high, low, np.float32(total / size), np.sqrt(squares)


def _pairwise(start: int, count: int, limit: int, leaf: Callable[[int, int], np.float32]) -> np.float32:
    """numpy's pairwise sum of ``count`` elements from ``start``: subtrees of at most ``limit`` elements
    summed by ``leaf(start, stop)``, in order, and added as numpy adds them."""
    if count <= limit:
        return leaf(start, start + count)
    half = count // 2
    half -= half % 8
    return _pairwise(start, half, limit, leaf) + _pairwise(start + half, count - half, limit, leaf)
