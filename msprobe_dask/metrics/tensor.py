"""The six tensor-mode metrics (compare.md §4.2), with the reference's pre-checks, dtypes and rounding.

Two ways to the same row:

- one shot (tensors up to ``BIG_TENSOR_ELEMS`` elements): both tensors are read and the metrics are
  computed with the same numpy operations, in the same dtypes, as the reference, so every cell is
  bit-identical to it;
- chunked (bigger tensors): each flat chunk of the pair gives a few partials (see :class:`Partials`), held
  as one numpy record (``PARTIALS_RECORD``); a ``dask.array`` reduction merges the records (chunk / combine /
  aggregate, :func:`merge_records`) and one task turns the merged record into the row
  (:func:`measure_pair_delayed`), so no whole tensor is ever in memory and the chunks of one pair run on
  every worker. MaxAbsErr, MaxRelativeErr and the two ratios are still exact. Cosine and EucDist come from
  dot products summed per chunk (numpy's einsum loop, the same in every process whatever its BLAS
  threads) and then across chunks (exactly, as double-doubles), while the reference takes one BLAS dot
  over the whole tensor, so their last digits can differ: a few ulps, up to ~1e-13 relative on tens of
  millions of elements. Cosine's 12-decimal rounding
  hides that almost always; EucDist is not rounded.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ml_dtypes
import numpy as np

from msprobe_dask.columns import TENSOR_METRIC_COLUMNS
from msprobe_dask.dump.tensor_file import TensorHandle, as_dask_array, open_tensor, read_array, read_flat
from msprobe_dask.errors import StoreError, UserError
from msprobe_dask.metrics.reference_dot import reference_dot

if TYPE_CHECKING:
    from dask.delayed import Delayed


UNSUPPORTED = "unsupported"
SHAPE_UNMATCHED = "shape unmatched"
NOT_AVAILABLE = "N/A"  # NaN/Inf at different positions
NAN = "Nan"

BIG_TENSOR_ELEMS = 8 * 1024 * 1024
"""Tensors with more elements than this take the chunked path."""
CHUNK_ELEMS = 1 << 20

COSINE_ROUND_ABOVE = 0.9999  # a cosine above this is shown with 6 decimals
THOUSANDTH, FIVE_THOUSANDTHS = 0.001, 0.005
_EPS64 = float(np.finfo(np.float64).eps)
# The reference casts every dtype that compares unequal to all of these (ints, bool, big-endian floats...)
# to float64 before the relative error.
_REFERENCE_FLOAT_TYPES = (np.half, np.single, float, np.double, np.float64, np.longdouble)

Cell = float | str
PathLike = str | os.PathLike[str]


@dataclass(frozen=True, slots=True)
class TensorMetrics:
    """One row's six metric cells (Python floats or the reference's strings) and why, if not numbers;
    ``unreadable``: a tensor file could not be read (the message names it), so the row is an error."""

    cells: tuple[Cell, ...]
    message: str = ""
    unreadable: bool = False

    @classmethod
    def filled(cls, value: str, message: str, unreadable: bool = False) -> TensorMetrics:
        return cls((value,) * len(TENSOR_METRIC_COLUMNS), message, unreadable)

    def as_dict(self) -> dict[str, Cell]:
        return dict(zip(TENSOR_METRIC_COLUMNS, self.cells))


def _fmt(value: Any) -> float:
    """The reference's 12-decimal rounding through text."""
    return float(f"{value:.12f}")


# ---------------------------------------------------------------------------------------------------------
# Pre-checks, shared by both paths (they only need shapes)


