"""The vis.db of graph_visualize written by a chain of tasks, as the rank plan's chunks are made.

::

    place(0, 0) --> insert(0, 0, 0) --> ... --> insert(s, r, n-1) --> place(...) --> ...  --> write vis.db
                    ^ rows(0, 0, 0..1)           ^ rows(s, r, n-1)                              ^ link

A rows task (graph/rank_plan.py: RankTasks.chunk) makes one chunk of the (step, rank)'s rows and returns
them packed; an insert task adds them to the vis.db as soon as they are made, after the chunk before
(``chained_write``); the last task sets the cells linked across ranks and renames the file. A run whose
rows are made whole writes its vis.db in one task (``write_task``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from msprobe_dask.graph.chunks import Prepared
from msprobe_dask.graph.held import (
    Held,
    RankMade,
    Spool,
    held_finish,
    light_of,
    rows_of,
    value_of,
)
from msprobe_dask.graph.rank_plan import Linked, Plan, RankTasks
from msprobe_dask.graph.rows import GraphRows, stack_rows
from msprobe_dask.graph.tasks import (
    Options,
    Summary,
    VisResult,
    job_divergence,
    joined,
    run_summary,
    vis_result,
)
from msprobe_dask.summary.model import RunSummary
from msprobe_dask.writers.visdb import GraphTables, VisdbWriter, write_visdb
from msprobe_dask.writers.visdb_schema import NODES, STACKS

if TYPE_CHECKING:
    from msprobe_dask.analysis.findings import Divergence

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
prototype graphw20: 2.96 -> 2.76 s). With one worker process: it keeps the chain's last inserts, and the
index builds after them, close behind the last chunk (that rank: the time after its last chunk 0.43 s,
0.53 s at a lag of 4; medians of 7 alternated runs under chrt, load 6-9)."""

CHAIN_LAG_SHARED = 4
"""The lag with more than one worker process (Spool.shared): more chunk tasks ready while an insert
waits for its chunks, fewer waits of a worker for a task whose input passes through the run's own
process (that rank on two workers, 8 alternated rounds under chrt, load 12-16, medians: from the first
chunk to the last 1.91 -> 1.77 s, wall 2.71 -> 2.59 s; a lag of 3: 1.80 s, 2.61 s; of 6 or 8 the chain
fell behind, the time after the last chunk 0.11 -> 0.28-0.50 s)."""


def turns(n: int) -> list[tuple[int, int]]:
    """The [start, end) of the chunks each insert task writes, of ``n``: runs of CHUNKS_PER_TURN, but the
    last chunk alone, so that what follows the last chunk task is the insert of its rows only (one rank
    of 7,716 entries a side in this process: that insert took 11 ms with the chunk before it)."""
    starts = [*range(0, n - 1, CHUNKS_PER_TURN), n - 1] if n > 1 else [0]
    return list(zip(starts, starts[1:] + [n]))


class Visualized(NamedTuple):
    """What a graph_visualize run wrote, and its summary (made from the graphs' rows, as they are in
    the vis.db: summary.nodes)."""

    path: str
    summary: RunSummary | None = None  # None: no vis.db (a merge's json files)
    unreadable: tuple[str, ...] = ()  # why rows' tensor files could not be read, in node order


def visualized(path: str, result: VisResult) -> Visualized:
    """What the run wrote at ``path``; of a compare, its summary with the job's first divergence."""
    return summarized(path, result, job_divergence(result.graphs))


def summarized(path: str, result: VisResult, found: Divergence | None) -> Visualized:
    """What the run wrote at ``path``, its summary with the job's first divergence ``found`` (None:
    none, or nothing compared)."""
    summary, unreadable = run_summary(result.graphs)
    if found is not None:
        from msprobe_dask.summary.first_divergence import apply_divergence

        apply_divergence(summary, found)
    return Visualized(path, summary, unreadable)


def write_task(result: VisResult, path: str) -> Visualized:
    """Write the vis.db: the graphs' chunks inserted in write order, in one transaction, indexes last
    (writers/visdb.py)."""
    return visualized(write_visdb(path, [graph_tables(g) for g in result.graphs], result.config), result)


