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
them out too); this module lays out the graph and runs it. On local worker processes (dask's
processes scheduler, whose tasks' results all pass through the run's own process) the graphs, the
prepared pair and the chunks' rows stay in the worker processes and the run's spool folder, and only
their names travel (graph/held.py: Plan.spool); there is then no prepare task, each worker prepares
the pair for its chunk tasks.

Over 400 lines: the plan, the write chain and the choice of window for the scheduler are one layout,
read together when the graph changes; the write chain is the next piece to move into a module of its
own (its names would have to become public: the import contract forbids private names across modules).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from msprobe_dask.dump import graph_layouts as layout
from msprobe_dask.dump.location import dump_path
from msprobe_dask.errors import DumpError, OutputError, cannot
from msprobe_dask.graph.chunks import Prepared, chunk_count, chunk_task
from msprobe_dask.graph.dump_files import GraphSource
from msprobe_dask.graph.gcpause import rare_full_collections
from msprobe_dask.graph.held import (
    RUN,
    Held,
    PairOf,
    Spool,
    held_build,
    held_chunk,
    held_finish,
    held_summary,
    hold,
    light_of,
    rows_of,
    value_of,
    whole_of,
)
from msprobe_dask.graph.model import Graph
from msprobe_dask.graph.rows import GraphRows, read_back, stack_rows
from msprobe_dask.graph.tasks import (
    BENCH,
    NPU,
    Options,
    Part,
    Summary,
    VisResult,
    build_task,
    joined,
    prepare_task,
    run_summary,
    summary_of,
    vis_result,
)
from msprobe_dask.pipeline.scheduler import RunOptions, computing
from msprobe_dask.summary.model import RunSummary
from msprobe_dask.writers.atomic import output_dir, withdrawn_if_failed
from msprobe_dask.writers.result_files import name_stamp
from msprobe_dask.writers.visdb import NODES, STACKS, GraphTables, VisdbWriter, linked_cells, write_visdb

if TYPE_CHECKING:  # (the merge modules are imported only for a merge)
    from msprobe_dask.graph.merge.strategy import ParallelParams

INSERT_PRIORITY = 1
CHUNKS_PER_TURN = 2
"""One insert task writes the rows of CHUNKS_PER_TURN chunks (turns), before the chunk tasks waiting
on its worker (their priority is 0, on a cluster): the write chain, which reaches a worker only as that
worker ends a task, then inserts more chunks a step than are made meanwhile, and catches up with them.
With an insert a chunk, most inserts waited for the last chunk (one rank of 50,000 entries on two
workers: 12 of 32, 0.9 s, after it)."""

CHAIN_LAG = 2
"""On local worker processes a chunk task waits for the write chain's insert CHAIN_LAG turns before
its own (dask's local schedulers ignore the tasks' priorities: without it, the chain fell 3 turns behind
the chunks and its last inserts came after the last chunk; one rank of 50,050 entries on two workers,
prototype graphw20: 2.96 -> 2.76 s; a lag of 2, 4 or 6 measured the same)."""

IN_TURN_FROM_BYTES = 64 << 20
"""A (step, rank)'s two graphs are built in turn (Plan.in_turn) in this process from this many bytes of
dump.json in the run; below, at once: each side's reading of its dump.json without the GIL then runs
beside the other's build. The 96-block transformer (2 x 6.3 MB), in this process under chrt -r 1, 10
interleaved runs each: compute's start to the prepare's end 94.4 -> 86.0 ms (median), peak RSS the
same (101-106 MiB)."""

ROWS_ORDER = 1 << 32
"""The chunk tasks run in the write chain's order on a cluster (their priority: -(place of the (step,
rank) x ROWS_ORDER + chunk + 1), below every other task's): dask's order of the graph alone would have
a worker take a rank's chunks out of order (the ranks after the first of a tree), and the chain wait for
the chunks it skipped."""

# ------------------------------------------------------------------------------------ tasks


def joined_whole(summary: Summary, *results: Any) -> Part:
    """The (step, rank)'s Part from its chunk tasks' whole results (rows included: build_graphs)."""
    return joined(summary, *map(whole_of, results))


