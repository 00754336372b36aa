"""graph_visualize's summary names the job's first divergence by compare's rule (analysis/), from the rows
its chunk tasks make of the compared nodes: the same (step, rank, node) and reason compare's summary
gives on the same dumps, each (step, rank)'s first divergent node (origin, or received from a peer), and
how it spread; for one rank, a tree of ranks and steps, and a parallel merge (its replicas)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import case_dir

import msprobe_dask as mp
from msprobe_dask.analysis.findings import ORIGIN, Divergence, Finding
from msprobe_dask.analysis.rank_rows import origin_place
from msprobe_dask.analysis.tolerance import Tolerance
from msprobe_dask.cli import main
from msprobe_dask.graph.compare import SUMMARY
from msprobe_dask.graph.divergence_rows import node_rows
from msprobe_dask.graph.model import API, Node

MULTIRANK = case_dir("multirank")
MS_DA = case_dir("ms_da")


def _graph_lines(capsys: pytest.CaptureFixture[str], *argv: str) -> list[str]:
    assert main(["graph_visualize", *argv]) == 0
    return capsys.readouterr().out.splitlines()


def _job_lines(lines: list[str]) -> list[str]:
    """The summary's last lines: the job's first divergence, its reason, code line and spread."""
    at = next(i for i, line in enumerate(lines) if line.startswith("First divergence: "))
    end = next((i for i in range(at + 1, len(lines)) if not lines[i].startswith("    ")), len(lines))
    return lines[at:end]


def _unstepped(lines: list[str]) -> list[str]:
    """The lines without the step of a job of one step (compare names none where the dump has no step
    folders, the graph step0)."""
    return [re.sub(r"\bstep0/", "", line) for line in lines]


def test_one_rank_names_the_planted_fault(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """stat_mix: block h.2's c_fc linear, whose weight is the planted fault (as compare names it)."""
    case = case_dir("stat_mix")
    lines = _graph_lines(
        capsys, "-tp", str(case / "target"), "-gp", str(case / "golden"), "-o", str(tmp_path)
    )
    assert "  first divergence: Functional.linear.10.forward  [origin]  error 0.5" in lines
    assert _job_lines(lines)[:2] == [
        "First divergence: step0/rank0 Functional.linear.10.forward",
        "    input Functional.linear.10.forward.input.1 differs (error 0.5) and no earlier node made it",
    ]
    # (compare labels a dump without rank folders by none: "rank0")
    assert (
        _unstepped(_job_lines(lines)) == mp.compare(case / "target", case / "golden").summary().origin_lines
    )


