"""Compare + rows cut into chunk tasks (graph/chunks.py) give the serial rows exactly, on any scheduler."""

from __future__ import annotations

from pathlib import Path

import pytest

from msprobe_dask.graph import chunks
from msprobe_dask.graph.build import build_graph
from msprobe_dask.graph.compare import compare_graphs, compare_mode, match_pairs
from msprobe_dask.graph.dump_files import GraphSource
from msprobe_dask.graph.micro_steps import assign_micro_steps
from msprobe_dask.graph.model import COLLECTION
from msprobe_dask.graph.overflow import check_overflow
from msprobe_dask.graph.rows import GraphRows, graph_rows, read_back

DATA = Path(__file__).resolve().parents[1] / "data"
CASES = [
    ("stat_mix", False),
    ("md5_mix", False),
    ("fuzzy", True),
    ("transformer_big", False),
    ("multirank/target/step0/rank1", False),
]


MANY = 40  # chunks per graph


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


def _chunked(tp: Path, gp: Path, fuzzy: bool, n: int = MANY) -> tuple[GraphRows, GraphRows]:
    npu, bench = (
        build_graph(GraphSource(str(tp)), items=False),
        build_graph(GraphSource(str(gp)), items=False),
    )
    assert not any(n.input_data or n.output_data for n in npu.nodes.values())
    mode = compare_mode(npu, bench, str(tp))
    pairs = match_pairs(npu, bench, fuzzy)
    assign_micro_steps(npu, bench)
    npu_rows, bench_rows = chunks.rows_here(
        chunks.prepare_compare(npu, bench, pairs, mode, ("NPU", "Bench"), overflow=True, n=n)
    )
    return npu_rows, bench_rows


def _read_back(g: GraphRows) -> GraphRows:
    read_back(g)
    return g


# (chunks, nodes a chunk task works through at once): many small chunks; a few chunks worked through in
# runs of a few nodes, which split collections' subtrees and meet a Bench partner again after its row
CUTS = [(MANY, chunks.SUB_RUN_NODES), (2, 3)]


