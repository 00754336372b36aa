"""Python API of graph_visualize: a lazy Dask graph from input folders to vis.db rows and file.

::

    result = build_graphs("run/npu", "run/bench", overflow_check=True)   # rows, no I/O
    path = graph_visualize("run/npu", "run/bench", output_path="out")     # writes compare_{ts}.vis.db

Task graph (one task per box)::

    build(step, rank, NPU) --+                 +--> rows(step, rank, 0) --+
                             +--> prepare  ----+--> ...                   +--> finish(step, rank) --+
    build(step, rank, Bench)-+    (match)      +--> rows(step, rank, n-1)-+                         |
    ...                                                                            link (cross-rank) <--+
    place(0, 0) --> insert(0, 0, 0) --> ... --> insert(s, r, n-1) --> place(...) --> ...  --> write vis.db

A rows task makes one chunk of the (step, rank)'s rows (graph/chunks.py) and returns them packed; an
insert task adds them to the vis.db as soon as they are made, after the chunk before (_write_chain).
The build, prepare and finish tasks live in graph/tasks.py (the merge plan, graph/merge/plan.py, lays
them out too); this module lays out the graph and runs it.

Over 400 lines: the plan (which tasks, on which replica), the write chain and the choice of window and
replicas for the scheduler are one layout, read together when the graph changes; the write chain is the
next piece to move into a module of its own (its names would have to become public: the import contract
forbids private names across modules).
"""

from __future__ import annotations

import contextlib
import os
import pickle
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from msprobe_dask.dump import graph_layouts as layout
from msprobe_dask.dump.location import dump_path
from msprobe_dask.errors import DumpError, OutputError
from msprobe_dask.graph.chunks import OwnOrder, Prepared, chunk_count, chunk_task, join
from msprobe_dask.graph.dump_files import GraphSource
from msprobe_dask.graph.gcpause import rare_full_collections
from msprobe_dask.graph.model import Graph
from msprobe_dask.graph.rows import GraphHead, GraphRows, RowsChunk, read_back, stack_rows
from msprobe_dask.graph.tasks import (
    BENCH,
    NPU,
    Options,
    Part,
    VisResult,
    build_task,
    prepare_build_task,
    prepare_compare_task,
    run_summary,
    vis_result,
)
from msprobe_dask.pipeline.scheduler import RunOptions, computing
from msprobe_dask.summary.model import RunSummary
from msprobe_dask.writers.atomic import output_dir, withdrawn_if_failed
from msprobe_dask.writers.visdb import NODES, STACKS, GraphTables, VisdbWriter, write_visdb

if TYPE_CHECKING:  # (the merge modules are imported only for a merge)
    from msprobe_dask.graph.merge.strategy import ParallelParams

REPLICA_CHUNKS = 8
"""Chunk tasks per replica of a Prepared at least (Plan.replicas): a replica costs a prepare and a
graph sent from the process that built it (measured on one rank of 50,000 entries: 0.2 s and 0.4 s of
CPU, against 3.2 s for the rows of its 32 chunks)."""

INSERT_PRIORITY = 1
SEND_PRIORITY = 2  # a graph pickled for the other replicas (_sent) before any other task of its worker
CHUNKS_PER_TURN = 2
"""The replicas make a (step, rank)'s chunks in runs of CHUNKS_PER_TURN (replica_of), and one insert task
writes a run's rows, before the chunk tasks waiting on its worker (their priority is 0): the write
chain, which reaches a worker only as that worker ends a task, then inserts more chunks a step than are
made meanwhile, and catches up with them. With an insert a chunk, chunks taken in turn, most inserts
waited for the last chunk (one rank of 50,000 entries on two workers: 12 of 32, 0.9 s, after it)."""

IN_TURN_FROM_BYTES = 64 << 20
"""A (step, rank)'s two graphs are built in turn (Plan.in_turn) in this process from this many bytes of
dump.json in the run; below, at once: each side's reading of its dump.json without the GIL then runs
beside the other's build. The 96-block transformer (2 x 6.3 MB), in this process under chrt -r 1, 10
interleaved runs each: compute's start to the prepare's end 94.4 -> 86.0 ms (median), peak RSS the
same (101-106 MiB)."""

