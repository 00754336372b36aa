"""Profile graph_visualize: time per stage (task name) and the process tree's peak RSS.

    python workflows/profile_graph.py -tp TARGET [-gp GOLDEN] [--workers N] [--repeat 1]

Runs ``graph_visualize`` through the Python API in this process: without ``--workers`` on dask's
threaded scheduler in this process (what no flag chooses for an input below
``scheduler.LOCAL_CLUSTER_FROM_BYTES``; ``--one-thread``: one thread, and the times are this process's
CPU times); with ``--workers N`` as the command line's ``--workers N`` runs
it (a LocalCluster of N forked single-threaded worker processes, one replica of each rank's prepared
graphs on each: graph/api.py), its scheduler's task stream giving each task's worker and times (this
module is the cluster's scheduler preload, see dask_setup). Prints, per stage (the tasks' key prefix:
build, prepare, rows, insert, finish, write...; a fetch of a task's inputs from another worker as
``prepare:transfer``...), the number of tasks, the sum of their durations, and the span from the
first start to the last end, then the wall time and the peak of the summed resident sets of this
process and its children (sampled every 20 ms); with ``--workers``, the CPU time of the worker
processes (all of it: tasks, fetches, the event loop) and of this process (the imports, the cluster's
start, its scheduler), and each worker's CPU time in its tasks by stage and outside them (``outside``:
its event loop, the worker process's main thread, from its first task to its last and in all; its
other threads; its garbage collections, their number and thread CPU time, in tasks or not; the page
faults of its task thread and their system time by stage); and the run
replayed as on an idle host (``replay``): each task taking its thread CPU time on its worker, in the
order its worker's priorities give, once its inputs are there (HOP_SECONDS from another worker), so
that runs on a loaded host compare by their critical path.
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


PRELOAD = "profile_graph_preload"
"""This module's name as the LocalCluster's scheduler preloads it (distributed.scheduler.preload)."""
_STREAMS: list[Any] = []  # the task stream plugin of each run's scheduler (dask_setup)


_WORKER_LOG: list[
    str
] = []  # the file each worker of the run's LocalCluster appends its CPU to (dask_teardown)
_TASK_CPU: dict[str, float] = {}  # (in a worker) each task's thread CPU time (_timed_tasks)
_FAULTS: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])  # (in a worker) per stage: the task
# thread's minor page faults and system time (_timed_tasks)
_GC = {"collections": 0, "seconds": 0.0, "in_tasks": 0.0}  # (in a worker) its garbage collections
_LOOP: dict[str, float] = {}  # (in a worker) its main thread's CPU at its first task and its last
_TASKS: dict[str, tuple[Any, list[str]]] = {}  # (in the scheduler) each task's priority and inputs
HOP_SECONDS = 0.01
"""In the replay, what an input made on another worker adds to a task's start (a small result: the task
stream's transfers at load 1-2)."""


def dask_setup(server: Any) -> None:
    """(distributed's preload hook, in the scheduler and the workers of the run's LocalCluster.) Record
    the scheduler's task stream."""
    from distributed import Scheduler
    from distributed.diagnostics.task_stream import TaskStreamPlugin

    if isinstance(server, Scheduler):
        plugin = TaskStreamPlugin(server, maxlen=1_000_000)
        server.add_plugin(plugin)
        _STREAMS.append(plugin)
        server.add_plugin(_graph_record(server))
    else:
        _timed_tasks()


def _graph_record(scheduler: Any) -> Any:
    """A scheduler plugin that records each task's priority and inputs as the scheduler runs it
    (_TASKS)."""
    from distributed.diagnostics.plugin import SchedulerPlugin

    class GraphRecord(SchedulerPlugin):
        name = "profile-graph-record"

        def transition(self, key: Any, start: str, finish: str, *args: Any, **kwargs: Any) -> None:
            if finish == "processing":
                ts = scheduler.tasks[key]
                _TASKS[str(key)] = (ts.priority, [str(d.key) for d in ts.dependencies])

    return GraphRecord()