@pytest.mark.parametrize(("n", "sub_run"), CUTS, ids=[f"{n}-chunks-by-{k}" for n, k in CUTS])
@pytest.mark.parametrize(("case", "fuzzy"), CASES, ids=[c for c, _ in CASES])
def test_chunked_compare_rows_equal_serial_rows(
    case: str, fuzzy: bool, n: int, sub_run: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(chunks, "SUB_RUN_NODES", sub_run)
    tp, gp = _sides(case)
    (npu, bench), wants = map(_read_back, _chunked(tp, gp, fuzzy, n)), _serial(tp, gp, fuzzy)
    for ours, want in zip((npu, bench), wants):
        assert ours.nodes == want.nodes
        assert ours.stacks == want.stacks
        assert ours.p2p == want.p2p
        assert ours.micro_steps == want.micro_steps
    assert _summary(npu) == _summary(wants[0])  # (the run's summary is the NPU graphs')


def _summary(g: GraphRows) -> object:
    return g.summary.finish(str) if g.summary is not None else None


@pytest.mark.parametrize("case", ["transformer_big", "multirank/target/step0/rank1"])
def test_packed_rows_read_back_as_serial_rows(case: str) -> None:
    """Chunk tasks pack their rows (one bytes object per chunk) and keep only the communication rows."""
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


@pytest.mark.parametrize(("n", "sub_run"), CUTS, ids=[f"{n}-chunks-by-{k}" for n, k in CUTS])
def test_chunked_build_rows_equal_serial_rows(n: int, sub_run: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(chunks, "SUB_RUN_NODES", sub_run)
    src = GraphSource(str(DATA / "transformer_big" / "target"))
    g = build_graph(src, items=False)
    assign_micro_steps(g)
    (ours,) = chunks.rows_here(chunks.prepare_build(g, "NPU", overflow=True, n=n))
    want_graph = build_graph(src)
    assign_micro_steps(want_graph)
    check_overflow(want_graph)
    want = graph_rows(want_graph, "NPU")
    assert ours.apart
    read_back(ours)
    assert (ours.nodes, ours.stacks) == (want.nodes, want.stacks)
    assert _summary(ours) == _summary(want)


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


def test_no_more_chunks_than_asked_and_tasks_past_the_last_make_nothing() -> None:
    g = build_graph(GraphSource(str(DATA / "transformer_big" / "target")), items=False)
    assign_micro_steps(g)
    p = chunks.prepare_build(g, "NPU", n=7)
    assert 1 < len(p.chunks) <= 7
    assert chunks.chunk_task(p, 7) == (None,)
    assert chunks.chunk_count(0) == 1 and chunks.chunk_count(64 << 20) == chunks.MAX_CHUNKS
    # a big dump: chunks of at most MAX_CHUNK_BYTES
    assert chunks.chunk_count(1 << 40) == (1 << 40) // chunks.MAX_CHUNK_BYTES
    assert chunks.chunk_count(chunks.MAX_CHUNKS * chunks.MAX_CHUNK_BYTES + 1) == chunks.MAX_CHUNKS + 1


def test_chunk_tasks_of_an_unpickled_prepared_give_the_same_rows() -> None:
    """A chunk task run in another process (a dask worker) gets the Prepared pickled, graphs and all,
    and makes the rows a task makes on the original."""
    import pickle

    tp, gp = _sides("transformer_big")
    npu, bench = (
        build_graph(GraphSource(str(tp)), items=False),
        build_graph(GraphSource(str(gp)), items=False),
    )
    mode = compare_mode(npu, bench, str(tp))
    pairs = match_pairs(npu, bench)
    assign_micro_steps(npu, bench)
    p = chunks.prepare_compare(npu, bench, pairs, mode, ("NPU", "Bench"), overflow=True, n=6)
    copy = pickle.loads(pickle.dumps(p))
    for k in range(len(p.chunks)):
        here, there = chunks.chunk_task(p, k), chunks.chunk_task(copy, k)
        assert [(c.packed, c.nodes, c.stacks) for c in here] == [(c.packed, c.nodes, c.stacks) for c in there]


@pytest.mark.parametrize("held", [False, True])
@pytest.mark.parametrize("scheduler", ["threads", "processes", "sync"])
def test_every_dask_scheduler_gives_the_same_rows(
    scheduler: str, held: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The graph of a multi-rank compare in many chunk tasks, computed by dask's threaded, processes
    (each task's inputs pickled to a worker process) and synchronous schedulers, with its big results
    traveling or ``held`` in the processes and a spool folder (graph/held.py): the same rows."""
    import dask

    from msprobe_dask.graph.held import Spool
    from msprobe_dask.graph.rank_plan import rows_made_whole
    from msprobe_dask.graph.tasks import Options

    monkeypatch.setattr(chunks, "CHUNK_BYTES", 1)
    (tmp_path / "spool").mkdir()
    results = []
    for how, spool in (
        ("sync", None),
        (scheduler, Spool(str(tmp_path / "spool"), True, 2) if held else None),
    ):
        lazy, _ = rows_made_whole(
            DATA / "multirank" / "target", DATA / "multirank" / "golden", Options(overflow_check=True), spool
        )
        (result,) = dask.compute(lazy, scheduler=how)
        results.append([(g.graph_id, g.n_rows, g.nodes, g.stacks, g.packed) for g in result.graphs])
    assert results[0] == results[1]


@pytest.mark.parametrize("held", [False, True])
def test_rows_are_cut_into_chunk_tasks_wherever_the_graph_runs(
    held: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In this process and on a cluster (the values travel) and on local worker processes (held there:
    graph/held.py), a graph's rows are made by many chunk tasks."""
    from msprobe_dask.graph import rank_plan, tasks
    from msprobe_dask.graph.held import Spool

    monkeypatch.setattr(chunks, "CHUNK_BYTES", 1)
    spool = Spool(str(tmp_path), True, 2) if held else None
    plan = rank_plan.rank_plan(DATA / "transformer_big" / "target", None, tasks.Options(), spool)
    r = plan.rank_tasks(plan.sources[0])
    assert r.pair.n > 1 and (r.prepared is None) is held


def test_only_local_worker_processes_do_not_share_results() -> None:
    from msprobe_dask.pipeline.scheduler import RunOptions

    assert RunOptions().shares_results and RunOptions(address="tcp://127.0.0.1:8786").shares_results
    assert not RunOptions(workers=2).shares_results
    assert not RunOptions(workers=2, holds_graphs=True).shares_results


def test_graph_visualize_on_local_workers_writes_the_vis_db_of_a_run_here(tmp_path: Path) -> None:
    """``--workers 2``: graph_visualize's graph on dask's processes scheduler, its big results held in the
    worker processes and the run's spool folder (graph/held.py), its rows in chunk tasks: the vis.db of
    the run in this process, and the spool folder gone."""
    from visdb_diff import diff_visdb

    from msprobe_dask.cli import main

    args = ["graph_visualize", "-q", "-tp", str(DATA / "multirank" / "target")]
    args += ["-gp", str(DATA / "multirank" / "golden")]
    assert main([*args, "-o", str(tmp_path / "here")]) == 0
    assert main([*args, "-o", str(tmp_path / "workers"), "--workers", "2"]) == 0
    (here,), (there,) = (tmp_path / "here").glob("*.vis.db"), (tmp_path / "workers").glob("*.vis.db")
    assert diff_visdb(str(there), str(here)) == []
    assert [p.name for p in (tmp_path / "workers").iterdir()] == [there.name]
