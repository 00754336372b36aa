"""The first divergence (msprobe_dask.analysis.divergence): on dumps with a fault planted at a known op
(workflows/gen_divergence_dumps.py) and on the corpus' stat_mix and multirank, the answer is the
planted op and rank; a near-zero mean is not a divergence."""

from __future__ import annotations

import pickle
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
from conftest import case_dir, light_node, walk_view
from hypothesis import given, settings
from hypothesis import strategies as st

from msprobe_dask.analysis.divergence import Tolerance, analyse_nodes, from_tables
from msprobe_dask.analysis.findings import ORIGIN, RECEIVED, step_and_rank
from msprobe_dask.analysis.flow import Comm, LightNode, Node, TensorError, column_nodes, part_nodes
from msprobe_dask.analysis.quiet_rows import QuietRun
from msprobe_dask.analysis.row_errors import READ_COLUMNS, RowColumns
from msprobe_dask.pipeline.compare import compare
from msprobe_dask.table import CompareTable

sys.path.insert(0, str(Path(__file__).parents[2] / "workflows"))
from gen_divergence_dumps import CASES, write_case  # noqa: E402


def _divergence(target: Path, golden: Path, tol: Tolerance | None = None):  # type: ignore[no-untyped-def]
    return from_tables(((r.label, r.table) for r in compare(target, golden)), tol)


def _columns(rows: Sequence[Mapping[str, Any]]) -> RowColumns:
    """Rows given as dicts of their cells (each with the same columns), column by column."""
    names = {name for row in rows for name in row}
    return RowColumns.of_columns(len(rows), {name: [row.get(name) for row in rows] for name in names})


def _error(row: Mapping[str, Any], atol: float) -> float | None:
    return _columns([row]).error(0, atol)


def _sides(root: Path) -> tuple[Path, Path]:
    target, golden = root / "target", root / "golden"
    return (target / "step0", golden / "step0") if (target / "step0").is_dir() else (target, golden)


@pytest.mark.parametrize("name", list(CASES))
def test_planted_fault_is_found(name: str, tmp_path: Path) -> None:
    case = write_case(tmp_path, name)
    found = _divergence(*_sides(tmp_path))
    if case.answer is None:
        assert found.origin is None and found.origins == ()
        return
    assert found.origin is not None
    assert (found.origin.rank, found.origin.node) == case.answer
    assert found.origin.kind == ORIGIN
    assert [(o.rank, o.node) for o in found.origins] == [case.answer], "a later node taken for an origin"
    reached = {f.rank for f in found.firsts if f.kind == RECEIVED}
    assert reached == set(range(case.ranks)) - {case.fault_rank}
    assert all(hop.received_from is not None for hop in found.path[1:])


def test_send_recv_names_the_sender(tmp_path: Path) -> None:
    write_case(tmp_path, "send_recv")
    found = _divergence(*_sides(tmp_path))
    first = found.first("", 3)
    assert first is not None and first.node == "Distributed.recv.0.forward" and first.received_from == 2
    assert "    spread: rank3 Distributed.recv.0.forward (received from rank 2)" in found.lines()
    assert [hop.rank for hop in found.path] == [2, 3, 0, 1]  # rank 3 by recv first, then the all_reduce


def test_all_reduce_names_the_sender(tmp_path: Path) -> None:
    write_case(tmp_path, "all_reduce")
    found = _divergence(*_sides(tmp_path))
    for rank in (0, 2, 3):
        first = found.first("", rank)
        assert first is not None
        assert (first.node, first.received_from, first.via) == (
            "Distributed.all_reduce.0.forward",
            1,
            "Distributed.all_reduce.0.forward",
        )


def test_stat_mix_names_block_h2() -> None:
    root = case_dir("stat_mix")
    found = _divergence(root / "target", root / "golden")
    assert found.origin is not None
    assert found.origin.node == "Functional.linear.10.forward"  # inside Module.h.2.mlp.c_fc
    assert "self.c_fc(x)" in found.origin.stack
    assert found.origin.tensor == "Functional.linear.10.forward.input.1"  # its weight, scaled by 1.5