def test_none_diverging(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    case = case_dir("stat_mix") / "target"
    lines = _graph_lines(capsys, "-tp", str(case), "-gp", str(case), "-o", str(tmp_path))
    assert _job_lines(lines) == ["First divergence: none (every node within tolerance)"]
    assert not any(line.startswith("  first divergence: ") for line in lines)


def test_ranks_name_the_rank_it_began_on_and_the_peers_it_reached(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """multirank: fc2's weight differs on rank 2; ranks 0, 1 and 3 receive it through all_reduce, in
    both steps. The summary says so, each (step, rank) and the job, as compare's does."""
    lines = _graph_lines(
        capsys, "-tp", str(MULTIRANK / "target"), "-gp", str(MULTIRANK / "golden"), "-o", str(tmp_path)
    )
    firsts = [line for line in lines if line.startswith("  first divergence: ")]
    received = "  first divergence: Distributed.all_reduce.{}.forward  [received from rank 2]  error 0.314201"
    origin = "  first divergence: Functional.linear.1.forward  [origin]  error 0.644695"
    assert firsts[:4] == [received.format(1), received.format(1), origin, received.format(1)]
    assert len(firsts) == 8 and firsts[6].startswith(origin.rpartition("error")[0])  # (step1/rank2)
    compared = mp.compare(MULTIRANK / "target", MULTIRANK / "golden").summary()
    assert _job_lines(lines) == compared.origin_lines
    assert compared.origin_lines[0] == "First divergence: step0/rank2 Functional.linear.1.forward"
    assert [line for line in compared.origin_lines if line.startswith("    spread: ")] == [
        f"    spread: step0/rank{r} Distributed.all_reduce.1.forward (received from rank 2)"
        for r in (0, 1, 3)
    ]


def test_a_merge_names_its_replica_s_first_divergence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """tp_merge: the target's two tensor-parallel ranks merged, against one rank: its embedding, whose
    input (the token ids each rank masks to its half of the table) differs."""
    case = case_dir("tp_merge")
    merge = ["--rank_size", "2", "1", "--tp", "2", "1", "--pp", "1", "1"]
    lines = _graph_lines(
        capsys, "-tp", str(case / "target"), "-gp", str(case / "golden"), *merge, "-o", str(tmp_path)
    )
    assert _job_lines(lines)[0] == "First divergence: step0/rank0 Functional.embedding.0.forward"
    assert "  first divergence: Functional.embedding.0.forward  [origin]  error 0.592593" in lines


def test_the_api_returns_it_typed() -> None:
    g = mp.graph(MULTIRANK / "target", MULTIRANK / "golden")
    found = g.divergence()
    assert isinstance(found, Divergence) and isinstance(found.origin, Finding)
    assert (found.origin.step, found.origin.rank, found.origin.node, found.origin.kind) == (
        "step0",
        2,
        "Functional.linear.1.forward",
        ORIGIN,
    )
    assert [(f.rank, f.received_from) for f in found.path] == [(2, None), (0, 2), (1, 2), (3, 2)]
    node = g.first_divergence()
    assert node == mp.compare(MULTIRANK / "target", MULTIRANK / "golden").first_divergence()
    assert node is not None and (node.label, node.name, node.result) == (
        "step0/rank2",
        "Functional.linear.1.forward",
        "origin",
    )
    assert mp.graph(MULTIRANK / "target").divergence() is None  # a build: nothing compared


def _facts(found: Divergence | None) -> list[tuple[object, ...]]:
    """A divergence's origin, path and firsts as (rank, node, kind, received_from): compare labels a tree
    of ranks without step folders by rank alone, the graph by step0/rankN."""
    assert found is not None and found.origin is not None
    return [(f.rank, f.node, f.kind, f.received_from) for f in (found.origin, *found.path, *found.firsts)]


@pytest.mark.parametrize("case", [MULTIRANK, MS_DA], ids=["multirank", "ms_da"])
def test_compare_graph_and_report_agree_on_every_multirank_case(
    case: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The first divergence of graph_visualize's summary, of its --report (the dumps' rows compared, as
    the compare command does) and of compare's summary: one answer."""
    target, golden = case / "target", case / "golden"
    compared = mp.compare(target, golden).divergence()
    assert _facts(mp.graph(target, golden).divergence()) == _facts(compared)
    lines = _graph_lines(capsys, "--report", "-tp", str(target), "-gp", str(golden), "-o", str(tmp_path))
    (report,) = tmp_path.glob("report_*.html")
    data = re.search(r'id="report-data"[^>]*>(.*?)</script>', report.read_text(encoding="utf-8"), re.S)
    assert data is not None
    report_lines = json.loads(data.group(1))["origin_lines"]
    assert compared is not None and compared.origin is not None
    where = f"rank{compared.origin.rank} {compared.origin.node}"
    assert _job_lines(lines)[0].endswith(where)
    assert _unstepped(_job_lines(lines)) == _unstepped(report_lines)


def _tensor_node(name: str, inputs: tuple[float, float], output: tuple[float, float]) -> tuple[Node, Node]:
    """A node and its partner, one input and one output each, their Max (NPU, Bench) as given."""
    npu, bench = Node(name, API), Node(name, API)
    for node, side in ((npu, 0), (bench, 1)):
        for items, state, high in ((node.input_data, "input", inputs), (node.output_data, "output", output)):
            items[f"{name}.{state}.0"] = {
                "state": state,
                "Max": high[side],
                "Min": -1.0,
                "Mean": 0.0,
                "Norm": 1.0,
            }
    return npu, bench


def test_a_piece_keeps_its_rows_up_to_an_origin_after_a_node_that_exceeds_without_being_one() -> None:
    """A piece's first node over rtol adds less than rtol to its inputs' error (not an origin); its
    third is one: the piece keeps its rows up to that one, as the walk of all its rows finds it."""
    made = [
        _tensor_node("Functional.a.0.forward", (1.0, 1.09), (1.15, 1.0)),  # over rtol, within its inputs'
        _tensor_node("Functional.b.0.forward", (5.0, 5.0), (7.0, 7.0)),
        _tensor_node("Functional.c.0.forward", (2.0, 2.0), (3.0, 2.0)),  # an origin
        _tensor_node("Functional.d.0.forward", (4.0, 4.0), (6.0, 4.0)),
    ]
    nodes = [npu for npu, _ in made]
    places = {npu.id: 10 * i for i, npu in enumerate(nodes)}
    piece = node_rows(nodes, dict(made), SUMMARY, lambda names: [places[n] for n in names], Tolerance())
    assert piece.exceeds and sorted(set(piece.places)) == [0, 10, 20]
    assert origin_place(list(zip(piece.places, piece.rows)), False, Tolerance()) == 20


@pytest.mark.parametrize("case", [MULTIRANK, MS_DA], ids=["multirank", "ms_da"])
def test_a_rank_s_communication_nodes_are_those_of_its_walk(case: Path) -> None:
    """The communication nodes a rank's rows give the links (made of those nodes' rows only, each at
    its entry's place among all) are the walk's (made of all its rows in dump order): the same rank,
    index, entry, exchange and inputs."""
    from msprobe_dask.analysis.rank_rows import RankRows
    from msprobe_dask.graph.api import build_graphs
    from msprobe_dask.graph.tasks import NPU

    graphs = build_graphs(case / "target", case / "golden").graphs
    ranks = [(g.rank, g.summary.divergence) for g in graphs if g.source == NPU and g.summary is not None]
    assert len(ranks) > 1
    for rank, rows in ranks:
        assert isinstance(rows, RankRows)
        nodes = rows.rank_nodes(rank, True)
        comms = [(n.rank, n.index, n.name, n.comm, n.inputs) for n in nodes.comms()]
        walked = [
            (n.rank, n.index, n.name, n.comm, tuple(t for t in n.inputs))
            for n in nodes.read(range(nodes.count))
            if getattr(n, "comm", None) is not None
        ]
        assert comms and comms == walked


@pytest.mark.parametrize("case", [MULTIRANK, MS_DA], ids=["multirank", "ms_da"])
def test_a_rank_s_walk_reads_the_same_nodes_a_few_entries_at_a_time(case: Path) -> None:
    """A rank's rows put in dump order a few entries at a time (RankRows.rank_nodes' block) give the walk
    what they give it put in order at once: the same Nodes at the same indexes, the nodes between them
    read the same (conftest.walk_view), whichever nodes received something from a peer."""
    from conftest import walk_view

    from msprobe_dask.analysis.rank_rows import RankRows
    from msprobe_dask.graph.api import build_graphs
    from msprobe_dask.graph.tasks import NPU

    graphs = build_graphs(case / "target", case / "golden").graphs
    ranks = [(g.rank, g.summary.divergence) for g in graphs if g.source == NPU and g.summary is not None]
    assert ranks
    for rank, rows in ranks:
        assert isinstance(rows, RankRows)
        whole = rows.rank_nodes(rank, True, block=max(1, len(rows.entries)))
        for receiving in (set(), set(range(0, whole.count, 2)), set(range(whole.count))):
            expected = repr(walk_view(whole.read(receiving)))
            for block in (1, 2, 3, 7):
                assert repr(walk_view(rows.rank_nodes(rank, True, block).read(receiving))) == expected