class Written(NamedTuple):
    """A step of the vis.db's write chain: the suspended writer."""

    writer: VisdbWriter


def _place_rank(prev: Written, summary: Summary) -> Written:
    """Place the (step, rank)'s graphs (a rank whose rows were made whole: add them)."""
    writer = prev.writer.resume()
    _place(writer, summary)
    return Written(writer.suspend())


def _place(writer: VisdbWriter, summary: Summary) -> None:
    if summary.done is not None:
        writer.add_graphs([graph_tables(g) for g in summary.done])
    else:
        for head, (rows, stacks) in zip(summary.heads, summary.counts):
            writer.place(head.graph_id, rows)
            writer.place(head.graph_id, stacks, STACKS)


def _insert_chunks(prev: Written, summary: Summary, *results: Any) -> Written:
    """Insert chunk tasks' rows (``results``, in chunk order) in one transaction."""
    writer = prev.writer.resume()
    writer.add_once(_chunk_parts(summary, results))
    return Written(writer.suspend())


def _chunk_parts(summary: Summary, results: Sequence[Any]) -> list[tuple[str, bytes, str]]:
    """The (graph id, packed rows, table) of chunk tasks' rows and stacks, in chunk order."""
    parts = []
    for result in results:
        for head, chunk in zip(summary.heads, rows_of(result)):
            if chunk is not None:
                if chunk.packed is None:
                    raise RuntimeError(f"graph {head.graph_id}: a chunk's rows came unpacked")
                parts.append((head.graph_id, chunk.packed, NODES))
                if chunk.stacks:
                    parts.append((head.graph_id, stack_rows(head.graph_id, chunk), STACKS))
    return parts


def _insert_rank(prev: Written, made: RankMade) -> Written:
    """Place a (step, rank) made by one task (held.held_rank) and insert its chunks' rows, one chunk's
    file at a time, in one transaction: with the indexes kept up to date, a commit a turn (as the
    inserts of chunk tasks make) wrote their pages again each time (one rank of 50,050 entries a side,
    5 alternated rounds at load 11: 1.07 s of CPU against 1.48 s, medians). The vis.db's header counts
    fewer commits; its pages are the same."""
    writer = prev.writer.resume()
    _place(writer, made.summary)
    for rows in made.rows:
        writer.add_once(_chunk_parts(made.summary, [rows]))
    return Written(writer.suspend())


def _part_of(made: RankMade) -> Held:
    return made.part


def _release(prepared: Prepared, finished: Any) -> None:
    """The (step, rank)'s chunk tasks are done (``finished``: their rows joined, _finish_early): its graphs
    are let go (chunks.Prepared.release), beside the inserts of its last chunks, which leave the GIL to
    it, not after them (one rank of 7,716 entries a side: the vis.db's last task waited 5 ms for the GIL
    this held). (Not after the chunk tasks themselves: their rows would be held until it runs.)"""
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
    """``released``: with a big input (chained_write's ``released_beside`` False), every (step, rank)'s
    graphs let go (_release) before this task's work, whose peak would add to theirs, as its indexing did
    (one rank of 1,001,000 entries a side in this process: 1,535 MiB with them let go beside it, 1,441
    MiB before it)."""
    parts, cells, found = value_of(linked)
    result = vis_result(parts, compare, opts, ranks, steps)
    path = prev.writer.resume().complete(cells, result.config)
    return summarized(path, result, found)


def _released_too(done: Visualized, *released: None) -> Visualized:
    """``done`` once every (step, rank)'s graphs are let go too (``released``: _release): else dask
    would not run the releases that no later build waits for, and those graphs, frozen and linked
    both ways (graph/gcpause.py), would stay until the run ends. With a small input in this process,
    not before the vis.db's last task (_end_write): each runs once its (step, rank)'s chunks are made."""
    return done


def graph_tables(g: GraphRows) -> GraphTables:
    return GraphTables(g.graph_id, g.n_rows, g.nodes, g.stacks, g.packed, g.apart)


