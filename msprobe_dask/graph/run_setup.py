"""Where a graph_visualize run computes, and what that choice sets: the size of its input that chooses
the scheduler (pipeline/scheduler.py), its spool folder and rank window on local worker processes
(graph/held.py), its graphs built in turn in this process for a big input.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from msprobe_dask.errors import OutputError, cannot
from msprobe_dask.graph.gcpause import rare_full_collections
from msprobe_dask.graph.held import Spool
from msprobe_dask.graph.rank_plan import input_sizes
from msprobe_dask.pipeline.scheduler import RunOptions, computing
from msprobe_dask.processes import alone_in_process

if TYPE_CHECKING:  # (the merge modules are imported only for a merge)
    from msprobe_dask.graph.merge.strategy import ParallelParams

IN_TURN_FROM_BYTES = 64 << 20
"""From this many bytes of dump.json in the run, a (step, rank)'s two graphs are not built at once in this
process's threads, whose builds hold the GIL but for their scans: its Bench graph is built on a local
worker process beside them (Plan.bench, on more than one CPU), or after its NPU graph (Plan.in_turn,
on one CPU); below, at once: each side's reading of its dump.json without the GIL then runs
beside the other's build. The 96-block transformer (2 x 6.3 MB), in this process under chrt -r 1, 10
interleaved runs each: compute's start to the prepare's end 94.4 -> 86.0 ms (median), peak RSS the
same (101-106 MiB)."""


def graph_run(
    run: RunOptions | None,
    target: str | os.PathLike[str],
    golden: str | os.PathLike[str] | None,
    merge: Sequence[ParallelParams] = (),
) -> RunOptions:
    """``run`` for a graph of the inputs: its worker processes hold big graphs
    (RunOptions.holds_graphs), and the size of its dump.json files (unless given), all and the biggest
    (step, rank)'s (RunOptions.held_bytes), chooses where it runs (pipeline.scheduler.computing): 8 ranks
    of 50,050 entries a side (874 MB) on two worker processes under chrt -r 1 at load 13-19, 19.3-19.8 s
    and 36 s of CPU, against 34-35 s and 43 s in this process. A TP/PP ``merge`` (--rank_size: a
    ParallelParams a side) is sized by all its rank folders, and a worker holds a replica of each side at
    a time (graph/merge/plan.py): held_bytes their share of the data-parallel replicas the NPU side's
    sizes give (docs/performance.md section 5)."""
    run = run or RunOptions()
    if run.input_bytes:
        return replace(run, holds_graphs=True)
    if merge:
        from msprobe_dask.graph.merge.plan import merge_input_bytes

        size, p = merge_input_bytes(target, golden), merge[0]
        replicas = max(1, p.rank_size // max(1, p.tp * p.pp))
        return replace(run, holds_graphs=True, input_bytes=size, held_bytes=max(1, size // replicas))
    size, held = input_sizes(target, golden)
    return replace(run, holds_graphs=True, input_bytes=size, held_bytes=held)


def rank_window(client: Any, run: RunOptions | None) -> int:
    """How many (step, rank)s a run in this machine holds at a time (0: no bound, on a cluster): one
    more than there are processes working, so that one is built while the others' rows are made."""
    if client is not None or (run and run.address):
        return 0
    return max(1, (run or RunOptions()).local_processes) + 1


def spool_for(folder: Path, client: Any, run: RunOptions | None) -> Spool | None:
    """On local worker processes, whose tasks' results do not share (RunOptions.shares_results), where
    the run's big results wait (graph/held.py): the spool folder ``folder``, made by spooling. None
    elsewhere: the values travel."""
    if not _spooled(client, run) or run is None:
        return None
    return Spool(str(folder), run.local_processes > 1, rank_window(client, run))


def _spooled(client: Any, run: RunOptions | None) -> bool:
    return client is None and run is not None and not run.shares_results


RANKS_ALONE_PER_PROCESS = 2
"""With at least this many (step, rank)s a local worker process, one task makes each (one_task_a_rank)."""


def one_task_a_rank(client: Any, run: RunOptions | None, ranks: int) -> bool:
    """Whether one task makes each of the input's ``ranks`` (step, rank)s, from its builds to its chunks'
    rows (rank_plan.Plan.rank_alone): on local worker processes, with RANKS_ALONE_PER_PROCESS or more a
    process, each busy with ranks of its own (8 ranks of 50,050 entries a side on two: 47.3 -> 36.6 s
    of the workers' CPU). With fewer, a (step, rank)'s chunks are spread over the processes, each
    preparing the pair again from a graph the other built, so that none waits idle for the last ranks
    (one rank on two: 1.49x faster than on one)."""
    return (
        _spooled(client, run) and run is not None and ranks >= RANKS_ALONE_PER_PROCESS * run.local_processes
    )


@contextlib.contextmanager
def spooling(spool: Spool | None) -> Iterator[None]:
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


def in_this_process(client: Any, run: RunOptions | None) -> bool:
    """Whether the run computes in this process's threads (no ``client``, RunOptions.in_this_process)."""
    return client is None and run is not None and run.in_this_process


def big_here(client: Any, run: RunOptions | None) -> bool:
    """Whether the run computes in this process with an input of IN_TURN_FROM_BYTES or more: each (step,
    rank)'s two graphs are then not built at once here (builds_apart, else Plan.in_turn)."""
    return in_this_process(client, run) and run is not None and run.input_bytes >= IN_TURN_FROM_BYTES


def builds_apart(client: Any, run: RunOptions | None) -> bool:
    """Whether each (step, rank)'s Bench graph is built on a local worker process beside its NPU graph
    (Plan.bench): a big input in this process (big_here) with more than one CPU for its threads,
    while this process runs no other thread, so that the worker can be forked now (a Python caller's
    threads: the builds in turn; scheduler.forked_worker)."""
    return big_here(client, run) and run is not None and run.threads > 1 and alone_in_process()


def computed(obj: Any, client: Any = None, run: RunOptions | None = None) -> Any:
    """On ``client`` if given, else where ``run`` says (see pipeline.scheduler)."""
    if client is not None:
        return client.compute(obj).result()
    with rare_full_collections(), computing(run or RunOptions()) as compute:
        (value,) = compute([obj])
        return value
