"""Run a command and report its wall time, CPU time and peak RSS (the largest child process, and the
process tree's sum, sampled every 20 ms, in MiB): the one measuring code of the benchmarks.

``python measure.py --probe TIMEOUT COMMAND...`` is the probe ``measure`` runs the command in (so that
only the command is counted)."""

from __future__ import annotations

import compileall
import contextlib
import importlib.util
import json
import math
import os
import resource
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

_PAGE = os.sysconf("SC_PAGE_SIZE")
_TICK = os.sysconf("SC_CLK_TCK")


def tree_sample(pid: int) -> tuple[int, dict[int, float], list[int]]:
    """The process tree of ``pid`` as it is now, from /proc: its RSS summed (bytes), each process's CPU
    seconds so far, and its pids (``pid`` first). Each process's ``stat`` (its RSS and CPU), its children
    from ``/proc/PID/task/TID/children``: 0.3 ms of CPU a sample; psutil's ``children(recursive=True)``
    read every process's ``/proc/PID/stat`` to find them, 2.1 ms a sample on a host of 100 processes,
    8-10% of a CPU taken from the command it measured, which cost a run that keeps both CPUs busy
    (``--workers 2``) about 0.1 s of a 2 s wall time and a run with one busy not at all."""
    rss, cpu_of, pids, todo = 0, {}, [], [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/stat", "rb") as f:
                fields = f.read().rpartition(b")")[2].split()  # (the name may hold spaces)
            for tid in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{tid}/children", "rb") as f:
                    todo.extend(map(int, f.read().split()))
        except (OSError, ValueError):
            continue
        # fields 14, 15 (utime, stime, in ticks) and 24 (rss, in pages) of proc(5), counted from 3 here
        cpu_of[p] = (int(fields[11]) + int(fields[12])) / _TICK
        rss += int(fields[21]) * _PAGE
        pids.append(p)
    return rss, cpu_of, pids


def _probe(timeout: float, command: list[str]) -> None:
    """Run ``command`` (this process's only child) sampling its tree every 20 ms, and print its figures
    as JSON. Its CPU is the larger of two counts: the reaped children's (getrusage), and the sum over the
    tree's processes as last sampled. The first misses a process never waited for (its CPU goes to init:
    a --workers 1 tensor compare once showed 5.6 s where its processes counted 12.5 s themselves); the
    second misses a process's last 20 ms. Past ``timeout`` seconds the tree is killed (returncode -9)."""
    start = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    tree, cpu_of = 0, {}
    while proc.poll() is None:
        rss, cpu_now, pids = tree_sample(proc.pid)
        tree = max(tree, rss)
        cpu_of.update(cpu_now)
        if time.perf_counter() - start > timeout:
            for p in reversed(pids):
                with contextlib.suppress(OSError):
                    os.kill(p, signal.SIGKILL)
        time.sleep(0.02)
    wall = time.perf_counter() - start
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = max(use.ru_utime + use.ru_stime, sum(cpu_of.values()))
    print(
        json.dumps({"rc": proc.returncode, "wall": wall, "cpu": cpu, "rss_kib": use.ru_maxrss, "tree": tree})
    )


@dataclass(frozen=True)
class Measurement:
    wall: float
    peak_mib: float  # the largest single process
    returncode: int
    cpu: float = 0.0  # user + system seconds of the command's process tree (_probe)
    tree_peak_mib: float = 0.0  # the largest sum over the command's process tree

    @property
    def summary(self) -> str:
        return (
            f"{self.wall:.2f} s wall, {self.cpu:.2f} s CPU, peak {self.tree_peak_mib:.0f} MiB "
            f"(process tree; largest process {self.peak_mib:.0f} MiB)"
        )


def compile_ours() -> None:
    """Write the bytecode of the msprobe_dask that ``python -m msprobe_dask`` runs, as ``pip install``
    leaves a package (the reference's is compiled so): an editable checkout under PYTHONDONTWRITEBYTECODE=1
    would compile all of ours again at each start (0.08 s), a cost no install has."""
    spec = importlib.util.find_spec("msprobe_dask")
    if spec is not None and spec.submodule_search_locations:
        for folder in spec.submodule_search_locations:
            compileall.compile_dir(folder, quiet=1)


def measure(command: list[str], timeout: float = math.inf) -> Measurement:
    """Wall time, CPU and peak RSS of ``command``, run in a fresh probe process (_probe) so only it is
    counted; past ``timeout`` seconds its process tree is killed (returncode -9)."""
    probe = [sys.executable, __file__, "--probe", str(timeout), *command]
    out = subprocess.run(probe, capture_output=True, text=True, check=True)
    data = json.loads(out.stdout)
    return Measurement(
        wall=data["wall"],
        peak_mib=data["rss_kib"] / 1024,
        returncode=data["rc"],
        cpu=data["cpu"],
        tree_peak_mib=max(data["tree"] / 2**20, data["rss_kib"] / 1024),  # sampled: at least the largest
    )


def median(runs: list[Measurement]) -> Measurement:
    """Each figure's median over ``runs`` (of one command, interleaved with the others')."""
    return Measurement(
        wall=statistics.median(m.wall for m in runs),
        peak_mib=statistics.median(m.peak_mib for m in runs),
        returncode=max(m.returncode for m in runs),
        cpu=statistics.median(m.cpu for m in runs),
        tree_peak_mib=statistics.median(m.tree_peak_mib for m in runs),
    )


_FLOOR = (
    "import sys, orjson\n"
    "for path in sys.argv[4:]:\n"
    "    with open(path, 'rb') as f:\n"
    "        orjson.loads(f.read())\n"
    "with open(sys.argv[1], 'wb') as f:\n"
    "    if sys.argv[3]:\n"
    "        with open(sys.argv[3], 'rb') as source:\n"
    "            while block := source.read(1 << 24):\n"
    "                f.write(block)\n"
    "    else:\n"
    "        f.write(b'x' * int(sys.argv[2]))\n"
)


def measure_floor(json_files: list[Path], written: Path, out: Path, copied: bool = False) -> Measurement:
    """The floor of a job that reads ``json_files`` and writes what is under ``written``: a Python start,
    the fastest JSON parse (orjson) of each file, and writing a file of that size at ``out``
    (``copied``: the bytes of ``written``, one file, copied to ``out`` 16 MiB at a time, read back from
    the OS's file cache; neither is synced to the disk, nor is any output of ours)."""
    files = [written] if written.is_file() else [p for p in written.rglob("*") if p.is_file()]
    size = sum(p.stat().st_size for p in files)
    source = str(written) if copied else ""
    return measure([sys.executable, "-c", _FLOOR, str(out), str(size), source, *map(str, json_files)])


def report(name: str, ours: Measurement, reference: Measurement | None) -> None:
    print(f"{name}: ours {ours.summary} (rc={ours.returncode})")
    if reference is not None:
        print(f"{name}: reference {reference.summary} (rc={reference.returncode})")
        print(
            f"{name}: speed-up {reference.wall / ours.wall:.1f}x ({reference.cpu / ours.cpu:.1f}x less CPU), "
            f"memory {ours.tree_peak_mib / reference.tree_peak_mib:.2f} of the reference's"
        )


if __name__ == "__main__":
    if sys.argv[1:2] != ["--probe"] or len(sys.argv) < 4:
        sys.exit("usage: measure.py --probe TIMEOUT COMMAND...")
    _probe(float(sys.argv[2]), sys.argv[3:])
