"""Benchmark: msprobe_dask compare against the reference ``msprobe compare`` and the floor.

    python workflows/bench_compare.py [--case transformer_big | --target T --golden G]
        [--reference /path/to/msprobe] [--xlsx] [--repeat 3] [--flags "--workers 2"]

T and G are what compare takes (dump.json files or dump folders, rank trees too). Runs are interleaved
(ours, reference, floor, ours, ...) and medians reported, with CPU time and the peak RSS summed over
each command's process tree. The floor is what no compare can beat here: a Python start, the fastest
JSON parse of every dump.json of both sides (orjson) and writing a file of the size of our results.
The reference runs only if ``msprobe`` is on PATH (or given with --reference).
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from measure import Measurement, measure, measure_floor, median, report  # noqa: E402

DATA = Path(__file__).resolve().parent.parent / "tests" / "data"


def dump_files(path: Path) -> list[Path]:
    return [path] if path.is_file() else sorted(path.rglob("dump.json"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", default="transformer_big", help="a case folder in tests/data")
    parser.add_argument("--target", type=Path, help="target dump.json or folder (overrides --case)")
    parser.add_argument("--golden", type=Path, help="golden dump.json or folder (overrides --case)")
    parser.add_argument(
        "--reference", default=shutil.which("msprobe"), help="the reference msprobe executable"
    )
    parser.add_argument("--xlsx", action="store_true")
    parser.add_argument("--flags", default="", help="more flags for our compare (e.g. '--workers 2')")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each command (medians reported)")
    args = parser.parse_args()
    target = args.target or DATA / args.case / "target" / "dump.json"
    golden = args.golden or DATA / args.case / "golden" / "dump.json"
    extra = ["--xlsx"] if args.xlsx else []
    ours_runs: list[Measurement] = []
    reference_runs: list[Measurement] = []
    floor_runs: list[Measurement] = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(max(1, args.repeat)):
            out = Path(tmp) / f"ours{i}"
            flags = ["-tp", str(target), "-gp", str(golden), "-o", str(out), *extra, *shlex.split(args.flags)]
            ours_runs.append(measure([sys.executable, "-m", "msprobe_dask", "compare", "-q", *flags]))
            if args.reference:
                reference_runs.append(
                    measure(
                        [
                            args.reference,
                            "compare",
                            "-tp",
                            str(target),
                            "-gp",
                            str(golden),
                            "-o",
                            f"{tmp}/reference{i}",
                            *extra,
                        ]
                    )  # fmt: skip
                )
            dumps = dump_files(target) + dump_files(golden)
            floor_runs.append(measure_floor(dumps, out, Path(tmp) / "floor"))
    name = f"compare {args.target or args.case}"
    name += f"{' --xlsx' if args.xlsx else ''}{' ' + args.flags if args.flags else ''}"
    ours = median(ours_runs)
    report(name, ours, median(reference_runs) if reference_runs else None)
    floor = median(floor_runs)
    print(f"{name}: floor {floor.summary}")
    print(f"{name}: ours / floor {ours.wall / floor.wall:.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
