"""Chunked compare + rows over forked processes (graph/chunks.py) give the serial rows exactly."""

from __future__ import annotations

from pathlib import Path

import pytest

from msprobe_dask.graph import chunks, forked
from msprobe_dask.graph.build import GraphSource, assign_micro_steps, build_graph
from msprobe_dask.graph.compare import compare_graphs, compare_mode, match_pairs
from msprobe_dask.graph.model import COLLECTION
from msprobe_dask.graph.overflow import check_overflow
from msprobe_dask.graph.rows import graph_rows, read_back
from msprobe_dask.writers.row_parts import RowParts

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


def _chunked(tp: Path, gp: Path, fuzzy: bool, parts: RowParts | None = None):
    npu, bench = (
        build_graph(GraphSource(str(tp)), items=False),
        build_graph(GraphSource(str(gp)), items=False),
    )
    assert not any(n.input_data or n.output_data for n in npu.nodes.values())
    mode = compare_mode(npu, bench, str(tp))
    pairs = match_pairs(npu, bench, fuzzy)
    assign_micro_steps(npu, bench)
    return chunks.compare_rows(npu, bench, pairs, mode, ("NPU", "Bench"), overflow=True, parts=parts)


@pytest.mark.parametrize(("case", "fuzzy"), CASES, ids=[c for c, _ in CASES])
def test_chunked_compare_rows_equal_serial_rows(case: str, fuzzy: bool, small_chunks: None) -> None:
    tp, gp = _sides(case)
    for ours, want in zip(_chunked(tp, gp, fuzzy), _serial(tp, gp, fuzzy)):
        assert ours.nodes == want.nodes
        assert ours.stacks == want.stacks
        assert ours.p2p == want.p2p
        assert ours.micro_steps == want.micro_steps


@pytest.mark.parametrize("case", ["transformer_big", "multirank/target/step0/rank1"])
def test_rows_spilled_to_part_files_read_back_as_serial_rows(
    case: str, small_chunks: None, tmp_path: Path
) -> None:
    """Forked jobs leave their rows in part files and keep only the communication rows."""
    tp, gp = _sides(case)
    for ours, want in zip(_chunked(tp, gp, False, RowParts(tmp_path)), _serial(tp, gp, False)):
        assert len(ours.spilled) == 2  # this process's file and the child's
        assert ours.nodes == [row for row in want.nodes if row[-1] == 1]
        read_back(ours)
        assert not ours.spilled
        assert ours.nodes == want.nodes
        assert ours.stacks == want.stacks
        assert ours.p2p == want.p2p
        assert ours.micro_steps == want.micro_steps


def test_chunked_build_rows_equal_serial_rows(small_chunks: None, tmp_path: Path) -> None:
    src = GraphSource(str(DATA / "transformer_big" / "target"))
    g = build_graph(src, items=False)
    assign_micro_steps(g)
    ours = chunks.build_rows(g, "NPU", overflow=True)
    spilled = chunks.build_rows(g, "NPU", overflow=True, parts=RowParts(tmp_path))
    want_graph = build_graph(src)
    assign_micro_steps(want_graph)
    check_overflow(want_graph)
    want = graph_rows(want_graph, "NPU")
    assert (ours.nodes, ours.stacks) == (want.nodes, want.stacks)
    assert spilled.spilled
    read_back(spilled)
    assert (spilled.nodes, spilled.stacks) == (want.nodes, want.stacks)


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
def test_visdb_from_part_files_equals_visdb_from_rows(
    target: str, golden: str | None, overflow: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """graph_visualize with rows left in part files by forked jobs and copied by the writer (with
    the communication links set after the copy) writes the db written from rows in memory, and
    leaves no part file behind."""
    from visdb_diff import diff_visdb

    from msprobe_dask.graph.api import graph_visualize

    def run(out: Path) -> str:
        gp = DATA / golden if golden else None
        return graph_visualize(DATA / target, gp, output_path=out, overflow_check=overflow)

    in_memory = run(tmp_path / "serial")
    monkeypatch.setattr(chunks, "CHUNK_NODES", (3, 40))
    monkeypatch.setattr(chunks, "PROCESS_NODES", 1)
    monkeypatch.setattr(chunks, "usable_cpus", lambda: 2)
    monkeypatch.setattr(forked, "usable_cpus", lambda: 8)
    puts: list[str] = []
    put = RowParts.put

    def counted_put(self: RowParts, table: str, rows: list) -> str:
        puts.append(table)
        return put(self, table, rows)

    monkeypatch.setattr(RowParts, "put", counted_put)
    spilled = run(tmp_path / "forked")
    assert puts  # rows did go through part files (in this process at least)
    assert diff_visdb(spilled, in_memory) == []
    assert [p.name for p in (tmp_path / "forked").iterdir()] == [Path(spilled).name]
