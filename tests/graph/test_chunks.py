"""Chunked compare + rows over forked processes (graph/chunks.py) give the serial rows exactly."""

from __future__ import annotations

from pathlib import Path

import pytest

from msprobe_dask.graph import chunks, forked
from msprobe_dask.graph.build import GraphSource, assign_micro_steps, build_graph
from msprobe_dask.graph.compare import compare_graphs, compare_mode, match_pairs
from msprobe_dask.graph.model import COLLECTION
from msprobe_dask.graph.overflow import check_overflow
from msprobe_dask.graph.rows import GraphRows, graph_rows, read_back
from msprobe_dask.writers.visdb import RowSink

DATA = Path(__file__).resolve().parents[1] / "data"
CASES = [
    ("stat_mix", False),
    ("md5_mix", False),
    ("fuzzy", True),
    ("transformer_big", False),
    ("multirank/target/step0/rank1", False),
]


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Many chunks of a few nodes, always two processes."""
    monkeypatch.setattr(chunks, "CHUNK_NODES", (3, 40))
    monkeypatch.setattr(chunks, "PROCESS_NODES", 1)
    monkeypatch.setattr(chunks, "usable_cpus", lambda: 2)
    monkeypatch.setattr(forked, "usable_cpus", lambda: 2)


def _sides(case: str) -> tuple[Path, Path]:
    if case.startswith("multirank"):
        return DATA / case, DATA / case.replace("/target/", "/golden/")
    return DATA / case / "target", DATA / case / "golden"


def _serial(tp: Path, gp: Path, fuzzy: bool):
    npu, bench = build_graph(GraphSource(str(tp))), build_graph(GraphSource(str(gp)))
    mode = compare_mode(npu, bench, str(tp))
    compare_graphs(npu, bench, mode, fuzzy=fuzzy)
    assign_micro_steps(npu, bench)
    check_overflow(npu)
    check_overflow(bench)
    md5 = mode == "md5"
    return graph_rows(npu, "NPU", md5), graph_rows(bench, "Bench", md5)


def _chunked(tp: Path, gp: Path, fuzzy: bool) -> tuple[GraphRows, GraphRows]:
    npu, bench = (
        build_graph(GraphSource(str(tp)), items=False),
        build_graph(GraphSource(str(gp)), items=False),
    )
    assert not any(n.input_data or n.output_data for n in npu.nodes.values())
    mode = compare_mode(npu, bench, str(tp))
    pairs = match_pairs(npu, bench, fuzzy)
    assign_micro_steps(npu, bench)
    return chunks.compare_rows(npu, bench, pairs, mode, ("NPU", "Bench"), overflow=True)


def _read_back(g: GraphRows) -> GraphRows:
    read_back(g)
    return g


@pytest.mark.parametrize(("case", "fuzzy"), CASES, ids=[c for c, _ in CASES])
def test_chunked_compare_rows_equal_serial_rows(case: str, fuzzy: bool, small_chunks: None) -> None:
    tp, gp = _sides(case)
    for ours, want in zip(map(_read_back, _chunked(tp, gp, fuzzy)), _serial(tp, gp, fuzzy)):
        assert ours.nodes == want.nodes
        assert ours.stacks == want.stacks
        assert ours.p2p == want.p2p
        assert ours.micro_steps == want.micro_steps


@pytest.mark.parametrize("case", ["transformer_big", "multirank/target/step0/rank1"])
def test_packed_rows_read_back_as_serial_rows(case: str, small_chunks: None) -> None:
    """Jobs pack their rows (one bytes object per chunk) and keep only the communication rows."""
    tp, gp = _sides(case)
    for ours, want in zip(_chunked(tp, gp, False), _serial(tp, gp, False)):
        assert ours.apart and len(ours.packed) > 2 and ours.n_rows == len(want.nodes)
        assert ours.nodes == [row for row in want.nodes if row[-1] == 1]
        read_back(ours)
        assert not ours.apart and not ours.packed
        assert ours.nodes == want.nodes
        assert ours.stacks == want.stacks
        assert ours.p2p == want.p2p
        assert ours.micro_steps == want.micro_steps


def test_chunked_build_rows_equal_serial_rows(small_chunks: None) -> None:
    src = GraphSource(str(DATA / "transformer_big" / "target"))
    g = build_graph(src, items=False)
    assign_micro_steps(g)
    ours = chunks.build_rows(g, "NPU", overflow=True)
    want_graph = build_graph(src)
    assign_micro_steps(want_graph)
    check_overflow(want_graph)
    want = graph_rows(want_graph, "NPU")
    assert ours.apart
    read_back(ours)
    assert (ours.nodes, ours.stacks) == (want.nodes, want.stacks)


def test_runs_cover_the_nodes_and_keep_collections_whole() -> None:
    g = build_graph(GraphSource(str(DATA / "transformer_big" / "target")), items=False)
    nodes = g.sorted_nodes()
    runs = chunks.subtree_runs(nodes, g.root, 5)
    assert len(runs) > 10
    assert [lo for lo, _ in runs] == [0] + [hi for _, hi in runs[:-1]] and runs[-1][1] == len(nodes)
    run_of = {id(n): k for k, (lo, hi) in enumerate(runs) for n in nodes[lo:hi]}
    collections = [n for n in nodes if n.type == COLLECTION]
    assert collections
    for c in collections:
        assert {run_of[id(x)] for x in c.children} == {run_of[id(c)]}


@pytest.mark.parametrize(
    ("target", "golden", "overflow"),
    [("multirank/target", "multirank/golden", False), ("transformer_big/target", None, True)],
)
def test_visdb_written_while_the_jobs_run_equals_visdb_written_at_the_end(
    target: str, golden: str | None, overflow: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """graph_visualize, whose writer thread takes the packed rows of forked jobs as they come (in any
    order, the communication links set at the end), writes the db that the rows written all at the end
    make, and leaves no other file behind."""
    from visdb_diff import diff_visdb

    from msprobe_dask.graph.api import build_graphs, graph_visualize
    from msprobe_dask.writers.visdb import GraphTables, write_visdb

    gp = DATA / golden if golden else None
    result = build_graphs(DATA / target, gp, overflow_check=overflow)
    at_end = write_visdb(
        tmp_path / "at_end.vis.db",
        [GraphTables(g.graph_id, len(g.nodes), g.nodes, g.stacks) for g in result.graphs],
        result.config,
    )
    monkeypatch.setattr(chunks, "CHUNK_NODES", (3, 40))
    monkeypatch.setattr(chunks, "PROCESS_NODES", 1)
    monkeypatch.setattr(chunks, "usable_cpus", lambda: 2)
    monkeypatch.setattr(forked, "usable_cpus", lambda: 8)
    taken: list[str] = []
    put = RowSink.put

    def counted_put(self: RowSink, graph_id: str, packed: bytes, stacks: bytes) -> bool:
        ok = put(self, graph_id, packed, stacks)
        taken.extend([graph_id] if ok else [])
        return ok

    monkeypatch.setattr(RowSink, "put", counted_put)
    out = tmp_path / "streamed"
    streamed = graph_visualize(DATA / target, gp, output_path=out, overflow_check=overflow)
    assert len(taken) > 10 and set(taken) == {g.graph_id for g in result.graphs}
    assert diff_visdb(streamed, at_end) == []
    assert [p.name for p in out.iterdir()] == [Path(streamed).name]
