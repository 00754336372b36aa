"""graph_visualize's vis.db written by a chain of tasks (graph/write_chain.py ``chained_write``): each chunk's
rows inserted as soon as the chunk and the write before it are done. The file is the one a single
write task makes from the whole result, rowids included, on every dask scheduler and whatever order
the chunks finish in; a run that fails midway leaves nothing."""

from __future__ import annotations

import os
import pickle
import shutil
import signal
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dask
import pytest
from visdb_diff import diff_visdb, rowids
from visdb_summary import summarise_visdb, unreadable_rows

from msprobe_dask import processes
from msprobe_dask.errors import DumpError, OutputError
from msprobe_dask.graph import api, chunks, held, rank_plan, run_setup, tasks, write_chain
from msprobe_dask.graph.held import Spool
from msprobe_dask.writers.visdb import VisdbWriter, linked_cells
from msprobe_dask.writers.visdb_schema import NODES

DATA = Path(__file__).resolve().parents[1] / "data"
CASES = {
    "multirank compare": ("multirank/target", "multirank/golden", tasks.Options(overflow_check=True)),
    "multirank build": ("multirank/target", None, tasks.Options()),
    "tensor mode (rows made whole)": ("tensor_mix/target", "tensor_mix/golden", tasks.Options()),
    "fuzzy": ("fuzzy/target", "fuzzy/golden", tasks.Options(fuzzy_match=True)),
}


def _sides(case: str) -> tuple[Path, Path | None, tasks.Options]:
    tp, gp, opts = CASES[case]
    return DATA / tp, (DATA / gp if gp else None), opts


def _one_write_task(case: str, path: Path) -> write_chain.Visualized:
    tp, gp, opts = _sides(case)
    result, _ = rank_plan.rows_made_whole(tp, gp, opts)
    (written,) = dask.compute(dask.delayed(write_chain.write_task)(result, str(path)), scheduler="sync")
    return written


def _chained(
    case: str, path: Path, scheduler: str, spool: Spool | None = None, alone: bool = False
) -> write_chain.Visualized:
    tp, gp, opts = _sides(case)
    plan = rank_plan.rank_plan(tp, gp, opts, spool)
    plan.rank_alone = alone
    writer = VisdbWriter(path).suspend()
    (written,) = dask.compute(
        write_chain.chained_write(plan, writer, spool.window if spool else 0), scheduler=scheduler
    )
    assert written.path == str(path)
    return written


def _spool(tmp_path: Path, shared: bool = True) -> Spool:
    (tmp_path / "spool").mkdir()
    return Spool(str(tmp_path / "spool"), shared, 2)


