"""Profile graph_visualize: time per stage (task name) and the process tree's peak RSS.

    python workflows/profile_graph.py -tp TARGET [-gp GOLDEN] [--workers N] [--repeat 1]

Runs ``graph_visualize`` through the Python API in this process: without ``--workers`` on the
scheduler ``computing()`` chooses for the input (no flag; ``--one-thread``: one thread, and the
times are this process's CPU times); with ``--workers N`` as the command line's ``--workers N`` runs
it (a LocalCluster of N forked single-threaded worker processes, one replica of each rank's prepared
graphs on each: graph/api.py), its scheduler's task stream giving each task's worker and times (this
module is the cluster's scheduler preload, see dask_setup). Prints, per stage (the tasks' key prefix:
build, prepare, rows, insert, finish, write...; a fetch of a task's inputs from another worker as
``prepare:transfer``...), the number of tasks, the sum of their durations, and the span from the
first start to the last end, then the wall time and the peak of the summed resident sets of this
process and its children (sampled every 20 ms); with ``--workers``, the CPU time of the worker
processes (all of it: tasks, fetches, the event loop) and of this process (the imports, the cluster's
start, its scheduler), and each worker's CPU time in its tasks by stage and outside them.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


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
        me = psutil.Process()
        while not self._stop.is_set():
            rss = 0
            for p in [me, *me.children(recursive=True)]:
                try:
                    rss += p.memory_info().rss
                except psutil.Error:
                    pass
            self.peak = max(self.peak, rss)
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
        graph_visualize(args.target, args.golden, output_path=out)
    return spans, time.perf_counter() - t


PRELOAD = "profile_graph_preload"
"""This module's name as the LocalCluster's scheduler preloads it (distributed.scheduler.preload)."""
_STREAMS: list[Any] = []  # the task stream plugin of each run's scheduler (dask_setup)


_WORKER_LOG: list[
    str
] = []  # the file each worker of the run's LocalCluster appends its CPU to (dask_teardown)


def dask_setup(server: Any) -> None:
    """(distributed's preload hook, in the scheduler and the workers of the run's LocalCluster.) Record
    the scheduler's task stream."""
    from distributed import Scheduler
    from distributed.diagnostics.task_stream import TaskStreamPlugin

    if isinstance(server, Scheduler):
        plugin = TaskStreamPlugin(server, maxlen=1_000_000)
        server.add_plugin(plugin)
        _STREAMS.append(plugin)


def dask_teardown(server: Any) -> None:
    """(distributed's preload hook.) A worker, as it closes, writes its process's CPU time and its tasks'
    CPU time by stage (the thread CPU distributed measures around each task: Worker.digests_total)."""
    import json
    import resource

    from distributed import Worker

    if not isinstance(server, Worker) or not _WORKER_LOG:
        return
    tasks: dict[str, float] = defaultdict(float)
    for key, seconds in server.digests_total.items():
        if isinstance(key, tuple) and len(key) == 5 and key[0] == "execute" and key[3] == "thread-cpu":
            tasks[_stage(key[2])] += seconds
    me = resource.getrusage(resource.RUSAGE_SELF)
    with open(_WORKER_LOG[0], "a") as f:
        f.write(json.dumps({"cpu": me.ru_utime + me.ru_stime, "tasks": tasks}) + "\n")


def _worker_cpu(log: Path) -> None:
    """Each worker's CPU time: in its tasks by stage, and outside them (its event loop: results sent and
    fetched, the worker's start)."""
    import json

    lines = log.read_text().splitlines() if log.exists() else []
    for i, line in enumerate(sorted(lines)):
        cpu, tasks = json.loads(line).values()
        stages = ", ".join(
            f"{k} {v:.2f}" for k, v in sorted(tasks.items(), key=lambda kv: -kv[1]) if v >= 0.005
        )
        print(
            f"worker {i}: CPU {cpu:.2f} s: tasks {sum(tasks.values()):.2f} s ({stages}), outside tasks ",
            end="",
        )
        print(f"{cpu - sum(tasks.values()):.2f} s")


def _cluster(args: argparse.Namespace, out: str) -> tuple[list[tuple[str, float, float, str]], float]:
    import resource

    import dask

    from msprobe_dask.graph.api import graph_visualize
    from msprobe_dask.pipeline.scheduler import RunOptions

    sys.modules[PRELOAD] = sys.modules[__name__]
    _STREAMS.clear()
    log = Path(out) / "workers.jsonl"  # (the workers are forked: they see this list filled)
    _WORKER_LOG[:] = [str(log)]
    children, mine = resource.getrusage(resource.RUSAGE_CHILDREN), time.process_time()
    t = time.perf_counter()
    preloads = {"distributed.scheduler.preload": [PRELOAD], "distributed.worker.preload": [PRELOAD]}
    with dask.config.set(preloads):
        graph_visualize(args.target, args.golden, output_path=out, run=RunOptions(workers=args.workers))
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)  # (the workers are waited for by the run's end)
    workers = after.ru_utime + after.ru_stime - children.ru_utime - children.ru_stime
    print(f"CPU: worker processes {workers:.2f} s, this process {time.process_time() - mine:.2f} s")
    _worker_cpu(log)
    spans = []
    for task in _STREAMS[0].buffer:
        for part in task["startstops"]:
            stage = _stage(task["key"]) + ("" if part["action"] == "compute" else f":{part['action']}")
            spans.append((stage, part["start"], part["stop"], task["worker"]))
    return spans, wall


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
            spans, wall = (_cluster if args.workers else _local)(args, out)
        _report(spans, wall, peak.peak)
        walls.append(wall)
    print(f"median wall {statistics.median(walls):.2f} s; load {psutil.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
