"""The typed Python API: ``msprobe_dask.compare`` / ``msprobe_dask.graph``."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from conftest import case_dir, read_csv

import msprobe_dask as mp
from msprobe_dask.graph.api import visualize
from msprobe_dask.results.compare import NUMERIC_COLUMNS


def _pair(case: str, file: bool = True) -> tuple[str, str]:
    name = "dump.json" if file else ""
    return str(case_dir(case) / "target" / name), str(case_dir(case) / "golden" / name)


def _same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


def _float_or_nan(cell: str) -> float:
    try:
        return float(cell)
    except ValueError:  # N/A, unsupported, none, ...
        return math.nan


@pytest.mark.parametrize("case", ["stat_mix", "tensor_mix", "md5_mix"])
def test_typed_cells_are_the_csv_cells(case: str, tmp_path: Path) -> None:
    table = mp.compare(*_pair(case))[0]
    csv = read_csv(table.write(tmp_path / "r.csv"))
    header, body = csv[0], csv[1:]
    assert tuple(header) == table.columns and len(body) == len(table)
    for name in header:
        typed, cells = table.column(name), [row[header.index(name)] for row in body]
        if name in NUMERIC_COLUMNS:
            for value, cell in zip(typed, cells):
                assert isinstance(value, float)
                if cell.endswith("%"):
                    assert _same(value, float(cell[:-1]) / 100), (name, cell)
                elif cell in ("True", "False"):
                    assert value == float(cell == "True")
                else:
                    assert _same(value, _float_or_nan(cell)), (name, cell)
        elif name == "Err_message":
            assert typed == [json.loads(cell) for cell in cells]


@pytest.mark.parametrize("case", ["stat_mix", "tensor_mix", "kernel_npy"])
def test_to_pandas_metric_columns_are_numeric(case: str) -> None:
    pytest.importorskip("pandas")
    res = mp.compare(*_pair(case, file=case != "kernel_npy"))
    frame = res.to_pandas()
    assert len(frame) == sum(len(t) for t in res)
    metric_columns = [c for c in frame.columns if c in NUMERIC_COLUMNS]
    assert metric_columns
    for column in metric_columns:
        assert frame[column].dtype.kind == "f", column


def test_summary_first_divergence_and_displays() -> None:
    res = mp.compare(*_pair("multirank", file=False))
    labels = [t.label for t in res]
    assert labels[0] == "step0/rank0" and len(labels) == 8
    summary = res.summary()
    assert [g.label for g in summary.groups] == labels
    node = res.first_divergence()
    assert node is not None and node == summary.first_divergence and node.label in labels
    assert res["step0/rank2"].summary.total == len(res["step0/rank2"])
    with pytest.raises(KeyError):
        res["step9/rank9"]
    assert "step1/rank3" in repr(res) and "<table>" in res._repr_html_()


def test_graph_nodes_and_summary_equal_the_visdb(tmp_path: Path) -> None:
    target, golden = _pair("multirank", file=False)
    g = mp.graph(target, golden)
    from_db = visualize(target, golden, output_path=tmp_path).summary  # (its vis.db's: test_write_chain)
    assert from_db is not None
    assert [(x.label, x.counts, x.kinds) for x in g.summary().groups] == [
        (x.label, x.counts, x.kinds) for x in from_db.groups
    ]
    assert g.summary().first_divergence == from_db.first_divergence
    npu = g.graph(step=1, rank=2)
    assert npu.root.name == "DefaultModel" and npu.root.parent is None
    for name in npu.root.children:
        assert npu[name].parent == "DefaultModel"
    assert {n.type for n in npu} <= {"module", "api", "collection"}
    assert g.graph(step=1, rank=2, source="Bench").root.precision is None
    assert "<table>" in g._repr_html_()


def test_graph_first_divergence_is_the_job_s_on_the_rank_it_began() -> None:
    """multirank: fc2's weight differs on rank 2; ranks 0, 1 and 3 receive it through all_reduce. The
    summary's first group is rank 0, whose first divergence is the all_reduce through which it received
    the difference; first_divergence is the job's, as compare finds it from the rows: rank 2's fc2
    linear (from the rows the graph's chunk tasks made: tests/graph/test_first_divergence.py)."""
    target, golden = _pair("multirank", file=False)
    g = mp.graph(target, golden)
    first = g.summary().groups[0].first_divergence
    assert first is not None and (first.label, first.name, first.result) == (
        "step0/rank0",
        "Distributed.all_reduce.1.forward",
        "received from rank 2",
    )
    node = g.first_divergence()
    assert node == mp.compare(target, golden).first_divergence()
    assert node is not None and (node.label, node.name, node.result) == (
        "step0/rank2",
        "Functional.linear.1.forward",
        "origin",
    )
    assert mp.graph(target).first_divergence() is None  # a build: nothing compared


def test_graph_refuses_a_keyword_it_does_not_know() -> None:
    """A misspelt merge option (``tp_size``) is an error, not a graph built without the merge."""
    target = case_dir("multirank") / "target"
    with pytest.raises(TypeError, match="unexpected keyword argument 'tp_size'"):
        mp.graph(target, tp_size=2)


def test_the_graph_subpackage_is_still_importable() -> None:
    import msprobe_dask.graph.api as graph_api

    assert callable(mp.graph) and mp.graph.api is graph_api
    assert mp.compare.__module__ == "msprobe_dask.api"