@pytest.mark.parametrize(
    "scheduler, held, alone",
    [
        ("sync", False, False),
        ("threads", False, False),
        ("processes", False, False),
        ("sync", True, False),
        ("processes", True, False),
        ("sync", True, True),
        ("processes", True, True),
    ],
)
@pytest.mark.parametrize("case", list(CASES))
def test_the_chain_writes_the_file_of_one_write_task(
    case: str, scheduler: str, held: bool, alone: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(``held``: the big results held in the processes and a spool folder, graph/held.py, as on local
    worker processes; one process alone does not write the spool: ``shared`` False with sync.
    ``alone``: one task makes each (step, rank), Plan.rank_alone.)"""
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 1)  # as many chunks as the graphs allow
    one = _one_write_task(case, tmp_path / "one.vis.db")
    spool = _spool(tmp_path, scheduler != "sync") if held else None
    written = _chained(case, tmp_path / "chain.vis.db", scheduler, spool, alone)
    if spool is not None:  # (the run's spool folder is removed by api.visualize)
        shutil.rmtree(spool.folder)
    assert diff_visdb(str(tmp_path / "chain.vis.db"), str(tmp_path / "one.vis.db")) == []
    assert rowids(tmp_path / "chain.vis.db") == rowids(tmp_path / "one.vis.db")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chain.vis.db", "one.vis.db"]
    # the summary merged from the chunks' (one node each, or a collection) is the one of the file's rows;
    # a compare's first divergences (by compare's rule, from the rows the chunks made of the compared
    # nodes: tests/graph/test_first_divergence.py) those of one write task
    from_db = summarise_visdb(written.path)
    assert written.summary is not None and one.summary is not None
    counted = [(g.label, g.counts, g.kinds, g.worst) for g in written.summary.groups]
    assert counted == [(g.label, g.counts, g.kinds, g.worst) for g in from_db.groups]
    firsts = [g.first_divergence for g in written.summary.groups]
    assert firsts == [g.first_divergence for g in one.summary.groups]
    assert written.summary.origin_lines == one.summary.origin_lines
    assert bool(written.summary.origin_lines) == (CASES[case][1] is not None)
    assert list(written.unreadable) == unreadable_rows(written.path)


def test_the_last_task_gets_the_linked_cells_not_the_communication_rows(tmp_path: Path) -> None:
    """(What the link task holds for the vis.db's last task, which on local worker processes it reads
    pickled from the spool: the (matched_distributed, id) cells that linking across ranks set, those
    of the rows a single write task writes.)"""
    spool = _spool(tmp_path)
    _chained("multirank compare", tmp_path / "chain.vis.db", "sync", spool)
    with open(Path(spool.folder) / "run-linked", "rb") as f:
        linked = pickle.load(f)
    tp, gp, opts = _sides("multirank compare")
    (whole,) = dask.compute(rank_plan.rows_made_whole(tp, gp, opts)[0], scheduler="sync")
    assert linked.cells and linked.cells == linked_cells(row for g in whole.graphs for row in g.nodes)
    assert not [g.graph_id for rows, _, _ in linked.parts for g in rows if g.nodes or g.p2p]


def test_the_first_divergence_is_found_beside_the_last_inserts_from_comms_made_in_the_rank_tasks(
    tmp_path: Path,
) -> None:
    """(The link task, which waits for every rank but not for the write chain, finds the job's first
    divergence for the vis.db's last task; one task a (step, rank) makes its communication nodes for the
    links, tasks.link_ahead, and a rank whose rows exceed no rtol keeps no rows: it is never walked; the
    last task gets the summaries without those rows.)"""
    from msprobe_dask.analysis.rank_rows import RankRows

    spool = _spool(tmp_path)
    _chained("multirank compare", tmp_path / "chain.vis.db", "sync", spool, alone=True)
    with open(Path(spool.folder) / "run-linked", "rb") as f:
        linked = pickle.load(f)
    tp, gp, opts = _sides("multirank compare")
    (whole,) = dask.compute(rank_plan.rows_made_whole(tp, gp, opts)[0], scheduler="sync")
    assert linked.divergence is not None and linked.divergence == tasks.job_divergence(whole.graphs)
    assert all(g.summary is None or g.summary.divergence is None for rows, _, _ in linked.parts for g in rows)
    made = []
    for path in sorted(Path(spool.folder).glob("run-part-*")):
        with open(path, "rb") as f:
            rows, _, _ = pickle.load(f)
        made += [g.summary.divergence for g in rows if g.source == tasks.NPU]
    assert len(made) == 8 and all(isinstance(rows, RankRows) and rows.comms for rows in made)
    assert all(bool(rows.rows) == rows.exceeds for rows in made)


def test_chunks_finishing_last_first_change_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Threads, each chunk task slower than the next: the chunks are made in reverse order, and each
    write waits for its chunk and the write before it."""
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 1)
    made: list[int] = []
    chunk_task = rank_plan.chunk_task

    def late_first(p: chunks.Prepared, k: int) -> object:
        time.sleep(0.02 * (8 - min(k, 8)))
        made.append(k)
        return chunk_task(p, k)

    _one_write_task("multirank compare", tmp_path / "one.vis.db")
    monkeypatch.setattr(rank_plan, "chunk_task", late_first)
    with dask.config.set(num_workers=8):
        _chained("multirank compare", tmp_path / "chain.vis.db", "threads")
    assert made != sorted(made)
    assert diff_visdb(str(tmp_path / "chain.vis.db"), str(tmp_path / "one.vis.db")) == []
    assert rowids(tmp_path / "chain.vis.db") == rowids(tmp_path / "one.vis.db")


