"""A rank's compare graph replayed on simulated local worker processes: where its tasks wait, without a
quiet host.

    python workflows/timeline_compare.py -tp TARGET -gp GOLDEN --workers 1 --repeat 2 --save T.jsonl
    python workflows/replay_compare.py -tp TARGET -gp GOLDEN --timelines T.jsonl [--workers 2] [--runs 100]
        [--noise 0.15]

Builds the graph that ``--workers N`` runs for a one-rank dump (``chunked.rank_file``, not shared, with
the summary's nodes) and runs it through dask's own scheduling loop (``dask.local.get_async``: its
ordering, its ready stack, ``scheduler.TASKS_QUEUED_PER_WORKER`` tasks queued a worker) on a simulated
pool: a task starts when a worker is free and lasts its CPU time in the saved timelines (the median of
its kind and label; each run drawn with lognormal ``--noise``), the process that schedules taking
``--handling`` seconds a finished task. Each run builds the graph again (new keys: dask's order among
equal tasks changes with them). Prints the median and mean end of the tasks, their loss against a
perfect share (CPU / workers), and the workers' idle time by the kind of task each idle ended on. What it
leaves out: the start and end in this process, the workers slowing each other, the host's load.
"""

from __future__ import annotations

import argparse
import heapq
import json
import random
import statistics
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from timeline_compare import task_label  # noqa: E402


class _Done:
    """A submitted batch of tasks, as dask.local reads a future (``result``, ``add_done_callback``)."""

    def __init__(self, batch: list[Any]) -> None:
        self.batch = batch

    def add_done_callback(self, callback: Callable[[Any], None]) -> None:
        pass  # (the replay hands the batch to dask's queue itself: _Pool.next_done)

    def result(self) -> list[tuple[Any, tuple[None, int], bool]]:
        return [(args[0], (None, 0), False) for args in self.batch]


class _Pool:
    """Simulated worker processes taking submitted tasks in order, each as soon as it is free."""

    def __init__(self, workers: int, seconds: Callable[[Any], float], handling: float) -> None:
        self.free = [0.0] * workers
        self.busy = [0.0] * workers
        self.seconds, self.handling = seconds, handling
        self.now = 0.0  # (where the process that schedules is)
        self.done: list[tuple[float, int, _Done]] = []
        self.idle: defaultdict[str, float] = defaultdict(float)

    def submit(self, function: Any, batch: list[Any]) -> _Done:
        done = _Done(batch)
        w = min(range(len(self.free)), key=self.free.__getitem__)
        start = max(self.free[w], self.now)
        if self.free[w]:
            self.idle[batch[0][0].split("-")[0]] += start - self.free[w]
        took = sum(self.seconds(args[0]) for args in batch)
        self.free[w], self.busy[w] = start + took, self.busy[w] + took
        heapq.heappush(self.done, (start + took, id(done), done))
        return done

    def next_done(self, queue: Any) -> _Done:
        end, _, done = heapq.heappop(self.done)
        self.now = max(self.now, end) + self.handling
        return done


def _seconds(timelines: Path) -> Callable[[str, str], float]:
    """Each task's CPU seconds by its kind and label (the median over the saved runs; a label not seen:
    its kind's median)."""
    by_label: dict[tuple[str, str], list[float]] = defaultdict(list)
    by_kind: dict[str, list[float]] = defaultdict(list)
    for line in timelines.read_text().splitlines():
        for task in json.loads(line)["tasks"]:
            by_label[task["kind"], task.get("label", "")].append(task["cpu"])
            by_kind[task["kind"]].append(task["cpu"])
    labelled = {key: statistics.median(cpu) for key, cpu in by_label.items()}
    kinds = {kind: statistics.median(cpu) for kind, cpu in by_kind.items()}
    return lambda kind, label: labelled.get((kind, label), kinds.get(kind, 0.0))


def _replay(args: argparse.Namespace, seconds: Callable[[str, str], float]) -> tuple[float, _Pool]:
    import dask.local
    from dask.optimization import cull, fuse
    from dask.utils import ensure_dict, key_split

    from msprobe_dask.analysis.tolerance import Tolerance
    from msprobe_dask.dump.layouts import pair_dumps
    from msprobe_dask.pipeline.chunked import rank_file
    from msprobe_dask.pipeline.pairing import MatchOptions
    from msprobe_dask.pipeline.scheduler import TASKS_QUEUED_PER_WORKER

    ((label, npu, bench),) = pair_dumps(args.target_path, args.golden_path)
    graph = rank_file(
        label, npu, bench, MatchOptions(), Path("replayed.csv"), Tolerance(), shared=False, linked=False
    )
    dsk: dict[Any, Any] = {}
    for output in graph.outputs:
        dsk.update(ensure_dict(output.__dask_graph__()))
    keys = [output.key for output in graph.outputs]
    culled, dependencies = cull(dsk, keys)
    fused, _ = fuse(culled, keys, dependencies)
    drawn = {
        k: seconds(key_split(k), task_label(t)) * random.lognormvariate(0, args.noise)
        for k, t in fused.items()
    }
    pool = _Pool(args.workers, drawn.__getitem__, args.handling)
    queue_get = dask.local.queue_get
    dask.local.queue_get = pool.next_done  # (the replay's clock, not a thread's wait)
    try:
        dask.local.get_async(
            pool.submit, args.workers * (1 + TASKS_QUEUED_PER_WORKER), fused, keys, chunksize=1
        )
    finally:
        dask.local.queue_get = queue_get
    return max(pool.free), pool


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-tp", "--target_path", required=True)
    parser.add_argument("-gp", "--golden_path", required=True)
    parser.add_argument("--timelines", type=Path, required=True, help="timeline_compare.py --save's file")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--noise", type=float, default=0.15, help="sigma of each task's lognormal factor")
    parser.add_argument("--handling", type=float, default=0.0005, help="seconds a finished task takes here")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    random.seed(args.seed)
    seconds = _seconds(args.timelines)
    ends: list[float] = []
    losses: list[float] = []
    idle: defaultdict[str, float] = defaultdict(float)
    for _ in range(args.runs):
        end, pool = _replay(args, seconds)
        ends.append(end)
        losses.append(end - sum(pool.busy) / args.workers)
        for kind, waited in pool.idle.items():
            idle[kind] += waited
    loss = statistics.mean(losses)
    print(
        f"{args.workers} workers, {args.runs} runs: tasks end median {statistics.median(ends):.3f} s, "
        f"mean {statistics.mean(ends):.3f} s; loss against CPU / workers: mean {loss:.3f} s"
    )
    longest = sorted(idle.items(), key=lambda item: -item[1])[:6]
    waits = ", ".join(f"{kind} {waited / args.runs:.3f}" for kind, waited in longest)
    print(f"idle a run (all workers), by the task it ended on: {waits}")


if __name__ == "__main__":
    main()