ROWS_ORDER = 1 << 32
"""The chunk tasks run in the write chain's order (their priority: -(place of the (step, rank) x ROWS_ORDER
+ chunk + 1), below every other task's): dask's order of the graph alone would have a worker take a
rank's chunks out of order (one rank with its order-* tasks; the ranks after the first of a tree), and
the chain wait for the chunks it skipped."""

# ------------------------------------------------------------------------------------ tasks


class Summary(NamedTuple):
    """What joining the chunks and placing the rows in the vis.db need of a Prepared (small: made
    where the Prepared is)."""

    heads: list[GraphHead]
    done: list[GraphRows] | None
    mode: str
    counts: list[tuple[int, int]]  # each graph's tb_nodes and tb_stack rows


def _summary(p: Prepared) -> Summary:
    return Summary(p.heads(), p.done, p.mode, p.row_counts())


def _joined(summary: Summary, results: list[Any]) -> Part:
    heads, done, mode, _ = summary
    return (done if done is not None else join(heads, results)), mode, heads[0].micro_steps


def _joined_chunks(summary: Summary, *results: Any) -> Part:
    return _joined(summary, list(results))


@dataclass(slots=True)
class RankTasks:
    """The lazy pieces of one (step, rank): its Prepared (one or more replicas, see Plan.replicas), its
    summary and chunk tasks."""

    name: str  # "{step}-{rank}"
    prepared: list[Any]
    summary: Any
    chunks: list[Any]
    workers: list[int | None]  # the LocalCluster worker of each replica (None: where dask chooses)

    def on_replica(self, i: int) -> contextlib.AbstractContextManager[Any]:
        """Tasks laid out inside run on the worker of replica ``i`` (see Plan.replicas)."""
        return _on_worker(self.workers[i])

    def finish(self) -> Any:
        """The lazy Part, joined from the chunk tasks' results."""
        import dask

        return dask.delayed(_joined_chunks)(self.summary, *self.chunks, dask_key_name=f"finish-{self.name}")


def _on_worker(worker: int | None) -> contextlib.AbstractContextManager[Any]:
    """Tasks laid out inside run on the run's LocalCluster worker named ``worker`` (0, 1, ...), or on
    another if that one is gone (a lost worker's successor gets a new address); None: where dask
    chooses. See Plan.replicas."""
    if worker is None:
        return contextlib.nullcontext()
    import dask

    return dask.annotate(workers=[worker], allow_other_workers=True)


def replica_of(k: int, replicas: int) -> int:
    """The replica of a Prepared that chunk ``k`` is made from: runs of CHUNKS_PER_TURN chunks, taken by
    the replicas in turn."""
    return k // CHUNKS_PER_TURN % replicas


def turns(n: int) -> list[tuple[int, int]]:
    """The [start, end) of the chunks each insert task writes, of ``n``: runs of CHUNKS_PER_TURN, but the
    last chunk alone, so that what follows the last chunk task is the insert of its rows only (one rank
    of 7,716 entries a side in this process: that insert took 11 ms with the chunk before it)."""
    starts = [*range(0, n - 1, CHUNKS_PER_TURN), n - 1] if n > 1 else [0]
    return list(zip(starts, starts[1:] + [n]))


def _rank_tasks(prepared: list[Any], n: int, name: str, workers: list[int | None], first: int) -> RankTasks:
    """``n`` chunk tasks, chunk k made from replica replica_of(k) of the Prepared, on the worker of
    that replica (``workers``), before the chunks of later (step, rank)s and after those of earlier
    ones (``first``: its place in the write order), as the write chain inserts them (ROWS_ORDER)."""
    import dask

    chunks = []
    for k in range(n):
        i = replica_of(k, len(prepared))
        with _on_worker(workers[i]), dask.annotate(priority=-(first * ROWS_ORDER + k + 1)):
            chunks.append(dask.delayed(chunk_task)(prepared[i], k, dask_key_name=f"rows-{name}-{k}"))
    return RankTasks(
        name, prepared, dask.delayed(_summary)(prepared[0], dask_key_name=f"summary-{name}"), chunks, workers
    )


def _chunks_for(*folders: str) -> int:
    return chunk_count(sum(_size(GraphSource(f).dump_json) for f in folders))


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0  # the build task gives the error


def _link_task(distributed: bool, overflow: bool, *ranks: Part) -> list[Part]:
    parts = list(ranks)
    if distributed:
        from msprobe_dask.graph.distributed import link_distributed

        link_distributed([g for rows, _, _ in parts for g in rows], overflow)
    return parts


