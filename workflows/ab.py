"""A/B two checkouts on one command line: median wall, CPU and peak RSS of each, and their ratio.

    python workflows/ab.py --a A/.venv/bin/python --b B/.venv/bin/python [--repeat 5] -- \\
        graph_visualize -tp T -gp G -o {out}

Runs ``PY -m msprobe_dask ARGS`` with A's and B's interpreter in turn (A, B, A, B, ...), ``{out}`` replaced
by a fresh folder each run (removed after it), measured by workflows/measure.py (CPU and peak RSS of the
process tree).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from measure import Measurement, measure, median  # noqa: E402

_COMPILE = "import sys; sys.path.insert(0, sys.argv[1]); import measure; measure.compile_ours()"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--a", required=True, help="side A's Python (its venv's bin/python)")
    parser.add_argument("--b", required=True, help="side B's Python")
    parser.add_argument("--repeat", type=int, default=5, help="runs of each side (medians reported)")
    parser.add_argument("args", nargs="+", help="msprobe_dask's arguments after --, {out}: the output folder")
    args = parser.parse_args()
    sides = {"A": args.a, "B": args.b}
    for python in sides.values():  # each side's bytecode written first, as an install leaves it
        subprocess.run([python, "-c", _COMPILE, str(Path(__file__).parent)], check=True)
    runs: dict[str, list[Measurement]] = {name: [] for name in sides}
    print(f"load {os.getloadavg()[0]:.1f} at the start", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(max(1, args.repeat)):
            for name, python in sides.items():
                out = Path(tmp) / f"{name}{i}"
                argv = [a.replace("{out}", str(out)) for a in args.args]
                found = measure([python, "-m", "msprobe_dask", *argv])
                shutil.rmtree(out, ignore_errors=True)
                runs[name].append(found)
                print(f"{name} {i + 1}: {found.summary} (rc={found.returncode})", flush=True)
    print(f"load {os.getloadavg()[0]:.1f} at the end")
    a, b = median(runs["A"]), median(runs["B"])
    for name, m in (("A", a), ("B", b)):
        print(f"{name} median: {m.summary}")
    print(
        f"B / A: wall {b.wall / a.wall:.3f}, CPU {b.cpu / a.cpu:.3f}, "
        f"peak RSS {b.tree_peak_mib / a.tree_peak_mib:.3f}"
    )
    return max(a.returncode, b.returncode)


if __name__ == "__main__":
    sys.exit(main())
