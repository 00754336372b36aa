"""Run a command and report its wall time, CPU time and peak RSS (the largest child process, and the
process tree's sum, sampled every 20 ms, in MiB)."""

from __future__ import annotations

import compileall
import importlib.util
import json
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

_PROBE = (
    "import json, os, resource, subprocess, sys, time\n"
    "page = os.sysconf('SC_PAGE_SIZE')\n"
    "def tree_rss(pid):\n"
    "    total, todo = 0, [pid]\n"
    "    while todo:\n"
    "        p = todo.pop()\n"
    "        try:\n"
    "            with open(f'/proc/{p}/statm', 'rb') as f:\n"
    "                total += int(f.read().split()[1]) * page\n"
    "            for tid in os.listdir(f'/proc/{p}/task'):\n"
    "                with open(f'/proc/{p}/task/{tid}/children', 'rb') as f:\n"
    "                    todo.extend(map(int, f.read().split()))\n"
    "        except (OSError, ValueError):\n"
    "            pass\n"
    "    return total\n"
    "t = time.perf_counter()\n"
    "proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
    "tree = 0\n"
    "while proc.poll() is None:\n"
    "    tree = max(tree, tree_rss(proc.pid))\n"
    "    time.sleep(0.02)\n"
    "wall = time.perf_counter() - t\n"
    "use = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
    "print(json.dumps({'rc': proc.returncode, 'wall': wall, 'cpu': use.ru_utime + use.ru_stime,\n"
    "                  'rss_kib': use.ru_maxrss, 'tree': tree}))\n"
)
"""The probe that runs a command: its process tree's RSS summed every 20 ms from /proc (each process's
``statm``, its children from ``/proc/PID/task/TID/children``: 0.3 ms of CPU a sample; psutil's
``children(recursive=True)`` read every process's ``/proc/PID/stat`` to find them, 2.1 ms a sample on a
host of 100 processes, 8-10% of a CPU taken from the command it measured, which cost a run that keeps
both CPUs busy (``--workers 2``) about 0.1 s of a 2 s wall time and a run with one busy not at all)."""


@dataclass(frozen=True)
class Measurement:
    wall: float
    peak_mib: float  # the largest single process
    returncode: int
    cpu: float = 0.0  # user + system seconds of the command and every process it waited for
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


def measure(command: list[str]) -> Measurement:
    """Wall time, CPU and peak RSS of ``command``, run in a fresh probe process so only it is counted."""
    out = subprocess.run([sys.executable, "-c", _PROBE, *command], capture_output=True, text=True, check=True)
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
    "for path in sys.argv[3:]:\n"
    "    with open(path, 'rb') as f:\n"
    "        orjson.loads(f.read())\n"
    "with open(sys.argv[1], 'wb') as f:\n"
    "    f.write(b'x' * int(sys.argv[2]))\n"
)


def measure_floor(json_files: list[Path], written: Path, out: Path) -> Measurement:
    """The floor of a job that reads ``json_files`` and writes what is under ``written``: a Python start,
    the fastest JSON parse (orjson) of each file, and writing a file of that size at ``out``."""
    files = [written] if written.is_file() else [p for p in written.rglob("*") if p.is_file()]
    size = sum(p.stat().st_size for p in files)
    return measure([sys.executable, "-c", _FLOOR, str(out), str(size), *map(str, json_files)])


def report(name: str, ours: Measurement, reference: Measurement | None) -> None:
    print(f"{name}: ours {ours.summary} (rc={ours.returncode})")
    if reference is not None:
        print(f"{name}: reference {reference.summary} (rc={reference.returncode})")
        print(
            f"{name}: speed-up {reference.wall / ours.wall:.1f}x ({reference.cpu / ours.cpu:.1f}x less CPU), "
            f"memory {ours.tree_peak_mib / reference.tree_peak_mib:.2f} of the reference's"
        )