class Visualized(NamedTuple):
    """What a graph_visualize run wrote, and its summary (made from the graphs' rows, as they are in
    the vis.db: summary.nodes)."""

    path: str
    summary: RunSummary | None = None  # None: no vis.db (a merge's json files)
    unreadable: tuple[str, ...] = ()  # why rows' tensor files could not be read, in node order


def _visualized(path: str, result: VisResult) -> Visualized:
    summary, unreadable = run_summary(result.graphs)
    return Visualized(path, summary, unreadable)


def _write_task(result: VisResult, path: str) -> Visualized:
    """Write the vis.db: the graphs' chunks inserted in write order, in one transaction, indexes last
    (writers/visdb.py)."""
    return _visualized(write_visdb(path, [_tables(g) for g in result.graphs], result.config), result)


def _json_task(steps: list[list[Graph]], out: str) -> Visualized:
    """A merge's graphs written as dump folders (no vis.db, no summary)."""
    from msprobe_dask.graph.merge.export_json import write_merged_json

    return Visualized(write_merged_json(steps, out))


class Written(NamedTuple):
    """A step of the vis.db's write chain: the suspended writer."""

    writer: VisdbWriter


def _place_rank(prev: Written, summary: Summary) -> Written:
    """Place the (step, rank)'s graphs (a rank whose rows were made whole: add them)."""
    writer = prev.writer.resume()
    if summary.done is not None:
        writer.add_graphs([_tables(g) for g in summary.done])
    else:
        for head, (rows, stacks) in zip(summary.heads, summary.counts):
            writer.place(head.graph_id, rows)
            writer.place(head.graph_id, stacks, STACKS)
    return Written(writer.suspend())


def _insert_chunks(prev: Written, summary: Summary, *results: tuple[RowsChunk | None, ...]) -> Written:
    """Insert chunk tasks' rows (``results``, in chunk order) in one transaction."""
    writer = prev.writer.resume()
    parts = []
    for result in results:
        for head, chunk in zip(summary.heads, result):
            if chunk is not None:
                if chunk.packed is None:
                    raise RuntimeError(f"graph {head.graph_id}: a chunk's rows came unpacked")
                parts.append((head.graph_id, chunk.packed, NODES))
                if chunk.stacks:
                    parts.append((head.graph_id, stack_rows(head.graph_id, chunk), STACKS))
    writer.add_once(parts)
    return Written(writer.suspend())


def _light(result: tuple[RowsChunk | None, ...], linked: bool) -> tuple[RowsChunk | None, ...]:
    """A chunk task's result without its rows and stacks (what joining the chunks needs: made where
    the chunk is, so that its rows go only to their insert), and without its communication rows
    unless they are ``linked`` across ranks (Plan.linked: else nothing changes them after their
    insert; held to the run's end, they would be 0.45 GB of one rank of 1,001,000 entries a side)."""
    return tuple(
        None if c is None else replace(c, packed=None, stacks=[], nodes=c.nodes if linked else [])
        for c in result
    )


def _release(prepared: Prepared, written: Written) -> None:
    """The (step, rank)'s rows are written (``written``): its graphs are let go (chunks.Prepared.release),
    where the replica ``prepared`` is."""
    prepared.release()


def _end_write(
    prev: Written,
    parts: list[Part],
    compare: bool,
    opts: Options,
    ranks: list[int],
    steps: list[int],
    *released: None,
) -> Visualized:
    """``released``: with a big input (_write_chain's ``released_beside`` False), every (step, rank)'s
    graphs let go (_release) before this task's own work, whose index builds' peak would add to theirs
    (one rank of 1,001,000 entries a side in this process: 1,535 MiB with them let go beside it, 1,441
    MiB before it)."""
    result = vis_result(parts, compare, opts, ranks, steps)
    path = prev.writer.resume().complete([_tables(g) for g in result.graphs], result.config)
    return _visualized(path, result)


def _released_too(done: Visualized, *released: None) -> Visualized:
    """``done`` once every (step, rank)'s graphs are let go too (``released``: _release): else dask
    would not run the releases that no later build waits for, and those graphs, frozen and linked
    both ways (graph/gcpause.py), would stay until the run ends. With a small input in this process,
    beside the vis.db's last task (_end_write), whose index builds leave the GIL to them (one rank of
    7,716 entries a side: its release, 4 ms, ran alone between the last insert and that task)."""
    return done


