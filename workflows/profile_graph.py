"""Profile graph_visualize: time per stage (task name) and the process tree's peak RSS.

    python workflows/profile_graph.py -tp TARGET [-gp GOLDEN] [--workers N] [--repeat 1]

Runs ``graph_visualize`` through the Python API in this process: without ``--workers`` on dask's
threaded scheduler in this process (what no flag chooses for an input below
``scheduler.GRAPH_PROCESSES_FROM_BYTES``; ``--one-thread``: one thread, and the times are this process's
CPU times); with ``--workers N`` as the command line's ``--workers N`` runs it (dask's processes
scheduler, N forked worker processes, each holding the graphs it builds or loads: graph/held.py), each
task timed in the worker that runs it (dask.local.execute_task wrapped before the workers are forked).
Prints, per stage (the tasks' key prefix: build, summary, rows, insert, finish, write...), the number of
tasks, the sum of their durations, and the span from the first start to the last end, then the wall time
and the peak of the summed resident sets of this process and its children (sampled every 20 ms); with
``--workers``, the CPU time of the worker processes and of this process (the imports, the plan, dask's
scheduler), and each worker's CPU time in its tasks by stage (thread CPU) and outside them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "workflows"))
from measure import tree_sample  # noqa: E402


class TreePeak:
    """The peak of the summed RSS of this process and its children, sampled in a thread."""

    def __init__(self) -> None:
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> TreePeak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        me = os.getpid()
        while not self._stop.is_set():
            self.peak = max(self.peak, tree_sample(me)[0])
            time.sleep(0.02)


def _stage(key: object) -> str:
    name = key[0] if isinstance(key, tuple) else str(key)
    return name.split("-")[0]


def _report(spans: list[tuple[str, float, float, str]], wall: float, peak: int) -> None:
    by: dict[str, list[tuple[float, float, str]]] = defaultdict(list)
    for stage, start, stop, where in spans:
        by[stage].append((start, stop, where))
    t0 = min(s for _, s, _, _ in spans)
    print(f"{'stage':18s} {'tasks':>5s} {'busy s':>7s} {'from':>6s} {'to':>6s}  workers")
    for stage, runs in sorted(by.items(), key=lambda kv: min(s for s, _, _ in kv[1])):
        busy = sum(b - a for a, b, _ in runs)
        first, last = min(a for a, _, _ in runs) - t0, max(b for _, b, _ in runs) - t0
        workers = len({w for _, _, w in runs})
        print(f"{stage:18s} {len(runs):5d} {busy:7.2f} {first:6.2f} {last:6.2f}  {workers}")
    print(f"wall {wall:.2f} s, peak RSS {peak / 2**20:.0f} MiB (process tree)")


def _local(args: argparse.Namespace, out: str) -> tuple[list[tuple[str, float, float, str]], float]:
    import dask
    from dask.callbacks import Callback

    from msprobe_dask.graph.api import graph_visualize
    from msprobe_dask.pipeline.scheduler import RunOptions

    starts: dict[object, float] = {}
    spans: list[tuple[str, float, float, str]] = []
    lock = threading.Lock()

    clock = time.process_time if args.one_thread else time.perf_counter

    def pretask(key, dsk, state):  # noqa: ANN001
        starts[key] = clock()

    def posttask(key, result, dsk, state, worker_id):  # noqa: ANN001
        with lock:
            spans.append((_stage(key), starts[key], clock(), str(worker_id)))

    t = time.perf_counter()
    with (
        Callback(pretask=pretask, posttask=posttask),
        dask.config.set(num_workers=1 if args.one_thread else None),
    ):
        # (input_bytes 1: a size that runs in this process, where the callbacks see the tasks)
        graph_visualize(args.target, args.golden, output_path=out, run=RunOptions(input_bytes=1))
    return spans, time.perf_counter() - t


def _timed_tasks(log: str) -> Any:
    """dask.local.execute_task wrapped (to be restored with the returned original) so that each task
    appends its worker process, key, wall start and end and thread CPU time to ``log``: the workers,
    forked after this, run the wrapped one."""
    import json

    import dask.local

    execute = dask.local.execute_task

    def timed(key: Any, *args: Any) -> Any:
        import os

        start, cpu = time.time(), time.thread_time()
        try:
            return execute(key, *args)
        finally:
            record = [os.getpid(), str(key), start, time.time(), time.thread_time() - cpu]
            with open(log, "a") as f:
                f.write(json.dumps(record) + "\n")

    dask.local.execute_task = timed
    return execute


def _workers(args: argparse.Namespace, out: str) -> tuple[list[tuple[str, float, float, str]], float]:
    import json
    import resource

    import dask.local

    from msprobe_dask.graph.api import graph_visualize
    from msprobe_dask.pipeline.scheduler import RunOptions

    log = Path(out) / "tasks.jsonl"
    execute = _timed_tasks(str(log))
    children, mine = resource.getrusage(resource.RUSAGE_CHILDREN), time.process_time()
    t = time.perf_counter()
    try:
        graph_visualize(args.target, args.golden, output_path=out, run=RunOptions(workers=args.workers))
    finally:
        dask.local.execute_task = execute
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)  # (the workers are waited for by the run's end)
    workers = after.ru_utime + after.ru_stime - children.ru_utime - children.ru_stime
    print(f"CPU: worker processes {workers:.2f} s, this process {time.process_time() - mine:.2f} s")
    records = [json.loads(line) for line in log.read_text().splitlines()]
    by_worker: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for pid, key, _, _, cpu in records:
        by_worker[pid][_stage(key)] += cpu
    for i, (_, stages) in enumerate(sorted(by_worker.items())):
        shown = ", ".join(
            f"{k} {v:.2f}" for k, v in sorted(stages.items(), key=lambda kv: -kv[1]) if v >= 0.005
        )
        print(f"worker {i}: tasks {sum(stages.values()):.2f} s of thread CPU ({shown})")
    return [(_stage(key), start, end, str(pid)) for pid, key, start, end, _ in records], wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-tp", dest="target", required=True)
    parser.add_argument("-gp", dest="golden")
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument(
        "--one-thread", action="store_true", help="in this process on one thread: stage times are CPU times"
    )
    args = parser.parse_args()
    walls = []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as out, TreePeak() as peak:
            spans, wall = (_workers if args.workers else _local)(args, out)
        _report(spans, wall, peak.peak)
        walls.append(wall)
    print(f"median wall {statistics.median(walls):.2f} s; load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
