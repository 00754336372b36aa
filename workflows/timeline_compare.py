"""The timeline of a compare command line on local worker processes: each task, from the command's start
to its exit.

    python workflows/timeline_compare.py -tp TARGET -gp GOLDEN [--workers 1 2] [--repeat 1] [--tasks]
        [--flags=-q] [--save FILE]

Runs ``python -m msprobe_dask compare -tp TARGET -gp GOLDEN -o OUT --workers N FLAGS`` (the settings of
``--workers``, interleaved, ``--repeat`` rounds) through this module, which wraps dask's
``dask.local.execute_task`` before the command starts: each task of the run (in the worker processes,
forked with the wrapper) appends its key, worker, start, end, thread CPU and minor page faults to a
log. Prints, per run, in seconds from the command's start: the start (to the first task), each kind of
task (count, CPU, first start, last end), each worker's time outside tasks between the first task and
the last (its waits of more than 5 ms, with the task that ended each) and the end (the last task's end
to the exit); ``--tasks``: every task. Then, per setting, the medians of the start, the tasks and the
end. ``--save``: each run's tasks appended to FILE as a line of JSON (what workflows/replay_compare.py
replays). The ratio of the wall times of two settings is what issue 16's one-rank target asks; the waits
are what the second worker cannot share.
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
from collections import defaultdict
from pathlib import Path
from typing import Any

LOG = "TIMELINE_COMPARE_LOG"  # the environment variable naming the file the tasks append to
START = "TIMELINE_COMPARE_START"  # the command's start (time.time() before its process was made)
WAIT = 0.005  # a worker's wait shown from this long


def _run_traced() -> None:
    """(In the command's process.) The command line with each task's events logged."""
    import dask.local
    from dask.utils import key_split

    execute = dask.local.execute_task

    def traced(key: Any, *args: Any) -> Any:
        label = task_label(args[2](args[0])[0])  # (execute_task's task_info, loads)
        faults, cpu, start = (
            resource.getrusage(resource.RUSAGE_SELF).ru_minflt,
            time.thread_time(),
            time.time(),
        )
        try:
            return execute(key, *args)
        finally:
            event = {
                "kind": key_split(key),
                "label": label,
                "key": str(key),
                "pid": os.getpid(),
                "start": start,
                "end": time.time(),
                "cpu": time.thread_time() - cpu,
                "faults": resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults,
            }
            with open(os.environ[LOG], "a") as f:
                f.write(json.dumps(event) + "\n")

    dask.local.execute_task = traced
    from msprobe_dask.cli import console_main

    sys.argv = ["msprobe-dask", *sys.argv[2:]]
    console_main()


def task_label(task: Any) -> str:
    """What tells a task from the others of its kind, the same in every run of a graph (its key's token is
    not): its first literal arguments, a part's number or its spool file's name (not a path)."""
    literals = [
        a
        for a in getattr(task, "args", ())
        if isinstance(a, int | str) and not isinstance(a, bool) and not (isinstance(a, str) and "/" in a)
    ]
    return " ".join(map(str, literals[:3]))


def _one_run(command: list[str], out: Path) -> dict[str, Any]:
    log = out.with_suffix(".log")
    env = {**os.environ, LOG: str(log)}
    start = time.time()
    done = subprocess.run(
        [sys.executable, __file__, "--traced", *command, "-o", str(out)],
        env={**env, START: repr(start)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    end = time.time()
    if done.returncode:
        sys.exit(f"the command failed ({done.returncode}): {done.stderr.strip().splitlines()[-1:]}")
    tasks = [json.loads(line) for line in log.read_text().splitlines()]
    for task in tasks:
        task["start"] -= start
        task["end"] -= start
    return {"tasks": sorted(tasks, key=lambda t: t["start"]), "exit": end - start}


def _report(name: str, run: dict[str, Any], every_task: bool) -> tuple[float, float, float]:
    tasks = run["tasks"]
    first, last = tasks[0]["start"], max(t["end"] for t in tasks)
    workers = sorted({t["pid"] for t in tasks})
    end = run["exit"] - last
    print(
        f"{name}: start {first:.3f} s, tasks {last - first:.3f} s, end {end:.3f} s (exit {run['exit']:.3f} s)"
    )
    if every_task:
        for t in tasks:
            w = workers.index(t["pid"])
            times = f"{t['start']:7.3f} {t['end']:7.3f} cpu {t['cpu']:.3f}"
            print(f"  w{w} {times} faults {t['faults']:6d} {t['key'][:50]}")
    kinds: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for t in tasks:
        kinds[t["kind"]].append(t)
    for kind, group in kinds.items():
        cpu, faults = sum(t["cpu"] for t in group), sum(t["faults"] for t in group)
        span = f"from {group[0]['start']:6.3f} to {max(t['end'] for t in group):6.3f}"
        print(f"  {kind:16s} {len(group):4d} cpu {cpu:6.3f} s  faults {faults:7d}  {span}")
    for w, pid in enumerate(workers):
        at, waits = first, []
        for t in (t for t in tasks if t["pid"] == pid):
            if t["start"] - at > WAIT:
                waits.append(f"{at:.3f}+{t['start'] - at:.3f} ({t['kind']})")
            at = t["end"]
        if last - at > WAIT:
            waits.append(f"{at:.3f}+{last - at:.3f} (the end)")
        mine = [t for t in tasks if t["pid"] == pid]
        busy = sum(t["end"] - t["start"] for t in mine)
        out = last - first - busy
        print(f"  worker {w}: {len(mine)} tasks, {busy:.3f} s in them, {out:.3f} s out: {', '.join(waits)}")
    return first, last - first, end


def main() -> None:
    if sys.argv[1:2] == ["--traced"]:
        _run_traced()
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-tp", "--target_path", required=True)
    parser.add_argument("-gp", "--golden_path", required=True)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--flags", default="", help="more flags of the command, e.g. --flags=-q")
    parser.add_argument("--tasks", action="store_true", help="print every task")
    parser.add_argument("--save", type=Path, help="append each run's tasks to this file (JSON lines)")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).parent))
    from measure import compile_ours

    compile_ours()  # (the start it reports: without bytecode, each start compiles ours)
    sums: dict[int, list[tuple[float, float, float]]] = defaultdict(list)
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeat):
            for workers in args.workers:
                command = ["compare", "-tp", args.target_path, "-gp", args.golden_path, *args.flags.split()]
                run = _one_run([*command, "--workers", str(workers)], Path(tmp) / f"out{i}-{workers}")
                if args.save:
                    with open(args.save, "a") as f:
                        f.write(json.dumps({"workers": workers, **run}) + "\n")
                sums[workers].append(_report(f"--workers {workers}, run {i + 1}", run, args.tasks))
    for workers, found in sums.items():
        start, tasks, end = (statistics.median(column) for column in zip(*found))
        print(f"--workers {workers}: medians start {start:.3f} s, tasks {tasks:.3f} s, end {end:.3f} s")


if __name__ == "__main__":
    main()
