"""The reference's float64 dots (Cosine, EucDist) reproduced digit for digit on one BLAS thread, and the
fast path of the six metrics against the general one."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from conftest import openblas_dots
from threadpoolctl import threadpool_limits

import msprobe_dask.metrics.one_shot as one_shot
from msprobe_dask.metrics.one_shot import measure_arrays
from msprobe_dask.metrics.reference_dot import reference_dot, thread_runs

SIZES = [10_000, 10_001, 12_345, 20_001, 65_537, 1_000_001]


def test_thread_runs_are_openblas_s_split() -> None:
    assert thread_runs(10_000) == [(0, 10_000)]
    assert thread_runs(10_001) == [(0, 5_001), (5_001, 10_001)]
    assert thread_runs(20_000) == [(0, 10_000), (10_000, 20_000)]
    assert thread_runs(30_001, threads=3) == [(0, 10_001), (10_001, 20_001), (20_001, 30_001)]


def _pairs(tmp_path: Path) -> list[Path]:
    rng = np.random.default_rng(3)
    paths = []
    for size in SIZES:
        x = rng.standard_normal(size).astype(np.float32).astype(np.float64)
        y = (x * (1 + rng.normal(0, 1e-3, size))).astype(np.float32).astype(np.float64)
        paths.append(tmp_path / f"{size}.npy")
        np.save(paths[-1], np.stack([x, y]))
    return paths


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="OpenBLAS runs one thread on one CPU")
def test_reference_dot_is_two_threaded_openblas_s_dot(tmp_path: Path) -> None:
    """The same bits as numpy on two BLAS threads (the corpus machine's), which one thread does not give."""
    paths = _pairs(tmp_path)
    two, one = openblas_dots(paths, 2), openblas_dots(paths, 1)
    ours = []
    with threadpool_limits(1, user_api="blas"):  # as in a dask worker
        for path in paths:
            x, y = np.load(path)
            diff = x - y
            ours.append((float(reference_dot(x, y)), float(np.sqrt(reference_dot(diff, diff)))))
    assert ours == two
    assert one != two  # these sizes do show the thread count in the last digits


@pytest.mark.parametrize("dtypes", [("float32", "float32"), ("float16", "float16"), ("float64", "float32"),
                                    ("float16", "float32")])  # fmt: skip
@pytest.mark.parametrize("size", [7, 10_001, 50_000])
@pytest.mark.parametrize("kernel", ["C", "numpy"])
def test_fast_path_gives_the_general_path_s_cells(
    dtypes: tuple[str, str], size: int, kernel: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finite floats take the fast path (the C kernel's pass or its numpy definition); zeros in bench,
    NaN/Inf and overflow go to the general path: every case gives the general path's cells."""
    if kernel == "numpy":
        monkeypatch.setattr(one_shot, "pair_pass_kernel", None)
    elif one_shot.pair_pass_kernel is None:
        pytest.skip("the C kernel is not built")
    rng = np.random.default_rng(size)
    npu = rng.standard_normal(size).astype(dtypes[0])
    bench = (npu * (1 + rng.normal(0, 2e-3, size))).astype(dtypes[1])
    with_zero = bench.copy()
    with_zero[::5] = 0
    with_nan = npu.copy(), bench.copy()
    for side in with_nan:
        side[3] = np.nan
    huge = (npu.astype(np.float64) * 1e200, bench.astype(np.float64))
    cases = [(npu, bench), (npu, with_zero), with_nan, huge, (npu.reshape(1, -1), bench.reshape(-1, 1)[:, 0])]
    assert one_shot.finite_float_cells(npu, bench, one_shot.Workspace()) is not None
    fast = [measure_arrays(n, b) for n, b in cases]
    monkeypatch.setattr(one_shot, "finite_float_cells", lambda *_: None)
    general = [measure_arrays(n, b) for n, b in cases]
    assert [m.cells for m in fast] == [m.cells for m in general]
    assert [m.message for m in fast] == [m.message for m in general]
