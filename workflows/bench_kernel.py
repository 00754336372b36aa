"""Benchmark: the static-graph kernel compare, ours against the reference, on a generated 16-rank tree.

    python workflows/bench_kernel.py [--ranks 16] [--layers 50] [--elems 4096] [--mode npy|statistic]
                                     [--workers 0] [--tree DIR] [--reference /path/to/msprobe]

Generates OUT/target and OUT/golden with gen_kernel_dump.py (unless --tree points at one), then times
``compare -tp target -gp golden --rank 0,...,R-1`` for us and, if given, the reference. The reference
needs MindSpore to import its kernel compare; it runs with the import shim of tests/data/kernel_npy
on PYTHONPATH instead.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from gen_kernel_dump import SHIM, write_tree  # noqa: E402
from measure import measure, report  # noqa: E402

DATA = Path(__file__).resolve().parent.parent / "tests" / "data"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=16)
    parser.add_argument("--layers", type=int, default=50)
    parser.add_argument("--elems", type=int, default=4096, help="elements per activation tensor")
    parser.add_argument("--mode", choices=("npy", "statistic"), default="npy")
    parser.add_argument("--workers", type=int, default=0, help="ours: a local cluster of N processes")
    parser.add_argument("--tree", type=Path, help="an existing OUT folder with target/ and golden/")
    parser.add_argument("--reference", default=shutil.which("msprobe"), help="the reference executable")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tree = args.tree or Path(tmp) / "tree"
        if args.tree is None:
            write_tree(
                tree, ranks=args.ranks, steps=1, layers=args.layers, elems=args.elems, mode=args.mode,
                layout="rank", seed=0,
            )  # fmt: skip
        if args.mode == "npy":
            tensors = sum(1 for _ in (tree / "target").rglob("*.npy"))
        else:
            tensors = sum(
                len(p.read_text().splitlines()) - 1 for p in (tree / "target").rglob("statistic.csv")
            )
        print(f"tree: {args.ranks} ranks x 1 step, {args.layers} layers, {tensors} target tensors")
        ranks = ",".join(str(r) for r in range(args.ranks))
        io = ["-tp", str(tree / "target"), "-gp", str(tree / "golden"), "--rank", ranks]
        workers = ["--workers", str(args.workers)] if args.workers else []
        ours = measure(
            [sys.executable, "-m", "msprobe_dask", "compare", "-q", *io, "-o", f"{tmp}/ours", *workers]
        )
        reference = None
        if args.reference:
            saved = os.environ.get("PYTHONPATH")
            os.environ["PYTHONPATH"] = str(DATA / SHIM)
            try:
                reference = measure([args.reference, "compare", *io, "-o", f"{tmp}/reference"])
            finally:
                if saved is None:
                    del os.environ["PYTHONPATH"]
                else:
                    os.environ["PYTHONPATH"] = saved
    report(f"kernel compare ({args.mode}, {args.ranks} ranks)", ours, reference)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
