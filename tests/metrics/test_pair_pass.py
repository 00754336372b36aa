"""The C pass over a finite float pair (metrics/csrc/pair_pass.c) against its Python definition
(``one_shot.numpy_finite_float_cells``): the same cells on generated pairs of every dtype it reads, and its
limits taken from Python."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import msprobe_dask.metrics.one_shot as one_shot
from msprobe_dask.metrics.reference_dot import reference_dot

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
        assert _kernel_dots(npu, bench, 0) == _blas_dots(npu, bench), (n_dtype, b_dtype, size, seed)
        assert _every_loops_alike(npu, bench), (n_dtype, b_dtype, size, seed)


def _every_loops_alike(npu: np.ndarray, bench: np.ndarray) -> bool:
    """The kernel's loops for each instruction set (AVX-512, AVX2, generic C, as far as the CPU runs them)
    give the same maxima, counts and dots, in both orders."""
    passes = [
        one_shot.kernel_pass(npu, _name(npu), bench, _name(bench), order, loops)
        for order in (0, 1)
        for loops in LOOPS
    ]
    return all(p == passes[i - i % len(LOOPS)] for i, p in enumerate(passes))


LOOPS = (0, 1, 2)  # the kernel's loops: the widest the CPU runs, AVX2 at most, generic C


def _name(array: np.ndarray) -> str:
    return "bfloat16" if array.dtype == _dtype("bfloat16") else array.dtype.name


@pytest.mark.parametrize("size", [16 * 1025 + 7, (1 << 20) + 37, 3 * (1 << 20) + 16])
def test_every_loops_give_the_same_on_long_runs(size: int) -> None:
    """Runs of many 16- and 32-element blocks and of more than the AVX-512 loops' 2^20 elements between
    flushes of their counts."""
    for n_dtype, b_dtype in [("float32", "float16"), ("bfloat16", "bfloat16"), ("float16", "float64")]:
        npu, bench = _pair(n_dtype, b_dtype, size, size)
        assert _every_loops_alike(npu, bench), (n_dtype, b_dtype, size)


def test_inexact_products_are_rounded_as_blas_rounds_them() -> None:
    """float64 products are not exact, so fused (fma) and separate roundings differ: sizes 1 to 47 cover
    every way a run ends (16-lane blocks, then one by one)."""
    rng = np.random.default_rng(5)
    for size in range(1, 48):
        for _ in range(4):
            npu, bench = rng.standard_normal(size), rng.standard_normal(size)
            assert _kernel_dots(npu, bench, 0) == _blas_dots(npu, bench), size


def _kernel_dots(npu: np.ndarray, bench: np.ndarray, order: int) -> list[float]:
    return list(one_shot.kernel_pass(npu, npu.dtype.name, bench, bench.dtype.name, order)[4:])


def _blas_dots(npu: np.ndarray, bench: np.ndarray) -> list[float]:
    """n.b, n.n, b.b, d.d as the reference takes them: numpy (BLAS) on the float64 copies."""
    n, b = npu.astype(np.float64), bench.astype(np.float64)
    return [float(reference_dot(x, y)) for x, y in ((n, b), (n, n), (b, b), (n - b, n - b))]


def test_every_float16_value_widens_as_numpy_widens_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """All 63,488 finite float16s (subnormals and both zeros included) against a bench of ones; and each
    alone: its dots with 1 and with itself are its float64 value and that value's square (both exact)."""
    every = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    finite = every[np.isfinite(every)]
    with_kernel, in_numpy = _both(finite, np.ones_like(finite), monkeypatch)
    assert with_kernel is not None and with_kernel.cells == in_numpy.cells  # type: ignore[union-attr]
    ones = np.ones(2, np.float16)
    dots = [_kernel_dots(np.array([value, 0], np.float16), ones, 0)[:2] for value in finite]
    wide = finite.astype(np.float64)
    assert [d[0] for d in dots] == list(wide + 0.0) and [d[1] for d in dots] == list(wide * wide)


CHECK_ORDER = """
import sys
sys.path.insert(0, sys.argv[1])
import numpy as np
from test_pair_pass import DTYPES, _blas_dots, _every_loops_alike, _kernel_dots, _pair
from msprobe_dask.metrics.reference_dot import kernel_order

assert kernel_order() == 1, kernel_order()
differ = 0
rng = np.random.default_rng(5)
for size in [*range(1, 100), 10_001, 10_032, 20_047]:
    for n_dtype in DTYPES:
        npu, bench = _pair(n_dtype, "float32", max(size, 8), size)
        differ += _kernel_dots(npu, bench, 1) != _blas_dots(npu, bench)
        differ += not _every_loops_alike(npu, bench)
    npu, bench = rng.standard_normal(size), rng.standard_normal(size)
    differ += _kernel_dots(npu, bench, 1) != _blas_dots(npu, bench)
print(differ)
"""


@pytest.mark.skipif("avx512f" not in Path("/proc/cpuinfo").read_text(), reason="no AVX-512 CPU")
def test_the_kernel_sums_as_openblas_s_skylakex_ddot() -> None:
    """The tests run numpy's BLAS on its Haswell kernel (conftest.py); the other order the kernel makes is
    checked against numpy in a process whose OpenBLAS runs its SkylakeX kernel."""
    env = {**os.environ, "OPENBLAS_CORETYPE": "SkylakeX"}
    code = [sys.executable, "-c", CHECK_ORDER, str(Path(__file__).parent)]
    out = subprocess.run(code, env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.split() == ["0"], out.stderr[-2000:]


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