def test_multirank_names_rank_2_and_how_it_spread() -> None:
    root = case_dir("multirank")
    found = _divergence(root / "target" / "step0", root / "golden" / "step0")
    assert found.origin is not None
    assert (found.origin.rank, found.origin.node) == (2, "Functional.linear.1.forward")  # fc2's weight
    assert [o.rank for o in found.origins] == [2]  # not rank 1's batch_isend_irecv (a racy buffer)
    for rank in (0, 1, 3):
        first = found.first("", rank)
        assert first is not None and first.received_from == 2
        assert first.node == "Distributed.all_reduce.1.forward"
    assert "received from rank 2" in "\n".join(found.lines())


def test_multistep_names_the_first_step() -> None:
    root = case_dir("multistep")
    found = _divergence(root / "target", root / "golden")
    assert found.origin is not None and found.origin.step == "step0"
    assert found.origin.tensor == "Tensor.add_.0.forward.input.alpha"  # lr 0.12 against 0.1


def test_near_zero_mean_is_no_error() -> None:
    row = {
        "NPU max": 2.5, "NPU min": -1.9, "NPU mean": 0.0, "NPU l2norm": 11.0,
        "Bench max": 2.5, "Bench min": -1.9, "Bench mean": 3.7e-9, "Bench l2norm": 11.0,
    }  # fmt: skip
    assert _error(row, 1e-6) == 0.0
    assert _error(row, 0.0) == pytest.approx(3.7e-9 / 2.5)
    assert _error({**row, "NPU max": 3.75}, 1e-6) == pytest.approx((1.25 - 1e-6) / 2.5)
    assert _error({**row, "NPU max": "inf"}, 1e-6) == float("inf")
    assert _error({"NPU max": "N/A", "Bench max": 1.0}, 1e-6) is None


def test_tolerance_is_settable(tmp_path: Path) -> None:
    write_case(tmp_path, "single")
    found = _divergence(*_sides(tmp_path), Tolerance(atol=1e-6, rtol=1.0))
    assert found.origin is None  # a 1.5x fault is within a 100% tolerance
    strict = _divergence(*_sides(tmp_path), Tolerance(atol=0.0, rtol=1e-4))
    assert strict.origin is not None and strict.origin.node == "Functional.linear.0.forward"  # the noise


@pytest.mark.parametrize(
    ("label", "expected"),
    [
        ("", ("", 0)),
        ("rank3", ("", 3)),
        ("step1/rank2", ("step1", 2)),
        ("graph/step0/proc5", ("graph/step0", 0)),
    ],
)
def test_step_and_rank(label: str, expected: tuple[str, int]) -> None:
    assert step_and_rank(label) == expected


def test_typed_api_and_summary_use_the_analysis() -> None:
    import msprobe_dask as mp

    root = case_dir("multirank")
    res = mp.compare(root / "target", root / "golden")
    node = res.first_divergence()
    assert node is not None
    assert (node.label, node.name, node.result) == ("step0/rank2", "Functional.linear.1.forward", "origin")
    summary = res.summary()
    firsts = {g.label: g.first_divergence for g in summary.groups}
    assert firsts["step0/rank0"] is not None and firsts["step0/rank0"].result == "received from rank 2"
    assert summary.origin_lines[0] == "First divergence: step0/rank2 Functional.linear.1.forward"
    divergence = res.divergence()
    assert divergence is not None and divergence.origin is not None and divergence.origin.step == "step0"


def test_batch_links_name_the_peers_when_the_table_knows_them(tmp_path: Path) -> None:
    """In memory a CompareTable holds each P2POp's op and peer: rank 3's batch received rank 2's isend
    tensors only. A csv read back does not: any two batches are linked, every tensor may be sent."""
    from msprobe_dask.analysis.links import link
    from msprobe_dask.summary.divergence import rank_table_nodes

    write_case(tmp_path, "batch")
    results = compare(*_sides(tmp_path))
    known = {step_and_rank(r.label)[1]: rank_table_nodes(r.label, r.table) for r in results}
    batch = next(n for n in known[3] if n.name == "Distributed.batch_isend_irecv.0.forward")
    received = link(known).received[(3, batch.index)]
    assert {s.rank for s in received if s.tensors} == {2}
    assert batch.comm is not None and batch.comm.peers == frozenset({0, 2})
    bare = {
        rank: [{**row, "api_origin_name": entry} for row, entry in zip(r.table.records(), r.table.entries)]
        for r in results
        for rank in [step_and_rank(r.label)[1]]
    }
    read_back = {rank: column_nodes(_columns(rows), rank, 1e-6) for rank, rows in bare.items()}
    batch = next(n for n in read_back[3] if n.name == "Distributed.batch_isend_irecv.0.forward")
    assert {s.rank for s in link(read_back).received[(3, batch.index)] if s.tensors} == {0, 1, 2}


