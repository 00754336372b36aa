"""Benchmark: compare a 16-rank synthetic tree with 1 and with 2 local worker processes.

    python workflows/bench_multirank.py [--ranks 16] [--layers 400] [--tree DIR] [--repeat 1]

Generates the tree with gen_synthetic_tree.py (unless --tree points at one), then times
``compare(target, golden, run=RunOptions(workers=N))`` for N = 1 and 2: each rank pair is parsed,
matched and judged as independent Dask tasks, so two worker processes should take about half the time.
The times include starting the LocalCluster (about 1 s); the csv writing is timed separately.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from gen_synthetic_tree import write_tree  # noqa: E402

from msprobe_dask.pipeline.compare import compare  # noqa: E402
from msprobe_dask.pipeline.scheduler import RunOptions  # noqa: E402


def time_compare(target: Path, golden: Path, workers: int, repeat: int) -> tuple[float, int]:
    best = float("inf")
    rows = 0
    for _ in range(repeat):
        start = time.perf_counter()
        results = compare(target, golden, run=RunOptions(workers=workers))
        best = min(best, time.perf_counter() - start)
        rows = sum(len(r.table.rows) for r in results)
    return best, rows


def time_write(target: Path, golden: Path, out: Path) -> float:
    from msprobe_dask.writers.csv_writer import write_csv

    results = compare(target, golden)
    start = time.perf_counter()
    for result in results:
        write_csv(result.table, out / f"compare_result_{result.label}_bench.csv")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=16)
    parser.add_argument("--layers", type=int, default=400)
    parser.add_argument("--tree", type=Path, help="an existing tree made by gen_synthetic_tree.py")
    parser.add_argument("--repeat", type=int, default=1, help="runs per worker count (the best is kept)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tree = args.tree
        if tree is None:
            tree = Path(tmp) / "tree"
            start = time.perf_counter()
            write_tree(tree, args.ranks, 1, args.layers)
            elapsed = time.perf_counter() - start
            print(f"generated {args.ranks} ranks x {args.layers} layers in {elapsed:.1f} s")
        target, golden = tree / "target" / "step0", tree / "golden" / "step0"
        t1, rows = time_compare(target, golden, 1, args.repeat)
        print(f"1 worker:  {t1:6.2f} s  ({rows} rows)")
        t2, _ = time_compare(target, golden, 2, args.repeat)
        print(f"2 workers: {t2:6.2f} s")
        print(f"speed-up:  {t1 / t2:6.2f}x")
        print(f"csv writing (coordinator, not included above): {time_write(target, golden, Path(tmp)):.2f} s")


if __name__ == "__main__":
    main()