def test_a_chunk_failing_after_others_were_written_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 1)
    chunk_task = rank_plan.chunk_task
    inserted: list[int] = []
    insert = write_chain._insert_chunks

    def counting(*args: object) -> object:
        inserted.append(1)
        return insert(*args)  # type: ignore[arg-type]

    def fails_late(p: chunks.Prepared, k: int) -> object:
        if len(inserted) >= 3:
            raise DumpError("dump.json", "a bad entry found late")
        return chunk_task(p, k)

    monkeypatch.setattr(rank_plan, "chunk_task", fails_late)
    monkeypatch.setattr(write_chain, "_insert_chunks", counting)
    out = tmp_path / "out"
    with pytest.raises(DumpError, match="a bad entry found late"), dask.config.set(num_workers=1):
        api.graph_visualize(DATA / "multirank" / "target", DATA / "multirank" / "golden", output_path=out)
    assert len(inserted) >= 3
    assert not out.exists()


def test_a_write_after_the_file_was_removed_makes_no_new_file(tmp_path: Path) -> None:
    """A task still running when a failed run removed the temporary file: SQLite would begin a new
    empty one; the writer removes it and says why."""
    writer = VisdbWriter(tmp_path / "build_1.vis.db").suspend()
    writer.temporary.unlink()
    with pytest.raises(OutputError, match="its temporary file is gone"):
        writer.resume()
    assert list(tmp_path.iterdir()) == []


def test_an_insert_run_again_after_its_worker_was_lost_adds_nothing(tmp_path: Path) -> None:
    """A dask worker lost after an insert task committed: the task runs again from the same input
    (its writer as it was before); the rows it finds in the file are counted, not added twice."""
    import pickle

    from msprobe_dask.graph.chunks import chunk_task, prepare_build
    from msprobe_dask.graph.tasks import build_task

    g = build_task(str(DATA / "stat_mix" / "target"), 0, 0, False)
    p = prepare_build(g, "NPU", n=3)
    summary = tasks.summary_of(p)
    writer = VisdbWriter(tmp_path / "build_1.vis.db").suspend()
    written = write_chain._place_rank(write_chain.Written(writer), summary)
    for k in range(len(p.chunks)):
        before = pickle.dumps(written)  # what a worker running the task again gets
        write_chain._insert_chunks(pickle.loads(before), summary, chunk_task(p, k))
        written = write_chain._insert_chunks(pickle.loads(before), summary, chunk_task(p, k))
    path = written.writer.resume().complete([], ("build", "", "", "", 1, 0, "null", "[0]", "[0]"))
    with sqlite3.connect(path) as con:
        assert con.execute("SELECT count(*) FROM tb_nodes").fetchone()[0] == len(g.nodes)
    con.close()