def test_a_parts_communication_nodes_share_one_comm_of_each_value() -> None:
    """A rank's all_reduces name the same process group: a part's nodes hold one Comm of each value, so
    that its pickle (NodePart) holds it once and the process that links the ranks reads it once."""
    from msprobe_dask.summary.divergence import node_part

    root = case_dir("multirank")
    for r in compare(root / "target", root / "golden"):
        comms = node_part(r.label, r.table, Tolerance()).comms()
        assert comms and len({id(n.comm) for n in comms}) == len({n.comm for n in comms}), r.label


@pytest.mark.parametrize("name", ["single", "send_recv", "all_reduce", "batch", "near_zero"])
def test_the_analysis_of_a_ranks_parts_is_the_whole_ranks(name: str, tmp_path: Path) -> None:
    """The rows of each rank's table cut into parts at entry boundaries (NodePart: its communication
    nodes, and its rows packed, made into nodes when the walk reaches them) and walked part by part,
    each rank only up to its first origin, give the analysis of the whole nodes: the origin, each
    rank's first divergent node, the path."""
    import random

    from msprobe_dask.analysis.divergence import analyse_nodes
    from msprobe_dask.summary.divergence import analyse_rank_nodes, node_part, rank_of_parts, rank_table_nodes

    write_case(tmp_path, name)
    results = compare(*_sides(tmp_path))
    rng = random.Random(name)
    for tol in (Tolerance(), Tolerance(rtol=0.0)):
        whole = {r.label: rank_table_nodes(r.label, r.table, tol) for r in results}
        ranks = []
        for r in results:
            ends = [
                i
                for i in range(1, len(r.table.rows) + 1)
                if r.table.entries[i - 1 : i + 1] != [r.table.entries[i - 1]] * 2
            ]
            cuts = sorted({0, len(r.table.rows), *(rng.choice(ends) for _ in range(3))})
            parts = [node_part(r.label, _rows(r.table, lo, hi), tol) for lo, hi in zip(cuts, cuts[1:])]
            assert sum(p.count for p in parts) == len(whole[r.label])
            ranks.append((r.label, rank_of_parts(parts)))
        found = analyse_rank_nodes(ranks, tol)
        groups: dict[str, dict[int, list]] = {}  # type: ignore[type-arg]
        for label, nodes in whole.items():
            step, rank = step_and_rank(label)
            groups.setdefault(step, {})[rank] = nodes
        expected = analyse_nodes(groups, tol)
        assert found is not None
        assert repr((found.origin, found.firsts, found.path, found.nodes, found.lines())) == repr(
            (expected.origin, expected.firsts, expected.path, expected.nodes, expected.lines())
        )
        firsts = {(o.step, o.rank): o for o in reversed(expected.origins)}  # each rank's first origin
        assert sorted(found.origins, key=lambda o: o.rank) == sorted(firsts.values(), key=lambda o: o.rank)


def test_random_nodes_walked_part_by_part_give_the_whole_walks_answer() -> None:
    """Random ranks of nodes (tensors that recur across parts, errors around rtol, backward nodes of
    earlier forwards, parameters_grad nodes without inputs, all_reduces linking the ranks), cut into
    random parts: the same answer as the whole nodes'."""
    import random

    from msprobe_dask.analysis.divergence import analyse_nodes
    from msprobe_dask.summary.divergence import analyse_rank_nodes, rank_of_parts

    rng = random.Random(3)
    tol = Tolerance()
    for trial in range(80):
        world, count = rng.randint(1, 3), rng.randint(1, 60)
        reduces = set(rng.sample(range(count), rng.randint(0, min(3, count))))
        whole = {rank: _random_nodes(rng, rank, count, reduces) for rank in range(world)}
        ranks = [
            (f"rank{rank}", rank_of_parts(_random_parts(rng, nodes, tol))) for rank, nodes in whole.items()
        ]
        found, expected = analyse_rank_nodes(ranks, tol), analyse_nodes({"": whole}, tol)
        assert found is not None
        assert repr((found.origin, found.firsts, found.path, found.nodes)) == repr(
            (expected.origin, expected.firsts, expected.path, expected.nodes)
        ), trial


