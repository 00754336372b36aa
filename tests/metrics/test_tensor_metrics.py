"""Tensor-mode metrics: the reference's cells for real dumps and hand-made edge cases, the chunked path,
and compare(x, x)."""

from __future__ import annotations

import ast
import csv
import dataclasses
import json
import math
import os
import shutil
import tempfile
import warnings
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from msprobe_dask.columns import TENSOR_METRIC_COLUMNS
from msprobe_dask.dump.zarr_store import write_array
from msprobe_dask.errors import StoreError
from msprobe_dask.metrics.chunked import aggregate_partials, chunk_partials
from msprobe_dask.metrics.one_shot import measure_arrays
from msprobe_dask.metrics.tensor import measure_pair, measure_pair_delayed, measure_pairs
from msprobe_dask.metrics.tensor_cells import TensorMetrics

DATA = Path(__file__).resolve().parents[1] / "data"
EDGE = DATA / "tensors" / "edge"
EDGE_PT = EDGE / "pt" / "target" / "dump_tensor_data"


def _reference_metrics() -> tuple[str, ...]:
    """The reference's tensor metrics, in its csv's order (between the requires_grad and the statistics
    columns); edge/expected.json holds their cells in this order. A metric of ours the reference has not
    is checked against the other path, not here."""
    (path,) = (DATA / "tensor_mix" / "ref" / "compare_csv").glob("*.csv")
    with open(path, newline="") as f:
        header = next(csv.reader(f))
    return tuple(header[header.index("Bench Requires_grad") + 1 : header.index("NPU max")])


REFERENCE_METRICS = _reference_metrics()
APPROXIMATE = ("Cosine", "EucDist")  # from float sums, which the chunked path adds in another order


def reference_cells(metrics: TensorMetrics) -> list[float | str]:
    cells = metrics.as_dict()
    return [cells[c] for c in REFERENCE_METRICS]


def every(cell: str) -> tuple[str, ...]:
    """The cells of a row whose metrics are all ``cell``."""
    return (cell,) * len(TENSOR_METRIC_COLUMNS)


REFERENCE_CSVS = {
    "tensor_mix": "compare_csv",
    "fuzzy_tensor": "compare_csv",  # exact-name run
    "ms_vs_pt_tensor": "compare_am_csv",  # MindSpore .npy vs PyTorch .pt
}


def csv_text(cell: float | str) -> str:
    """A cell as the reference's csv prints it: Python str of a float, except that infinities get a leading
    space (pandas' csv writer does that to every float inf)."""
    if isinstance(cell, float) and math.isinf(cell):
        return " inf" if cell > 0 else " -inf"
    return str(cell)


def reference_rows(case: str) -> list[tuple[Path, Path, list[str]]]:
    """(npu file, bench file, the six reference cells) for every csv row whose Data_name names two files."""
    (path,) = (DATA / case / "ref" / REFERENCE_CSVS[case]).glob("*.csv")
    rows = []
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            npu, bench = ast.literal_eval(row["Data_name"])
            if npu in ("-1", "N/A") or bench in ("-1", "N/A"):
                continue
            rows.append(
                (
                    DATA / case / "target" / "dump_tensor_data" / npu,
                    DATA / case / "golden" / "dump_tensor_data" / bench,
                    [row[c] for c in REFERENCE_METRICS],
                )
            )
    return rows


@pytest.mark.parametrize("case", sorted(REFERENCE_CSVS))
def test_same_cells_as_reference_csv(case: str) -> None:
    rows = reference_rows(case)
    assert len(rows) > 80
    wrong = []
    for npu, bench, expected in rows:
        got = [csv_text(c) for c in reference_cells(measure_pair(npu, bench))]
        if got != expected:
            wrong.append((npu.name, bench.name, got, expected))
    assert not wrong, wrong[:5]


def test_reference_csvs_cover_the_interesting_cells() -> None:
    seen = {cell for case in REFERENCE_CSVS for *_, cells in reference_rows(case) for cell in cells}
    assert {"unsupported", "shape unmatched", "N/A", "1.0", "0.0"} <= seen


