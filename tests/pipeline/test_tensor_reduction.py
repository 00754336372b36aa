"""Tensor pairs measured as dask.array reductions inside the compare graph: the same cells as the
reference, blocks of chunks of one big pair as tasks of their own, metrics equal to numpy's float64 answer."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import read_csv, reference_file
from test_compare_csv_reference import assert_same_cells, run_compare

import msprobe_dask.metrics.tensor as tensor_metrics
from msprobe_dask.dump.layouts import pair_dumps
from msprobe_dask.pipeline import compare as compare_pipeline
from msprobe_dask.pipeline.compare import compare
from msprobe_dask.pipeline.scheduler import RunOptions


@pytest.mark.parametrize("case", ["tensor_mix", "fuzzy_tensor"])
def test_every_pair_as_a_reduction_gives_the_reference_csv(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every pair through the dask.array reduction: every cell the reference's, but EucDist, whose float64
    sum is einsum's (not BLAS's, whose order depends on its threads): equal within 1e-13 relative."""
    monkeypatch.setattr(tensor_metrics, "BIG_TENSOR_ELEMS", 0)
    jobs: list[int] = []
    real_big = compare_pipeline._measure_big
    monkeypatch.setattr(compare_pipeline, "_measure_big", lambda job: jobs.append(1) or real_big(job))
    ours = read_csv(run_compare(case, tmp_path))
    assert len(jobs) > 80
    ref = read_csv(reference_file(case, "compare_csv"))
    euc = ref[0].index("EucDist")
    for a, b in zip(ours[1:], ref[1:]):
        if a[euc] != b[euc]:
            assert float(a[euc]) == pytest.approx(float(b[euc]), rel=1e-13), (a[0], a[euc], b[euc])
            a[euc] = b[euc]
    assert_same_cells(ours, ref)


def tensor_dump(folder: Path, array: np.ndarray) -> Path:
    (folder / "dump_tensor_data").mkdir(parents=True)
    np.save(folder / "dump_tensor_data" / "Tensor.big.0.forward.output.0.npy", array)
    entry = {
        "type": "numpy.ndarray", "dtype": str(array.dtype), "shape": list(array.shape),
        "Max": 0, "Min": 0, "Mean": 0, "Norm": 0, "data_name": "Tensor.big.0.forward.output.0.npy",
    }  # fmt: skip
    dump = {
        "task": "tensor", "level": "L1", "framework": "mindspore", "dump_data_dir": str(folder),
        "data": {"Tensor.big.0.forward": {"input_args": [], "input_kwargs": {}, "output": [entry]}},
    }  # fmt: skip
    (folder / "dump.json").write_text(json.dumps(dump))
    return folder


def test_a_big_pair_is_chunk_tasks_and_equals_float64_numpy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(11)
    npu = rng.standard_normal((300, 333)).astype(np.float32)
    bench = (npu * (1 + rng.normal(0, 2e-3, npu.shape))).astype(np.float32)
    target, golden = tensor_dump(tmp_path / "target", npu), tensor_dump(tmp_path / "golden", bench)
    monkeypatch.setattr(tensor_metrics, "BIG_TENSOR_ELEMS", 10_000)
    monkeypatch.setattr(tensor_metrics, "CHUNK_ELEMS", 4_000)

    job = (
        target / "dump_tensor_data" / "Tensor.big.0.forward.output.0.npy",
        golden / "dump_tensor_data" / "Tensor.big.0.forward.output.0.npy",
    )
    graph = dict(compare_pipeline._measure_big(job).__dask_graph__())
    tasks = -(-npu.size // (4_000 * tensor_metrics.CHUNKS_PER_TASK))
    chunk_keys = [key for key in graph if isinstance(key, tuple) and len(key) == 2]  # (the aggregate's has 1)
    chunk_tasks = {key[1] for key in chunk_keys if key[0].startswith("merge_records-")}
    assert chunk_tasks == set(range(tasks))  # one (fused read + partials) task per CHUNKS_PER_TASK chunks

    (result,) = compare(target, golden, run=RunOptions())
    record = result.table.records()[0]
    n, b = npu.reshape(-1).astype(np.float64), bench.reshape(-1).astype(np.float64)
    relative = np.abs((npu - bench) / bench).reshape(-1)
    expected = {
        "Cosine": n @ b / (np.linalg.norm(n) * np.linalg.norm(b)),
        "EucDist": np.linalg.norm(n - b),
        "MaxAbsErr": np.max(np.abs(n - b)),
        "MaxRelativeErr": np.max(relative),
        "One Thousandth Err Ratio": np.mean(relative < 0.001),
        "Five Thousandths Err Ratio": np.mean(relative < 0.005),
    }
    for column, value in expected.items():
        assert record[column] == pytest.approx(value, rel=1e-6, abs=1e-12), column


def test_a_file_bigger_than_the_limit_holding_fewer_elements_is_measured_in_one_shot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The batches split by file bytes; a pair whose file is big but whose elements are not stays exact."""
    rng = np.random.default_rng(2)
    npu = rng.standard_normal(6_000).astype(np.float32)  # 24 KB files, 6,000 elements
    target = tensor_dump(tmp_path / "target", npu)
    golden = tensor_dump(tmp_path / "golden", (npu * 1.001).astype(np.float32))
    monkeypatch.setattr(tensor_metrics, "BIG_TENSOR_ELEMS", 10_000)
    job = tuple(side / "dump_tensor_data" / "Tensor.big.0.forward.output.0.npy" for side in (target, golden))
    assert compare_pipeline._batches([job]) == ([], [0])  # type: ignore[list-item]
    graph = dict(compare_pipeline._measure_big(job).__dask_graph__())
    assert not any(isinstance(key, tuple) and key[0].startswith("merge_records-") for key in graph)
    (measured,) = compare_pipeline._measure_big(job).compute(scheduler="sync")
    assert measured == tensor_metrics.measure_pair(*job)


def test_tensor_files_count_in_the_size_that_chooses_the_scheduler(tmp_path: Path) -> None:
    """A tensor dump's size is its dump.json and its tensor files (big ones run on worker processes)."""
    array = np.zeros(1000, np.float32)
    target, golden = tensor_dump(tmp_path / "target", array), tensor_dump(tmp_path / "golden", array)
    sources = pair_dumps(target, golden)
    files = [*(target / "dump_tensor_data").iterdir(), *(golden / "dump_tensor_data").iterdir()]
    expected = sum(p.stat().st_size for p in [target / "dump.json", golden / "dump.json", *files])
    assert compare_pipeline._input_bytes(sources) == expected
