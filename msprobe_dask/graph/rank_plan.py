"""The rank plan of graph_visualize: the inputs' (step, rank)s in write order, and the lazy tasks of each.

A (step, rank)'s graphs are built (one task a side), prepared (matched) and cut into chunk tasks
(graph/chunks.py); its Part, the chunks joined, is linked across ranks by one task (graph/distributed.py).
The build, prepare and finish tasks live in graph/tasks.py; on local worker processes the graphs, the
prepared pair and the chunks' rows stay in the worker processes and the run's spool folder, and only
their names travel (graph/held.py: Plan.spool); there is then no prepare task, each worker prepares
the pair for its chunk tasks. graph/write_chain.py writes the chunks' rows into the vis.db as they are
made; ``rows_made_whole`` returns them whole (build_graphs, a merge's json files).
"""

from __future__ import annotations

import contextlib
import os
import pickle
import threading
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from msprobe_dask.dump import graph_layouts as layout
from msprobe_dask.dump.location import dump_path
from msprobe_dask.dump.source import log_warning
from msprobe_dask.errors import DumpError
from msprobe_dask.graph.chunks import chunk_count, chunk_task
from msprobe_dask.graph.dump_files import GraphSource
from msprobe_dask.graph.held import (
    COMM_ALL,
    COMM_LINK,
    COMM_NONE,
    RUN,
    Held,
    PairOf,
    Spool,
    held_build,
    held_chunk,
    held_rank,
    held_summary,
    hold,
    value_of,
    whole_of,
)
from msprobe_dask.graph.model import Graph
from msprobe_dask.graph.rows import GraphRows
from msprobe_dask.graph.tasks import (
    BENCH,
    NPU,
    Options,
    Part,
    Summary,
    build_task,
    job_divergence,
    joined,
    pickled_build_task,
    prepare_task,
    summary_of,
    vis_result,
)
from msprobe_dask.pipeline.scheduler import ForkedWorker, forked_worker
from msprobe_dask.writers.visdb import linked_cells

if TYPE_CHECKING:
    from msprobe_dask.analysis.findings import Divergence

ROWS_ORDER = 1 << 32
"""The chunk tasks run in the write chain's order on a cluster (their priority: -(place of the (step,
rank) x ROWS_ORDER + chunk + 1), below every other task's): dask's order of the graph alone would have
a worker take a rank's chunks out of order (the ranks after the first of a tree), and the chain wait for
the chunks it skipped."""


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
    made: Any = None  # (Plan.rank_alone) the lazy RankMade of the (step, rank): no other task then

    def chunk(self, k: int, comm: str, *after: Any) -> Any:
        """The lazy chunk ``k`` of the rows, made before the chunks of later (step, rank)s and after
        those of earlier ones on a cluster, as the write chain inserts them (ROWS_ORDER); ``comm``:
        what its light keeps of its communication rows (graph/held.py: COMM_ALL...), ``after``: done
        first."""
        import dask

        key = f"rows-{self.name}-{k}"
        with dask.annotate(priority=-(self.place * ROWS_ORDER + k + 1)):
            if self.spool is None:
                return dask.delayed(chunk_task)(self.prepared, k, dask_key_name=key)
            return dask.delayed(held_chunk)(
                self.pair, self.spool, self.place, k, tuple(self.graphs), comm, *after, dask_key_name=key
            )


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
    without their communication rows and p2p ops, those rows' (matched_distributed, id) cells, in
    write order (linked_cells), and the job's first divergence (tasks.job_divergence: found here,
    beside the write chain's last inserts, not after them; R8: 2.0 s of CPU). On local worker
    processes they travel pickled through a spool file: one rank of 50,050 entries a side has 17.7 MB
    of communication rows."""

    parts: list[Part]
    cells: list[tuple[Any, Any]]
    divergence: Divergence | None


def _link_cells_task(
    distributed: bool, overflow: bool, spool: Spool | None, *ranks: Part | Held
) -> Linked | Held:
    """_link_task's Parts as Linked (``spool``: held there, graph/held.py); their graphs' summaries
    without the rows of the first divergence's walk, done here (R8: 14 MB pickled)."""
    parts = _link_task(distributed, overflow, *ranks)
    cells = linked_cells(row for rows, _, _ in parts for g in rows for row in g.nodes)
    kept = [([_linked_graph(g) for g in rows], mode, micro) for rows, mode, micro in parts]
    linked = Linked(kept, cells, job_divergence([g for rows, _, _ in parts for g in rows]))
    return linked if spool is None else hold(spool, RUN, "linked", linked)