@pytest.mark.parametrize("case", list(CASES))
def test_every_chain_task_run_again_after_it_committed_writes_the_same_file(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each task of the chain runs twice from the same input, as when its dask worker is lost after the
    task's work was done: a rank placed with its rows made whole (tensor mode), each insert, and the
    last task (which had named the file) do only what is left; the file is the one a run without
    losses writes."""
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 1)
    _one_write_task(case, tmp_path / "one.vis.db")
    for name in ("_place_rank", "_insert_chunks", "_end_write"):
        monkeypatch.setattr(write_chain, name, _twice(getattr(write_chain, name)))
    _chained(case, tmp_path / "chain.vis.db", "sync")
    assert diff_visdb(str(tmp_path / "chain.vis.db"), str(tmp_path / "one.vis.db")) == []
    assert rowids(tmp_path / "chain.vis.db") == rowids(tmp_path / "one.vis.db")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chain.vis.db", "one.vis.db"]


def _twice(task):  # type: ignore[no-untyped-def]
    def twice(*args):  # type: ignore[no-untyped-def]
        task(*args)
        return task(*args)

    return twice


CONFIG = ("build", "", "", "", 1, 0, "null", "[0]", "[0]")
Killed = Callable[[write_chain.Written, tasks.Summary, Any], None]


def _by_hand(path: Path, killed: Killed | None = None) -> None:
    """stat_mix's build written by hand, task by task. ``killed(written, summary, chunk)`` runs before
    each task (``chunk``: the insert's chunk result, None before the last task) in a child process,
    which is then killed as a dask worker's process can be, in the middle of its task."""
    from msprobe_dask.graph.chunks import chunk_task, prepare_build
    from msprobe_dask.graph.tasks import build_task

    g = build_task(str(DATA / "stat_mix" / "target"), 0, 0, False)
    p = prepare_build(g, "NPU", n=3)
    summary = tasks.summary_of(p)
    written = write_chain._place_rank(write_chain.Written(VisdbWriter(path).suspend()), summary)
    for chunk in [*(chunk_task(p, k) for k in range(len(p.chunks))), None]:
        if killed is not None:
            pid = os.fork()
            if pid == 0:
                try:
                    killed(written, summary, chunk)
                finally:
                    os.kill(os.getpid(), signal.SIGKILL)
            os.waitpid(pid, 0)
        if chunk is not None:
            written = write_chain._insert_chunks(written, summary, chunk)
    written.writer.resume().complete([], CONFIG)


def _same_file(killed: Killed, tmp_path: Path) -> None:
    _by_hand(tmp_path / "plain.vis.db")
    _by_hand(tmp_path / "killed.vis.db", killed)
    assert diff_visdb(str(tmp_path / "killed.vis.db"), str(tmp_path / "plain.vis.db")) == []
    assert rowids(tmp_path / "killed.vis.db") == rowids(tmp_path / "plain.vis.db")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["killed.vis.db", "plain.vis.db"]


def test_an_insert_killed_in_its_transaction_leaves_the_file_as_last_committed(tmp_path: Path) -> None:
    """Each insert task killed after SQLite wrote some of its pages (a cache too small for its rows, as
    a big rank's are): the task run again finds the file as the task before left it (the journal is
    rolled back) and adds all its rows (without the journal, the pages written stayed, the task found
    its first row there and the rows of the pages not written were lost)."""

    def spilled(written: write_chain.Written, summary: tasks.Summary, chunk: Any) -> None:
        if chunk is None:
            return
        writer = written.writer.resume()
        size = writer.temporary.stat().st_size
        writer._db.execute("PRAGMA cache_size=1")
        writer.add_once(
            [(h.graph_id, c.packed, NODES) for h, c in zip(summary.heads, chunk) if c is not None]
        )
        assert writer.temporary.stat().st_size > size  # (its pages were written)

    _same_file(spilled, tmp_path)


@pytest.mark.parametrize("where", ["commit", "named"])
def test_the_last_task_killed_after_its_commit_or_naming_runs_again_to_the_same_file(
    where: str, tmp_path: Path
) -> None:
    """The last task killed once it committed (before the file is named) or named the file (before its
    temporary name is removed): run again, it completes the file without a second tb_config row or
    index, and without refusing the name it gave the file itself."""

    def ending(written: write_chain.Written, summary: tasks.Summary, chunk: Any) -> None:
        if chunk is not None:
            return
        import msprobe_dask.writers.visdb as visdb

        def kill(*args: Any) -> None:
            os.kill(os.getpid(), signal.SIGKILL)

        setattr(visdb, "publish" if where == "commit" else "remove_temporary", kill)
        written.writer.resume().complete([], CONFIG)

    _same_file(ending, tmp_path)


@pytest.mark.parametrize("held_here", [False, True])
def test_a_rank_is_built_only_once_the_rank_window_before_it_is_written(
    held_here: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The memory of a run holds a window of (step, rank)s, not all of them: rank i's graphs are built
    after the rows of rank i - window are in the vis.db (``held_here``: as on local worker processes,
    graph/held.py, where each process lets go of the graphs of rank i - window as it holds rank i's)."""
    events: list[tuple[str, int, int]] = []
    build, insert = rank_plan.build_task, write_chain._insert_chunks

    def building(folder: str, step: int, rank: int, items: bool) -> object:
        events.append(("build", step, rank))
        return build(folder, step, rank, items)

    def inserting(prev: write_chain.Written, summary: tasks.Summary, *results: tuple) -> write_chain.Written:
        written = insert(prev, summary, *results)
        events.append(("inserted", summary.heads[0].step, summary.heads[0].rank))
        return written

    monkeypatch.setattr(rank_plan, "build_task", building)
    monkeypatch.setattr(held, "build_task", building)
    monkeypatch.setattr(write_chain, "_insert_chunks", inserting)
    _one_write_task("multirank compare", tmp_path / "one.vis.db")
    events.clear()
    tp, gp, opts = _sides("multirank compare")
    plan = rank_plan.rank_plan(tp, gp, opts, _spool(tmp_path) if held_here else None)
    writer = VisdbWriter(tmp_path / "chain.vis.db").suspend()
    with dask.config.set(num_workers=4):
        dask.compute(write_chain.chained_write(plan, writer, window=2), scheduler="threads")
    ranks = [(s.step, s.rank) for s in plan.sources]
    assert len(ranks) > 2
    for before, rank in zip(ranks, ranks[2:]):
        last_insert = max(i for i, e in enumerate(events) if e == ("inserted", *before))
        assert last_insert < events.index(("build", *rank))
    assert diff_visdb(str(tmp_path / "chain.vis.db"), str(tmp_path / "one.vis.db")) == []


def test_every_ranks_graphs_are_let_go_before_the_last_task(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The last ranks' releases, which no later build waits for, run before the last task's index
    builds (dask used to leave them out: their graphs, frozen and linked both ways, stayed to the end);
    and the items and lines the built nodes share are still empty afterwards (model.NO_ITEMS)."""
    from msprobe_dask.graph.model import NO_ITEMS, NO_LINES

    events: list[str] = []
    release, end = write_chain._release, write_chain._end_write

    def releasing(prepared: chunks.Prepared, finished: object) -> None:
        events.append("release")
        release(prepared, finished)

    def ending(*args: object) -> write_chain.Visualized:
        events.append("end")
        return end(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(write_chain, "_release", releasing)
    monkeypatch.setattr(write_chain, "_end_write", ending)
    tp, gp, opts = _sides("multirank compare")
    plan = rank_plan.rank_plan(tp, gp, opts)
    dask.compute(
        write_chain.chained_write(plan, VisdbWriter(tmp_path / "x.vis.db").suspend(), 2), scheduler="sync"
    )
    assert events == ["release"] * len(plan.sources) + ["end"]
    assert NO_ITEMS == {} and NO_LINES == []


@pytest.mark.parametrize("in_turn", [False, True])
def test_a_ranks_bench_graph_is_built_after_its_npu_graph_in_this_process(in_turn: bool) -> None:
    """Plan.in_turn (graph_visualize in this process): the Bench build waits for the NPU build; else
    (worker processes, a cluster) the two are built at once."""
    tp, gp, opts = _sides("multirank compare")
    plan = rank_plan.rank_plan(tp, gp, opts, in_turn=in_turn)
    source = plan.sources[0]
    graph = dict(plan.rank_tasks(source).prepared.__dask_graph__())
    npu, bench = (f"build-{source.step}-{source.rank}-{side}" for side in ("NPU", "Bench"))
    assert (npu in graph[bench].dependencies) is in_turn and bench not in graph[npu].dependencies


def test_a_ranks_bench_graph_is_built_on_a_worker_process_beside_its_npu_graph_apart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Plan.bench (a big input in this process, more than one CPU): the Bench build waits for no
    NPU build and runs its build on a worker process of its own (another pid), whose graph, unpickled
    here, is the one built here."""
    tp, gp, opts = _sides("multirank compare")
    plan = rank_plan.rank_plan(tp, gp, opts, bench_apart=True)
    source = plan.sources[0]
    laid_out = plan.rank_tasks(source)
    graph = dict(laid_out.prepared.__dask_graph__())
    npu, bench = (f"build-{source.step}-{source.rank}-{side}" for side in ("NPU", "Bench"))
    assert npu not in graph[bench].dependencies and bench not in graph[npu].dependencies
    build, pids = tasks.build_task, tmp_path / "pids"

    def recorded(*args: Any) -> Any:
        with pids.open("a") as f:
            f.write(f"{os.getpid()}\n")
        return build(*args)

    monkeypatch.setattr(tasks, "build_task", recorded)  # (before the fork: the worker records its pid)
    before = processes.direct_children()
    assert plan.bench is not None and plan.bench.to_build == 1
    with plan.bench.forked():  # (the worker forked now, gone once the last Bench graph laid out is back)
        (forked,) = processes.direct_children() - before
        (apart,) = dask.compute(laid_out.graphs[1], scheduler="sync")
        assert not processes.direct_children() - before and plan.bench.to_build == 0
    assert pids.read_text().split() == [str(forked)]
    here = build(source.folders[1], source.step, source.rank, False)

    def shape(g: Any) -> list[Any]:
        return [(n.id, n.type, n.parent and n.parent.id, n.stack, n.micro) for n in g.nodes.values()]

    assert shape(apart) == shape(here) and len(shape(here)) > 1
    assert dict(apart.data) == dict(here.data) and apart.root.id == here.root.id

@pytest.mark.parametrize("cpus", [1, 2])
def test_a_big_input_in_this_process_builds_its_bench_graphs_apart_on_more_than_one_cpu(
    cpus: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """run_setup: a big input in this process (IN_TURN_FROM_BYTES) has its Bench graphs built on a worker
    process with more than one CPU for this process's threads, after its NPU graphs with one."""
    from msprobe_dask.pipeline.scheduler import RunOptions

    monkeypatch.setattr(RunOptions, "threads", property(lambda self: cpus))
    monkeypatch.setattr(run_setup, "alone_in_process", lambda: True)  # (pytest's threads: see below)
    big = RunOptions(input_bytes=run_setup.IN_TURN_FROM_BYTES, holds_graphs=True, held_bytes=1 << 40)
    small = RunOptions(input_bytes=run_setup.IN_TURN_FROM_BYTES - 1)
    assert run_setup.big_here(None, big) and not run_setup.big_here(None, small)
    assert run_setup.builds_apart(None, big) is (cpus > 1)
    assert not run_setup.builds_apart(None, small) and not run_setup.builds_apart(object(), big)


def test_a_big_input_builds_in_turn_while_this_process_runs_another_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """run_setup.builds_apart: no worker is forked from this process while another thread runs (a Python
    caller's, a library's): a lock it held at the fork instant would be held for ever in the worker."""
    import threading

    from msprobe_dask.pipeline.scheduler import RunOptions

    monkeypatch.setattr(RunOptions, "threads", property(lambda self: 2))
    big = RunOptions(input_bytes=run_setup.IN_TURN_FROM_BYTES, holds_graphs=True, held_bytes=1 << 40)
    done = threading.Event()
    other = threading.Thread(target=done.wait)
    other.start()
    try:
        assert not processes.alone_in_process()
        assert run_setup.big_here(None, big) and not run_setup.builds_apart(None, big)
    finally:
        done.set()
        other.join()


@pytest.mark.parametrize("beside", [False, True])
def test_a_big_inputs_graphs_are_let_go_before_the_last_task(tmp_path: Path, beside: bool) -> None:
    """``released_beside`` (a small input in this process): the releases run beside the vis.db's last
    task; else (a big input: the index builds' peak would add to the graphs') before it."""
    tp, gp, opts = _sides("multirank compare")
    plan = rank_plan.rank_plan(tp, gp, opts)
    chain = write_chain.chained_write(
        plan, VisdbWriter(tmp_path / "x.vis.db").suspend(), released_beside=beside
    )
    graph = dict(chain.__dask_graph__())
    releases = {k for k in graph if str(k).startswith("release-")}
    assert len(releases) == len(plan.sources)
    assert releases.isdisjoint(graph["write-visdb"].dependencies) is beside
    assert ("released-too" in graph) is beside


def test_the_chain_holds_each_task_once(tmp_path: Path) -> None:
    """Its graph is laid out in time linear in the (step, rank)s: no layer holds copies of another's
    tasks (dask.delayed given a list of Delayeds optimizes the graph laid out so far into a layer of
    its own: 446 tasks for 71 with a window of 3, 24 s for 64 ranks, minutes for 256)."""
    tp, gp, opts = _sides("multirank compare")
    chain = write_chain.chained_write(
        rank_plan.rank_plan(tp, gp, opts), VisdbWriter(tmp_path / "x.vis.db").suspend(), 2
    )
    graph = chain.__dask_graph__()
    assert sum(len(layer) for layer in graph.layers.values()) == len(graph.to_dict())


def test_the_rank_window_is_one_more_than_the_local_processes_and_open_on_a_cluster() -> None:
    from msprobe_dask.pipeline.scheduler import RunOptions

    assert run_setup.rank_window(None, RunOptions()) == 2
    assert run_setup.rank_window(None, RunOptions(workers=3)) == 4
    assert run_setup.rank_window(None, RunOptions(address="tcp://127.0.0.1:8786")) == 0
    assert run_setup.rank_window(object(), None) == 0


def test_one_task_a_rank_only_with_two_ranks_or_more_a_local_worker_process() -> None:
    from msprobe_dask.pipeline.scheduler import RunOptions

    assert run_setup.one_task_a_rank(None, RunOptions(workers=2), 4)
    assert run_setup.one_task_a_rank(None, RunOptions(workers=1), 2)
    assert not run_setup.one_task_a_rank(None, RunOptions(workers=2), 3)
    assert not run_setup.one_task_a_rank(None, RunOptions(workers=1), 1)
    assert not run_setup.one_task_a_rank(None, RunOptions(), 8)  # (threads of this process)
    assert not run_setup.one_task_a_rank(None, RunOptions(address="tcp://127.0.0.1:8786"), 8)
    assert not run_setup.one_task_a_rank(object(), None, 8)


def test_a_spool_only_on_local_worker_processes_written_where_there_are_several(tmp_path: Path) -> None:
    """Where the tasks' results do not share (local worker processes) the run holds its big results in
    them and a spool folder of its own, written for the others where there are several; its rank
    window is the run's."""
    from msprobe_dask.pipeline.scheduler import RunOptions

    assert run_setup.spool_for(tmp_path, None, RunOptions()) is None
    assert run_setup.spool_for(tmp_path, None, RunOptions(address="tcp://127.0.0.1:8786")) is None
    assert run_setup.spool_for(tmp_path, object(), None) is None
    one, three = (run_setup.spool_for(tmp_path / "spool", None, RunOptions(workers=n)) for n in (1, 3))
    assert one is not None and three is not None and one.folder == str(tmp_path / "spool")
    assert not one.shared and three.shared
    assert three.window == run_setup.rank_window(None, RunOptions(workers=3))


def test_held_chunks_wait_for_the_write_chain_some_turns_back(tmp_path: Path) -> None:
    """On local worker processes (whose scheduler ignores priorities) a chunk task waits for the insert
    write_chain._chain_lag turns before its own (more turns with more than one worker process);
    elsewhere for nothing but its graphs."""
    tp, gp, opts = _sides("multirank compare")
    assert write_chain._chain_lag(None) == 0
    for i, shared in enumerate((None, False, True)):
        (tmp_path / str(i)).mkdir()
        spool = None if shared is None else _spool(tmp_path / str(i), shared)
        chain = write_chain.chained_write(
            rank_plan.rank_plan(tp, gp, opts, spool), VisdbWriter(tmp_path / f"{i}.vis.db").suspend(), 2
        )
        graph = dict(chain.__dask_graph__())
        inserts = [k for k in graph if str(k).startswith("insert-")]
        waits = {
            k: {d for d in graph[k].dependencies if str(d).startswith("insert-")}
            for k in graph
            if str(k).startswith("rows-")
        }
        if spool is None:
            assert not any(waits.values())
            continue
        lag = write_chain._chain_lag(spool)
        assert lag == (write_chain.CHAIN_LAG_SHARED if shared else write_chain.CHAIN_LAG)
        gated = {k: d for k, d in waits.items() if d}
        assert gated and all(len(d) == 1 for d in gated.values())
        assert lag <= len(waits) - len(gated) <= lag * write_chain.CHUNKS_PER_TURN
        assert {next(iter(d)) for d in gated.values()} <= set(inserts)


def test_the_chunk_tasks_run_in_the_write_chains_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each chunk task's priority is below every other task's and below those of the chunks the chain
    inserts before it (rank_plan.ROWS_ORDER): a worker makes its chunks in the chain's order, whatever dask's
    order of the graph."""
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 1)
    tp, gp, opts = _sides("multirank compare")
    plan = rank_plan.rank_plan(tp, gp, opts)
    chain = write_chain.chained_write(plan, VisdbWriter(tmp_path / "x.vis.db").suspend(), 2)
    priority = {}
    for layer in chain.__dask_graph__().layers.values():
        for key in layer:
            priority[str(key)] = (layer.annotations or {}).get("priority", 0)
    rows = [k for k in priority if k.startswith("rows-")]
    in_chain = sorted(
        rows,
        key=lambda k: (
            [s.name for s in plan.sources].index(k[5:].rsplit("-", 1)[0]),
            int(k.rsplit("-", 1)[1]),
        ),
    )
    assert len(rows) > 2 * len(plan.sources)
    assert [priority[k] for k in in_chain] == sorted((priority[k] for k in rows), reverse=True)
    assert len({priority[k] for k in rows}) == len(rows)
    assert max(priority[k] for k in rows) < min(p for k, p in priority.items() if k not in rows)


def test_the_vis_db_s_bytes_do_not_depend_on_the_layout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its indexes kept up to date by the inserts whatever the input's size, and its header's
    transaction counters set once it is complete: a big input in this process (its graphs built in
    turn, let go before the last task), a small one, and two worker processes (a commit an insert task)
    write the same file (the index pages of a big input differed, built at the end; the counters of
    the worker processes' run)."""
    from msprobe_dask.pipeline.scheduler import RunOptions

    monkeypatch.setattr(chunks, "CHUNK_BYTES", 1 << 12)
    tp, gp = DATA / "multirank" / "target", DATA / "multirank" / "golden"
    small = Path(api.graph_visualize(tp, gp, output_path=tmp_path / "small")).read_bytes()
    on_workers = api.graph_visualize(tp, gp, output_path=tmp_path / "workers", run=RunOptions(workers=2))
    monkeypatch.setattr(run_setup, "IN_TURN_FROM_BYTES", 0)  # (a big input: its graphs built in turn)
    big = api.graph_visualize(tp, gp, output_path=tmp_path / "big")
    assert Path(big).read_bytes() == small
    assert Path(on_workers).read_bytes() == small


@pytest.mark.parametrize("scheduler", ["sync", "threads"])
@pytest.mark.parametrize("case", ["multirank compare", "tensor mode (rows made whole)"])
def test_a_shared_writer_stays_open_through_the_chain_in_one_transaction(
    case: str, scheduler: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The chain's tasks in threads of this process (api.visualize's writer for a small input there:
    ``shared``): the one writer, open from task to task (it does not pickle meanwhile), and nothing
    committed before the last task; the file is that of one write task."""
    import pickle

    monkeypatch.setattr(chunks, "CHUNK_BYTES", 1)
    _one_write_task(case, tmp_path / "one.vis.db")
    tp, gp, opts = _sides(case)
    plan = rank_plan.rank_plan(tp, gp, opts)
    writer = VisdbWriter(tmp_path / "chain.vis.db", indexed_early=True, shared=True).suspend()
    assert writer.resume() is writer
    with pytest.raises(RuntimeError, match="suspended"):
        pickle.dumps(writer)
    commits = []
    insert = write_chain._insert_chunks

    def committed_rows(*args: Any) -> Any:
        with sqlite3.connect(writer.temporary) as db:  # (what another connection sees: the last commit)
            commits.append(db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0])
        return insert(*args)

    monkeypatch.setattr(write_chain, "_insert_chunks", committed_rows)
    dask.compute(write_chain.chained_write(plan, writer, window=2), scheduler=scheduler)
    assert commits and set(commits) == {0}
    assert diff_visdb(str(tmp_path / "chain.vis.db"), str(tmp_path / "one.vis.db")) == []
    assert rowids(tmp_path / "chain.vis.db") == rowids(tmp_path / "one.vis.db")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chain.vis.db", "one.vis.db"]


def test_graph_visualize_shares_its_writer_in_this_process_whatever_the_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared: list[bool] = []
    writer_class = api.VisdbWriter

    def seen(*args: Any, **kwargs: Any) -> VisdbWriter:
        shared.append(kwargs.get("shared", False))
        return writer_class(*args, **kwargs)

    monkeypatch.setattr(api, "VisdbWriter", seen)
    api.graph_visualize(DATA / "multirank" / "target", DATA / "multirank" / "golden", output_path=tmp_path)
    monkeypatch.setattr(run_setup, "IN_TURN_FROM_BYTES", 1)  # (a big input: its graphs built in turn)
    api.graph_visualize(
        DATA / "multirank" / "target", DATA / "multirank" / "golden", output_path=tmp_path / "big"
    )
    assert shared == [True, True]


def test_a_resumed_writer_leaves_the_result_it_came_from_sendable(tmp_path: Path) -> None:
    """An insert task resumes the writer of the task before, whose result dask may still send to
    another worker while this task writes (a step's finish runs where it likes): that result stays
    suspended and pickles; resumed in place, it failed to pickle and the worker waiting for it hung."""
    import pickle

    writer = VisdbWriter(tmp_path / "build_1.vis.db").suspend()
    resumed = writer.resume()
    assert pickle.loads(pickle.dumps(write_chain.Written(writer))).writer.temporary == writer.temporary
    resumed.suspend()