def _squeezed(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(n for n in shape if n != 1)


def _precheck(n_shape: tuple[int, ...], b_shape: tuple[int, ...]) -> TensorMetrics | None:
    """The reference's checks before any arithmetic, on squeezed shapes, first hit wins."""
    if math.prod(n_shape) == 0:
        return TensorMetrics.filled(UNSUPPORTED, "empty NPU tensor, can not compare")
    if n_shape != b_shape:
        return TensorMetrics.filled(
            SHAPE_UNMATCHED, f"shape of NPU {list(n_shape)} and bench {list(b_shape)} differ after squeeze"
        )
    return None


_TO_FLOAT32 = frozenset(
    np.dtype(getattr(ml_dtypes, name))
    for name in (
        "bfloat16",
        "float8_e4m3fn",
        "float8_e5m2",
        "float8_e4m3fnuz",
        "float8_e5m2fnuz",
        "float8_e8m0fnu",
    )
    if hasattr(ml_dtypes, name)  # the newer float8 kinds need a recent ml_dtypes
)


_BFLOAT16 = np.dtype(ml_dtypes.bfloat16)


def _compute_dtype(array: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """bfloat16 and float8 become float32 (in ``out``, a float32 array of the same size, if given), as the
    reference does before it turns a torch tensor into numpy.

    bfloat16 is the upper half of a float32's bits, so it widens exactly by a shift (the same bits as the
    cast, NaN payloads included, in one vectorised pass). (A ``.npy`` written from a bfloat16 array says
    only ``|V2``; like ``np.load`` we keep it raw, and the NaN/Inf check then finds it unreadable.)
    """
    if array.dtype not in _TO_FLOAT32:
        return array
    widened = (np.empty(array.shape, np.float32) if out is None else out).reshape(array.shape)
    if array.dtype == _BFLOAT16:
        np.left_shift(array.view(np.uint16), 16, out=widened.view(np.uint32), dtype=np.uint32)
    else:
        np.copyto(widened, array)
    return widened


def _without_shared_invalid(n: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """The two arrays with NaN/Inf zeroed where both sides have them at the same places (copies, only when
    there is something to zero); None if the places differ."""
    if n.dtype.kind in "biu" and b.dtype.kind in "biu":
        return n, b  # no NaN/Inf in integers
    # The reference looks at float64 copies; float16/32 NaN/Inf masks are the same on the arrays themselves.
    n_float = n if n.dtype.kind == "f" else n.astype(float)
    b_float = b if b.dtype.kind == "f" else b.astype(float)
    if np.isfinite(n_float).all() and np.isfinite(b_float).all():
        return n, b
    n_inf, b_inf, n_nan, b_nan = np.isinf(n_float), np.isinf(b_float), np.isnan(n_float), np.isnan(b_float)
    if not (np.array_equal(n_inf, b_inf) and np.array_equal(n_nan, b_nan)):
        return None
    n, b = np.array(n), np.array(b)
    for array, mask in ((n, n_inf), (b, b_inf), (n, n_nan), (b, b_nan)):
        array[mask] = 0
    return n, b


def _relative_error(n: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``|(n - b) / b|`` in ``result_type(n, b, float32)``, with that type's eps added where ``b == 0``."""
    with np.errstate(all="ignore"):
        if n.dtype not in _REFERENCE_FLOAT_TYPES:
            n = n.astype(float)
        if b.dtype not in _REFERENCE_FLOAT_TYPES:
            b = b.astype(float)
        zero = b == 0
        rtype = np.result_type(n, b, np.float32)
        if zero.any():
            n, b = n.astype(rtype), b.astype(rtype)  # copies: eps is added in place
            eps = np.finfo(rtype).eps
            n[zero] += eps
            b[zero] += eps
        else:
            n, b = n.astype(rtype, copy=False), b.astype(rtype, copy=False)
        relative = np.asarray(n - b)  # the reference's |(n - b) / b|, in place after the first step
        np.divide(relative, b, out=relative)
        return np.abs(relative, out=relative)


def _cosine_cell(num: Any, n_norm: Any, b_norm: Any) -> Cell:
    if n_norm <= _EPS64 and b_norm <= _EPS64:
        return 1.0
    if n_norm <= _EPS64 or b_norm <= _EPS64:
        return NAN  # all zeros on one side
    with np.errstate(all="ignore"):
        cos = num / (n_norm * b_norm)
    if np.isnan(cos):
        return NAN
    value = _fmt(cos)
    return round(value, 6) if value > COSINE_ROUND_ABOVE else value


def _max_cell(value: Any) -> Cell:
    return NAN if np.isnan(value) else _fmt(value)


def _ratio_cell(count: Any, total: int) -> Cell:
    return NAN if total == 0 else _fmt(count / total)


def _guarded(compute: Any) -> Cell:
    """Like the reference's per-algorithm guard: a metric that raises is ``unsupported``, the others stand."""
    try:
        return compute()
    except Exception:  # noqa: BLE001 - any numpy failure means this one cell is unsupported
        return UNSUPPORTED


# ---------------------------------------------------------------------------------------------------------
# One shot: in-memory arrays, exactly the reference's operations


class Workspace:
    """Scratch arrays reused from one tensor pair to the next (in one task, one thread at a time): a fresh
    array of tens of MB costs its page faults every time, which weighs more than the arithmetic on it."""

    def __init__(self) -> None:
        self._arrays: dict[str, np.ndarray] = {}

    def array(self, name: str, size: int, dtype: Any) -> np.ndarray:
        """A 1-D array of ``size`` elements of ``dtype`` (its values left over from earlier use)."""
        dtype = np.dtype(dtype)
        held = self._arrays.get(name)
        if held is None or held.dtype != dtype or held.size < size:
            held = self._arrays[name] = np.empty(size, dtype)
        return held[:size]


def _widened(array: np.ndarray, name: str, ws: Workspace) -> np.ndarray:
    """``_compute_dtype`` into the workspace's array ``name``."""
    return _compute_dtype(
        array, ws.array(name, array.size, np.float32) if array.dtype in _TO_FLOAT32 else None
    )


def measure_arrays(npu: np.ndarray, bench: np.ndarray, workspace: Workspace | None = None) -> TensorMetrics:
    """The six cells for two in-memory tensors, bit-identical to the reference."""
    workspace = workspace or Workspace()
    n = np.squeeze(_widened(np.asarray(npu), "npu32", workspace))
    b = np.squeeze(_widened(np.asarray(bench), "bench32", workspace))
    early = _precheck(n.shape, b.shape)
    if early is not None:
        return early
    if n.ndim == 0:
        return _measure_0d(n, b)
    if n.dtype in _FAST_FLOATS and b.dtype in _FAST_FLOATS:
        fast = _measure_finite_floats(n, b, workspace)
        if fast is not None:
            return fast
    try:
        zeroed = _without_shared_invalid(n, b)
    except (ValueError, TypeError):
        return TensorMetrics.filled(UNSUPPORTED, "data is unreadable as numbers")
    if zeroed is None:
        return TensorMetrics.filled(NOT_AVAILABLE, "NaN/Inf positions of NPU and bench differ")
    n, b = zeroed
    n64, b64 = n.reshape(-1).astype(float), b.reshape(-1).astype(float)
    with np.errstate(all="ignore"):  # overflow to inf is part of the answer, not worth a warning
        try:
            relative: np.ndarray | None = _relative_error(n, b)
        except Exception:  # noqa: BLE001 - the reference makes the three cells that need it unsupported
            relative = None

        def from_relative(cell: Any) -> Cell:
            return UNSUPPORTED if relative is None else _guarded(lambda: cell(relative))

        diff = n64 - b64
        cells = (
            _guarded(lambda: _cosine_cell(reference_dot(n64, b64), _norm(n64), _norm(b64))),
            _guarded(lambda: float(np.sqrt(reference_dot(diff, diff)))),
            _guarded(lambda: _max_cell(np.max(np.abs(diff)))),
            from_relative(lambda re: _max_cell(np.max(re))),  # re is |...| already
            from_relative(lambda re: _ratio_cell(np.count_nonzero(re < THOUSANDTH), re.size)),
            from_relative(lambda re: _ratio_cell(np.count_nonzero(re < FIVE_THOUSANDTHS), re.size)),
        )
    return TensorMetrics(cells)


def _norm(x64: np.ndarray) -> np.float64:
    """``np.linalg.norm`` of a 1-D float64 array (the square root of its dot with itself)."""
    return np.sqrt(reference_dot(x64, x64))


_FAST_FLOATS = frozenset(np.dtype(t) for t in (np.float16, np.float32, np.float64))


def _with_eps_where_bench_is_zero(relative: np.ndarray, n: np.ndarray, b: np.ndarray) -> Any:
    """The relative error where bench is 0 made again by ``_relative_error``'s rule (its dtype's eps added
    to both sides there, element by element the same arithmetic); its new maximum."""
    zero = b == 0
    if zero.any():
        relative[zero] = _relative_error(n[zero], b[zero])
    return np.max(relative)


def _measure_finite_floats(n: np.ndarray, b: np.ndarray, ws: Workspace) -> TensorMetrics | None:
    """The cells of two float16/32/64 tensors without NaN/Inf, with the general path's bits in fewer passes
    and no fresh big arrays; None when the general path must decide (NaN/Inf, a square overflowing float64,
    a 0 in bench: its eps rule).

    Finite sums of squares prove both tensors finite; a finite largest relative error proves bench has no
    0 (which makes an inf or NaN there). The relative error is computed in its dtype (``rtype``) by ufuncs
    that widen their inputs on the fly, as the reference's widened copies hold the same values.
    """
    size = n.size
    n64, b64 = ws.array("n64", size, np.float64), ws.array("b64", size, np.float64)
    np.copyto(n64.reshape(n.shape), n)  # (astype would make a fresh array)
    np.copyto(b64.reshape(b.shape), b)
    with np.errstate(all="ignore"):
        n_sq, b_sq = reference_dot(n64, n64), reference_dot(b64, b64)
        if not (np.isfinite(n_sq) and np.isfinite(b_sq)):
            return None
        rtype = np.result_type(n, b, np.float32)
        relative = ws.array("relative", size, rtype).reshape(n.shape)
        np.subtract(n, b, out=relative, dtype=rtype)
        np.divide(relative, b, out=relative, dtype=rtype)
        np.abs(relative, out=relative)
        max_rel = np.max(relative)
        if not np.isfinite(max_rel):
            max_rel = _with_eps_where_bench_is_zero(relative, n, b)
            if not np.isfinite(max_rel):
                return None
        below = ws.array("below", size, bool).reshape(n.shape)
        thousandth = np.count_nonzero(np.less(relative, THOUSANDTH, out=below))
        five_thousandths = np.count_nonzero(np.less(relative, FIVE_THOUSANDTHS, out=below))
        cosine = _cosine_cell(reference_dot(n64, b64), np.sqrt(n_sq), np.sqrt(b_sq))
        diff = np.subtract(n64, b64, out=n64)
        euclidean = float(np.sqrt(reference_dot(diff, diff)))
        max_abs = np.max(np.abs(diff, out=diff))
    cells = (
        cosine,
        euclidean,
        _max_cell(max_abs),
        _max_cell(max_rel),
        _ratio_cell(thousandth, size),
        _ratio_cell(five_thousandths, size),
    )
    return TensorMetrics(cells)


def _measure_0d(n: np.ndarray, b: np.ndarray) -> TensorMetrics:
    """0-d (size 1 before squeeze): only MaxAbsErr and MaxRelativeErr, in the arrays' own dtypes, NaN kept."""

    def max_abs() -> Cell:
        x, y = (n.astype(float), b.astype(float)) if n.dtype == bool else (n, b)
        with np.errstate(all="ignore"):
            return _max_cell(np.max(np.abs(x - y)))

    def max_rel() -> Cell:
        return _max_cell(np.max(np.abs(_relative_error(n, b))))

    cells = (UNSUPPORTED, UNSUPPORTED, _guarded(max_abs), _guarded(max_rel), UNSUPPORTED, UNSUPPORTED)
    return TensorMetrics(cells, "0-d tensor: Cosine, EucDist and the error ratios can not be computed")


# ---------------------------------------------------------------------------------------------------------
# Chunked: per-chunk partials and one aggregate


@dataclass(frozen=True, slots=True)
class Partials:
    """What one flat chunk of a tensor pair contributes to the row."""

    size: int
    mismatch: bool = False  # NaN/Inf at different positions somewhere in this chunk
    dot: float = 0.0  # n . b, in float64
    n_sq: float = 0.0  # n . n
    b_sq: float = 0.0  # b . b
    diff_sq: float = 0.0  # (n - b) . (n - b)
    max_abs: Any = 0.0  # float64 scalar
    max_rel: Any = 0.0  # scalar in the relative-error dtype
    under_thousandth: int = 0
    under_five_thousandths: int = 0


def chunk_partials(npu_chunk: np.ndarray, bench_chunk: np.ndarray) -> Partials:
    """Partials of two aligned flat chunks (raw file dtypes; bfloat16/float8 are converted here).

    The sums are taken with ``einsum`` (numpy's own loop, not BLAS), so a chunk gives the same partials
    whatever BLAS threading the process has (a dask worker runs BLAS on one thread). Most chunks hold no
    NaN/Inf: the sums of squares being finite proves it, and only other chunks take the masks' path.
    """
    n = _compute_dtype(npu_chunk).reshape(-1)
    b = _compute_dtype(bench_chunk).reshape(-1)
    with np.errstate(all="ignore"):
        n_sq = np.einsum("i,i->", n, n, dtype=np.float64)
        b_sq = np.einsum("i,i->", b, b, dtype=np.float64)
        if not (np.isfinite(n_sq) and np.isfinite(b_sq)):
            zeroed = _without_shared_invalid(n, b)
            if zeroed is None:
                return Partials(n.size, mismatch=True)
            n, b = zeroed
            n_sq = np.einsum("i,i->", n, n, dtype=np.float64)
            b_sq = np.einsum("i,i->", b, b, dtype=np.float64)
        diff = np.subtract(n, b, dtype=np.float64)
        relative = _relative_error(n, b)
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


_SUMS = ("dot", "n_sq", "b_sq", "diff_sq")
PARTIALS_RECORD = np.dtype(
    [("size", "i8"), ("mismatch", "?")]
    + [(name, "f8") for field in _SUMS for name in (field, field + "_lo")]
    + [("max_abs", "f8"), ("max_rel", "f8"), ("under_thousandth", "i8"), ("under_five_thousandths", "i8")]
)
"""Partials as one numpy record, the element type of the dask.array reduction. Each float sum is kept as a
double-double (``x`` + ``x_lo``, the exact sum to ~106 bits), so that merging records in any tree shape gives
the same sums; the maxima are float64 (the same values as the float16/32 maxima they hold)."""


def _record(part: Partials) -> np.ndarray:
    record = np.zeros(1, PARTIALS_RECORD)
    for name in Partials.__slots__:
        record[name] = getattr(part, name)
    return record


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
    merged = np.zeros(1, PARTIALS_RECORD)
    if flat.size:
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
            _guarded(lambda: _cosine_cell(num, n_norm, b_norm)),
            float(np.sqrt(summed("diff_sq"))),
            _max_cell(total["max_abs"]),
            _max_cell(total["max_rel"]),
            _ratio_cell(np.int64(total["under_thousandth"]), size),
            _ratio_cell(np.int64(total["under_five_thousandths"]), size),
        )
    return TensorMetrics(cells)


def aggregate_partials(parts: Iterable[Partials]) -> TensorMetrics:
    """The row from all chunks' partials, in any order."""
    records = [_record(p) for p in parts]
    return record_metrics(merge_records(np.concatenate(records) if records else np.zeros(0, PARTIALS_RECORD)))


def _block_record(npu_chunk: np.ndarray, bench_chunk: np.ndarray) -> np.ndarray:
    return _record(chunk_partials(npu_chunk, bench_chunk))


def _chunk_bounds(size: int, chunk_elems: int) -> list[tuple[int, int]]:
    step = max(int(chunk_elems), 1)
    return [(start, min(start + step, size)) for start in range(0, size, step)]


def _measure_chunked(npu: TensorHandle, bench: TensorHandle, chunk_elems: int) -> TensorMetrics:
    parts = (
        chunk_partials(read_flat(npu, start, stop), read_flat(bench, start, stop))
        for start, stop in _chunk_bounds(npu.size, chunk_elems)
    )
    return aggregate_partials(parts)


# ---------------------------------------------------------------------------------------------------------
# Files


def _unreadable(exc: UserError | OSError) -> TensorMetrics:
    """A row for a tensor that cannot be read; a damaged zarr store stops the run instead (StoreError)."""
    if isinstance(exc, StoreError):
        raise exc
    return TensorMetrics.filled(UNSUPPORTED, str(exc), unreadable=True)


def _open_pair(npu_path: PathLike, bench_path: PathLike) -> tuple[TensorHandle, TensorHandle] | TensorMetrics:
    try:
        return open_tensor(Path(npu_path)), open_tensor(Path(bench_path))
    except (UserError, OSError) as exc:
        return _unreadable(exc)


def measure_pair(
    npu_path: PathLike,
    bench_path: PathLike,
    *,
    big_elems: int = BIG_TENSOR_ELEMS,
    chunk_elems: int = CHUNK_ELEMS,
    workspace: Workspace | None = None,
) -> TensorMetrics:
    """The six cells for two tensor files (``.npy`` or ``.pt``, in any combination).

    A file that is missing, truncated or refused gives ``unsupported`` cells and a one-line ``message``
    naming it; nothing is raised, so a run goes on. Tensors bigger than ``big_elems`` are measured chunk by
    chunk (see the module docstring for the precision of that path).
    """
    pair = _open_pair(npu_path, bench_path)
    if isinstance(pair, TensorMetrics):
        return pair
    npu, bench = pair
    early = _precheck(_squeezed(npu.shape), _squeezed(bench.shape))
    if early is not None:
        return early
    if npu.size > big_elems and npu.size > 1:
        try:
            return _measure_chunked(npu, bench, chunk_elems)
        except (UserError, OSError) as exc:
            return _unreadable(exc)
    return _measure_one_shot(npu, bench, workspace)


def _measure_one_shot(
    npu: TensorHandle, bench: TensorHandle, workspace: Workspace | None = None
) -> TensorMetrics:
    workspace = workspace or Workspace()
    try:
        npu_array = read_array(npu, workspace.array("npu_bytes", npu.nbytes, np.uint8))
        bench_array = read_array(bench, workspace.array("bench_bytes", bench.nbytes, np.uint8))
    except (UserError, OSError) as exc:
        return _unreadable(exc)
    return measure_arrays(npu_array, bench_array, workspace)


def measure_pairs(
    pairs: Sequence[tuple[PathLike, PathLike]],
    *,
    big_elems: int = BIG_TENSOR_ELEMS,
    chunk_elems: int = CHUNK_ELEMS,
) -> list[TensorMetrics]:
    """``measure_pair`` over a batch, in order, with one workspace: the body of one Dask task for many
    small tensors."""
    workspace = Workspace()
    return [
        measure_pair(n, b, big_elems=big_elems, chunk_elems=chunk_elems, workspace=workspace)
        for n, b in pairs
    ]


SPLIT_EVERY = 32
"""Records merged per combine task of the reduction tree."""


def measure_pair_delayed(
    npu_path: PathLike, bench_path: PathLike, *, big_elems: int | None = None, chunk_elems: int | None = None
) -> Delayed:
    """A lazy ``TensorMetrics`` for a pair: for more than ``big_elems`` (``BIG_TENSOR_ELEMS``) elements, a
    ``dask.array`` reduction over the two flat tensors, else one task measuring it in one shot.

    Each pair of aligned chunks gives one partials record (``blockwise``), the records are merged by
    ``dask.array.reduction`` (chunk / combine / aggregate: :func:`merge_records`), and one task turns the
    merged record into the row. The chunks are independent tasks, so a big tensor is read and reduced on
    every worker at once. Headers are read now (to know the chunking); the data only when the graph runs.
    """
    from dask import delayed

    pair = _open_pair(npu_path, bench_path)
    if isinstance(pair, TensorMetrics):
        return delayed(pair)
    npu, bench = pair
    early = _precheck(_squeezed(npu.shape), _squeezed(bench.shape))
    if early is not None:
        return delayed(early)
    big = BIG_TENSOR_ELEMS if big_elems is None else big_elems
    if npu.size <= max(big, 1):  # small after all (or 0-d): one shot, the reference's bits
        return delayed(_measure_one_shot)(npu, bench)
    return delayed(record_metrics)(_reduced_record(npu, bench, chunk_elems or CHUNK_ELEMS))


def _reduced_record(npu: TensorHandle, bench: TensorHandle, chunk_elems: int) -> Any:
    import dask.array as da

    records = da.blockwise(
        _block_record, "i",
        as_dask_array(npu, chunk_elems), "i",
        as_dask_array(bench, chunk_elems), "i",
        adjust_chunks={"i": 1}, dtype=PARTIALS_RECORD, meta=np.empty((0,), PARTIALS_RECORD),
    )  # fmt: skip
    return da.reduction(
        records, merge_records, merge_records, combine=merge_records, dtype=PARTIALS_RECORD,
        split_every=SPLIT_EVERY, concatenate=True, meta=np.empty((), PARTIALS_RECORD),
    )  # fmt: skip
