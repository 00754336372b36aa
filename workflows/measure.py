"""Run a command and report its wall time and peak RSS (the largest child process, in MiB)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass

_PROBE = (
    "import json, resource, subprocess, sys, time\n"
    "t = time.perf_counter()\n"
    "rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode\n"
    "wall = time.perf_counter() - t\n"
    "rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
    "print(json.dumps({'rc': rc, 'wall': wall, 'rss_kib': rss}))\n"
)


@dataclass(frozen=True)
class Measurement:
    wall: float
    peak_mib: float
    returncode: int


def measure(command: list[str]) -> Measurement:
    """Wall time and peak RSS of ``command``, run in a fresh probe process so only it is counted."""
    out = subprocess.run([sys.executable, "-c", _PROBE, *command], capture_output=True, text=True, check=True)
    data = json.loads(out.stdout)
    return Measurement(wall=data["wall"], peak_mib=data["rss_kib"] / 1024, returncode=data["rc"])


def best_of(command: list[str], repeat: int) -> Measurement:
    """The fastest of ``repeat`` runs (the machine may be shared; the first run also warms caches)."""
    return min((measure(command) for _ in range(max(1, repeat))), key=lambda m: m.wall)


def report(name: str, ours: Measurement, reference: Measurement | None) -> None:
    print(f"{name}: ours {ours.wall:.2f} s, peak {ours.peak_mib:.0f} MiB (rc={ours.returncode})")
    if reference is not None:
        print(
            f"{name}: reference {reference.wall:.2f} s, peak {reference.peak_mib:.0f} MiB "
            f"(rc={reference.returncode})"
        )
        print(
            f"{name}: speed-up {reference.wall / ours.wall:.1f}x, "
            f"memory {ours.peak_mib / reference.peak_mib:.2f} of the reference's"
        )