def test_a_rank_alone_walked_ahead_through_its_first_parts_gives_the_whole_walks_answer() -> None:
    """Random nodes of a rank alone in its job, cut into random parts, walked ahead through their first
    parts (``walk_ahead``, as a task beside the last table part does) and on from there: the answer of
    the whole nodes, whether the walk ahead found the origin, got somewhere, or had nothing to walk."""
    import random

    from msprobe_dask.analysis.divergence import Walk, analyse_nodes
    from msprobe_dask.analysis.findings import Finding
    from msprobe_dask.summary.divergence import analyse_rank_nodes, rank_of_parts, walk_ahead

    rng = random.Random(5)
    tol = Tolerance()
    outcomes: set[type] = set()
    for trial in range(120):
        nodes = _random_nodes(rng, 0, rng.randint(1, 60), set())
        parts = _random_parts(rng, nodes, tol)
        expected = analyse_nodes({"": {0: nodes}}, tol)
        for first in range(len(parts)):
            ahead = walk_ahead("rank0", parts[:first], tol)
            outcomes.add(type(ahead))
            reads = [len(part.reads) for part in parts]
            found = analyse_rank_nodes([("rank0", rank_of_parts(parts, ahead))], tol)
            assert found is not None
            if ahead is not None:  # (not walked again)
                assert [len(part.reads) for part in parts[:first]] == reads[:first]
            assert repr((found.origin, found.firsts, found.path, found.nodes)) == repr(
                (expected.origin, expected.firsts, expected.path, expected.nodes)
            ), (trial, first)
    assert outcomes == {Finding, Walk, type(None)}


def _random_nodes(rng: Any, rank: int, count: int, reduces: set[int]) -> list[Node]:
    """A rank's random nodes: tensors that recur across nodes, errors around rtol, backward nodes of
    earlier forwards, parameters_grad nodes without inputs, all_reduces at ``reduces``."""
    pool = [(float(i), -float(i)) for i in range(25)]
    errors = (0.0,) * 12 + (0.05, 0.09) * 3 + (0.2, 1.0)  # few over rtol: the walks go far

    def tensors(n: int) -> tuple[TensorError, ...]:
        return tuple(TensorError(f"t{rng.random()}", rng.choice(errors), rng.choice(pool)) for _ in range(n))

    nodes: list[Node] = []
    for i in range(count):
        kind = rng.random()
        if i in reduces:
            name, comm = f"Distributed.all_reduce.{i}.forward", Comm("all_reduce", None)
        elif kind < 0.5 or not nodes:
            name, comm = f"Functional.f.{i}.forward", None
        elif kind < 0.85:
            name, comm = rng.choice([n.name for n in nodes]).replace(".forward", ".backward"), None
        else:
            name, comm = f"Module.m.{i}.parameters_grad", None
        inputs = () if "parameters_grad" in name else tensors(rng.randint(0, 3))
        nodes.append(Node(rank, i, name, inputs, tensors(rng.randint(0, 2)), [f"s{i}"], comm))
    return nodes


def _random_parts(rng: Any, nodes: list[Node], tol: Tolerance) -> list[_Nodes]:
    """``nodes`` cut into random parts (index counted from a part's start)."""
    count = len(nodes)
    cuts = sorted({0, count, *(rng.randrange(count + 1) for _ in range(rng.randint(0, 6)))})
    return [
        _Nodes([replace(n, index=n.index - lo) for n in nodes[lo:hi]], tol) for lo, hi in zip(cuts, cuts[1:])
    ]


def _rows(table: CompareTable, lo: int, hi: int) -> CompareTable:
    """Rows lo..hi of ``table``, as a table part holds them."""
    p2p = {i - lo: pair for i, pair in table.p2p.items() if lo <= i < hi}
    return CompareTable(table.mode, table.columns, table.rows[lo:hi], entries=table.entries[lo:hi], p2p=p2p)