def _tables(g: GraphRows) -> GraphTables:
    return GraphTables(g.graph_id, g.n_rows, g.nodes, g.stacks, g.packed, g.apart)


def _read_back(result: VisResult) -> VisResult:
    for g in result.graphs:
        read_back(g)
    return result


# ------------------------------------------------------------------------------------ graph


class RankSource(NamedTuple):
    """One (step, rank) of the input: its dump folders (NPU, and Bench in a compare)."""

    step: int
    rank: int
    folders: tuple[str, ...]

    @property
    def name(self) -> str:
        return f"{self.step}-{self.rank}"


@dataclass(slots=True)
class Plan:
    """The inputs' (step, rank)s in write order, and what the graph of each needs."""

    sources: list[RankSource]
    opts: Options
    split: bool  # cut each graph's rows into chunk tasks (see _rank_plan)
    compare: bool
    linked: bool  # rank folders: communication nodes are linked across ranks
    rank_list: list[int]
    step_list: list[int]
    # each (step, rank)'s graphs prepared by this many tasks, each in the process that makes its share of
    # the chunks: a prepared pair of graphs (about twice dump.json's size) is not sent from process to
    # process, only each side's graph, built once, to the processes that prepare the pair (_replicas).
    # With more than one, each replica's tasks (its prepare, its chunks and the inserts of their rows)
    # are placed on a worker of their own (RankTasks.workers): left to dask, an insert went to the less
    # busy worker, which fetched the chunk's rows first (18 of 32 on one rank of 50,000 entries)
    replicas: int = 1
    # in this process (threads that share one GIL), for a big input (IN_TURN_FROM_BYTES), a (step,
    # rank)'s Bench graph is built once its NPU graph is, not beside it: their peaks do not add up (both
    # sides of one rank of 200,200 entries: 312 MiB of peak RSS, against 428-474 MiB at once)
    in_turn: bool = False

    def rank_tasks(self, source: RankSource, after: Any = None) -> RankTasks:
        """The lazy tasks of one (step, rank): its graphs built (only once ``after`` is computed, if
        given), prepared and cut into chunk tasks."""
        import dask

        s, r, folders = source
        n = _chunks_for(*folders) if self.split else 1
        name = source.name
        replicas = max(1, min(self.replicas, n // REPLICA_CHUNKS))
        first = self.sources.index(source)  # (the ranks' first replicas on different workers)
        workers: list[int | None] = [None]
        if replicas > 1:
            workers = [(first + i) % self.replicas for i in range(replicas)]
        graphs: list[Any] = []
        for j, (f, side) in enumerate(zip(folders, (NPU, BENCH))):  # (each side on a worker of its own)
            before = (*(after or ()), *(graphs if self.in_turn else ()))
            with _on_worker(workers[j % replicas]):
                graphs.append(
                    dask.delayed(_build_after, pure=True)(
                        f, s, r, *before, dask_key_name=f"build-{s}-{r}-{side}"
                    )
                )
        sent = []  # each graph pickled where it was built, for the replicas on the other workers
        for j, (g, side) in enumerate(zip(graphs, (NPU, BENCH))):
            with _on_worker(workers[j % replicas]), dask.annotate(priority=SEND_PRIORITY):
                sent.append(
                    dask.delayed(_sent)(g, dask_key_name=f"send-{s}-{r}-{side}") if replicas > 1 else g
                )
        if replicas > 1 and len(graphs) == 2:  # (a pair's graphs ordered where they were built: OwnOrder)
            for j, side in enumerate((NPU, BENCH)):
                with _on_worker(workers[j % replicas]):
                    graphs[j] = dask.delayed(OwnOrder)(graphs[j], dask_key_name=f"order-{s}-{r}-{side}")
        prepared = []
        for i in range(replicas):
            mine = [
                g if j % replicas == i else sent[j] for j, g in enumerate(graphs)
            ]  # (the others' pickled)
            with _on_worker(workers[i]):
                prepared.append(
                    dask.delayed(_prepared)(
                        self.opts, folders[0], n, i == 0, *mine, dask_key_name=f"prepare-{name}-{i}"
                    )
                )
        return _rank_tasks(prepared, n, name, workers, first)

    def parts(self, finished: list[Any]) -> Any:
        """The lazy list of each (step, rank)'s Part (``finished``), linked across ranks."""
        import dask

        # (each Part an argument of its own: a list of Delayeds would have dask optimize the whole graph
        # laid out so far, once per list: quadratic in the ranks)
        return dask.delayed(_link_task)(
            self.linked, self.opts.overflow_check, *finished, dask_key_name="link-ranks"
        )


def _build_after(folder: str, step: int, rank: int, *after: Any) -> Graph:
    """Build a graph without its items (the chunk tasks parse them), once ``after`` is done."""
    return build_task(folder, step, rank, False)


def _sent(g: Graph) -> bytes:
    """A graph pickled (flat: model.Graph.__reduce__) by a task of its own, on the worker that built it,
    for a replica prepared on another worker (Plan.rank_tasks). Left to dask, the graph is pickled only
    once that worker asks for it, in the event loops of both: one rank of 50,050 entries a side, from a
    graph built to its replica received (each worker receiving the other's), 0.16-0.34 s of wall time
    against 0.05-0.15 s with the bytes made at once and loaded by the task that reads them. Pickled as
    dask pickles a task's result (cloudpickle: by value what pickle takes by name only where it must)."""
    import cloudpickle

    return cloudpickle.dumps(g, protocol=pickle.HIGHEST_PROTOCOL)


def _received(g: Graph | bytes | OwnOrder) -> Graph:
    if isinstance(g, OwnOrder):
        return g.graph
    return pickle.loads(g) if isinstance(g, bytes) else g


def _prepared(
    opts: Options,
    where: str,
    n: int,
    whole: bool,
    npu: Graph | bytes | OwnOrder,
    bench: Graph | bytes | OwnOrder | None = None,
) -> Prepared:
    """The graph (a build) or the pair (a compare) prepared for ``n`` chunk tasks (``whole``: see
    tasks.prepare_compare_task); a graph built on another worker comes pickled (_sent), one built on
    this worker ordered already (OwnOrder)."""
    if bench is None:
        return prepare_build_task(_received(npu), opts, n)
    own = npu if isinstance(npu, OwnOrder) else bench if isinstance(bench, OwnOrder) else None
    return prepare_compare_task(_received(npu), _received(bench), opts, where, n, whole, own)


def _rank_plan(
    target: str | os.PathLike[str],
    golden: str | os.PathLike[str] | None,
    opts: Options,
    split: bool = True,
    replicas: int = 1,
    in_turn: bool = False,
) -> Plan:
    """The Plan of the inputs. ``split``: cut each graph's rows into chunk tasks (else one task each:
    where the tasks reading a result would each get it pickled, see RunOptions.shares_results);
    ``replicas``, ``in_turn``: see Plan."""
    tp = dump_path(target)
    if golden is None:
        kind, sources = layout.build_sources(tp)
        ranks_in = [RankSource(step, rank, (folder,)) for step, rank, folder in sources]
        ranks = sorted({r for _, r, _ in sources}, key=[r for _, r, _ in sources].index)
    else:
        kind, pairs = layout.compare_sources(tp, dump_path(golden))
        ranks_in = [RankSource(step, rank, (a, b)) for step, rank, a, b in pairs]
        ranks = list(dict.fromkeys(r for _, r, _, _ in pairs))
    if not ranks_in:
        raise DumpError(target, "holds no dump to visualize")
    steps = sorted({src.step for src in ranks_in}) if kind == "steps" else [0]
    files = kind == "files"
    return Plan(
        ranks_in,
        opts,
        split,
        golden is not None,
        not files,
        [0] if files else ranks,
        steps,
        replicas,
        in_turn,
    )


def _plan(
    target: str | os.PathLike[str],
    golden: str | os.PathLike[str] | None,
    opts: Options,
    split: bool = True,
    replicas: int = 1,
):
    """(lazy VisResult, compare?) for the inputs (``split``, ``replicas``: see _rank_plan)."""
    import dask

    plan = _rank_plan(target, golden, opts, split, replicas)
    parts = plan.parts([plan.rank_tasks(src).finish() for src in plan.sources])
    args = (plan.compare, opts, plan.rank_list, plan.step_list)
    return dask.delayed(vis_result)(parts, *args, dask_key_name="vis-result"), plan.compare


def _write_chain(
    plan: Plan, writer: VisdbWriter, window: int = 0, kept: bool = False, released_beside: bool = False
) -> Any:
    """The lazy vis.db written by a chain of tasks: each (step, rank)'s graphs placed in write order,
    then each chunk's rows inserted as soon as the chunk is made and the one before it is in (the rows
    and their rowids are those of one write task: VisdbWriter); the last task sets the linked
    communication cells and tb_config, builds the indexes and renames the file. A chunk's rows are
    thus written while later chunks are made, and dropped once written. ``writer``: the vis.db begun
    (suspended) by the run's own process, so that no task creates a file that could outlive a failed
    run. ``window`` > 0: a (step, rank)'s graphs are built only once the rows of the ``window``-th
    (step, rank) before it are written and its graphs let go (_release), so that at most ``window`` of
    them are held at a time. ``kept``: only the releases that a later build waits for are made, the
    last graphs kept to the run's end (_kept_to_the_end): their releases would be the last tasks but
    one (one rank of 50,050 entries a side on two workers: 0.03 s of each worker's CPU after the last
    insert, its writer sent to the other worker first). ``released_beside``: the releases run beside
    the last task (_released_too), not before it (_end_write)."""
    import dask

    written: Any = Written(writer)
    finished: list[Any] = []
    released: list[Any] = []  # each (step, rank)'s graphs let go once its rows are written
    for i, source in enumerate(plan.sources):
        r = plan.rank_tasks(source, released[i - window] if 0 < window <= i else None)
        written = dask.delayed(_place_rank)(written, r.summary, dask_key_name=f"place-{r.name}")
        for k, end in turns(len(r.chunks)):  # (a turn's chunks: made by one replica)
            turn = r.chunks[k:end]
            with r.on_replica(replica_of(k, len(r.prepared))), dask.annotate(priority=INSERT_PRIORITY):
                written = dask.delayed(_insert_chunks)(
                    written, r.summary, *turn, dask_key_name=f"insert-{r.name}-{k}"
                )
        releases = []
        if not kept or i + window < len(plan.sources):  # (else no build waits for them)
            for k, p in enumerate(r.prepared):
                with r.on_replica(k):
                    releases.append(dask.delayed(_release)(p, written, dask_key_name=f"release-{r.name}-{k}"))
        released.append(releases)
        finished.append(_finish_early(r, plan.linked))
    args = (plan.compare, plan.opts, plan.rank_list, plan.step_list)
    every = [] if kept else [release for releases in released for release in releases]
    if kept or not released_beside:
        return dask.delayed(_end_write)(
            written, plan.parts(finished), *args, *every, dask_key_name="write-visdb"
        )
    end = dask.delayed(_end_write)(written, plan.parts(finished), *args, dask_key_name="write-visdb")
    return dask.delayed(_released_too)(end, *every, dask_key_name="released-too")


def _finish_early(r: RankTasks, linked: bool) -> Any:
    """The lazy Part of a (step, rank) written by the chain, joined from its chunks made (without their
    rows, _light) rather than inserted: linking across ranks and joining the summary need only those,
    and run while the last inserts are written (one rank of 50,000 entries on two workers: 0.3-0.5 s
    of inserts after the last chunk). It is made on a worker that does not insert the last turn."""
    import dask

    lights = []
    for k, chunk in enumerate(r.chunks):
        with r.on_replica(replica_of(k, len(r.prepared))), dask.annotate(priority=INSERT_PRIORITY):
            lights.append(dask.delayed(_light)(chunk, linked, dask_key_name=f"light-{r.name}-{k}"))
    with r.on_replica((replica_of(len(r.chunks) - 1, len(r.prepared)) + 1) % len(r.prepared)):
        return dask.delayed(_joined_chunks)(r.summary, *lights, dask_key_name=f"finish-{r.name}")


def _any_plan(
    target: str | os.PathLike[str],
    golden: str | os.PathLike[str] | None,
    opts: Options,
    parallel: Sequence[ParallelParams] | None,
    json_output: bool = False,
    split: bool = True,
    replicas: int = 1,
):
    """The merge plan when ``parallel`` is given and the input has rank folders, else ``_plan``."""
    merged = _merged(target, golden, opts, parallel, json_output)
    return merged or _plan(target, golden, opts, split, replicas)


def _merged(
    target: str | os.PathLike[str],
    golden: str | os.PathLike[str] | None,
    opts: Options,
    parallel: Sequence[ParallelParams] | None,
    json_output: bool,
):
    """(lazy VisResult, compare?) of the merge plan when ``parallel`` is given and the input has rank
    folders, else None."""
    if not parallel:
        return None
    from msprobe_dask.graph.merge.plan import merge_plan

    result, compare = merge_plan(target, golden, opts, list(parallel), json_output)
    return (result, compare) if result is not None else None


def _graph_run(
    run: RunOptions | None, target: str | os.PathLike[str], golden: str | os.PathLike[str] | None
) -> RunOptions:
    """``run`` for a graph of the inputs: its results are big and read by many tasks
    (RunOptions.big_shared_results), and the size of its dump.json files (unless given) chooses where
    it runs (pipeline.scheduler.computing)."""
    run = run or RunOptions()
    size = run.input_bytes or _input_bytes(target, golden)
    return replace(run, big_shared_results=True, input_bytes=size)


def _input_bytes(target: str | os.PathLike[str], golden: str | os.PathLike[str] | None) -> int:
    tp = dump_path(target)
    if golden is None:
        return sum(_size(GraphSource(f).dump_json) for _, _, f in layout.build_sources(tp)[1])
    pairs = layout.compare_sources(tp, dump_path(golden))[1]
    return sum(_size(GraphSource(a).dump_json) + _size(GraphSource(b).dump_json) for _, _, a, b in pairs)


def _rank_window(client: Any, run: RunOptions | None) -> int:
    """How many (step, rank)s a run in this machine holds at a time (0: no bound, on a cluster): one
    more than there are processes working, so that one is built while the others' rows are made."""
    if client is not None or (run and run.address):
        return 0
    return max(1, (run or RunOptions()).local_processes) + 1


def _kept_to_the_end(client: Any, run: RunOptions | None) -> bool:
    """Whether the graphs that no later build waits for are kept to the run's end rather than let go by
    tasks of their own (_write_chain): where the processes that hold them end with the run (its own
    LocalCluster) and its last task has no indexes to build beside them (_index_early)."""
    local = client is None and run is not None and not run.address and run.local_processes > 0
    return local and _index_early(client, run)


def _splits(client: Any, run: RunOptions | None) -> bool:
    """Whether the graphs' rows are cut into chunk tasks where the graph runs (see _plan)."""
    return client is not None or (run or RunOptions()).shares_results


def _replicas(client: Any, run: RunOptions | None) -> int:
    """How many replicas of a (step, rank)'s Prepared its chunk tasks are made from (Plan.replicas): one
    per local worker process, whose LocalCluster runs each chunk task where its replica is
    (scheduler.LOCAL_CLUSTER_SCHEDULER); one for threads of this process, which share it, and on a
    cluster, whose scheduler sends a rank's chunk tasks to every worker (a group of tasks with few
    inputs is placed on free workers: each fetches the Prepared once)."""
    return 1 if client is not None else max(1, (run or RunOptions()).local_processes)


def _index_early(client: Any, run: RunOptions | None) -> bool:
    """Whether the vis.db's indexes are made with its tables and kept up to date by the write chain's
    inserts (VisdbWriter's ``indexed_early``), rather than built by its last task: where the chunks
    are made in more than one process (local worker processes, a cluster), that task would build them
    alone, the other processes idle, while each insert's share runs beside their chunk tasks. So too
    in this process for an input below IN_TURN_FROM_BYTES on 2 CPUs or more: the chunk tasks, one after
    the other on the GIL, leave the other thread to the inserts, which run in SQLite without the GIL
    (T: 7,716 entries a side, the 7 index builds after the last chunk task took 55-60 ms alone; kept up
    to date, the inserts take +85 ms of CPU beside the chunks, the time after the last chunk task
    75 -> 39 ms). A big input in this process builds them at the end (its graphs in turn; a rank of
    200,200 entries a side: +1.15 s of 19.3 s kept up to date)."""
    run = run or RunOptions()
    if client is not None or run.address is not None or _replicas(client, run) > 1:
        return True
    return run.in_this_process and run.input_bytes < IN_TURN_FROM_BYTES and run.threads > 1


def _compute(obj: Any, client: Any = None, run: RunOptions | None = None) -> Any:
    """On ``client`` if given, else where ``run`` says (see pipeline.scheduler)."""
    if client is not None:
        return client.compute(obj).result()
    with rare_full_collections(), computing(run or RunOptions()) as compute:
        (value,) = compute([obj])
        return value


def build_graphs(
    target: str | os.PathLike[str],
    golden: str | os.PathLike[str] | None = None,
    *,
    overflow_check: bool = False,
    fuzzy_match: bool = False,
    layer_mapping: str | bool | None = None,
    client: Any = None,
    parallel: Sequence[ParallelParams] | None = None,
    run: RunOptions | None = None,
) -> VisResult:
    """Build (and compare) the graphs; return the rows a vis.db would hold, without writing anything.
    ``parallel``: merge each side's rank graphs first (see graph_visualize). ``client``: a dask Client
    to compute on; otherwise ``run`` chooses the scheduler, workers and progress reporting."""
    opts = Options(overflow_check, fuzzy_match, layer_mapping)
    run = run if client is not None else _graph_run(run, target, golden)
    result, _ = _any_plan(
        target, golden, opts, parallel, split=_splits(client, run), replicas=_replicas(client, run)
    )
    return _read_back(_compute(result, client, run))


def output_name(compare: bool, ts: str | None = None) -> str:
    ts = ts or time.strftime("%Y%m%d%H%M%S", time.localtime())
    return f"{'compare' if compare else 'build'}_{ts}.vis.db"


def visualize(
    target: str | os.PathLike[str],
    golden: str | os.PathLike[str] | None = None,
    *,
    output_path: str | os.PathLike[str],
    overflow_check: bool = False,
    fuzzy_match: bool = False,
    layer_mapping: str | bool | None = None,
    tensor_log: bool = False,
    client: Any = None,
    parallel: Sequence[ParallelParams] | None = None,
    json_output: bool = False,
    run: RunOptions | None = None,
) -> Visualized:
    """Build the graphs and write ``build_{ts}.vis.db`` / ``compare_{ts}.vis.db`` into ``output_path``.

    ``parallel`` (one ParallelParams per side) merges the rank graphs of each side first (§6); with
    ``json_output`` a merge build writes ``step{s}/rank{r}/{construct,dump,stack}.json`` instead."""
    import dask

    ts = time.strftime("%Y%m%d%H%M%S", time.localtime())
    out = Path(output_path)
    if out.exists() and not out.is_dir():
        raise OutputError(out, "is not a folder")
    json_files = bool(parallel and json_output)
    opts = Options(overflow_check, fuzzy_match, layer_mapping, tensor_log)
    run = run if client is not None else _graph_run(run, target, golden)
    split, replicas = _splits(client, run), _replicas(client, run)
    merged = _merged(target, golden, opts, parallel, json_output)
    here = client is None and run is not None and run.in_this_process
    in_turn = here and run is not None and run.input_bytes >= IN_TURN_FROM_BYTES  # (Plan.in_turn)
    plan = (
        _rank_plan(target, golden, opts, split, replicas, in_turn)
        if merged is None and not json_files
        else None
    )
    if plan is None:
        result, compare = merged or _plan(target, golden, opts, split, replicas)
    else:
        compare = plan.compare
    path = out / output_name(compare, ts)
    written: Any = None  # with a plan, the rows written chunk by chunk (_write_chain)
    if json_files:
        written = dask.delayed(_json_task)(result, str(out), dask_key_name="write-json")
    elif plan is None:
        written = dask.delayed(_write_task)(result, str(path), dask_key_name="write-visdb")
    # a bad input leaves nothing behind, not even the folders we made; a stopped run no vis.db
    with output_dir(out), withdrawn_if_failed(path):
        if plan is None:
            return _compute(written, client, run)
        writer = VisdbWriter(path, _index_early(client, run), shared=here and not in_turn).suspend()
        try:
            window, kept = _rank_window(client, run), _kept_to_the_end(client, run)
            chain = _write_chain(plan, writer, window, kept, released_beside=here and not in_turn)
            return _compute(chain, client, run)
        finally:  # (named when complete, and closed; a failed run leaves nothing, its file closed)
            writer.abort()


def graph_visualize(
    target: str | os.PathLike[str], golden: str | os.PathLike[str] | None = None, **options: Any
) -> str:
    """``visualize``'s path: the ``build_{ts}.vis.db`` / ``compare_{ts}.vis.db`` written into
    ``output_path`` (or, for a merge's json files, the folder)."""
    return visualize(target, golden, **options).path