def _timed_tasks() -> None:
    """(In a worker.) Measure each task's thread CPU time (_TASK_CPU), page faults and system time
    (_FAULTS), around distributed's _run_task; the main thread's CPU at the first and the last task
    (_LOOP); the process's garbage collections (_GC)."""
    import gc
    import resource

    import distributed.worker

    run = distributed.worker._run_task
    tasks = threading.local()  # (set in the task thread while a task runs)

    def timed(task: Any, data: Any, execution_state: Any, key: Any, *args: Any) -> Any:
        _LOOP.setdefault("first", _main_thread_cpu())
        t, use = time.thread_time(), resource.getrusage(resource.RUSAGE_THREAD)
        tasks.running = True
        try:
            return run(task, data, execution_state, key, *args)
        finally:
            tasks.running = False
            _TASK_CPU[str(key)] = _TASK_CPU.get(str(key), 0.0) + time.thread_time() - t
            now = resource.getrusage(resource.RUSAGE_THREAD)
            faults = _FAULTS[_stage(key)]
            faults[0] += now.ru_minflt - use.ru_minflt
            faults[1] += now.ru_stime - use.ru_stime
            _LOOP["last"] = _main_thread_cpu()

    started = [0.0]

    def collected(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started[0] = time.thread_time()
            return
        seconds = time.thread_time() - started[0]
        _GC["collections"] += 1
        _GC["seconds"] += seconds
        if getattr(tasks, "running", False):
            _GC["in_tasks"] += seconds

    distributed.worker._run_task = timed
    gc.callbacks.append(collected)


def _main_thread_cpu() -> float:
    """(In a worker.) The CPU time of the process's main thread (a forked worker's event loop)."""
    for thread in psutil.Process().threads():
        if thread.id == threading.main_thread().native_id:
            return thread.user_time + thread.system_time
    return 0.0


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
    loop = {**_LOOP, "all": _main_thread_cpu()}
    threads = sum(t.user_time + t.system_time for t in psutil.Process().threads())
    record = {"cpu": me.ru_utime + me.ru_stime, "tasks": tasks, "each": _TASK_CPU, "loop": loop}
    record.update(threads=threads, gc=_GC, faults=_FAULTS, system=me.ru_stime)
    with open(_WORKER_LOG[0], "a") as f:
        f.write(json.dumps(record) + "\n")


def _worker_cpu(log: Path) -> None:
    """Each worker's CPU time: in its tasks by stage, and outside them (its event loop: results sent and
    fetched, the worker's start)."""
    import json

    lines = log.read_text().splitlines() if log.exists() else []
    for i, line in enumerate(sorted(lines)):
        record = json.loads(line)
        cpu, tasks = record["cpu"], record["tasks"]
        stages = ", ".join(
            f"{k} {v:.2f}" for k, v in sorted(tasks.items(), key=lambda kv: -kv[1]) if v >= 0.005
        )
        print(
            f"worker {i}: CPU {cpu:.2f} s: tasks {sum(tasks.values()):.2f} s ({stages}), outside tasks ",
            end="",
        )
        print(f"{cpu - sum(tasks.values()):.2f} s")
        _print_outside(record)


def _print_outside(record: dict[str, Any]) -> None:
    """A worker's CPU outside its tasks, and what the collector and the page faults took (_timed_tasks)."""
    loop, gc, faults = record["loop"], record["gc"], record["faults"]
    during = loop.get("last", 0.0) - loop.get("first", 0.0)
    others = record["threads"] - loop["all"] - sum(record["tasks"].values())
    print(
        f"    event loop (main thread) {loop['all']:.2f} s, {during:.2f} s of it from the first task's start "
        f"to the last's; other threads {max(others, 0.0):.2f} s; {gc['collections']} garbage "
        f"collections {gc['seconds']:.3f} s ({gc['in_tasks']:.3f} s in tasks)"
    )
    by = ", ".join(
        f"{k} {n:.0f} ({s:.2f} s)"
        for k, (n, s) in sorted(faults.items(), key=lambda kv: -kv[1][0])
        if n >= 100
    )
    print(f"    system time {record['system']:.2f} s; the task thread's page faults: {by}")


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
    _print_replay(_replay(log))
    return spans, wall


def _replay(log: Path) -> dict[str, tuple[float, float, str]]:
    """The run's tasks as on an idle host: {key: (start, end, worker)}. Each task runs on the worker that
    ran it, for its thread CPU time; a worker free at time t takes, of its tasks whose inputs are there
    (+HOP_SECONDS from another worker), the one of highest priority (the scheduler's), else waits for
    the first to be ready."""
    import json

    cpu: dict[str, float] = {}
    for line in log.read_text().splitlines() if log.exists() else []:
        cpu.update(json.loads(line)["each"])
    where = {str(t["key"]): t["worker"] for t in _STREAMS[0].buffer}
    todo: dict[str, set[str]] = defaultdict(set)
    for key, worker in where.items():
        todo[worker].add(key)
    done: dict[str, tuple[float, float, str]] = {}
    free: dict[str, float] = defaultdict(float)

    def ready(key: str, worker: str) -> float | None:
        inputs = [d for d in _TASKS.get(key, (0, []))[1] if d in where]
        if any(d not in done for d in inputs):
            return None
        return max([done[d][1] + (0.0 if where[d] == worker else HOP_SECONDS) for d in inputs], default=0.0)

    while any(todo.values()):
        best: tuple[float, str, str] | None = None
        for worker, keys in todo.items():
            times = [(t, k) for k in keys if (t := ready(k, worker)) is not None]
            if not times:
                continue
            now = [k for t, k in times if t <= free[worker]]
            start = free[worker] if now else min(t for t, _ in times)
            key = min(now or [k for t, k in times if t == start], key=lambda k: _TASKS.get(k, (0, []))[0])
            if best is None or start < best[0]:
                best = (start, worker, key)
        if best is None:
            raise RuntimeError("replay: no task can run")
        start, worker, key = best
        done[key] = (start, start + cpu.get(key, 0.0), worker)
        free[worker] = done[key][1]
        todo[worker].remove(key)
    return done


def _print_replay(done: dict[str, tuple[float, float, str]]) -> None:
    """The replay's end and the end of each stage, and each worker's time in tasks and idle."""
    ends: dict[str, float] = defaultdict(float)
    for key, (_, end, _) in done.items():
        ends[_stage(key)] = max(ends[_stage(key)], end)
    last = max(ends.values(), default=0.0)
    stages = ", ".join(f"{stage} {end:.3f}" for stage, end in sorted(ends.items(), key=lambda kv: kv[1]))
    hop = f"{HOP_SECONDS * 1000:.0f} ms a hop"
    print(f"replayed as on an idle host (thread CPU, {hop}): {last:.3f} s; ends: {stages}")
    workers: dict[str, float] = defaultdict(float)
    for start, end, worker in done.values():
        workers[worker] += end - start
    busy = ", ".join(f"{b:.3f}" for b in sorted(workers.values()))
    print(f"replay: each worker's tasks {busy} s, the rest of the {last:.3f} s waiting")


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