@dataclass(frozen=True)
class _Nodes:
    """A part of a rank's nodes as a NodePart gives them (a node that cannot diverge as its LightNode)."""

    part: list[Node]
    tol: Tolerance
    reads: list[object] = field(default_factory=list)  # (one a read of its nodes)

    @property
    def count(self) -> int:
        return len(self.part)

    @property
    def exceeds(self) -> bool:
        return any(t.error > self.tol.rtol for node in self.part for t in node.inputs + node.outputs)

    def comms(self, start: int) -> list[Node]:
        return [node.moved(start) for node in self.part if node.comm is not None]

    def nodes(self, receiving: object) -> list[Node | LightNode]:
        self.reads.append(receiving)
        return [light_node(node, self.tol.rtol) or node for node in self.part]


def test_nodes_pickle_flat_and_come_back_equal() -> None:
    """Nodes travel pickled (summary.divergence.NodePart) as their class and fields' values."""
    sent = TensorError("Distributed.isend.0.forward.input.0", 0.5, (1.0, -1.0), sent_to=3)
    node = Node(
        1, 7, "Distributed.isend.0.forward", (sent,), (), ["File a.py, line 3"], Comm("isend", frozenset({3}))
    )
    assert pickle.loads(pickle.dumps(node, pickle.HIGHEST_PROTOCOL)) == node
    assert TensorError.__reduce__(sent) == (TensorError, (sent.name, 0.5, (1.0, -1.0), 3))


_CELL = st.sampled_from(
    [None, 0, 0.0, 1.0, -2.5, 1e-7, float("nan"), float("inf"), "0", "3.5", "N/A", 7, False]
)
_DIFF = st.sampled_from([None, 0.0, "0", 0.5, float("nan")])  # MaxAbsErr, EucDist


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(*[_CELL] * 8, *[_DIFF] * 2, st.sampled_from("ab"), st.booleans(), st.booleans()), max_size=6
    ),
    st.sampled_from([0.0, 1e-6, 0.5]),
    st.sampled_from([0.0, 0.1, 2.0]),
)
def test_rows_exceed_rtol_where_a_rows_error_does(rows: list[tuple], atol: float, rtol: float) -> None:  # type: ignore[type-arg]
    """RowColumns.exceeds (which passes over rows whose two sides' statistics are the same cells) is
    whether any row's error exceeds rtol."""
    from msprobe_dask.columns import STAT_COLUMNS

    stats = (*STAT_COLUMNS, "MaxAbsErr", "EucDist")
    rows = [(*row[:4], *row[:4], *row[8:]) if row[12] else row for row in rows]  # both sides the same
    cells = {c: [row[stats.index(c)] if c in stats else None for row in rows] for c in READ_COLUMNS}
    cells["NPU MD5"], cells["BENCH MD5"] = [row[10] for row in rows], ["a"] * len(rows)
    columns = RowColumns(cells, [row[11] for row in rows])
    errors = [columns.error(i, atol) for i in range(len(rows))]
    assert columns.exceeds(atol, rtol) == any(e is not None and e > rtol for e in errors)


_NAMES = st.sampled_from(
    [
        "Functional.linear.0.forward.input.0",
        "Functional.linear.0.forward.input.1",
        "Functional.linear.0.forward.output.0",
        "Functional.linear.0.backward.input.0",
        "Module.fc.Linear.parameters_grad.weight",
        "Distributed.all_reduce.0.forward.input.0",
        "Distributed.all_reduce.0.forward.output.0",
        "Distributed.all_gather.0.forward.input.0",
        "Distributed.isend.0.forward.output.0",
        "Tensor.add.1.forward.output.0",
    ]
)


