"""Pieces of the kernel compare on hand-made inputs: file names, rank/step from paths, pairing order,
pandas' column typing, big tensors measured in chunks, empty tensors (D17)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import DATA

from msprobe_dask.columns import TENSOR_METRIC_COLUMNS
from msprobe_dask.dump.kernel import KernelTensor, kernel_rank_step, npy_tensor
from msprobe_dask.metrics.kernel import EMPTY, SHAPE, compare_arrays
from msprobe_dask.pipeline.kernel_compare import pair_on_occurrence
from msprobe_dask.pipeline.kernel_rows import npy_row
from msprobe_dask.pipeline.kernel_table import _column_dtype

NAME = "Add.Default--net-Add-op3.12.0.1717200000000007"


@pytest.mark.parametrize(
    ("name", "key"),
    [
        (f"{NAME}.output.0.DefaultFormat.npy", "Default--net-Add-op3.12.output.0"),
        (f"{NAME}.input.10.NCHW.float32.npy", "Default--net-Add-op3.12.input.10"),  # MindSpore >= 2.3
        (f"{NAME}.output.0.npy", None),  # no format: not a kernel tensor (the reference skips it too)
        (f"{NAME}.output.0.a.b.c.npy", None),  # 11 parts
        (f"{NAME}.workspace.0.DefaultFormat.npy", None),
        ("random.npy", None),
    ],
)
def test_npy_names(name: str, key: str | None) -> None:
    tensor = npy_tensor(Path(name))
    assert (tensor.key if tensor else None) == key
    if tensor:
        assert tensor.timestamp == 1717200000000007


@pytest.mark.parametrize(
    ("leaf", "expected"),
    [  # each seen in a reference run: the output was named compare_result_{rank}_{step}
        ("d/rank_0/Net/0/1", (0, 1)),
        ("d/my_rank_3/Net/0/0", (3, 0)),
        ("d/20240101120000/3/Net/1/0", (3, 0)),  # GE: {time}/{device}/{model}/{model_id}/{iteration}
        ("d/x/y/7/Net/2", (7, 2)),  # 4th-from-last not a number: the 3rd-from-last
        ("d/a/b/c/9/4", (-1, 4)),  # neither: never compared
        ("d/rank_0/Net/1/constants", (0, -1)),
        ("my_rank_runs/x/y/7/Net/2", (-1, 2)),  # "rank_" anywhere in the path: the rank_ rule applies
    ],
)
def test_rank_and_step_from_the_path(leaf: str, expected: tuple[int, int]) -> None:
    assert kernel_rank_step(Path("/dumps") / leaf) == expected


def _t(key: str, timestamp: int) -> KernelTensor:
    return KernelTensor(key, timestamp, f"{key}.{timestamp}", Path("x"))


def test_pairing_by_key_then_occurrence_in_time_order() -> None:
    npu = [_t("b.1.input.2", 5), _t("b.1.input.10", 4)] + [_t("a.1.output.0", t) for t in range(12, 0, -1)]
    bench = [_t("a.1.output.0", t) for t in range(100, 111)] + [_t("c.1.output.0", 1)]
    pairs = pair_on_occurrence(npu, bench)
    keys = [(n or b).key for n, b in pairs]
    assert keys == ["a.1.output.0"] * 12 + ["b.1.input.10", "b.1.input.2", "c.1.output.0"]
    assert [(n.timestamp, b.timestamp if b else None) for n, b in pairs[:12]] == [
        *((t, 99 + t) for t in range(1, 12)),
        (12, None),
    ]
    assert pairs[-1][0] is None


def _cell(kind: str, value: Any) -> Any:
    if kind == "None":
        return None
    value = float("nan") if value == "nan" else value
    if kind in ("float", "int", "bool", "str"):
        return {"float": float, "int": int, "bool": bool, "str": str}[kind](value)
    return getattr(np, kind)(value)


def test_column_types_are_the_ones_pandas_infers() -> None:
    """Every case recorded from pandas 3.1.1 in the reference's venv (ref/pandas_dtypes.json). Its
    string dtype (texts and missing cells only) is written exactly like object, which we say."""
    table = json.loads((DATA / "kernel_npy" / "ref" / "pandas_dtypes.json").read_text())
    assert len(table["cases"]) > 100
    for case in table["cases"]:
        dtype = _column_dtype([_cell(kind, value) for kind, value in case["cells"]])
        expected = "object" if case["dtype"] == "str" else case["dtype"]
        assert (str(dtype) if dtype is not None else "object") == expected, case


def _save(folder: Path, name: str, array: np.ndarray) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    np.save(folder / name, array)
    return folder / name


def test_big_tensors_are_measured_in_chunks(tmp_path: Path) -> None:
    """Above ``big_elems`` the metrics come from per-chunk partials read from the files: the same cells
    (cosine and distance to the last ulps) as the one-shot computation."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((64, 33)).astype(np.float32)
    b = (a * (1 + 1e-3 * rng.standard_normal(a.shape))).astype(np.float32)
    a[3, 4] = b[3, 4] = np.nan
    paths = (_save(tmp_path, "a.npy", a), _save(tmp_path, "b.npy", b))
    mapped = [np.load(p, mmap_mode="r") for p in paths]
    whole = compare_arrays(*mapped, paths)
    chunked = compare_arrays(*mapped, paths, big_elems=100)
    assert whole.accuracy == chunked.accuracy == "Yes"
    sums = [TENSOR_METRIC_COLUMNS.index(c) for c in ("Cosine", "EucDist")]  # float sums: to the last ulps
    assert [c for i, c in enumerate(whole.cells or ()) if i not in sums] == [
        c for i, c in enumerate(chunked.cells or ()) if i not in sums
    ]
    assert [whole.cells[i] for i in sums] == pytest.approx([chunked.cells[i] for i in sums], rel=1e-12)


def test_empty_tensors_get_a_row(tmp_path: Path) -> None:
    """D17: the reference crashes on a 0-element .npy; we keep its row, without statistics."""
    empty = KernelTensor("k", 1, "e", _save(tmp_path, "e.npy", np.zeros((0, 3), np.float32)))
    full = KernelTensor("k", 1, "f", _save(tmp_path, "f.npy", np.ones(2, np.float32)))
    row = npy_row(empty, full)
    assert row[6:10] == [None] * 4 and row[10] == np.float32(1)
    assert row[14] is None and row[15] == EMPTY + SHAPE
    assert row[16:] == [None] * len(TENSOR_METRIC_COLUMNS)
