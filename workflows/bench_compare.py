"""Benchmark: msprobe_dask compare against the reference ``msprobe compare`` on the same input.

    python workflows/bench_compare.py [--case transformer_big] [--reference /path/to/msprobe] [--xlsx]

The reference runs only if ``msprobe`` is on PATH (or given with --reference).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from measure import best_of, report  # noqa: E402

DATA = Path(__file__).resolve().parent.parent / "tests" / "data"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", default="transformer_big", help="a case folder in tests/data")
    parser.add_argument("--target", help="target dump.json (overrides --case)")
    parser.add_argument("--golden", help="golden dump.json (overrides --case)")
    parser.add_argument(
        "--reference", default=shutil.which("msprobe"), help="the reference msprobe executable"
    )
    parser.add_argument("--xlsx", action="store_true")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each tool (the fastest is kept)")
    args = parser.parse_args()
    target = Path(args.target or DATA / args.case / "target" / "dump.json")
    golden = Path(args.golden or DATA / args.case / "golden" / "dump.json")
    extra = ["--xlsx"] if args.xlsx else []
    with tempfile.TemporaryDirectory() as tmp:
        ours = best_of(
            [
                sys.executable,
                "-m",
                "msprobe_dask",
                "compare",
                "-q",
                "-tp",
                str(target),
                "-gp",
                str(golden),
                "-o",
                f"{tmp}/ours",
                *extra,
            ],
            args.repeat,
        )
        reference = None
        if args.reference:
            reference = best_of(
                [
                    args.reference,
                    "compare",
                    "-tp",
                    str(target),
                    "-gp",
                    str(golden),
                    "-o",
                    f"{tmp}/reference",
                    *extra,
                ],
                args.repeat,
            )
    report(f"compare {target.parent.parent.name}{' --xlsx' if args.xlsx else ''}", ours, reference)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
