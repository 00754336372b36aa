"""Benchmark: one rank at several sizes, ours with default flags against the floor (issue 16's scale table).

    python workflows/bench_scale.py [--entries 50050 200200] [--tree DIR ...] [--repeat 1]
        [--commands compare graph_visualize] [--scratch DIR]

Each size is a tree of one rank made by gen_synthetic_tree.py (``--entries N``: N entries a side, made in
--scratch unless there already; ``--tree DIR``: an existing one, e.g. /work/scratch/bench/M1; wrap a
1M-entry run in ``flock /work/helpers/m1.lock``). Per repeat and size, each command (``python -m
msprobe_dask compare|graph_visualize -tp T -gp G -o OUT``) runs followed by its floor
(workflows/measure.py:measure_floor: a Python start, orjson's parse of both dump.json, writing its
output's bytes; graph_visualize's: its vis.db's bytes copied). The table gives the medians: wall, CPU
and peak RSS summed over the process tree, the floor, the wall's ratio to the floor spread over the
machine's CPUs, and CPU per 10,000 entries.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from gen_synthetic_tree import write_tree  # noqa: E402
from measure import Measurement, compile_ours, measure, measure_floor, median  # noqa: E402

ENTRIES_A_LAYER = 7  # gen_synthetic_tree.py's entries a side for each layer
_COUNT = "import orjson, sys\nprint(len(orjson.loads(open(sys.argv[1], 'rb').read())['data']))"


def sides(tree: Path) -> tuple[Path, Path]:
    """The target and golden rank folders of a one-rank tree."""
    return tree / "target" / "step0" / "rank0", tree / "golden" / "step0" / "rank0"


def entries_of(tree: Path) -> int:
    """The entries of the target's dump.json (parsed in a process of its own, whose memory goes with it)."""
    dump = sides(tree)[0] / "dump.json"
    return int(subprocess.run([sys.executable, "-c", _COUNT, dump], capture_output=True, check=True).stdout)


def made_tree(scratch: Path, entries: int) -> Path:
    tree = scratch / f"rank_{entries}"
    if not all((side / "dump.json").is_file() for side in sides(tree)):
        layers = -(-entries // ENTRIES_A_LAYER)
        print(f"generating {layers} layers below {tree}", flush=True)
        write_tree(tree, 1, 1, layers)
    return tree


def run_once(tree: Path, command: str, scratch: Path) -> tuple[Measurement, Measurement]:
    """``command`` on ``tree`` with default flags, then its floor (output removed after)."""
    target, golden = sides(tree)
    with tempfile.TemporaryDirectory(dir=scratch) as tmp:
        out = Path(tmp) / "out"
        argv = [command, "-tp", str(target), "-gp", str(golden), "-o", str(out)]
        ours = measure([sys.executable, "-m", "msprobe_dask", *argv])
        dumps, visdb = [target / "dump.json", golden / "dump.json"], next(out.glob("*.vis.db"), None)
        floor = measure_floor(dumps, visdb or out, Path(tmp) / "floor", copied=visdb is not None)
    return ours, floor


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, nargs="*", default=[50050, 200200], help="sizes to generate")
    parser.add_argument("--tree", type=Path, nargs="*", default=[], help="existing one-rank trees")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each command (medians reported)")
    parser.add_argument("--commands", nargs="+", default=["compare", "graph_visualize"])
    parser.add_argument("--scratch", type=Path, default=Path(tempfile.gettempdir()) / "bench_scale")
    args = parser.parse_args()
    compile_ours()
    trees = [made_tree(args.scratch, n) for n in args.entries] + args.tree
    sizes = {tree: entries_of(tree) for tree in trees}
    cpus = len(os.sched_getaffinity(0))
    print(f"load {os.getloadavg()[0]:.1f} at the start, {cpus} CPUs", flush=True)
    runs: dict[tuple[Path, str], list[Measurement]] = {(t, c): [] for t in trees for c in args.commands}
    floors: dict[tuple[Path, str], list[Measurement]] = {key: [] for key in runs}
    args.scratch.mkdir(parents=True, exist_ok=True)
    for _ in range(max(1, args.repeat)):
        for key in runs:
            ours, floor = run_once(*key, args.scratch)
            runs[key].append(ours)
            floors[key].append(floor)
            print(f"{sizes[key[0]]:,} {key[1]}: {ours.summary}", flush=True)
    print(f"load {os.getloadavg()[0]:.1f} at the end\n")
    print(
        "| entries a side | command | wall | CPU | peak RSS (process tree) | floor | wall / (floor / CPUs) "
        "| CPU / 10,000 entries |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for key, found in runs.items():
        ours, floor, entries = median(found), median(floors[key]), sizes[key[0]]
        failed = f" (exit {ours.returncode})" if ours.returncode else ""
        cells = [
            f"{entries:,}",
            key[1] + failed,
            f"{ours.wall:.2f} s",
            f"{ours.cpu:.2f} s",
            f"{ours.tree_peak_mib:,.0f} MiB",
            f"{floor.wall:.2f} s",
            f"{ours.wall / (floor.wall / cpus):.2f}x",
            f"{ours.cpu / entries * 1e4:.3f} s",
        ]
        print("| " + " | ".join(cells) + " |")
    return max(median(found).returncode for found in runs.values())


if __name__ == "__main__":
    sys.exit(main())
