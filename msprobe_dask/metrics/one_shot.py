"""The six cells of two in-memory tensors in one shot, bit-identical to the reference.

The general path (:func:`measure_arrays` after the fast path declined) takes the reference's numpy
operations in its dtypes. Finite float16 / bfloat16 / float32 / float64 pairs take a fast path with the
same bits in fewer passes (:func:`finite_float_cells`): the C kernel ``_pair_pass`` (``csrc/pair_pass.c``,
where it is built) reads the two tensors once and gives MaxAbsErr, the relative error's maximum, the two
counts and the four float64 dot products of Cosine and EucDist, summed in the order of this process's
BLAS (``reference_dot.kernel_order``); :func:`numpy_finite_float_cells`, its definition, runs where the
kernel is not built or does not know the BLAS's order (float64 copies, their difference, BLAS dots).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from msprobe_dask.dump.tensor_dtypes import ML_DTYPES, element_of, element_size, is_ml_dtype, native_name
from msprobe_dask.metrics.reference_dot import kernel_order, reference_dot, thread_runs
from msprobe_dask.metrics.tensor_cells import (
    FIVE_THOUSANDTHS,
    NOT_AVAILABLE,
    THOUSANDTH,
    UNSUPPORTED,
    Cell,
    Partials,
    TensorMetrics,
    as_real,
    compute_dtype,
    cosine_cell,
    guarded,
    max_cell,
    precheck,
    ratio_cell,
    relative_error,
    squeezed,
    without_shared_invalid,
)
from msprobe_dask.native import load

PAIR_PASS_API = 4  # PAIR_PASS_API in csrc/pair_pass.c
pair_pass_kernel = load("msprobe_dask.metrics._pair_pass", PAIR_PASS_API)

FAST_FLOATS = frozenset(np.dtype(t) for t in (np.float16, np.float32, np.float64))
KERNEL_KINDS = {"float16": 0, "bfloat16": 1, "float32": 2, "float64": 3}
"""The dtypes the kernel reads (in this machine's byte order), by name, and the number it knows each by."""


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
    """``compute_dtype`` into the workspace's array ``name``."""
    return compute_dtype(array, ws.array(name, array.size, np.float32) if is_ml_dtype(array.dtype) else None)


def measure_arrays(npu: np.ndarray, bench: np.ndarray, workspace: Workspace | None = None) -> TensorMetrics:
    """The six cells for two in-memory tensors (raw dtypes: bfloat16 / float8 are widened here),
    bit-identical to the reference."""
    workspace = workspace or Workspace()
    npu, bench = np.asarray(npu), np.asarray(bench)
    early = precheck(squeezed(npu.shape), squeezed(bench.shape))
    if early is not None:
        return early
    if npu.size > 1:  # (one element squeezes to 0-d)
        fast = finite_float_cells(npu, bench, workspace)
        if fast is not None:
            return fast
    n = np.squeeze(_widened(npu, "npu32", workspace))
    b = np.squeeze(_widened(bench, "bench32", workspace))
    if n.ndim == 0:
        return _measure_0d(n, b)
    n, b = as_real(n), as_real(b)  # (0-d: the difference's magnitude, as the reference's)
    try:
        zeroed = without_shared_invalid(n, b)
    except (ValueError, TypeError):
        return TensorMetrics.filled(UNSUPPORTED, "data is unreadable as numbers")
    if zeroed is None:
        return TensorMetrics.filled(NOT_AVAILABLE, "NaN/Inf positions of NPU and bench differ")
    n, b = zeroed
    n64, b64 = n.reshape(-1).astype(float), b.reshape(-1).astype(float)
    with np.errstate(all="ignore"):  # overflow to inf is part of the answer, not worth a warning
        try:
            relative: np.ndarray | None = relative_error(n, b)
        except Exception:  # noqa: BLE001 - the reference makes the three cells that need it unsupported
            relative = None

        def from_relative(cell: Any) -> Cell:
            return UNSUPPORTED if relative is None else guarded(lambda: cell(relative))

        diff = n64 - b64
        cells = (
            guarded(lambda: cosine_cell(reference_dot(n64, b64), _norm(n64), _norm(b64))),
            guarded(lambda: float(np.sqrt(reference_dot(diff, diff)))),
            guarded(lambda: max_cell(np.max(np.abs(diff)))),
            from_relative(lambda re: max_cell(np.max(re))),  # re is |...| already
            from_relative(lambda re: ratio_cell(np.count_nonzero(re < THOUSANDTH), re.size)),
            from_relative(lambda re: ratio_cell(np.count_nonzero(re < FIVE_THOUSANDTHS), re.size)),
        )
    return TensorMetrics(cells)


def _norm(x64: np.ndarray) -> np.float64:
    """``np.linalg.norm`` of a 1-D float64 array (the square root of its dot with itself)."""
    return np.sqrt(reference_dot(x64, x64))


def _with_eps_where_bench_is_zero(relative: np.ndarray, n: np.ndarray, b: np.ndarray) -> Any:
    """The relative error where bench is 0 made again by ``relative_error``'s rule (its dtype's eps added
    to both sides there, element by element the same arithmetic); its new maximum."""
    zero = b == 0
    if zero.any():
        relative[zero] = relative_error(n[zero], b[zero])
    return np.max(relative)


def relative_dtype(n: str, b: str) -> np.dtype:
    """The relative error's dtype for two raw dtypes, by name (bfloat16 computes as float32)."""
    return np.result_type(*(np.float32 if d in ML_DTYPES else np.dtype(d) for d in (n, b)), np.float32)


def finite_float_cells(npu: np.ndarray, bench: np.ndarray, ws: Workspace) -> TensorMetrics | None:
    """The cells of two float tensors of the same squeezed shape and more than one element, without
    NaN/Inf, with the general path's bits in fewer passes and no fresh big arrays; None when the general
    path must decide (other dtypes, NaN/Inf, a square overflowing float64, a relative error that is not
    finite).

    Finite sums of squares prove both tensors finite. The relative error is computed in its dtype
    (``rtype``), with that dtype's eps added to both sides where bench is 0 (``relative_error``'s rule):
    the reference's widened copies hold the same values as the float16/32 inputs.
    """
    kinds = kernel_kinds(native_name(npu.dtype), native_name(bench.dtype))
    if kinds is not None:
        return kernel_cells(npu, bench, *kinds)
    n = _widened(npu, "npu32", ws)
    b = _widened(bench, "bench32", ws)
    if n.dtype not in FAST_FLOATS or b.dtype not in FAST_FLOATS:
        return None
    return numpy_finite_float_cells(np.squeeze(n), np.squeeze(b), ws)


def kernel_reads(n_name: str | None, b_name: str | None) -> bool:
    """The C pass is built and reads tensors of these dtypes (named by ``tensor_dtypes.native_name``)."""
    return pair_pass_kernel is not None and n_name in KERNEL_KINDS and b_name in KERNEL_KINDS


def kernel_kinds(n_name: str | None, b_name: str | None) -> tuple[str, str, int] | None:
    """(the two dtypes' names, the dots' order) where the C pass measures tensors of these dtypes (named
    by ``tensor_dtypes.native_name``); None where it does not: another dtype or byte order, the kernel not
    built, or a BLAS whose summation order it does not know (``reference_dot.kernel_order``)."""
    if not kernel_reads(n_name, b_name):
        return None
    order = kernel_order()
    return None if order is None else (n_name, b_name, order)  # type: ignore[return-value]


def kernel_cells(
    npu: np.ndarray, bench: np.ndarray, n_name: str, b_name: str, order: int
) -> TensorMetrics | None:
    """``finite_float_cells`` by the C pass, from two tensors' elements (typed arrays or their bytes, as
    many elements each, more than one) of the dtypes ``kernel_kinds`` accepted: a bfloat16 tensor needs
    no ml_dtypes here."""
    found = finite_pass(npu, n_name, bench, b_name, order)
    if found is None:
        return None
    with np.errstate(all="ignore"):
        cosine = cosine_cell(found.dot, np.sqrt(found.n_sq), np.sqrt(found.b_sq))
        euclidean = float(np.sqrt(found.diff_sq))
    cells = (
        cosine,
        euclidean,
        max_cell(found.max_abs),
        max_cell(found.max_rel),
        ratio_cell(found.under_thousandth, found.size),
        ratio_cell(found.under_five_thousandths, found.size),
    )
    return TensorMetrics(cells)


def finite_pass(npu: np.ndarray, n_name: str, bench: np.ndarray, b_name: str, order: int) -> Partials | None:
    """``kernel_pass`` over two tensors' elements (arrays or their bytes, more than one each) as Partials
    (the dots as float64, the largest relative error in its dtype); None where the pair is not finite (a
    sum of squares or the largest relative error is not), where numpy's path decides."""
    size = _raw_bytes(npu).size // element_size(element_of(n_name))
    max_abs, max_rel, thousandth, five_thousandths, *dots = kernel_pass(npu, n_name, bench, b_name, order)
    n_b, n_sq, b_sq, diff_sq = (np.float64(dot) for dot in dots)
    if not (np.isfinite(n_sq) and np.isfinite(b_sq) and np.isfinite(max_rel)):
        return None
    return Partials(
        size=size,
        dot=n_b,
        n_sq=n_sq,
        b_sq=b_sq,
        diff_sq=diff_sq,
        max_abs=np.float64(max_abs),
        max_rel=relative_dtype(n_name, b_name).type(max_rel),
        under_thousandth=thousandth,
        under_five_thousandths=five_thousandths,
    )


def kernel_pass(
    npu: np.ndarray, n_name: str, bench: np.ndarray, b_name: str, order: int, loops: int = 0
) -> tuple[Any, ...]:
    """The C pass over two finite tensors' elements (arrays or their bytes) of ``KERNEL_KINDS`` by name, as
    many each, its dots summed in ``order`` (``reference_dot.KERNEL_ORDERS``): (max |n - b|, the largest
    relative error, the counts below the two limits, n.b, n.n, b.b, d.d). ``loops`` (the tests') chooses
    the kernel's loops: 0 the widest the CPU runs, 1 AVX2 at most, 2 generic C; each gives the same."""
    rtype = relative_dtype(n_name, b_name)
    n_bytes, b_bytes = _raw_bytes(npu), _raw_bytes(bench)
    size = n_bytes.size // element_size(element_of(n_name))
    return pair_pass_kernel.pair_pass(  # type: ignore[union-attr]
        n_bytes, KERNEL_KINDS[n_name], b_bytes, KERNEL_KINDS[b_name],
        rtype == np.float64, float(np.finfo(rtype).eps),
        _compared_limit(rtype, THOUSANDTH), _compared_limit(rtype, FIVE_THOUSANDTHS),
        [stop for _, stop in thread_runs(size)], order, loops,
    )  # fmt: skip


def _raw_bytes(array: np.ndarray) -> np.ndarray:
    """The elements in C order as bytes (a view when the array is contiguous)."""
    return np.ascontiguousarray(array).reshape(-1).view(np.uint8)


def _compared_limit(rtype: np.dtype, limit: float) -> float:
    """``limit`` as numpy compares a ``rtype`` array with it (``relative < limit``: a Python float is
    rounded to the array's dtype)."""
    return float(np.result_type(rtype, limit).type(limit))


def numpy_finite_float_cells(n: np.ndarray, b: np.ndarray, ws: Workspace) -> TensorMetrics | None:
    """``finite_float_cells`` in numpy (the kernel's definition), for float16/32/64 arrays of one shape."""
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
        cosine = cosine_cell(reference_dot(n64, b64), np.sqrt(n_sq), np.sqrt(b_sq))
        diff = np.subtract(n64, b64, out=n64)
        euclidean = float(np.sqrt(reference_dot(diff, diff)))
        max_abs = np.max(np.abs(diff, out=diff))
    cells = (
        cosine,
        euclidean,
        max_cell(max_abs),
        max_cell(max_rel),
        ratio_cell(thousandth, size),
        ratio_cell(five_thousandths, size),
    )
    return TensorMetrics(cells)


def _measure_0d(n: np.ndarray, b: np.ndarray) -> TensorMetrics:
    """0-d (size 1 before squeeze): only MaxAbsErr and MaxRelativeErr, in the arrays' own dtypes, NaN kept."""

    def max_abs() -> Cell:
        x, y = (n.astype(float), b.astype(float)) if n.dtype == bool else (n, b)
        with np.errstate(all="ignore"):
            return max_cell(np.max(np.abs(x - y)))

    def max_rel() -> Cell:
        return max_cell(np.max(np.abs(relative_error(n, b))))

    cells = (UNSUPPORTED, UNSUPPORTED, guarded(max_abs), guarded(max_rel), UNSUPPORTED, UNSUPPORTED)
    return TensorMetrics(cells, "0-d tensor: Cosine, EucDist and the error ratios can not be computed")