@dataclass(slots=True)
class RankTasks:
    """The lazy pieces of one (step, rank): its graphs, its Prepared (None: prepared by each worker
    process, graph/held.py), its summary; ``chunk`` lays out its chunk tasks."""

    name: str  # "{step}-{rank}"
    place: int  # in write order
    pair: PairOf
    graphs: list[Any]
    prepared: Any
    summary: Any
    spool: Spool | None

    def chunk(self, k: int, linked: bool, *after: Any) -> Any:
        """The lazy chunk ``k`` of the rows, made before the chunks of later (step, rank)s and after
        those of earlier ones on a cluster, as the write chain inserts them (ROWS_ORDER); ``linked``:
        its communication rows are kept with it (graph/held.py: light_of), ``after``: done first."""
        import dask

        key = f"rows-{self.name}-{k}"
        with dask.annotate(priority=-(self.place * ROWS_ORDER + k + 1)):
            if self.spool is None:
                return dask.delayed(chunk_task)(self.prepared, k, dask_key_name=key)
            return dask.delayed(held_chunk)(
                self.pair, self.spool, self.place, k, tuple(self.graphs), linked, *after, dask_key_name=key
            )


def turns(n: int) -> list[tuple[int, int]]:
    """The [start, end) of the chunks each insert task writes, of ``n``: runs of CHUNKS_PER_TURN, but the
    last chunk alone, so that what follows the last chunk task is the insert of its rows only (one rank
    of 7,716 entries a side in this process: that insert took 11 ms with the chunk before it)."""
    starts = [*range(0, n - 1, CHUNKS_PER_TURN), n - 1] if n > 1 else [0]
    return list(zip(starts, starts[1:] + [n]))


def _chunks_for(*folders: str) -> int:
    return chunk_count(sum(_size(GraphSource(f).dump_json) for f in folders))


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0  # the build task gives the error


def _link_task(distributed: bool, overflow: bool, *ranks: Part | Held) -> list[Part]:
    """Each (step, rank)'s Part (held: graph/held.py), linked across ranks."""
    parts = [value_of(r) for r in ranks]
    if distributed:
        from msprobe_dask.graph.distributed import link_distributed

        link_distributed([g for rows, _, _ in parts for g in rows], overflow)
    return parts


class Linked(NamedTuple):
    """The (step, rank)s' Parts linked across ranks, as the vis.db's last task needs them: their graphs
    without their communication rows and p2p ops, and those rows' (matched_distributed, id) cells, in
    write order (linked_cells). On local worker processes they travel pickled through a spool file:
    one rank of 50,050 entries a side has 17.7 MB of communication rows."""

    parts: list[Part]
    cells: list[tuple[Any, Any]]


def _link_cells_task(
    distributed: bool, overflow: bool, spool: Spool | None, *ranks: Part | Held
) -> Linked | Held:
    """_link_task's Parts as Linked (``spool``: held there, graph/held.py)."""
    parts = _link_task(distributed, overflow, *ranks)
    cells = linked_cells(row for rows, _, _ in parts for g in rows for row in g.nodes)
    kept = [([replace(g, nodes=[], p2p={}) for g in rows], mode, micro) for rows, mode, micro in parts]
    linked = Linked(kept, cells)
    return linked if spool is None else hold(spool, RUN, "linked", linked)


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


def _insert_chunks(prev: Written, summary: Summary, *results: Any) -> Written:
    """Insert chunk tasks' rows (``results``, in chunk order) in one transaction."""
    writer = prev.writer.resume()
    parts = []
    for result in results:
        for head, chunk in zip(summary.heads, rows_of(result)):
            if chunk is not None:
                if chunk.packed is None:
                    raise RuntimeError(f"graph {head.graph_id}: a chunk's rows came unpacked")
                parts.append((head.graph_id, chunk.packed, NODES))
                if chunk.stacks:
                    parts.append((head.graph_id, stack_rows(head.graph_id, chunk), STACKS))
    writer.add_once(parts)
    return Written(writer.suspend())


def _release(prepared: Prepared, written: Written) -> None:
    """The (step, rank)'s rows are written (``written``): its graphs are let go (chunks.Prepared.release)."""
    prepared.release()


