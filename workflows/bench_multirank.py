"""Benchmark: compare a synthetic multi-rank tree with 1 and 2 local worker processes and without flags.

    python workflows/bench_multirank.py [--ranks 16] [--layers 400] [--tree DIR] [--repeat 1]

Generates the tree with gen_synthetic_tree.py (unless --tree points at one), then runs the command line
(``msprobe-dask compare -q``, csv) with ``--workers 1``, ``--workers 2`` and no flag (the size of the
input decides), interleaved, and reports the median wall time, CPU time and peak RSS summed over each
run's process tree. Every rank is parsed, matched, judged and written by its own part tasks
(pipeline/chunked.py), so two worker processes should take about half the time.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from gen_synthetic_tree import write_tree  # noqa: E402
from measure import Measurement, measure  # noqa: E402

FLAGS = {"--workers 1": ["--workers", "1"], "--workers 2": ["--workers", "2"], "no flag": []}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=16)
    parser.add_argument("--layers", type=int, default=400)
    parser.add_argument("--tree", type=Path, help="an existing tree made by gen_synthetic_tree.py")
    parser.add_argument("--repeat", type=int, default=1, help="runs per setting (medians reported)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tree = args.tree
        if tree is None:
            tree = Path(tmp) / "tree"
            start = time.perf_counter()
            write_tree(tree, args.ranks, 1, args.layers)
            elapsed = time.perf_counter() - start
            print(f"generated {args.ranks} ranks x {args.layers} layers in {elapsed:.1f} s")
        dumps = ["-tp", str(tree / "target" / "step0"), "-gp", str(tree / "golden" / "step0")]
        runs: dict[str, list[Measurement]] = {name: [] for name in FLAGS}
        for i in range(max(1, args.repeat)):
            for name, flags in FLAGS.items():
                out = ["-o", f"{tmp}/out{i}{len(runs[name])}{name[-1]}"]
                runs[name].append(
                    measure([sys.executable, "-m", "msprobe_dask", "compare", "-q", *dumps, *out, *flags])
                )
        walls = {name: statistics.median(m.wall for m in found) for name, found in runs.items()}
        for name, found in runs.items():
            cpu = statistics.median(m.cpu for m in found)
            peak = statistics.median(m.tree_peak_mib for m in found)
            print(
                f"{name:12s} {walls[name]:7.2f} s wall, {cpu:7.2f} s CPU, peak {peak:6.0f} MiB (process tree)"
            )
        print(f"speed-up of --workers 2 over --workers 1: {walls['--workers 1'] / walls['--workers 2']:.2f}x")


if __name__ == "__main__":
    main()
