"""The C pass over a finite float pair (metrics/csrc/pair_pass.c) against its Python definition
(``one_shot.numpy_finite_float_cells``): the same cells on generated pairs of every dtype it reads, and its
limits taken from Python."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import msprobe_dask.metrics.one_shot as one_shot

pytestmark = pytest.mark.skipif(one_shot.pair_pass_kernel is None, reason="the C kernel is not built")

DTYPES = ["float16", "bfloat16", "float32", "float64"]


def _dtype(name: str) -> np.dtype:
    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)


def _pair(n_dtype: str, b_dtype: str, size: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Values of every kind the pass meets: wide exponents (float16 subnormals), zeros and -0 in both sides,
    relative errors right at the two limits, equal elements."""
    rng = np.random.default_rng(seed)
    npu = rng.standard_normal(size) * np.exp(rng.uniform(-9, 9, size))
    bench = npu * (1 + rng.choice([0, 1e-4, 1e-3, 5e-3, 2e-2], size) * rng.choice([-1, 1], size))
    bench[rng.random(size) < 0.05] = 0.0
    bench[rng.random(size) < 0.02] = -0.0
    npu[rng.random(size) < 0.05] = -0.0
    npu[:8] = np.float32(1.001), np.float32(1.005), 6e-8, -6e-8, 1e-5, 0.0, 65000.0, -2.0
    bench[:8] = 1.0, 1.0, 5.9e-8, 0.0, 1.1e-5, 0.0, 64000.0, -2.0
    return npu.astype(_dtype(n_dtype)), bench.astype(_dtype(b_dtype))


def _both(npu: np.ndarray, bench: np.ndarray, monkeypatch: pytest.MonkeyPatch) -> tuple[object, object]:
    with_kernel = one_shot.finite_float_cells(npu, bench, one_shot.Workspace())
    with monkeypatch.context() as patch:
        patch.setattr(one_shot, "pair_pass_kernel", None)
        in_numpy = one_shot.finite_float_cells(npu, bench, one_shot.Workspace())
    return with_kernel, in_numpy


@pytest.mark.parametrize("n_dtype", DTYPES)
@pytest.mark.parametrize("b_dtype", DTYPES)
@pytest.mark.parametrize("size", [9, 33, 10_001])
def test_the_kernel_gives_the_python_definition_s_cells(
    n_dtype: str, b_dtype: str, size: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    for seed in range(3):
        npu, bench = _pair(n_dtype, b_dtype, size, seed)
        with_kernel, in_numpy = _both(npu, bench, monkeypatch)
        assert with_kernel is not None and in_numpy is not None
        assert with_kernel.cells == in_numpy.cells, (n_dtype, b_dtype, size, seed)


def test_every_float16_value_widens_as_numpy_widens_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """All 63,488 finite float16s (subnormals and both zeros included) against a bench of ones."""
    every = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    finite = every[np.isfinite(every)]
    with_kernel, in_numpy = _both(finite, np.ones_like(finite), monkeypatch)
    assert with_kernel is not None and with_kernel.cells == in_numpy.cells  # type: ignore[union-attr]
    n64 = one_shot.Workspace()
    one_shot.finite_float_cells(finite, np.ones_like(finite), n64)
    assert np.array_equal(n64.array("n64", finite.size, np.float64), finite.astype(np.float64))


@pytest.mark.parametrize("case", ["nan", "inf", "overflowing relative error"])
def test_pairs_the_general_path_decides_are_left_to_it(case: str) -> None:
    npu, bench = np.linspace(1, 2, 100, dtype=np.float32), np.linspace(1, 2, 100, dtype=np.float32)
    if case == "nan":
        npu[5] = np.nan
    elif case == "inf":
        bench[7] = np.inf
    else:
        bench[3] = np.float32(1e-40)  # a subnormal bench: |n / b| overflows float32
    assert one_shot.finite_float_cells(npu, bench, one_shot.Workspace()) is None


def test_the_kernel_takes_its_limits_from_python(monkeypatch: pytest.MonkeyPatch) -> None:
    npu, bench = _pair("float32", "float32", 5_000, 7)
    before, _ = _both(npu, bench, monkeypatch)
    monkeypatch.setattr(one_shot, "THOUSANDTH", 0.3)
    monkeypatch.setattr(one_shot, "FIVE_THOUSANDTHS", 0.6)
    with_kernel, in_numpy = _both(npu, bench, monkeypatch)
    assert with_kernel.cells == in_numpy.cells  # type: ignore[union-attr]
    assert with_kernel.cells[4:] != before.cells[4:]  # type: ignore[union-attr]
