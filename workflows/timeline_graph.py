"""The timeline of a graph_visualize command line on its LocalCluster, from the command's start to its exit.

    python workflows/timeline_graph.py -tp TARGET [-gp GOLDEN] [--workers 2] [--repeat 3]

Runs ``python -m msprobe_dask graph_visualize -q ... --workers N`` (the settings ``--workers`` given,
interleaved, ``--repeat`` rounds) with this module as the cluster's scheduler and worker preload
(distributed's ``preload`` settings, through DASK_ environment variables), and prints each run's
events in seconds from the command's start, with the CPU each process had taken by then: the
scheduler's start in the run's process (what came before it: the interpreter, the imports, the plan),
each worker's start (forked from the run's process) and its registration, the client's connection,
the graph's arrival, the first task's start and the last task's end, each worker's and the scheduler's
close, and the command's exit. Then, per setting, the medians of the start (to the first task), the
tasks (first start to last end) and the end (last end to exit).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

LOG = "TIMELINE_GRAPH_LOG"  # the environment variable naming the file the preloads append events to


def _cpu() -> float:
    use = resource.getrusage(resource.RUSAGE_SELF)
    return use.ru_utime + use.ru_stime


def _event(name: str, **fields: Any) -> None:
    with open(os.environ[LOG], "a") as f:
        f.write(json.dumps({"event": name, "t": time.time(), "pid": os.getpid(), "cpu": _cpu(), **fields}))
        f.write("\n")


def dask_setup(server: Any) -> None:
    """(distributed's preload hook, in the scheduler and in each worker.)"""
    from distributed import Scheduler

    if not isinstance(server, Scheduler):
        _event("worker start")
        return
    from distributed.diagnostics.plugin import SchedulerPlugin
    from distributed.diagnostics.task_stream import TaskStreamPlugin

    stream = TaskStreamPlugin(server, maxlen=1_000_000)
    server.add_plugin(stream)
    _event("scheduler start")

    class Timeline(SchedulerPlugin):
        name = "timeline-graph"

        def add_worker(self, scheduler: Any, worker: str) -> None:
            _event("worker registered")

        def add_client(self, scheduler: Any, client: str) -> None:
            _event("client connected")

        def update_graph(self, scheduler: Any, **kwargs: Any) -> None:
            _event("graph received")

        async def close(self) -> None:
            spans = [(p["start"], p["stop"]) for t in stream.buffer for p in t["startstops"]]
            if spans:
                _event("tasks", first=min(s for s, _ in spans), last=max(e for _, e in spans))

    server.add_plugin(Timeline())


def dask_teardown(server: Any) -> None:
    from distributed import Scheduler

    _event("scheduler close" if isinstance(server, Scheduler) else "worker close")


def _run(sides: list[str], setting: list[str]) -> dict[str, float]:
    """One run: its events printed, and its start, tasks and end (seconds)."""
    here = str(Path(__file__).resolve().parent)
    with tempfile.TemporaryDirectory() as out:
        log = Path(out) / "events.jsonl"
        preload = json.dumps([Path(__file__).stem])
        env = dict(
            os.environ,
            **{LOG: str(log), "DASK_DISTRIBUTED__SCHEDULER__PRELOAD": preload},
            DASK_DISTRIBUTED__WORKER__PRELOAD=preload,
            PYTHONPATH=os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p),
        )
        command = [sys.executable, "-m", "msprobe_dask", "graph_visualize", "-q", *sides, "-o", f"{out}/o"]
        t0 = time.time()
        done = subprocess.run([*command, *setting], env=env, capture_output=True, text=True)
        end = time.time() - t0
        if done.returncode:
            sys.exit(f"{' '.join(setting)}: exit {done.returncode}\n{done.stderr}")
        events = [json.loads(line) for line in log.read_text().splitlines()]
    (tasks,) = [e for e in events if e["event"] == "tasks"]
    first, last = tasks["first"] - t0, tasks["last"] - t0
    for e in sorted(events, key=lambda e: e["t"]):
        if e is not tasks:
            print(f"  {e['t'] - t0:6.3f} s  {e['event']:18s} pid {e['pid']:7d}  CPU {e['cpu']:.3f} s")
    print(f"  tasks from {first:.3f} s to {last:.3f} s; exit at {end:.3f} s")
    return {"start": first, "tasks": last - first, "end": end - last, "wall": end}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-tp", dest="target", required=True)
    parser.add_argument("-gp", dest="golden")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    if min(args.workers) < 1:
        parser.error("--workers: 1 or more (the timeline is that of the run's LocalCluster)")
    sides = ["-tp", args.target] + (["-gp", args.golden] if args.golden else [])
    runs: dict[int, list[dict[str, float]]] = {n: [] for n in args.workers}
    for i in range(max(1, args.repeat)):
        for n in args.workers:
            print(f"round {i} --workers {n} (load {os.getloadavg()[0]:.1f})", flush=True)
            runs[n].append(_run(sides, ["--workers", str(n)]))
    for n, found in runs.items():
        medians = ", ".join(f"{k} {statistics.median(r[k] for r in found):.3f} s" for k in found[0])
        print(f"--workers {n} median: {medians}")


if __name__ == "__main__":
    main()