def chained_write(plan: Plan, writer: VisdbWriter, window: int = 0, released_beside: bool = False) -> Any:
    """The lazy vis.db written by a chain of tasks: each (step, rank)'s graphs placed in write order,
    then each chunk's rows inserted as soon as the chunk is made and the one before it is in (the rows
    and their rowids are those of one write task: VisdbWriter); the last task sets the linked
    communication cells and tb_config, commits and renames the file. A chunk's rows are
    thus written while later chunks are made, and dropped once written. ``writer``: the vis.db begun
    (suspended) by the run's own process, so that no task creates a file that could outlive a failed
    run. ``window`` > 0: a (step, rank)'s graphs are built only once the rows of the ``window``-th
    (step, rank) before it are written and its graphs let go (_release; on local worker processes, let
    go by each process as it holds the next ones, graph/held.py), so that at most ``window`` of them
    are held at a time. ``released_beside``: the releases run beside the last task (_released_too), not
    before it (_end_write). On local worker processes a chunk task waits for the insert _chain_lag()
    turns before its own."""
    import dask

    written: Any = Written(writer)
    lag = _chain_lag(plan.spool)
    comm = plan.comm
    finished: list[Any] = []
    released: list[Any] = []  # each (step, rank)'s graphs let go once its rows are made
    ends: list[Any] = []  # the chain once each (step, rank)'s rows are in
    chain: list[Any] = []  # the chain after each turn
    for i, source in enumerate(plan.sources):
        gate = None
        if 0 < window <= i:  # the window-th (step, rank) before: its rows written, its graphs let go
            gate = [ends[i - window]] if plan.spool is not None else [ends[i - window], released[i - window]]
        r = plan.rank_tasks(source, gate)
        if r.made is not None:  # (one task made the (step, rank): Plan.rank_alone)
            with dask.annotate(priority=INSERT_PRIORITY):
                written = dask.delayed(_insert_rank)(written, r.made, dask_key_name=f"insert-{r.name}")
            ends.append(written)
            finished.append(dask.delayed(_part_of)(r.made, dask_key_name=f"part-{r.name}"))
            continue
        written = dask.delayed(_place_rank)(written, r.summary, dask_key_name=f"place-{r.name}")
        chunks = []
        for k, end in turns(r.pair.n):
            gate = chain[-lag:][:1] if lag and len(chain) >= lag else []
            turn = [r.chunk(j, comm, *gate) for j in range(k, end)]
            chunks += turn
            with dask.annotate(priority=INSERT_PRIORITY):
                written = dask.delayed(_insert_chunks)(
                    written, r.summary, *turn, dask_key_name=f"insert-{r.name}-{k}"
                )
            chain.append(written)
        ends.append(written)
        finish = _finish_early(r, chunks, comm)
        finished.append(finish)
        if r.prepared is not None:
            released.append(dask.delayed(_release)(r.prepared, finish, dask_key_name=f"release-{r.name}"))
    linked = plan.parts(finished, cells=True)
    args = (plan.compare, plan.opts, plan.rank_list, plan.step_list)
    if not released_beside:
        return dask.delayed(_end_write)(written, linked, *args, *released, dask_key_name="write-visdb")
    end = dask.delayed(_end_write)(written, linked, *args, dask_key_name="write-visdb")
    return dask.delayed(_released_too)(end, *released, dask_key_name="released-too")


def _chain_lag(spool: Spool | None) -> int:
    """How many turns before its own the insert is that a chunk task waits for (0: none; only on local
    worker processes, ``spool``)."""
    if spool is None:
        return 0
    return CHAIN_LAG_SHARED if spool.shared else CHAIN_LAG


def _finish_early(r: RankTasks, chunks: list[Any], comm: str) -> Any:
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
            lights.append(dask.delayed(light_of)(chunk, comm, dask_key_name=f"light-{r.name}-{k}"))
    return dask.delayed(joined)(r.summary, *lights, dask_key_name=key)