EDGE_EXPECTED = json.loads((EDGE / "expected.json").read_text())


@pytest.mark.parametrize("key", sorted(EDGE_EXPECTED))
def test_same_cells_as_reference_edge_cases(key: str) -> None:
    """Hand-made pairs (0-d, size 1, NaN/Inf at same/different places, int64, bool, uint8, bfloat16,
    float8, float16 vs float32, empty, non-contiguous, big-endian and Fortran .npy...), see make_edge.py."""
    kind, npu_name = key.split("/", 1)
    *expected, bench_name = EDGE_EXPECTED[key]
    metrics = measure_pair(
        EDGE / kind / "target" / "dump_tensor_data" / npu_name,
        EDGE / kind / "golden" / "dump_tensor_data" / bench_name,
    )
    assert [csv_text(c) for c in reference_cells(metrics)] == expected


def test_cells_are_python_floats_or_reference_strings() -> None:
    allowed = {"unsupported", "shape unmatched", "N/A", "Nan"}
    for key, (*_, bench) in EDGE_EXPECTED.items():
        kind, npu = key.split("/", 1)
        target, golden = EDGE / kind / "target/dump_tensor_data", EDGE / kind / "golden/dump_tensor_data"
        for cell in measure_pair(target / npu, golden / bench).cells:
            assert type(cell) is float or cell in allowed, (key, cell)


# ---------------------------------------------------------------------------------------------------------
# Files that can not be read: a message, never an exception


def _truncate(src: Path, dst: Path, keep: int) -> Path:
    dst.write_bytes(src.read_bytes()[:keep])
    return dst


def test_truncated_files_give_a_message(tmp_path: Path) -> None:
    np.save(tmp_path / "good.npy", np.arange(64, dtype=np.float32))
    bad_npy = _truncate(tmp_path / "good.npy", tmp_path / "bad.npy", 200)
    good_pt = EDGE / "pt/target/dump_tensor_data/Torch.random.0.forward.input.0.pt"
    bad_pt = _truncate(good_pt, tmp_path / "bad.pt", 400)
    for npu, bench, culprit in (
        (bad_npy, tmp_path / "good.npy", bad_npy),
        (tmp_path / "good.npy", bad_npy, bad_npy),
        (bad_pt, good_pt, bad_pt),
        (good_pt, bad_pt, bad_pt),
    ):
        metrics = measure_pair(npu, bench)
        assert metrics.cells == every("unsupported")
        assert str(culprit) in metrics.message and "truncated" in metrics.message
        assert "\n" not in metrics.message


def test_missing_and_refused_files_give_a_message(tmp_path: Path) -> None:
    np.save(tmp_path / "good.npy", np.arange(4.0))
    missing = measure_pair(tmp_path / "good.npy", tmp_path / "missing.npy")
    assert missing.cells == every("unsupported") and "missing.npy" in missing.message
    evil = measure_pair(DATA / "tensors" / "evil_os_system.pt", tmp_path / "good.npy")
    assert evil.cells == every("unsupported") and "forbidden global os.system" in evil.message


def test_measure_pairs_keeps_order_and_continues_past_bad_files(tmp_path: Path) -> None:
    np.save(tmp_path / "a.npy", np.arange(1.0, 5.0))
    np.save(tmp_path / "b.npy", np.arange(1.0, 5.0) * 1.5)
    pairs = [
        (tmp_path / "a.npy", tmp_path / "b.npy"),
        (tmp_path / "a.npy", tmp_path / "nope.npy"),
        (tmp_path / "b.npy", tmp_path / "b.npy"),
    ]
    results = measure_pairs(pairs)
    assert results == [measure_pair(n, b) for n, b in pairs]
    assert results[1].as_dict()["Cosine"] == "unsupported" and results[2].as_dict()["Cosine"] == 1.0


