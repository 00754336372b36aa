"""The Python API of a merge: build_graphs(..., parallel=[...]) gives the merged rows without I/O."""

from __future__ import annotations

import json
from pathlib import Path

from msprobe_dask.graph.api import build_graphs
from msprobe_dask.graph.merge.strategy import ParallelParams
from msprobe_dask.graph.rows import COL

DATA = Path(__file__).resolve().parents[1] / "data"


def test_build_graphs_merges_the_tp_group() -> None:
    result = build_graphs(DATA / "tp_merge" / "target", parallel=[ParallelParams(2, 2, 1)])
    assert [(g.source, g.step, g.rank) for g in result.graphs] == [("NPU", 0, 0)]
    rows = result.graphs[0].nodes
    merged = [r for r in rows if r[COL["parallel_merge_info"]]]
    assert len(rows) == 1127 and len(merged) == 470  # the reference's counts (tp_merge/README.md)
    assert json.loads(result.config[7]) == [0]


def test_build_graphs_keeps_one_graph_per_dp_replica() -> None:
    result = build_graphs(DATA / "multirank" / "target" / "step1", parallel=[ParallelParams(4, 2, 1)])
    assert [(g.step, g.rank) for g in result.graphs] == [(1, 0), (1, 2)]
    assert json.loads(result.config[7]) == [0, 2] and json.loads(result.config[8]) == [0]