_FLOAT = st.sampled_from([0.0, -0.0, 1.0, -2.5, 1e-7, float("inf")])
_QUIET_ROW = st.tuples(_NAMES, *[_FLOAT] * 4, st.sampled_from([None, "N/A"])).map(
    lambda r: (
        (r[0], *r[1:5], *r[1:5], None, None, False, False)
        if r[5] is None
        else (r[0], *["N/A"] * 8, None, None, False, False)
    )
)  # (a row whose error is 0.0, or none: flow.walk_nodes reads a run of them at once)


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        # (two of three rows quiet: most parts then have runs of them)
        st.one_of(
            st.tuples(_NAMES, *[_CELL] * 8, *[_DIFF] * 2, st.booleans(), st.booleans()),
            _QUIET_ROW,
            _QUIET_ROW,
        ),
        max_size=12,
    ),
    st.sampled_from([0.0, 1e-6, 0.5]),
    st.sampled_from([0.0, 0.1, 2.0]),
    st.booleans(),
)
def test_walk_nodes_make_light_nodes_as_the_walk_reads_nodes(
    rows: list[tuple], atol: float, rtol: float, receiving: bool
) -> None:  # type: ignore[type-arg]
    """flow.walk_nodes makes a node that no rule can find straight from the rows as its LightNode (the
    node iter_column_nodes makes, read as the walk reads it: conftest.light_node), or a run of them whose
    errors are all 0.0 or none as a QuietRun: the walk reads the same (conftest.walk_view); any other
    node is that node (a communication node too, where every node received something from a peer
    (``receiving``) or its rows may be unsettled)."""
    from msprobe_dask.analysis.flow import iter_column_nodes, walk_nodes
    from msprobe_dask.columns import STAT_COLUMNS

    rows = sorted(rows, key=lambda row: row[0])  # (a node's rows together)
    rows = [(*row[:5], *row[1:5], *row[9:]) if row[12] else row for row in rows]  # both sides the same
    stats = ("NPU Name", *STAT_COLUMNS, "MaxAbsErr", "EucDist")
    cells = {c: [row[stats.index(c)] if c in stats else None for row in rows] for c in READ_COLUMNS}
    cells["NPU MD5"], cells["BENCH MD5"] = ["a"] * len(rows), ["a" if row[11] else "b" for row in rows]
    md5_only = [row[11] and row[1] is None for row in rows]
    nodes = list(iter_column_nodes(RowColumns(cells, md5_only), 3, atol))
    made = walk_nodes(RowColumns(cells, md5_only), 3, atol, rtol, range(len(nodes) if receiving else 0))
    expected = [light_node(node, rtol, receiving) or node for node in nodes]
    assert repr(walk_view(made)) == repr(walk_view(expected))


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        # (most parts all quiet: a node with an error to measure makes the part one of others)
        st.one_of(
            *[_QUIET_ROW] * 8, st.tuples(_NAMES, *[_CELL] * 8, *[_DIFF] * 2, st.booleans(), st.booleans())
        ),
        max_size=12,
    ),
    st.sampled_from([0.0, 1e-6, 0.5]),
    st.sampled_from([-1.0, 0.0, 0.1, 2.0]),
)
def test_a_part_that_is_one_quiet_run_is_walked_without_its_rows(
    rows: list[tuple], atol: float, rtol: float
) -> None:  # type: ignore[type-arg]
    """A table part of a job of one rank (not linked) whose nodes flow.walk_nodes makes into one QuietRun
    when none received something from a peer (flow.part_nodes) is read by the walk as that run without
    its rows (NodePart), and makes no communication node; a linked part makes no QuietRun. The walk
    reads the same of both as walk_nodes makes of the rows, when no node received something and when
    every one did (then made from the rows); both count the same nodes and exceed rtol where the rows
    do."""
    from types import SimpleNamespace

    from msprobe_dask.analysis.flow import walk_nodes
    from msprobe_dask.analysis.row_entries import entry_and_state
    from msprobe_dask.columns import STAT_COLUMNS
    from msprobe_dask.summary.divergence import node_part

    rows = sorted(rows, key=lambda row: row[0])  # (a node's rows together)
    rows = [(*row[:5], *row[1:5], *row[9:]) if row[12] else row for row in rows]  # both sides the same
    stats = ("NPU Name", *STAT_COLUMNS, "MaxAbsErr", "EucDist")
    cells = {c: [row[stats.index(c)] for row in rows] for c in READ_COLUMNS if c in stats}
    entries = [entry_and_state(row[0])[0] for row in rows]
    table = SimpleNamespace(cells=cells, columns=list(cells), entries=entries)
    tol = Tolerance(atol, rtol)
    part, linked = node_part("rank3", table, tol, False), node_part("rank3", table, tol, True)
    given = RowColumns.of_columns(len(rows), {**cells, "api_origin_name": entries})
    assert part.count == linked.count == len({*entries})
    assert part.exceeds == linked.exceeds == given.exceeds(atol, rtol)
    columns = pickle.loads(pickle.dumps(given))  # (as the walk's: a NaN cell of each side an object)
    nodes = list(walk_nodes(columns, 3, atol, rtol))
    assert bool(part.quiet_run) == (rtol >= 0 and len(nodes) == 1 and nodes[0].__class__ is QuietRun)
    assert part.comms() == [] and not linked.quiet_run
    walked = repr(walk_view(nodes))  # (a QuietRun's signatures are read once)
    assert repr(walk_view(part.nodes(set()))) == repr(walk_view(linked.nodes(set()))) == walked
    every = set(range(part.count))
    expected = repr(walk_view(walk_nodes(columns, 3, atol, rtol, every)))
    assert repr(walk_view(part.nodes(every))) == repr(walk_view(linked.nodes(every))) == expected


