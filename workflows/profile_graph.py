"""Profile graph_visualize: time per stage (task name) and the process tree's peak RSS.

    python workflows/profile_graph.py -tp TARGET [-gp GOLDEN] [--workers N] [--repeat 1]

Runs ``graph_visualize`` through the Python API in this process: without ``--workers`` on the
scheduler ``computing()`` chooses for the input (no flag; ``--one-thread``: one thread, and the
times are this process's CPU times), with ``--workers N`` on a LocalCluster of N
single-threaded worker processes made here (its task stream gives each task's worker and times). Prints,
per stage (the tasks' key prefix: build, prepare, rows, finish, link, write...), the number of tasks,
the CPU-side sum of their durations, and the span from the first start to the last end, then the
wall time and the peak of the summed resident sets of this process and its children (sampled every
20 ms).
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
    print(f"{'stage':10s} {'tasks':>5s} {'busy s':>7s} {'from':>6s} {'to':>6s}  workers")
    for stage, runs in sorted(by.items(), key=lambda kv: min(s for s, _, _ in kv[1])):
        busy = sum(b - a for a, b, _ in runs)
        first, last = min(a for a, _, _ in runs) - t0, max(b for _, b, _ in runs) - t0
        workers = len({w for _, _, w in runs})
        print(f"{stage:10s} {len(runs):5d} {busy:7.2f} {first:6.2f} {last:6.2f}  {workers}")
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


def _cluster(args: argparse.Namespace, out: str) -> tuple[list[tuple[str, float, float, str]], float]:
    from distributed import Client, LocalCluster, get_task_stream

    from msprobe_dask.graph.api import graph_visualize

    with (
        LocalCluster(n_workers=args.workers, threads_per_worker=1, dashboard_address=None) as cluster,
        Client(cluster) as client,
    ):
        t = time.perf_counter()
        with get_task_stream(client) as stream:
            graph_visualize(args.target, args.golden, output_path=out, client=client)
        wall = time.perf_counter() - t
    spans = []
    for task in stream.data:
        for part in task["startstops"]:
            if part["action"] == "compute":
                spans.append((_stage(task["key"]), part["start"], part["stop"], task["worker"]))
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
