"""Run a command and report its wall time, CPU time and peak RSS (the largest child process, and the
process tree's sum, sampled every 20 ms, in MiB)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass

_PROBE = (
    "import json, resource, subprocess, sys, time\n"
    "import psutil\n"
    "t = time.perf_counter()\n"
    "proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
    "top, tree = psutil.Process(proc.pid), 0\n"
    "while proc.poll() is None:\n"
    "    rss = 0\n"
    "    for p in [top, *top.children(recursive=True)]:\n"
    "        try:\n"
    "            rss += p.memory_info().rss\n"
    "        except psutil.Error:\n"
    "            pass\n"
    "    tree = max(tree, rss)\n"
    "    time.sleep(0.02)\n"
    "wall = time.perf_counter() - t\n"
    "use = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
    "print(json.dumps({'rc': proc.returncode, 'wall': wall, 'cpu': use.ru_utime + use.ru_stime,\n"
    "                  'rss_kib': use.ru_maxrss, 'tree': tree}))\n"
)


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


def report(name: str, ours: Measurement, reference: Measurement | None) -> None:
    print(f"{name}: ours {ours.summary} (rc={ours.returncode})")
    if reference is not None:
        print(f"{name}: reference {reference.summary} (rc={reference.returncode})")
        print(
            f"{name}: speed-up {reference.wall / ours.wall:.1f}x, "
            f"memory {ours.tree_peak_mib / reference.tree_peak_mib:.2f} of the reference's"
        )