def test_one_ranks_clock_ticks_once_a_node() -> None:
    """On one rank (and on ranks that exchange nothing) each node ticks its rank's clock once: the n-th
    node's time is n + 1, its communication nodes' too, as without links (what the analysis of a job of
    one rank's parts uses: analyse_firsts)."""
    from msprobe_dask.analysis.links import Links, link

    def nodes(rank: int) -> list[Node]:
        names = ["Functional.f.0.forward", "Distributed.all_reduce.1.forward", "Distributed.isend.2.forward"]
        comms = [None, Comm("all_reduce", frozenset({5})), Comm("isend", frozenset({7}))]
        return [Node(rank, i, names[i % 3], (), (), None, comms[i % 3]) for i in range(10)]

    for ranks in ({0: nodes(0)}, {1: nodes(1), 2: nodes(2)}):
        links = link(ranks)
        assert not links.received
        assert all(links.time(rank, i) == i + 1 == Links().time(rank, i) for rank in ranks for i in range(10))


_COMM_ROWS = st.sampled_from(
    [
        ("Distributed.all_reduce.0.forward.input.0", None, None, "torch.float32"),
        ("Distributed.all_reduce.0.forward.input.group", None, None, "torch.ProcessGroup"),
        ("Distributed.all_reduce.0.forward.output.0", None, None, "torch.float32"),
        ("Distributed.broadcast.1.forward.input.0", None, None, "torch.float32"),
        ("Distributed.broadcast.1.forward.input.src", None, None, "int"),
        ("Distributed.isend.2.forward.input.0", "isend", "3", "torch.float32"),
        ("Distributed.irecv.3.forward.input.0", "irecv", 1, "torch.float32"),
        ("Distributed.batch_isend_irecv.4.forward.input.0", "isend", "2", "torch.float32"),
        ("Distributed.batch_isend_irecv.4.forward.input.1", "irecv", "5", "torch.float32"),
        ("Distributed.all_gather.5.forward.input.0", None, None, "torch.float32"),
        ("Distributed.all_gather.5.forward.input.1", None, None, "torch.float32"),
        ("Functional.linear.6.forward.input.0", None, None, "torch.float32"),
        ("Functional.linear.6.forward.output.0", None, None, "torch.float32"),
    ]
)
_GROUP = st.sampled_from(["[0, 1, 2, 3]", "[3]", "[]", "N/A", 2.0, None])


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(_COMM_ROWS, *[_CELL] * 8, *[_DIFF] * 2, _GROUP, st.booleans()), max_size=10),
    st.sampled_from([0.0, 1e-6, 0.5]),
)
def test_a_parts_communication_nodes_are_the_column_nodes_links_read(rows: list[tuple], atol: float) -> None:  # type: ignore[type-arg]
    """A table part's communication nodes (what it sends for the links across ranks) are the
    communication nodes of column_nodes, with the same index, name, Comm and inputs, and no outputs or
    stack (which the links do not read)."""
    from msprobe_dask.columns import STACK_COLUMN, STAT_COLUMNS

    rows = sorted(rows, key=lambda row: row[0][0])  # (a node's rows together)
    stats = (*STAT_COLUMNS, "MaxAbsErr", "EucDist")
    cells = {c: [row[1 + stats.index(c)] if c in stats else None for row in rows] for c in READ_COLUMNS}
    cells["NPU Name"] = [row[0][0] for row in rows]
    cells["NPU P2POp op"], cells["NPU P2POp peer"] = [row[0][1] for row in rows], [row[0][2] for row in rows]
    cells["NPU Dtype"] = [row[0][3] for row in rows]
    cells["NPU max"] = [row[11] if row[0][3] != "torch.float32" else row[1] for row in rows]
    cells[STACK_COLUMN] = [f"stack {i}" for i in range(len(rows))]
    md5_only = [row[12] and row[1] is None for row in rows]
    cells["NPU MD5"], cells["BENCH MD5"] = ["a"] * len(rows), ["a" if row[12] else "b" for row in rows]
    columns = RowColumns(cells, md5_only)
    made = part_nodes(columns, 2, atol, True).comms
    expected = [node for node in column_nodes(RowColumns(cells, md5_only), 2, atol) if node.comm is not None]
    assert repr(made) == repr([replace(n, outputs=(), stack=None) for n in expected])
    assert len({id(n.comm) for n in made}) == len({n.comm for n in made})