def test_metrics_record() -> None:
    assert tuple(c for c in TENSOR_METRIC_COLUMNS if c in REFERENCE_METRICS) == REFERENCE_METRICS
    metrics = measure_arrays(np.array([1.0, 2.0]), np.array([1.0, 2.0]))
    assert reference_cells(metrics) == [1.0, 0.0, 0.0, 0.0, 1.0, 1.0] and metrics.message == ""
    assert metrics.as_dict()["Cosine"] == 1.0
    with pytest.raises(ValueError, match="metric cells for the columns"):  # one cell per column, no less
        TensorMetrics(metrics.cells[1:])
    with pytest.raises(dataclasses.FrozenInstanceError):
        metrics.message = "x"  # type: ignore[misc]


# ---------------------------------------------------------------------------------------------------------
# Chunked path == one-shot path


def _close(chunked: float | str, one_shot: float | str, rel: float = 1e-12) -> bool:
    if isinstance(chunked, str) or isinstance(one_shot, str):
        return chunked == one_shot
    return chunked == one_shot or abs(chunked - one_shot) <= rel * max(abs(one_shot), 1e-300)


def _assert_chunked_matches(npu: Path, bench: Path, big_elems: int, chunk_elems: int) -> TensorMetrics:
    one_shot = measure_pair(npu, bench)
    chunked = measure_pair(npu, bench, big_elems=big_elems, chunk_elems=chunk_elems)
    lazy = measure_pair_delayed(npu, bench, big_elems=big_elems, chunk_elems=chunk_elems).compute(
        scheduler="sync"
    )
    assert lazy == chunked
    cells, whole = chunked.as_dict(), one_shot.as_dict()
    assert all(_close(cells[c], whole[c]) for c in APPROXIMATE), (chunked, one_shot)
    exact = [c for c in TENSOR_METRIC_COLUMNS if c not in APPROXIMATE]  # maxima and ratios
    assert [cells[c] for c in exact] == [whole[c] for c in exact], (chunked, one_shot)
    return chunked


def _pair(tmp_path: Path, kind: str) -> tuple[Path, Path]:
    """Two files of one tensor: .npy of 1,000 floats, an edge case's .pt, or a converted dump's arrays."""
    n, b = tmp_path / f"n.{kind}", tmp_path / f"b.{kind}"
    values = np.random.default_rng(5).standard_normal(1000).astype(np.float32)
    for path in (n, b):
        if kind == "npy":
            np.save(path, values)
        elif kind == "pt":
            shutil.copy(EDGE_PT / "Torch.random.0.forward.input.0.pt", path)
        else:
            write_array(path, values.dtype, values.shape, lambda start, stop: values[start:stop])
    return n, b


@pytest.mark.parametrize("scheduler", ["sync", "threads"])
@pytest.mark.parametrize("damage", ["truncated", "missing", "folder"])
@pytest.mark.parametrize("kind", ["npy", "pt"])
def test_a_file_damaged_after_the_graph_is_made_gives_its_row(
    tmp_path: Path, kind: str, damage: str, scheduler: str
) -> None:
    """A big pair's headers are read as its graph is made, its chunks as the graph runs: a file damaged in
    between gives its row an error naming it (as the file damaged before gives), not one that stops the
    run."""
    n, b = _pair(tmp_path, kind)
    lazy = measure_pair_delayed(n, b, big_elems=1, chunk_elems=5)
    if damage == "truncated":
        os.truncate(n, 1000)
    else:
        n.unlink()
        if damage == "folder":
            n.mkdir()
    got = lazy.compute(scheduler=scheduler)
    before = measure_pair(n, b, big_elems=1, chunk_elems=5)
    assert got.unreadable and before.unreadable and got.cells == before.cells == every("unsupported")
    word = {"truncated": "truncated", "missing": "No such file", "folder": "folder"}[damage]
    assert got.message.startswith(f"{n}: ") and before.message.startswith(f"{n}: ")
    assert word in before.message and (word if damage != "folder" else "Is a directory") in got.message


