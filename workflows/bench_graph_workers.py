"""Benchmark graph_visualize on given dumps with ``--workers 1``, ``--workers 2`` and no flag.

    python workflows/bench_graph_workers.py -tp TARGET [-gp GOLDEN] [--repeat 3] [--reference MSPROBE]
                                            [--settings "no flag" "--workers 1" "--workers 2"]
                                            [--flags "--rank_size 64 16 --tp 2 1 --pp 2 1"]

Runs the command line (``msprobe-dask graph_visualize -q``) once per setting per round, the settings
interleaved, ``--repeat`` rounds; with ``--reference`` the reference's ``msprobe graph_visualize``
runs once per round too; ``--flags``: more flags for every run (a merge's ``--rank_size``...).
Reports each setting's median wall time, CPU time (the command and every process it waited for) and
peak RSS summed over its process tree (workflows/measure.py), the machine's load, and the ratios:
``--workers 1`` over ``--workers 2``, the reference over each.
Make inputs with gen_synthetic_tree.py (``--layers 7150``: ~50,000 entries per rank; ``28600``:
~200,000).
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from measure import Measurement, compile_ours, measure  # noqa: E402

SETTINGS = ("no flag", "--workers 1", "--workers 2")


def _flags(setting: str) -> list[str]:
    return [] if setting == "no flag" else shlex.split(setting)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-tp", dest="target", required=True)
    parser.add_argument("-gp", dest="golden")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--reference", help="the reference's msprobe executable")
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS))
    parser.add_argument("--flags", default="", help="more flags for every run, as one string")
    args = parser.parse_args()
    compile_ours()  # (else each start of ours may compile it: see measure.compile_ours)
    sides = ["-tp", args.target] + (["-gp", args.golden] if args.golden else []) + shlex.split(args.flags)
    runs: dict[str, list[Measurement]] = {s: [] for s in args.settings}
    loads: list[float] = []
    if args.reference:
        runs["reference"] = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(max(1, args.repeat)):
            for setting in runs:
                out = ["-o", f"{tmp}/{i}-{len(runs[setting])}-{setting.replace(' ', '')}"]
                if setting == "reference":
                    command = [args.reference, "graph_visualize", *sides, *out]
                else:
                    command = [sys.executable, "-m", "msprobe_dask", "graph_visualize", "-q", *sides, *out]
                    command += _flags(setting)
                m = measure(command)
                loads.append(os.getloadavg()[0])
                if m.returncode:
                    sys.exit(f"{setting}: exit {m.returncode}")
                print(f"round {i} {setting:12s} {m.summary}", flush=True)
                runs[setting].append(m)
    walls = {s: statistics.median(m.wall for m in found) for s, found in runs.items()}
    for setting, found in runs.items():
        cpu = statistics.median(m.cpu for m in found)
        peak = statistics.median(m.tree_peak_mib for m in found)
        print(f"{setting:12s} median {walls[setting]:7.2f} s wall, {cpu:7.2f} s CPU, peak {peak:6.0f} MiB")
    print(f"load (1 min) median {statistics.median(loads):.1f}, range {min(loads):.1f}-{max(loads):.1f}")
    if "--workers 1" in walls and "--workers 2" in walls:
        print(f"--workers 2 over --workers 1: {walls['--workers 1'] / walls['--workers 2']:.2f}x")
    if "reference" in walls:
        for setting in args.settings:
            print(f"reference over {setting}: {walls['reference'] / walls[setting]:.1f}x")


if __name__ == "__main__":
    main()