def test_a_nan_tensor_is_not_known_from_another_nan_tensor() -> None:
    """A tensor whose max and min are the text 'nan' has a signature of its own: an input that differs
    and whose max and min are NaN is an origin, though an earlier node made another tensor of NaN max
    and min (the texts converted once each, their NaN objects would be one, and the signatures equal)."""
    from msprobe_dask.columns import STAT_COLUMNS

    def row(name: str, *cells: str) -> dict[str, str]:
        return {"NPU Name": name, **dict(zip(STAT_COLUMNS, cells))}

    rows = [
        row("Functional.relu.0.forward.input.0", "1.0", "0.0", "0.5", "1.0", "1.0", "0.0", "0.5", "1.0"),
        row("Functional.relu.0.forward.output.0", "nan", "nan", "1.0", "1.0", "nan", "nan", "1.0", "1.0"),
        row("Functional.add.0.forward.input.0", "nan", "nan", "5.0", "1.0", "nan", "nan", "1.0", "1.0"),
        row("Functional.add.0.forward.output.0", "2.0", "1.0", "1.5", "1.0", "2.0", "1.0", "1.5", "1.0"),
    ]
    origin = analyse_nodes({"": {0: column_nodes(_columns(rows), 0, 1e-6)}}, Tolerance()).origin
    assert origin is not None and (origin.node, origin.kind) == ("Functional.add.0.forward", "origin")


@pytest.mark.parametrize("case", ["md5_mix", "tensor_mix", "stat_mix", "fuzzy", "transformer_big"])
def test_real_dumps_walked_in_quiet_parts_give_the_whole_ranks_answer(case: str) -> None:
    """A job of one rank on a real dump (tests/data; md5_mix and tensor_mix are those whose -da answer
    test_diff_analyze pins to the reference's): its table cut into parts of a few entries, each part
    made as the compare's part tasks make it for one rank (no links, a part without a diverging row
    carried as one QuietRun), walked part by part, gives the whole table's analysis (what -da reports).
    (On these dumps no answer depends on what a quiet part holds: its extremes and names are pinned by
    test_a_part_that_is_one_quiet_run_is_walked_without_its_rows.)"""
    from msprobe_dask.analysis.divergence import analyse_nodes
    from msprobe_dask.summary.divergence import analyse_rank_nodes, node_part, rank_of_parts, rank_table_nodes

    [result] = compare(case_dir(case) / "target", case_dir(case) / "golden")
    table, tol = result.table, Tolerance()
    ends = [
        i for i in range(1, len(table.rows) + 1) if table.entries[i - 1 : i + 1] != [table.entries[i - 1]] * 2
    ]
    quiet = 0
    for size in (1, 3, 8):
        cuts = [0, *ends[size - 1 :: size]]
        cuts += [len(table.rows)] if cuts[-1] != len(table.rows) else []
        parts = [
            node_part(result.label, _rows(table, lo, hi), tol, linked=False) for lo, hi in zip(cuts, cuts[1:])
        ]
        quiet += sum(bool(part.quiet_run) for part in parts)
        found = analyse_rank_nodes([(result.label, rank_of_parts(parts))], tol)
        step, rank = step_and_rank(result.label)
        expected = analyse_nodes({step: {rank: rank_table_nodes(result.label, table, tol)}}, tol)
        assert repr(
            None if found is None else (found.origin, found.firsts, found.path, found.nodes, found.lines())
        ) == repr((expected.origin, expected.firsts, expected.path, expected.nodes, expected.lines())), size
    assert quiet or case == "md5_mix", (
        "no part was carried as a QuietRun"
    )  # (md5: every row a node of its own)