def _linked_graph(g: GraphRows) -> GraphRows:
    """A graph as the vis.db's last task needs it: without its communication rows, p2p ops and walk rows."""
    return replace(g, nodes=[], p2p={}, summary=g.summary and g.summary.walked())


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
    # in this process, for a big input on more than one CPU (run_setup.builds_apart): a (step, rank)'s
    # Bench graph is built on a local worker process beside its NPU graph here, and sent back pickled
    # (BenchBuilds): the second CPU builds it for about a tenth of its build's CPU here (one side of
    # 200,200 entries: built in 2.0 s, unpickled in 0.22 s)
    bench: BenchBuilds | None = None
    # on local worker processes, with more (step, rank)s than processes (run_setup.one_task_a_rank): one
    # task makes each (held.held_rank), from its builds to its chunks' rows, in one process
    rank_alone: bool = False

    @property
    def comm(self) -> str:
        """What the write chain's chunks keep of their communication rows (graph/held.py: COMM_LINK,
        COMM_NONE): those that linking across ranks may read or set, if the ranks are linked."""
        return COMM_LINK if self.linked else COMM_NONE

    def rank_tasks(self, source: RankSource, after: Any = None) -> RankTasks:
        """The lazy tasks of one (step, rank): its graphs built (only once ``after`` is computed, if
        given) and prepared; RankTasks.chunk cuts them into chunk tasks."""
        import dask

        s, r, folders = source
        name, place = source.name, self.sources.index(source)
        pair = PairOf(self.opts, folders[0], _chunks_for(*folders))
        if self.rank_alone and self.spool is not None:  # (in write order, as the chain inserts them:
            # RunOptions.by_priority)
            with dask.annotate(priority=-(place * ROWS_ORDER + 1)):
                made = dask.delayed(held_rank)(
                    pair,
                    self.spool,
                    place,
                    folders,
                    s,
                    r,
                    self.comm,
                    *(after or ()),
                    dask_key_name=f"rank-{name}",
                )
            return RankTasks(name, place, pair, [], None, None, self.spool, made)
        graphs: list[Any] = []
        for f, side in zip(folders, (NPU, BENCH)):
            before = (*(after or ()), *(graphs if self.in_turn else ()))
            key = f"build-{s}-{r}-{side}"
            if self.spool is None and self.bench is not None and side == BENCH:
                self.bench.to_build += 1
                graphs.append(
                    dask.delayed(_build_apart, pure=True)(
                        self.bench, f, s, r, *(after or ()), dask_key_name=key
                    )
                )
            elif self.spool is None:
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


def _build_apart(bench: BenchBuilds, folder: str, step: int, rank: int, *after: Any) -> Graph:
    """_build_after's graph built on the Bench builds' worker process (Plan.bench)."""
    return bench.built(folder, step, rank)


class BenchBuilds:
    """The Bench graphs of a Plan's (step, rank)s built on one local worker process beside their NPU graphs
    here (run_setup.builds_apart), each sent back pickled (tasks.pickled_build_task) and unpickled here.
    The worker is forked at the run's setup, before this process's threads start (``forked``,
    scheduler.forked_worker), and ends once the last graph laid out (``to_build``) is back, so that it is
    unpickled here without its maker's memory beside it."""

    def __init__(self) -> None:
        self.to_build = 0
        self._worker: ForkedWorker | None = None
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def forked(self) -> Iterator[None]:
        """The worker for the block (ended at its end if not before: a failed run)."""
        with forked_worker() as self._worker:
            yield

    def built(self, folder: str, step: int, rank: int) -> Graph:
        import dask

        assert self._worker is not None, "BenchBuilds.forked first"
        build = dask.delayed(pickled_build_task)(
            folder, step, rank, dask_key_name=f"build-apart-{step}-{rank}"
        )
        (flat,) = self._worker.compute([build])
        with self._lock:
            self.to_build -= 1
            last = not self.to_build
        if last:
            self._worker.close()
        return pickle.loads(flat)


def rank_plan(
    target: str | os.PathLike[str],
    golden: str | os.PathLike[str] | None,
    opts: Options,
    spool: Spool | None = None,
    in_turn: bool = False,
    bench_apart: bool = False,
) -> Plan:
    """The Plan of the inputs (``spool``, ``in_turn``: see Plan; ``bench_apart``: Plan.bench, to be forked
    before the run, BenchBuilds.forked)."""
    tp = dump_path(target)
    if golden is None:
        kind, sources = layout.build_sources(tp)
        ranks_in = [RankSource(step, rank, (folder,)) for step, rank, folder in sources]
        ranks = sorted({r for _, r, _ in sources}, key=[r for _, r, _ in sources].index)
    else:
        kind, pairs = layout.compare_sources(tp, dump_path(golden), log_warning)
        ranks_in = [RankSource(step, rank, (a, b)) for step, rank, a, b in pairs]
        ranks = list(dict.fromkeys(r for _, r, _, _ in pairs))
    if not ranks_in:
        raise DumpError(target, "holds no dump to visualize")
    steps = sorted({src.step for src in ranks_in}) if kind == "steps" else [0]
    files = kind == "files"
    steps_of = [0] if files else ranks
    bench = BenchBuilds() if bench_apart else None
    return Plan(ranks_in, opts, golden is not None, not files, steps_of, steps, spool, in_turn, bench)


def rows_made_whole(
    target: str | os.PathLike[str],
    golden: str | os.PathLike[str] | None,
    opts: Options,
    spool: Spool | None = None,
):
    """(lazy VisResult, compare?) for the inputs, its rows made whole (``spool``: see Plan; no rank
    window here, every rank's graphs are held to the end)."""
    import dask

    plan = rank_plan(target, golden, opts, spool and replace(spool, window=0))
    finished = []
    for source in plan.sources:
        r = plan.rank_tasks(source)
        chunks = [r.chunk(k, COMM_ALL) for k in range(r.pair.n)]
        finished.append(dask.delayed(joined_whole)(r.summary, *chunks, dask_key_name=f"finish-{r.name}"))
    args = (plan.compare, opts, plan.rank_list, plan.step_list)
    return dask.delayed(vis_result)(plan.parts(finished), *args, dask_key_name="vis-result"), plan.compare


def input_sizes(target: str | os.PathLike[str], golden: str | os.PathLike[str] | None) -> tuple[int, int]:
    """The bytes of the inputs' dump.json files, and of the biggest (step, rank)'s."""
    tp = dump_path(target)
    if golden is None:
        sizes = [_size(GraphSource(f).dump_json) for _, _, f in layout.build_sources(tp)[1]]
    else:
        pairs = layout.compare_sources(tp, dump_path(golden))[1]
        sizes = [_size(GraphSource(a).dump_json) + _size(GraphSource(b).dump_json) for _, _, a, b in pairs]
    return sum(sizes), max(sizes, default=0)
