"""Where the graph runs, chosen in one place (``computing``):

=========================  ===============================================================================
``--scheduler ADDRESS``    that running dask cluster (cluster.py: a distributed ``Client``, dashboard shown)
``--workers N``            dask's local processes scheduler with N worker processes
no flag, big input         the same, one worker process per CPU (``LOCAL_PROCESSES_FROM_BYTES``; for a
                           graph that holds big graphs in each worker process, ``holds_graphs``: from
                           ``GRAPH_PROCESSES_FROM_BYTES`` to ``GRAPH_PROCESSES_TO_BYTES``)
no flag, small input       dask's threaded scheduler, in this process (for a graph that holds big graphs:
                           also one too big for the workers' memory)
=========================  ===============================================================================

Local worker processes are dask's processes scheduler: no distributed import, no event loop in the
workers; each task's inputs are pickled from this process into a worker and its result back, so the
graphs that send big results to many tasks leave them in spool files instead (``shares_results``). On
Linux the workers are forked (they start with this process's modules imported).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from msprobe_dask.errors import ConfigError, WorkerLost
from msprobe_dask.pipeline.cluster import client_quiet, on_cluster
from msprobe_dask.processes import direct_children, forking_workers, stop_children

if TYPE_CHECKING:  # (stages imports dask: only when a run shows progress)
    from msprobe_dask.pipeline.stages import StageLog

Compute = Callable[[Sequence[Any]], list[Any]]

LOCAL_PROCESSES_FROM_BYTES = 24 << 20
"""Without flags, inputs of at least this many bytes (the dump files a command reads, both sides, every
rank) run on local worker processes, smaller ones in this process: below it, starting the processes
and sending the results back costs more than the second CPU gives."""

GRAPH_PROCESSES_FROM_BYTES = 64 << 20
GRAPH_PROCESSES_TO_BYTES = 256 << 20
"""The same for a graph whose worker processes each hold big graphs (``holds_graphs``: graph_visualize,
each worker with the rank's two graphs), which runs on local worker processes from
GRAPH_PROCESSES_FROM_BYTES, unless one (step, rank)'s dump.json files (``held_bytes``: what a worker
process's graphs are made of) reach GRAPH_PROCESSES_TO_BYTES. Then the run stays in this process, so that
a big rank stays in its memory (one of 1,000,000 entries: 1.4 GB in this process, about as much again in
each worker); below, starting the workers and sharing the graphs costs more than the second CPU
gives (docs/performance.md, section 5)."""

SIGNAL_SPREAD_SECONDS = 0.5
"""How long a run whose worker process died waits for a signal to the process group that may have
killed it, before it reports the lost worker."""


@dataclass(frozen=True, slots=True)
class RunOptions:
    address: str | None = None  # a running dask scheduler
    workers: int = 0  # >0: that many local worker processes
    progress: bool = False  # show progress: named stages (a bar on a cluster, on a terminal only)
    # called with the percentage of finished tasks (local schedulers: as tasks finish; on a cluster:
    # at the end only) - for progress logs that are not a bar
    on_progress: Callable[[float], None] | None = None
    stage_log: StageLog | None = None  # the command's stage lines (pipeline/stages.py)
    input_bytes: int = 0  # size of the input (0: unknown, run in this process unless told otherwise)
    # each worker process holds big graphs (graph_visualize: a rank's two graphs, about twice its
    # dump.json): local worker processes only from GRAPH_PROCESSES_FROM_BYTES, and for a (step, rank) below
    # GRAPH_PROCESSES_TO_BYTES
    holds_graphs: bool = False
    held_bytes: int = 0  # of input_bytes, the most a worker process's graphs are made of (0: all of it)
    # local worker processes: the ready tasks sent highest ``priority`` annotation first (as a cluster
    # sends them; dask's local scheduler reads no annotation), none queued ahead of a worker's next
    # (TASKS_QUEUED_PER_WORKER not used): for a graph of long tasks whose results make short tasks
    # ready that others wait for (graph_visualize, one task a rank: an insert of the write chain)
    by_priority: bool = False

    @property
    def sized_by_input(self) -> bool:
        """Whether the size of the input (``input_bytes``) decides where the graph runs: only without
        ``--scheduler`` and ``--workers`` (a caller may then skip sizing it)."""
        return not self.address and not self.workers

    @property
    def local_processes(self) -> int:
        """How many local worker processes run the graph (0: a cluster, or threads of this process)."""
        if not self.sized_by_input:
            return 0 if self.address else self.workers
        cpus = _cpus()
        if self.holds_graphs:
            held = self.held_bytes or self.input_bytes
            big = (
                cpus > 1
                and self.input_bytes >= GRAPH_PROCESSES_FROM_BYTES
                and held < GRAPH_PROCESSES_TO_BYTES
            )
        else:
            big = cpus > 1 and self.input_bytes >= LOCAL_PROCESSES_FROM_BYTES
        return cpus if big else 0

    @property
    def shares_results(self) -> bool:
        """Whether the tasks that read a task's result get it without its being pickled again for each
        of them: true of threads of this process and of a cluster's workers, which keep a result where
        it was made and send it once to each worker that needs it; false of the local worker
        processes (dask's processes scheduler pickles each task's inputs into it): there the big
        results wait in spool files, and the tasks get their paths (compare's part_file.py,
        graph_visualize's graph/held.py)."""
        return not self.local_processes

    def log_written(self, files: int, kind: str, started: float) -> None:
        """The write stage's progress line (after the dask stages' lines): ``files`` written since
        ``started`` (time.perf_counter)."""
        self.log_stage(f"write {kind}", files, "files", started)

    def log_stage(self, name: str, count: int, unit: str, started: float) -> None:
        """The progress line of a stage done in this process, not by dask's tasks (whose lines
        ``pipeline/stages.py`` logs): ``count`` items (none: no line) since ``started``
        (time.perf_counter)."""
        if self.stage_log is not None and count:
            from msprobe_dask.pipeline.stages import stage_line

            seconds = time.perf_counter() - started
            self.stage_log.line(stage_line(name, count, count, unit, seconds))

    @property
    def in_this_process(self) -> bool:
        """Tasks run in threads of this process (no cluster, no worker processes)."""
        return not self.address and not self.local_processes

    @property
    def threads(self) -> int:
        """How many threads of this process run the tasks (in_this_process): one a CPU."""
        return _cpus()

    def __post_init__(self) -> None:
        if self.workers < 0:
            raise ConfigError(
                "--workers",
                f"must be 0 (the size of the input decides) or a number of processes, got {self.workers}",
            )
        most = max_workers()
        if self.workers > most:  # (a typo's 100000 processes took a shared 2-CPU host down)
            raise ConfigError("--workers", f"{self.workers} processes for {_cpus()} CPUs: at most {most}")


WORKERS_PER_CPU = 4
"""The most local worker processes a run starts per CPU (at least 8 in all): more only wait for the CPUs,
each holding its own Python (about 100 MB)."""


def max_workers() -> int:
    return max(8, WORKERS_PER_CPU * _cpus())


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


@contextlib.contextmanager
def computing(options: RunOptions) -> Iterator[Compute]:
    """Yield ``compute(delayed_objects) -> results`` bound to the scheduler the options choose."""
    if options.address:
        cluster = on_cluster(options.address, options.progress, options.stage_log, options.on_progress)
        with client_quiet(), cluster as compute:
            yield compute
        return
    yield _local(options)


def in_this_process(options: RunOptions) -> Compute:
    """``compute`` on dask's threaded scheduler in this process, with the options' progress: for a graph of
    one task whose result this process needs, which a worker process would only delay (its start, the
    result pickled there and unpickled here, its exit)."""
    return _local(dataclasses.replace(options, workers=0, input_bytes=0))


def _local(options: RunOptions) -> Compute:

    processes = options.local_processes

    def compute_local(objs: Sequence[Any]) -> list[Any]:
        with contextlib.ExitStack() as watchers:
            if options.progress:  # named stages: a live line on a terminal, else a line per stage
                from msprobe_dask.pipeline.stages import StageLog, StageProgress

                log = options.stage_log or StageLog(hold_seconds=0)
                watchers.enter_context(StageProgress(log, live=sys.stderr.isatty()))
            if options.on_progress is not None:
                from msprobe_dask.pipeline.task_progress import TaskProgress

                watchers.enter_context(TaskProgress(options.on_progress))
            if processes:
                return _in_processes(objs, processes, options.by_priority)
            return _in_threads(objs)

    return compute_local


def _in_threads(objs: Sequence[Any]) -> list[Any]:
    """dask's threaded scheduler on a pool of this run's own, shut down before the run's end is told: a
    task that fails ends dask's wait at once while the tasks already started go on in the other threads
    (of dask's shared pool, past the end of the compute), and one of them could write into a folder that
    the failed run has just removed (a table part's spool). The pool's threads start when first used."""
    from concurrent.futures import ThreadPoolExecutor

    import dask
    from dask.threaded import get  # a callable: dask then skips importing distributed

    with ThreadPoolExecutor(_cpus()) as pool:  # its exit waits for the tasks started
        return list(dask.compute(*objs, scheduler=get, pool=pool))


TASKS_QUEUED_PER_WORKER = 1
"""Tasks sent to the local worker processes beyond one a worker, waiting in the pool's call queue: a
worker that finishes a task starts the next one at once, instead of idling while this process takes the
result in and sends it the next task (dask's processes scheduler sends a task only when it counts a
free worker: ``get_async``'s ``num_workers`` is what it counts)."""


def _queued_get(
    dsk: Any, keys: Any, *, pool: Any, processes: int, by_priority: bool = False, **kwargs: Any
) -> Any:
    """dask's processes scheduler (``dask.multiprocessing.get``: the graph culled and fused, each task and
    its inputs pickled by cloudpickle, a task's error sent back with its traceback) on ``pool``, by dask's
    own loop ``dask.local.get_async`` through its documented arguments, keeping
    ``TASKS_QUEUED_PER_WORKER`` more tasks a worker in flight than the ``processes`` workers run; or
    (``by_priority``: RunOptions) none, the ready tasks by their priority annotations."""
    import pickle
    from functools import partial

    import cloudpickle
    from dask.local import get_async, reraise
    from dask.optimization import cull, fuse
    from dask.utils import ensure_dict

    priority = _priorities(dsk) if by_priority else None
    if hasattr(dsk, "__dask_graph__"):
        dsk = dsk.__dask_graph__()
    culled, dependencies = cull(ensure_dict(dsk), keys)
    fused, _ = fuse(culled, keys, dependencies)
    with _ready_by_priority(priority) if priority is not None else contextlib.nullcontext():
        return get_async(
            pool.submit,
            processes * (1 + (0 if by_priority else TASKS_QUEUED_PER_WORKER)),
            fused,
            keys,
            get_id=os.getpid,
            dumps=partial(cloudpickle.dumps, protocol=pickle.HIGHEST_PROTOCOL),
            loads=pickle.loads,
            pack_exception=_packed_task_error,
            raise_exception=reraise,
            chunksize=1,  # each task sent alone (see _in_processes)
            **kwargs,
        )


def _priorities(dsk: Any) -> dict[Any, Any]:
    """The ``priority`` annotation of each task of ``dsk`` that has one (dask.annotate)."""
    annotations = dsk.__dask_annotations__() if hasattr(dsk, "__dask_annotations__") else {}
    return dict(annotations.get("priority", {}))


def _ready_by_priority(priority: dict[Any, Any]) -> Any:
    """A dask callback (entered: beside the run's others, which ``get_async`` reads only where it is
    given none) that puts its ready tasks (a stack: the last is sent first) in order of ``priority``
    (0: none given), highest last, at the start and after each task; tasks of one priority keep dask's
    order."""
    from dask.callbacks import Callback

    def order(state: dict[str, Any]) -> None:
        state["ready"].sort(key=lambda key: priority.get(key, 0))

    def after_task(key: Any, result: Any, dsk: Any, state: dict[str, Any], worker: Any) -> None:
        order(state)

    return Callback(start_state=lambda dsk, state: order(state), posttask=after_task)


def _packed_task_error(exc: BaseException, dumps: Callable[[Any], bytes]) -> bytes:
    """A task's error as a worker process sends it back (dask's ``pack_exception``): with its traceback,
    or, where that cannot be pickled (a RecursionError's, thousands of frames deep), as an error that says
    so without it; the pool's own try would fail the same way and break the pool (every worker lost)."""
    from dask.multiprocessing import pack_exception

    try:
        return pack_exception(exc, dumps)
    except BaseException:
        unsent = RuntimeError(f"a task failed ({type(exc).__name__}), and its error could not be sent back")
        return dumps((unsent, None))


def _in_processes(objs: Sequence[Any], processes: int, by_priority: bool = False) -> list[Any]:
    before = direct_children()
    with _told_if_lost():
        # the workers ignore a Ctrl-C to the process group: this process stops them (cli.main); they are
        # forked at the pool's first task (a fork context starts them all then), in dask.compute
        with forking_workers():
            pool = _pool(processes)
            with _stopped_if_failed(pool, before):
                values = _computed_on(pool, objs, processes, by_priority)
            pool.shutdown()
            return values


def _pool(processes: int) -> Any:
    """The pool dask's processes scheduler would make itself (dask.multiprocessing.get), made here so that
    a stopped run can stop its workers (_stopped_if_failed), and so that a worker has its next task
    queued (_queued_get): every task is still sent by dask's scheduler, nothing else runs in it. On Linux
    its workers are forked, all at its first task."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    import dask.multiprocessing

    context = multiprocessing.get_context("fork" if sys.platform == "linux" else "spawn")
    return ProcessPoolExecutor(
        processes, mp_context=context, initializer=dask.multiprocessing.initialize_worker_process
    )


def _computed_on(pool: Any, objs: Sequence[Any], processes: int, by_priority: bool = False) -> list[Any]:
    from functools import partial

    import dask

    # chunksize 1: each ready task goes to a free worker (dask's default sends up to 6 ready tasks to one
    # worker as one batch: one rank's parts then ran on one worker of two)
    get = partial(_queued_get, pool=pool, processes=processes, by_priority=by_priority)
    return list(dask.compute(*objs, scheduler=get))


@contextlib.contextmanager
def _stopped_if_failed(pool: Any, before: set[int]) -> Iterator[None]:
    """A failed or stopped run's workers (this process's children but ``before``) stopped at once,
    whatever they run or have queued (none writes after the run's end), not waited for."""
    try:
        yield
    except BaseException:
        stop_children(spared=before)
        pool.shutdown(wait=False, cancel_futures=True)
        raise


@contextlib.contextmanager
def _told_if_lost() -> Iterator[None]:
    from concurrent.futures.process import BrokenProcessPool

    try:
        yield
    except BrokenProcessPool:
        # a kill of the process group reaches its processes one after the other: a worker it ended
        # first is no news if this process is stopped by the same signal in a moment
        time.sleep(SIGNAL_SPREAD_SECONDS)
        raise WorkerLost(None, "a local worker process died (out of memory?); nothing was written") from None


class ForkedWorker:
    """One local worker process of dask's processes scheduler (forked_worker), for graphs of this
    process's threads whose work runs beside this process's own: ``compute`` runs one there (without
    progress), ``close`` ends the process once its work is done."""

    def __init__(self, pool: Any) -> None:
        self._pool = pool

    def compute(self, objs: Sequence[Any]) -> list[Any]:
        with _told_if_lost():
            return _computed_on(self._pool, objs, 1)

    def close(self) -> None:
        self._pool.shutdown()


def _first_task() -> Any:
    """A task that does nothing but run (its worker's pid), for a pool to start its workers on."""
    import dask

    return dask.delayed(os.getpid, pure=False)(dask_key_name="worker-start")


@contextlib.contextmanager
def forked_worker() -> Iterator[ForkedWorker]:
    """A ForkedWorker whose process is forked now, for a run in this process's threads, before they start:
    called while this process runs no other thread (processes.alone_in_process), so that no lock another
    thread holds at the fork instant (a collector pause's, a stream's buffer's, a C library's) is held
    for ever in the worker. Ended at the block's end (at once if the block fails), if not closed before
    (graph/rank_plan.py: a big rank's Bench graph, unpickled here once the worker is gone)."""
    before = direct_children()
    with _told_if_lost(), forking_workers():
        pool = _pool(1)
        # its worker forked at the pool's first task, now: a task of dask's scheduler as every other
        _computed_on(pool, [_first_task()], 1)
    with _stopped_if_failed(pool, before):
        yield ForkedWorker(pool)
    pool.shutdown()
