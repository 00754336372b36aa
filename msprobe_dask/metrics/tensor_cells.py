"""The tensor metrics' rules (compare.md §4.2), shared by the one-shot and the chunked paths: the cells
(the reference's texts and 12-decimal rounding), the pre-checks on shapes, the dtypes the reference computes
in (bfloat16 / float8 widened to float32, the relative error's dtype and its eps where bench is 0) and the
NaN/Inf rule. How the six metrics are measured: ``metrics/tensor.py`` (files), ``one_shot.py``,
``chunked.py``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from msprobe_dask.columns import NA, NAN, TENSOR_METRIC_COLUMNS
from msprobe_dask.dump.tensor_dtypes import is_ml_dtype
from msprobe_dask.errors import StoreError, UserError

UNSUPPORTED = "unsupported"
SHAPE_UNMATCHED = "shape unmatched"
NOT_AVAILABLE = NA  # NaN/Inf at different positions

COSINE_ROUND_ABOVE = 0.9999  # a cosine above this is shown with 6 decimals
THOUSANDTH, FIVE_THOUSANDTHS = 0.001, 0.005
_EPS64 = float(np.finfo(np.float64).eps)
# The reference casts every dtype that compares unequal to all of these (ints, bool, big-endian floats...)
# to float64 before the relative error.
REFERENCE_FLOAT_TYPES = (np.half, np.single, float, np.double, np.float64, np.longdouble)

Cell = float | str


@dataclass(frozen=True, slots=True)
class TensorMetrics:
    """One row's metric cells (Python floats or the reference's strings) and why, if not numbers;
    ``unreadable``: a tensor file could not be read (the message names it), so the row is an error."""

    cells: tuple[Cell, ...]  # in the order of TENSOR_METRIC_COLUMNS, one each
    message: str = ""
    unreadable: bool = False

    def __post_init__(self) -> None:
        if len(self.cells) != len(TENSOR_METRIC_COLUMNS):
            raise ValueError(f"{len(self.cells)} metric cells for the columns {TENSOR_METRIC_COLUMNS}")

    @classmethod
    def filled(cls, value: str, message: str, unreadable: bool = False) -> TensorMetrics:
        return cls((value,) * len(TENSOR_METRIC_COLUMNS), message, unreadable)

    def as_dict(self) -> dict[str, Cell]:
        return dict(zip(TENSOR_METRIC_COLUMNS, self.cells))


def unreadable(exc: UserError | OSError) -> TensorMetrics:
    """The row of a pair whose tensor file cannot be read (``exc`` names it and the problem), whichever path
    reads it; a damaged zarr store stops the run instead (its StoreError is raised again)."""
    if isinstance(exc, StoreError):
        raise exc
    return TensorMetrics.filled(UNSUPPORTED, str(exc), unreadable=True)


@dataclass(frozen=True, slots=True)
class Partials:
    """What one pass over a pair of flat tensors gives: a chunk's contribution to a big pair's row
    (``chunked.py``), or a whole pair's numbers from the C pass (``one_shot.finite_pass``)."""

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


def fmt(value: Any) -> float:
    """The reference's 12-decimal rounding through text."""
    return float(f"{value:.12f}")


# ---------------------------------------------------------------------------------------------------------
# Pre-checks, shared by both paths (they only need shapes)


def squeezed(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(n for n in shape if n != 1)


def precheck(n_shape: tuple[int, ...], b_shape: tuple[int, ...]) -> TensorMetrics | None:
    """The reference's checks before any arithmetic, on squeezed shapes, first hit wins."""
    if math.prod(n_shape) == 0:
        return TensorMetrics.filled(UNSUPPORTED, "empty NPU tensor, can not compare")
    if n_shape != b_shape:
        return TensorMetrics.filled(
            SHAPE_UNMATCHED, f"shape of NPU {list(n_shape)} and bench {list(b_shape)} differ after squeeze"
        )
    return None


def compute_dtype(array: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """bfloat16 and float8 become float32 (in ``out``, a float32 array of the same size, if given), as the
    reference does before it turns a torch tensor into numpy.

    bfloat16 is the upper half of a float32's bits, so it widens exactly by a shift (the same bits as the
    cast, NaN payloads included, in one vectorised pass). (A ``.npy`` written from a bfloat16 array says
    only ``|V2``; like ``np.load`` we keep it raw: a file of no numbers, which ``tensor.py`` refuses.)
    """
    if not is_ml_dtype(array.dtype):
        return array
    widened = (np.empty(array.shape, np.float32) if out is None else out).reshape(array.shape)
    if array.dtype.name == "bfloat16":
        np.left_shift(array.view(np.uint16), 16, out=widened.view(np.uint32), dtype=np.uint32)
    else:
        np.copyto(widened, array)
    return widened


def as_real(array: np.ndarray) -> np.ndarray:
    """A complex array of more than one element as both paths measure it: its real part in float64 (what
    the reference's casts to float keep: the same cells, without numpy's ComplexWarning on every cast);
    any other array as it is."""
    return array.real.astype(np.float64) if array.dtype.kind == "c" else array


def without_shared_invalid(n: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
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


def relative_error(n: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``|(n - b) / b|`` in ``result_type(n, b, float32)``, with that type's eps added where ``b == 0``."""
    with np.errstate(all="ignore"):
        if n.dtype not in REFERENCE_FLOAT_TYPES:
            n = as_real(n).astype(float)  # (complex: its real part, as the cast keeps, without a warning)
        if b.dtype not in REFERENCE_FLOAT_TYPES:
            b = as_real(b).astype(float)
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


def cosine_cell(num: Any, n_norm: Any, b_norm: Any) -> Cell:
    if n_norm <= _EPS64 and b_norm <= _EPS64:
        return 1.0
    if n_norm <= _EPS64 or b_norm <= _EPS64:
        return NAN  # all zeros on one side
    with np.errstate(all="ignore"):
        cos = num / (n_norm * b_norm)
    if np.isnan(cos):
        return NAN
    value = fmt(cos)
    return round(value, 6) if value > COSINE_ROUND_ABOVE else value


def max_cell(value: Any) -> Cell:
    return NAN if np.isnan(value) else fmt(value)


def ratio_cell(count: Any, total: int) -> Cell:
    return NAN if total == 0 else fmt(count / total)


def guarded(compute: Any) -> Cell:
    """Like the reference's per-algorithm guard: a metric that raises is ``unsupported``, the others stand."""
    try:
        return compute()
    except Exception:  # noqa: BLE001 - any numpy failure means this one cell is unsupported
        return UNSUPPORTED