def _end_write(
    prev: Written,
    linked: Linked | Held,
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
    parts, cells = value_of(linked)
    result = vis_result(parts, compare, opts, ranks, steps)
    path = prev.writer.resume().complete(cells, result.config)
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
    compare: bool
    linked: bool  # rank folders: communication nodes are linked across ranks
    rank_list: list[int]
    step_list: list[int]
    # on local worker processes: where the tasks' big results wait (graph/held.py); None: their values
    # travel (threads of this process, a cluster)
    spool: Spool | None = None
    # in this process (threads that share one GIL), for a big input (IN_TURN_FROM_BYTES), a (step,
    # rank)'s Bench graph is built once its NPU graph is, not beside it: their peaks do not add up (both
    # sides of one rank of 200,200 entries: 312 MiB of peak RSS, against 428-474 MiB at once)
    in_turn: bool = False

    def rank_tasks(self, source: RankSource, after: Any = None) -> RankTasks:
        """The lazy tasks of one (step, rank): its graphs built (only once ``after`` is computed, if
        given) and prepared; RankTasks.chunk cuts them into chunk tasks."""
        import dask

        s, r, folders = source
        name, place = source.name, self.sources.index(source)
        pair = PairOf(self.opts, folders[0], _chunks_for(*folders))
        graphs: list[Any] = []
        for f, side in zip(folders, (NPU, BENCH)):
            before = (*(after or ()), *(graphs if self.in_turn else ()))
            key = f"build-{s}-{r}-{side}"
            if self.spool is None:
                graphs.append(dask.delayed(_build_after, pure=True)(f, s, r, *before, dask_key_name=key))
            else:
                graphs.append(
                    dask.delayed(held_build)(self.spool, place, side, f, s, r, *before, dask_key_name=key)
                )
        if self.spool is not None:  # (each worker process prepares the pair for its chunk tasks; this
            # task first, whole: its stage is the prepare's, pipeline/stages.py)
            summary = dask.delayed(held_summary)(
                pair, self.spool, place, *graphs, dask_key_name=f"prepare-{name}"
            )
            return RankTasks(name, place, pair, graphs, None, summary, self.spool)
        prepared = dask.delayed(prepare_task)(*pair, True, *graphs, dask_key_name=f"prepare-{name}")
        summary = dask.delayed(summary_of)(prepared, dask_key_name=f"summary-{name}")
        return RankTasks(name, place, pair, graphs, prepared, summary, None)

    def parts(self, finished: list[Any], cells: bool = False) -> Any:
        """The lazy list of each (step, rank)'s Part (``finished``), linked across ranks; ``cells``: as
        Linked, held in the spool if any (for the write chain's last task)."""
        import dask

        link, spool = (_link_cells_task, (self.spool,)) if cells else (_link_task, ())
        # (each Part an argument of its own: a list of Delayeds would have dask optimize the whole graph
        # laid out so far, once per list: quadratic in the ranks)
        return dask.delayed(link)(
            self.linked, self.opts.overflow_check, *spool, *finished, dask_key_name="link-ranks"
        )


def _build_after(folder: str, step: int, rank: int, *after: Any) -> Graph:
    """Build a graph without its items (the chunk tasks parse them), once ``after`` is done."""
    return build_task(folder, step, rank, False)


def _rank_plan(
    target: str | os.PathLike[str],
    golden: str | os.PathLike[str] | None,
    opts: Options,
    spool: Spool | None = None,
    in_turn: bool = False,
) -> Plan:
    """The Plan of the inputs (``spool``, ``in_turn``: see Plan)."""
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
    return Plan(ranks_in, opts, golden is not None, not files, [0] if files else ranks, steps, spool, in_turn)


def _plan(
    target: str | os.PathLike[str],
    golden: str | os.PathLike[str] | None,
    opts: Options,
    spool: Spool | None = None,
):
    """(lazy VisResult, compare?) for the inputs, its rows made whole (``spool``: see Plan; no rank
    window here, every rank's graphs are held to the end)."""
    import dask

    plan = _rank_plan(target, golden, opts, spool and replace(spool, window=0))
    finished = []
    for source in plan.sources:
        r = plan.rank_tasks(source)
        chunks = [r.chunk(k, True) for k in range(r.pair.n)]
        finished.append(dask.delayed(joined_whole)(r.summary, *chunks, dask_key_name=f"finish-{r.name}"))
    args = (plan.compare, opts, plan.rank_list, plan.step_list)
    return dask.delayed(vis_result)(plan.parts(finished), *args, dask_key_name="vis-result"), plan.compare


def _write_chain(plan: Plan, writer: VisdbWriter, window: int = 0, released_beside: bool = False) -> Any:
    """The lazy vis.db written by a chain of tasks: each (step, rank)'s graphs placed in write order,
    then each chunk's rows inserted as soon as the chunk is made and the one before it is in (the rows
    and their rowids are those of one write task: VisdbWriter); the last task sets the linked
    communication cells and tb_config, builds the indexes and renames the file. A chunk's rows are
    thus written while later chunks are made, and dropped once written. ``writer``: the vis.db begun
    (suspended) by the run's own process, so that no task creates a file that could outlive a failed
    run. ``window`` > 0: a (step, rank)'s graphs are built only once the rows of the ``window``-th
    (step, rank) before it are written and its graphs let go (_release; on local worker processes, let
    go by each process as it holds the next ones, graph/held.py), so that at most ``window`` of them
    are held at a time. ``released_beside``: the releases run beside the last task (_released_too), not
    before it (_end_write). On local worker processes a chunk task waits for the insert CHAIN_LAG turns
    before its own."""
    import dask

    written: Any = Written(writer)
    finished: list[Any] = []
    released: list[Any] = []  # each (step, rank)'s graphs let go once its rows are written
    ends: list[Any] = []  # the chain once each (step, rank)'s rows are in
    chain: list[Any] = []  # the chain after each turn
    for i, source in enumerate(plan.sources):
        before = ends if plan.spool is not None else released
        r = plan.rank_tasks(source, [before[i - window]] if 0 < window <= i else None)
        written = dask.delayed(_place_rank)(written, r.summary, dask_key_name=f"place-{r.name}")
        chunks = []
        for k, end in turns(r.pair.n):
            gate = chain[-CHAIN_LAG:][:1] if plan.spool is not None and len(chain) >= CHAIN_LAG else []
            turn = [r.chunk(j, plan.linked, *gate) for j in range(k, end)]
            chunks += turn
            with dask.annotate(priority=INSERT_PRIORITY):
                written = dask.delayed(_insert_chunks)(
                    written, r.summary, *turn, dask_key_name=f"insert-{r.name}-{k}"
                )
            chain.append(written)
        ends.append(written)
        if r.prepared is not None:
            released.append(dask.delayed(_release)(r.prepared, written, dask_key_name=f"release-{r.name}"))
        finished.append(_finish_early(r, chunks, plan.linked))
    linked = plan.parts(finished, cells=True)
    args = (plan.compare, plan.opts, plan.rank_list, plan.step_list)
    if not released_beside:
        return dask.delayed(_end_write)(written, linked, *args, *released, dask_key_name="write-visdb")
    end = dask.delayed(_end_write)(written, linked, *args, dask_key_name="write-visdb")
    return dask.delayed(_released_too)(end, *released, dask_key_name="released-too")


def _finish_early(r: RankTasks, chunks: list[Any], linked: bool) -> Any:
    """The lazy Part of a (step, rank) written by the chain, joined from its chunks made (without their
    rows, light_of) rather than inserted: linking across ranks and joining the summary need only those,
    and run while the last inserts are written (one rank of 50,000 entries on two workers: 0.3-0.5 s
    of inserts after the last chunk). On local worker processes the chunks' lights are in their spool
    files already, and the Part is held (graph/held.py)."""
    import dask

    key = f"finish-{r.name}"
    if r.spool is not None:
        return dask.delayed(held_finish)(r.spool, r.place, r.summary, *chunks, dask_key_name=key)
    lights = []
    for k, chunk in enumerate(chunks):
        with dask.annotate(priority=INSERT_PRIORITY):
            lights.append(dask.delayed(light_of)(chunk, linked, dask_key_name=f"light-{r.name}-{k}"))
    return dask.delayed(joined)(r.summary, *lights, dask_key_name=key)


def _any_plan(
    target: str | os.PathLike[str],
    golden: str | os.PathLike[str] | None,
    opts: Options,
    parallel: Sequence[ParallelParams] | None,
    json_output: bool = False,
    spool: Spool | None = None,
):
    """The merge plan when ``parallel`` is given and the input has rank folders, else ``_plan``."""
    merged = _merged(target, golden, opts, parallel, json_output)
    return merged or _plan(target, golden, opts, spool)


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
    """``run`` for a graph of the inputs: its worker processes hold big graphs
    (RunOptions.holds_graphs), and the size of its dump.json files (unless given) chooses where it runs
    (pipeline.scheduler.computing)."""
    run = run or RunOptions()
    size = run.input_bytes or _input_bytes(target, golden)
    return replace(run, holds_graphs=True, input_bytes=size)


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


def _spool_for(folder: Path, client: Any, run: RunOptions | None) -> Spool | None:
    """On local worker processes, whose tasks' results do not share (RunOptions.shares_results), where
    the run's big results wait (graph/held.py): the spool folder ``folder``, made by _spooling. None
    elsewhere: the values travel."""
    if client is not None or run is None or run.shares_results:
        return None
    return Spool(str(folder), run.local_processes > 1, _rank_window(client, run))


@contextlib.contextmanager
def _spooling(spool: Spool | None) -> Iterator[None]:
    """The spool folder made for the run, and removed at its end, whatever its end (its workers are
    stopped by then, scheduler._in_processes)."""
    if spool is None:
        yield
        return
    try:
        os.mkdir(spool.folder)
    except OSError as exc:
        raise OutputError(spool.folder, cannot("be created", exc)) from None
    try:
        yield
    finally:
        shutil.rmtree(spool.folder, ignore_errors=True)


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
    if client is not None or run.address is not None or run.local_processes > 1:
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
    import tempfile

    opts = Options(overflow_check, fuzzy_match, layer_mapping)
    run = run if client is not None else _graph_run(run, target, golden)
    spool = _spool_for(Path(tempfile.gettempdir()) / f".graph-spool-{uuid.uuid4().hex}", client, run)
    result, _ = _any_plan(target, golden, opts, parallel, spool=spool)
    with _spooling(spool):
        return _read_back(_compute(result, client, run))


def output_name(compare: bool, ts: str | None = None) -> str:
    ts = ts or name_stamp()
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

    ts = name_stamp()
    out = Path(output_path)
    if out.exists() and not out.is_dir():
        raise OutputError(out, "is not a folder")
    json_files = bool(parallel and json_output)
    opts = Options(overflow_check, fuzzy_match, layer_mapping, tensor_log)
    run = run if client is not None else _graph_run(run, target, golden)
    path = out / output_name(golden is not None, ts)
    spool = _spool_for(path.with_name(f".{path.name}.spool"), client, run)  # (a temporary of its name)
    merged = _merged(target, golden, opts, parallel, json_output)
    here = client is None and run is not None and run.in_this_process
    in_turn = here and run is not None and run.input_bytes >= IN_TURN_FROM_BYTES  # (Plan.in_turn)
    plan = _rank_plan(target, golden, opts, spool, in_turn) if merged is None and not json_files else None
    if plan is None:
        result, _ = merged or _plan(target, golden, opts, spool)
    written: Any = None  # with a plan, the rows written chunk by chunk (_write_chain)
    if json_files:
        written = dask.delayed(_json_task)(result, str(out), dask_key_name="write-json")
    elif plan is None:
        written = dask.delayed(_write_task)(result, str(path), dask_key_name="write-visdb")
    # a bad input leaves nothing behind, not even the folders we made; a stopped run no vis.db
    with output_dir(out), withdrawn_if_failed(path), _spooling(spool):
        if plan is None:
            return _compute(written, client, run)
        writer = VisdbWriter(path, _index_early(client, run), shared=here and not in_turn).suspend()
        try:
            chain = _write_chain(
                plan, writer, _rank_window(client, run), released_beside=here and not in_turn
            )
            return _compute(chain, client, run)
        finally:  # (named when complete, and closed; a failed run leaves nothing, its file closed)
            writer.abort()


def graph_visualize(
    target: str | os.PathLike[str], golden: str | os.PathLike[str] | None = None, **options: Any
) -> str:
    """``visualize``'s path: the ``build_{ts}.vis.db`` / ``compare_{ts}.vis.db`` written into
    ``output_path`` (or, for a merge's json files, the folder)."""
    return visualize(target, golden, **options).path
