"""The Python API: rows without I/O, the same rows on a distributed cluster, an atomic writer."""

from __future__ import annotations

from pathlib import Path

import pytest

from msprobe_dask.graph.api import build_graphs, graph_visualize

DATA = Path(__file__).resolve().parents[1] / "data"


def test_build_graphs_returns_rows_and_writes_nothing(tmp_path: Path) -> None:
    result = build_graphs(DATA / "stat_mix" / "target", DATA / "stat_mix" / "golden")
    assert result.compare and [g.source for g in result.graphs] == ["NPU", "Bench"]
    assert result.config[1:3] == ("compare", "summary")
    root = result.graphs[0].nodes[-1]
    assert root[3] == "DefaultModel" and root[5] == ""  # post-order: the root is the last row


def test_same_rows_on_a_distributed_cluster() -> None:
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        with Client(cluster) as client:
            remote = build_graphs(DATA / "multirank" / "target" / "step0", client=client)
    local = build_graphs(DATA / "multirank" / "target" / "step0")
    assert [g.nodes for g in remote.graphs] == [g.nodes for g in local.graphs]
    assert remote.config == local.config


@pytest.mark.parametrize("workers", [1, 2])
def test_same_rows_on_local_worker_processes(
    workers: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``workers``: the big results held in the worker processes and a spool folder of the run's own
    (graph/held.py), in the temporary folder, gone at the end; the rows read back whole; every rank's
    graphs held to the end (no rank window: one worker alone spools nothing)."""
    import tempfile

    from msprobe_dask.pipeline.scheduler import RunOptions

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    for case in ("multirank", "tensor_mix"):
        sides = (DATA / case / "target", DATA / case / "golden")
        remote = build_graphs(*sides, run=RunOptions(workers=workers))
        local = build_graphs(*sides)
        assert [(g.nodes, g.stacks) for g in remote.graphs] == [(g.nodes, g.stacks) for g in local.graphs]
        assert remote.config == local.config
    assert list(tmp_path.iterdir()) == []


def test_writer_leaves_only_the_finished_file(tmp_path: Path) -> None:
    out = tmp_path / "out"
    path = graph_visualize(DATA / "stat_mix" / "target", output_path=out)
    assert [p.name for p in out.iterdir()] == [Path(path).name]
    assert Path(path).name.startswith("build_")
