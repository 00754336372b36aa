"""Tensor pairs too big for one shot, chunk by chunk: each flat chunk of the pair gives a few partials
(:class:`Partials`), held as one numpy record (``PARTIALS_RECORD``); :func:`merge_records` merges records
(the chunk / combine / aggregate step of the ``dask.array`` reduction ``metrics/tensor.py`` builds) and
:func:`record_metrics` turns the merged record into the row, so no whole tensor is ever in memory and the
chunks of one pair run on every worker.

MaxAbsErr, MaxRelativeErr and the two ratios are exact. Cosine and EucDist come from dot products summed per
chunk (by the C pass in one fixed order for the finite float chunks it reads, else numpy's einsum loop: the
same in every process whatever its BLAS threads) and then across chunks
(exactly, as double-doubles), while the reference takes one BLAS dot over the whole tensor, so their last
digits can differ: a few ulps, up to ~1e-13 relative on tens of millions of elements. Cosine's 12-decimal
rounding hides that almost always; EucDist is not rounded.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from msprobe_dask.dump.tensor_dtypes import native_name
from msprobe_dask.dump.tensor_file import TensorHandle, cut_error, mapped_run, read_flat
from msprobe_dask.errors import UserError
from msprobe_dask.metrics.one_shot import Workspace, finite_pass, kernel_reads
from msprobe_dask.metrics.tensor_cells import (
    FIVE_THOUSANDTHS,
    NOT_AVAILABLE,
    THOUSANDTH,
    UNSUPPORTED,
    Partials,
    TensorMetrics,
    as_real,
    compute_dtype,
    cosine_cell,
    guarded,
    max_cell,
    ratio_cell,
    relative_error,
    unreadable,
    without_shared_invalid,
)


def chunk_partials(npu_chunk: np.ndarray, bench_chunk: np.ndarray) -> Partials:
    """Partials of two aligned flat chunks (raw file dtypes; bfloat16/float8 are converted here).

    Finite float chunks of the dtypes the C pass reads take it (one pass over both chunks' bytes, as a
    one-shot pair does: ``one_shot.finite_pass``), its dots summed in ``CHUNK_DOT_ORDER``. Others take
    numpy: the sums with ``einsum`` (numpy's own loop, not BLAS), so a chunk gives the same partials
    whatever BLAS threading the process has (a dask worker runs BLAS on one thread). Most chunks hold no
    NaN/Inf: the sums of squares being finite proves it, and only other chunks take the masks' path.
    """
    fast = _kernel_partials(npu_chunk, bench_chunk)
    return fast if fast is not None else _numpy_partials(npu_chunk, bench_chunk)


def _numpy_partials(npu_chunk: np.ndarray, bench_chunk: np.ndarray) -> Partials:
    """``chunk_partials`` by numpy."""
    n = as_real(compute_dtype(npu_chunk)).reshape(-1)
    b = as_real(compute_dtype(bench_chunk)).reshape(-1)
    with np.errstate(all="ignore"):
        n_sq = np.einsum("i,i->", n, n, dtype=np.float64)
        b_sq = np.einsum("i,i->", b, b, dtype=np.float64)
        if not (np.isfinite(n_sq) and np.isfinite(b_sq)):
            zeroed = without_shared_invalid(n, b)
            if zeroed is None:
                return Partials(n.size, mismatch=True)
            n, b = zeroed
            n_sq = np.einsum("i,i->", n, n, dtype=np.float64)
            b_sq = np.einsum("i,i->", b, b, dtype=np.float64)
        diff = np.subtract(n, b, dtype=np.float64)
        relative = relative_error(n, b)
        return Partials(
            size=n.size,
            dot=float(np.einsum("i,i->", n, b, dtype=np.float64)),
            n_sq=float(n_sq),
            b_sq=float(b_sq),
            diff_sq=float(np.einsum("i,i->", diff, diff)),
            max_abs=np.max(np.abs(diff)),
            max_rel=np.max(relative),
            under_thousandth=int(np.count_nonzero(relative < THOUSANDTH)),
            under_five_thousandths=int(np.count_nonzero(relative < FIVE_THOUSANDTHS)),
        )


CHUNK_DOT_ORDER = 0
"""The order the C pass sums a chunk's dots in (one of ``reference_dot.KERNEL_ORDERS``, whatever this
process's BLAS: the chunks' sums are added exactly across chunks, never compared with a BLAS dot)."""


def _kernel_partials(npu_chunk: np.ndarray, bench_chunk: np.ndarray) -> Partials | None:
    """The C pass's partials of two finite float chunks of the dtypes it reads (the maxima and counts as
    numpy's, the dots in ``CHUNK_DOT_ORDER``); None where it does not apply (numpy's path decides)."""
    n_name, b_name = native_name(npu_chunk.dtype), native_name(bench_chunk.dtype)
    if npu_chunk.size < 2 or n_name is None or b_name is None or not kernel_reads(n_name, b_name):
        return None
    return finite_pass(npu_chunk, n_name, bench_chunk, b_name, CHUNK_DOT_ORDER)


def _file_partials(
    npu: TensorHandle, bench: TensorHandle, first: int, last: int, buffers: Workspace
) -> Partials:
    """``chunk_partials`` of elements ``first:last`` of the pair: the C pass over the files' memory-mapped
    pages where it reads the pair (``mapped_run``; a file cut meanwhile is a ``TensorFileError``), else
    numpy over the elements read into ``buffers``."""
    n_name, b_name = native_name(npu.element), native_name(bench.element)
    if last - first > 1 and n_name is not None and b_name is not None and kernel_reads(n_name, b_name):
        mapped = mapped_run(npu, first, last - first), mapped_run(bench, first, last - first)
        if mapped[0] is not None and mapped[1] is not None:
            try:
                fast = finite_pass(mapped[0], n_name, mapped[1], b_name, CHUNK_DOT_ORDER)
            except BufferError:
                raise cut_error(npu, bench) from None
            if fast is not None:
                return fast
            return _numpy_partials(*_read_pair(npu, bench, first, last, buffers))
    return chunk_partials(*_read_pair(npu, bench, first, last, buffers))


def _read_pair(
    npu: TensorHandle, bench: TensorHandle, first: int, last: int, buffers: Workspace
) -> tuple[np.ndarray, np.ndarray]:
    npu_buffer = buffers.array("npu_chunk", (last - first) * npu.itemsize, np.uint8)
    bench_buffer = buffers.array("bench_chunk", (last - first) * bench.itemsize, np.uint8)
    return read_flat(npu, first, last, npu_buffer), read_flat(bench, first, last, bench_buffer)


_SUMS = ("dot", "n_sq", "b_sq", "diff_sq")
PARTIALS_RECORD = np.dtype(
    [("size", "i8"), ("mismatch", "?")]
    + [(name, "f8") for field in _SUMS for name in (field, field + "_lo")]
    + [("max_abs", "f8"), ("max_rel", "f8"), ("under_thousandth", "i8"), ("under_five_thousandths", "i8")]
    + [("unreadable", "O")]
)
"""Partials as one numpy record, the element type of the dask.array reduction. Each float sum is kept as a
double-double (``x`` + ``x_lo``, the exact sum to ~106 bits), so that merging records in any tree shape gives
the same sums; the maxima are float64 (the same values as the float16/32 maxima they hold). ``unreadable``:
the message of a block whose files could not be read (``block_record``), else None."""


def _record(part: Partials) -> np.ndarray:
    record = _empty_records(1)
    for name in Partials.__slots__:
        record[name] = getattr(part, name)
    return record


def _empty_records(count: int) -> np.ndarray:
    records = np.zeros(count, PARTIALS_RECORD)
    records["unreadable"] = None
    return records


def _exact_sum(values: list[float]) -> tuple[float, float]:
    """(the correctly rounded sum, the rest of the exact sum); inf/nan as numpy sums them, rest 0."""
    try:
        high = math.fsum(values)
    except (OverflowError, ValueError):
        return float(np.sum(np.array(values, dtype=np.float64))), 0.0
    if not math.isfinite(high):
        return high, 0.0
    return high, math.fsum([*values, -high])


def merge_records(records: np.ndarray, axis: Any = None, keepdims: bool = False) -> np.ndarray:
    """Chunk, combine and aggregate step of the reduction: many partials records into one."""
    flat = np.asarray(records, PARTIALS_RECORD).reshape(-1)
    merged = _empty_records(1)
    if flat.size:
        merged["unreadable"] = next((m for m in flat["unreadable"] if m is not None), None)  # the first
        merged["size"] = flat["size"].sum()
        merged["mismatch"] = flat["mismatch"].any()
        for name in _SUMS:
            merged[name], merged[name + "_lo"] = _exact_sum(
                [*flat[name].tolist(), *flat[name + "_lo"].tolist()]
            )
        with np.errstate(all="ignore"):
            merged["max_abs"] = np.max(flat["max_abs"])  # NaN wins, as in one np.max over the tensor
            merged["max_rel"] = np.max(flat["max_rel"])
        merged["under_thousandth"] = flat["under_thousandth"].sum()
        merged["under_five_thousandths"] = flat["under_five_thousandths"].sum()
    return merged if keepdims else merged.reshape(())


def record_metrics(record: np.ndarray) -> TensorMetrics:
    """The row from the merged record of all chunks."""
    total = record.reshape(-1)[0]
    if total["unreadable"] is not None:
        return TensorMetrics.filled(UNSUPPORTED, total["unreadable"], unreadable=True)
    if total["size"] == 0:
        return TensorMetrics.filled(UNSUPPORTED, "no data")
    if total["mismatch"]:
        return TensorMetrics.filled(NOT_AVAILABLE, "NaN/Inf positions of NPU and bench differ")
    size = int(total["size"])

    def summed(name: str) -> np.float64:
        return np.float64(total[name]) + np.float64(total[name + "_lo"])

    with np.errstate(all="ignore"):
        n_norm, b_norm, num = np.sqrt(summed("n_sq")), np.sqrt(summed("b_sq")), summed("dot")
        cells = (
            guarded(lambda: cosine_cell(num, n_norm, b_norm)),
            float(np.sqrt(summed("diff_sq"))),
            max_cell(total["max_abs"]),
            max_cell(total["max_rel"]),
            ratio_cell(np.int64(total["under_thousandth"]), size),
            ratio_cell(np.int64(total["under_five_thousandths"]), size),
        )
    return TensorMetrics(cells)


def aggregate_partials(parts: Iterable[Partials]) -> TensorMetrics:
    """The row from all chunks' partials, in any order."""
    records = [_record(p) for p in parts]
    return record_metrics(merge_records(np.concatenate(records) if records else _empty_records(0)))


def block_record(
    npu: TensorHandle, bench: TensorHandle, start: int, stop: int, chunk_elems: int
) -> np.ndarray:
    """The merged partials of elements ``start:stop`` of the pair (a task's block), each chunk of
    ``chunk_elems`` elements (``start`` a multiple of it) read and measured apart: the same record, merged
    on, as one block a chunk gives. A block whose files cannot be read (changed since their headers were
    read, an I/O error) gives a record saying so (``unreadable``), as the row of a small pair would."""
    step = max(int(chunk_elems), 1)
    bounds = [(first, min(first + step, stop)) for first in range(start, stop, step)]
    records = _empty_records(len(bounds))
    buffers = Workspace()
    try:
        for i, (first, last) in enumerate(bounds):
            records[i] = _record(_file_partials(npu, bench, first, last, buffers))
    except (UserError, OSError) as exc:
        records = _empty_records(1)
        records["unreadable"] = unreadable(exc).message
    return merge_records(records, keepdims=True)


def measure_chunked(npu: TensorHandle, bench: TensorHandle, chunk_elems: int) -> TensorMetrics:
    """The row of a pair read chunk by chunk in this task."""
    return record_metrics(block_record(npu, bench, 0, npu.size, chunk_elems))