def test_a_store_array_damaged_after_the_graph_is_made_stops_the_run(tmp_path: Path) -> None:
    """A converted dump's array missing a chunk file is a damaged store, which stops the run (README, Safety),
    whether the pair is measured in one shot or chunk by chunk, its chunk removed before or during the run."""
    n, b = _pair(tmp_path, "zarr")
    lazy = measure_pair_delayed(n, b, big_elems=1, chunk_elems=5)
    (n / "c" / "0").unlink()
    for measure in (lambda: lazy.compute(scheduler="threads"), lambda: measure_pair(n, b)):
        with pytest.raises(StoreError, match="chunk c/0 is missing"):
            measure()


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int64", "bool"])
def test_chunked_equals_one_shot_on_big_random_arrays(tmp_path: Path, dtype: str) -> None:
    rng = np.random.default_rng(7)
    npu = rng.standard_normal((37, 1, 5411)).astype(np.float64)
    bench = npu * (1 + rng.normal(0, 3e-3, npu.shape))
    bench.reshape(-1)[rng.choice(bench.size, 500, replace=False)] = 0.0  # eps where bench == 0
    if dtype in ("float32", "float64", "float16"):
        holes = rng.choice(npu.size, 300, replace=False)
        npu.reshape(-1)[holes[:150]] = bench.reshape(-1)[holes[:150]] = np.nan
        npu.reshape(-1)[holes[150:]] = np.inf
        bench.reshape(-1)[holes[150:]] = -np.inf
    if dtype == "int64":
        npu, bench = (npu * 50).astype(np.int64), (bench * 50).astype(np.int64)
    elif dtype == "bool":
        npu, bench = npu > 0.5, bench > 0.4
    else:
        npu, bench = npu.astype(dtype), bench.astype(dtype)
    np.save(tmp_path / "n.npy", npu)
    np.save(tmp_path / "b.npy", bench)
    chunked = _assert_chunked_matches(
        tmp_path / "n.npy", tmp_path / "b.npy", big_elems=10_000, chunk_elems=7919
    )
    assert all(isinstance(c, float) for c in chunked.cells)


def test_bfloat16_npy_is_raw_void_and_unsupported(tmp_path: Path) -> None:
    """np.save of a bfloat16 array writes '|V2': np.load (the reference) gets raw bytes, not numbers, and
    the row is an error naming the file (D27)."""
    values = np.linspace(-1, 1, 10).astype(ml_dtypes.bfloat16)
    np.save(tmp_path / "x.npy", values)
    assert np.load(tmp_path / "x.npy").dtype == np.dtype("V2")
    metrics = measure_pair(tmp_path / "x.npy", tmp_path / "x.npy")
    assert metrics.cells == every("unsupported") and metrics.unreadable
    assert metrics.message.startswith(f"{tmp_path / 'x.npy'}: the file holds void16 [10], not numbers")


def test_chunked_overflow_like_one_shot(tmp_path: Path) -> None:
    """float64 dot products that overflow: inf/nan partials, as the reference's single dot gives them."""
    rng = np.random.default_rng(5)
    npu = rng.standard_normal(30_000) * 1e160
    np.save(tmp_path / "n.npy", npu)
    np.save(tmp_path / "b.npy", -npu * 1.01)
    chunked = _assert_chunked_matches(tmp_path / "n.npy", tmp_path / "b.npy", big_elems=100, chunk_elems=999)
    assert [chunked.as_dict()[c] for c in APPROXIMATE] == ["Nan", math.inf]


def test_chunked_nan_mismatch_in_one_chunk(tmp_path: Path) -> None:
    npu = np.linspace(-1, 1, 50_000, dtype=np.float32)
    bench = npu.copy()
    npu[49_990] = np.nan
    np.save(tmp_path / "n.npy", npu)
    np.save(tmp_path / "b.npy", bench)
    chunked = _assert_chunked_matches(tmp_path / "n.npy", tmp_path / "b.npy", big_elems=100, chunk_elems=1000)
    assert chunked.cells == every("N/A")


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_chunked_complex_like_one_shot(tmp_path: Path, dtype: str) -> None:
    """A complex pair is measured on its real parts in float64 on both paths (as the reference casts it);
    the chunked path raised a TypeError (einsum of a complex chunk into float64) and ended the run."""
    rng = np.random.default_rng(7)
    values = (rng.standard_normal(5_000) + 1j * rng.standard_normal(5_000)).astype(dtype)
    values[::97] = 0
    np.save(tmp_path / "n.npy", values)
    np.save(tmp_path / "b.npy", values * (1.001 + 0.5j))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)  # the one-shot path's casts
        chunked = _assert_chunked_matches(tmp_path / "n.npy", tmp_path / "b.npy", 100, 999)
    assert all(type(cell) is float for cell in chunked.cells), chunked


