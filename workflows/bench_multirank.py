"""Benchmark: compare or graph_visualize a synthetic multi-rank tree with 1 and 2 local worker processes
and without flags, against the floor.

    python workflows/bench_multirank.py [--ranks 16] [--layers 400] [--tree DIR] [--repeat 1] [--summary]
        [--command compare|graph_visualize]

Generates the tree with gen_synthetic_tree.py (unless --tree points at one), then runs the command line
(``msprobe-dask compare -q``, csv; with ``--summary`` the default flags: the summary and the
first-divergence analysis; ``graph_visualize``: its default flags, one vis.db) with ``--workers 1``,
``--workers 2`` and no flag (the size of the input decides), interleaved with the floor, and reports the
median wall time, CPU time and peak RSS summed over each run's process tree. compare's floor of one
rank (workflows/measure.py:measure_floor) is a Python start, orjson's parse of the rank's two dump.json
and writing a file of its csv's size; the tree's floor is that times the ranks over the machine's CPUs
(every CPU busy with a rank). graph_visualize's floor is one process's: a Python start, orjson's parse
of every rank's two dump.json and the vis.db's bytes copied, over the machine's CPUs. Every rank is
parsed, matched, judged and written by its own part tasks (pipeline/chunked.py), so two worker
processes should take about half the time. Our modules' bytecode is compiled first, as an install
leaves it (``measure.compile_ours``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from gen_synthetic_tree import write_tree  # noqa: E402
from measure import Measurement, compile_ours, measure, measure_floor  # noqa: E402

FLAGS = {"--workers 1": ["--workers", "1"], "--workers 2": ["--workers", "2"], "no flag": []}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=16)
    parser.add_argument("--layers", type=int, default=400)
    parser.add_argument("--tree", type=Path, help="an existing tree made by gen_synthetic_tree.py")
    parser.add_argument("--repeat", type=int, default=1, help="runs per setting (medians reported)")
    parser.add_argument(
        "--summary", action="store_true", help="default flags (the summary and first divergence), not -q"
    )
    parser.add_argument("--command", choices=("compare", "graph_visualize"), default="compare")
    args = parser.parse_args()
    graph = args.command == "graph_visualize"
    quiet = [] if args.summary or graph else ["-q"]
    compile_ours()
    cpus = len(os.sched_getaffinity(0))
    with tempfile.TemporaryDirectory() as tmp:
        tree = args.tree
        if tree is None:
            tree = Path(tmp) / "tree"
            start = time.perf_counter()
            write_tree(tree, args.ranks, 1, args.layers)
            elapsed = time.perf_counter() - start
            print(f"generated {args.ranks} ranks x {args.layers} layers in {elapsed:.1f} s")
        sides = tree / "target" / "step0", tree / "golden" / "step0"
        ranks = sorted(p.name for p in sides[0].iterdir() if p.is_dir())
        dumps = ["-tp", str(sides[0]), "-gp", str(sides[1])]
        runs: dict[str, list[Measurement]] = {name: [] for name in FLAGS}
        floors: list[Measurement] = []
        print(f"load {os.getloadavg()[0]:.1f} at the start", flush=True)
        for i in range(max(1, args.repeat)):
            for name, flags in FLAGS.items():
                out = Path(f"{tmp}/out{i}{len(runs[name])}{name[-1]}")
                command = [sys.executable, "-m", "msprobe_dask", args.command, *quiet, *dumps, "-o", str(out)]
                runs[name].append(measure([*command, *flags]))
                if runs[name][-1].returncode:  # (its output is missing: no time of a failed run counts)
                    sys.exit(f"{name}: exit {runs[name][-1].returncode}: {' '.join([*command, *flags])}")
                print(f"{name}: {runs[name][-1].summary}", flush=True)
            if graph:
                jsons = [side / rank / "dump.json" for rank in ranks for side in sides]
                floors.append(measure_floor(jsons, next(out.glob("*.vis.db")), out / "floor", copied=True))
            else:
                written = next(out.rglob(f"compare_result_{ranks[0]}_*"))
                jsons = [side / ranks[0] / "dump.json" for side in sides]
                floors.append(measure_floor(jsons, written, out / "floor"))
        print(f"load {os.getloadavg()[0]:.1f} at the end")
        walls = {name: statistics.median(m.wall for m in found) for name, found in runs.items()}
        floor_run, cpus = statistics.median(m.wall for m in floors), min(cpus, len(ranks))
        times = 1 if graph else len(ranks)  # (a graph's floor run reads every rank, compare's one)
        floor = floor_run * times / cpus
        print(f"floor: {floor_run:.2f} s a run x {times} / {cpus} CPUs = {floor:.2f} s")
        for name, found in runs.items():
            cpu = statistics.median(m.cpu for m in found)
            peak = statistics.median(m.tree_peak_mib for m in found)
            print(
                f"{name:12s} {walls[name]:7.2f} s wall, {cpu:7.2f} s CPU, peak {peak:6.0f} MiB "
                f"(process tree), {walls[name] / floor:.2f}x the floor"
            )
        print(f"speed-up of --workers 2 over --workers 1: {walls['--workers 1'] / walls['--workers 2']:.2f}x")


if __name__ == "__main__":
    main()