@pytest.mark.parametrize("shape", [(), (1,), (6,)])
def test_complex_pair_without_numpy_warnings(shape: tuple[int, ...]) -> None:
    """A complex pair, 0-d too, is measured without numpy's ComplexWarning (a line on the user's stderr
    for each cast): the relative error takes the real parts in float64, the values the cast kept."""
    npu = np.full(shape, 1 + 2j, dtype=np.complex64)
    bench = np.full(shape, 2 + 1j, dtype=np.complex64)
    with warnings.catch_warnings():
        warnings.simplefilter("error", np.exceptions.ComplexWarning)
        cells = measure_arrays(npu, bench).as_dict()
    assert cells["MaxRelativeErr"] == 0.5  # |(1 - 2) / 2|, the real parts


@pytest.mark.parametrize("key", sorted(EDGE_EXPECTED))
def test_chunked_path_on_edge_cases(key: str) -> None:
    """Every edge case through tiny chunks (non-contiguous and offset .pt storages included)."""
    kind, npu_name = key.split("/", 1)
    bench_name = EDGE_EXPECTED[key][-1]
    npu = EDGE / kind / "target" / "dump_tensor_data" / npu_name
    bench = EDGE / kind / "golden" / "dump_tensor_data" / bench_name
    _assert_chunked_matches(npu, bench, big_elems=0, chunk_elems=3)


def test_partials_aggregate_in_any_order() -> None:
    rng = np.random.default_rng(3)
    npu, bench = rng.standard_normal(1000), rng.standard_normal(1000)
    parts = [chunk_partials(npu[i : i + 100], bench[i : i + 100]) for i in range(0, 1000, 100)]
    assert aggregate_partials(parts) == aggregate_partials(reversed(parts))


# ---------------------------------------------------------------------------------------------------------
# compare(x, x)

_SHAPES = hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=6).filter(lambda s: math.prod(s) >= 2)
_DTYPES = st.sampled_from([np.float16, np.float32, np.float64, np.int32, np.int64, np.bool_])


@st.composite
def _arrays(draw: st.DrawFn) -> np.ndarray:
    dtype = np.dtype(draw(_DTYPES))
    shape = draw(_SHAPES)
    if dtype.kind == "f":
        # NaN and Inf are allowed: at identical places they are zeroed on both sides
        elements = st.floats(width=dtype.itemsize * 8, allow_nan=True, allow_infinity=True)
        if dtype == np.float64:
            elements = elements.filter(lambda v: not math.isfinite(v) or abs(v) < 1e150)  # x.x stays finite
        return draw(hnp.arrays(dtype, shape, elements=elements))
    return draw(hnp.arrays(dtype, shape))


@settings(max_examples=150, deadline=None)
@given(_arrays(), st.sampled_from(["npy", "npy+chunks"]))
def test_comparing_a_tensor_with_itself(x: np.ndarray, path_kind: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        np.save(Path(folder) / "x.npy", x)
        path = Path(folder) / "x.npy"
        big = 0 if path_kind == "npy+chunks" else 10**9
        metrics = measure_pair(path, path, big_elems=big, chunk_elems=5)
    assert reference_cells(metrics) == [1.0, 0.0, 0.0, 0.0, 1.0, 1.0], (x, metrics)
    assert metrics.message == ""


def test_bfloat16_widens_to_the_casts_bits_for_every_pattern() -> None:
    from msprobe_dask.metrics.tensor_cells import compute_dtype

    every = np.arange(1 << 16, dtype=np.uint16).view(ml_dtypes.bfloat16).reshape(256, 256)
    widened = compute_dtype(every)
    assert widened.dtype == np.float32 and widened.shape == (256, 256)
    assert np.array_equal(widened.view(np.uint32), every.astype(np.float32).view(np.uint32))
