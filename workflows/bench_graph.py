"""Benchmark ``graph_visualize``: msprobe-dask vs the reference msprobe (wall time, memory, ratio).

    python workflows/bench_graph.py --reference /path/to/msprobe [--nodes 100000] [--repeat 3]
                                    [--ref-repeat 1] [--skip-synthetic] [--skip-build | --skip-compare]
                                    [--flags '--workers 2'] [--target T [--golden G]]

Cases: tests/data/transformer_big (a real 24-layer dump) and a synthetic dump in the reference's format
with about ``--nodes`` nodes per side (two copies with different statistics), each as a compare
(-tp -gp) and as a build (-tp only); ``--target`` (and ``--golden``) add a dump of your own. Each
round runs ours, the reference (in its first ``--ref-repeat`` rounds) and the floor, one after the
other: the machine's speed drifts over minutes on a shared host, so the tools run side by side, and
the medians are printed with the range of the 1-minute load average. Their vis.db files are checked to
be equal with tests/graph/visdb_diff.py. The floor is a Python start, the fastest JSON parse (orjson)
of every .json file of the inputs, and writing a file of our vis.db's size (workflows/measure.py).

Each tool runs with its modules' bytecode compiled, as ``pip install`` leaves a package: the
reference's is (pip compiled it), and this script compiles ours first. (An editable checkout under
PYTHONDONTWRITEBYTECODE=1 would compile all of ours again at each start: 0.08 s.)

CPU is the user + system time of the tool and of the children it waited for (dask worker processes);
peak memory is the largest sum of the resident sets of the tool's process tree, sampled every 20 ms
(workflows/measure.py; pages shared between processes count in each: an upper bound).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "graph"))
sys.path.insert(0, str(Path(__file__).parent))
from measure import Measurement, compile_ours, measure, measure_floor, median, report  # noqa: E402


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
    # as the msProbe dumper writes them: indent=1, stack.json grouping the nodes that share a stack
    grouped = {str(i): [[name], lines] for i, (name, lines) in enumerate(stack.items())}
    (folder / "construct.json").write_text(json.dumps(construct, indent=1))
    (folder / "dump.json").write_text(json.dumps(dump, indent=1))
    (folder / "stack.json").write_text(json.dumps(grouped, indent=1))


def _db(folder: Path) -> Path:
    return next(folder.glob("*.vis.db"))


def bench(
    name: str,
    args: list[str],
    reference: str | None,
    work: Path,
    repeat: int,
    ref_repeat: int,
    flags: list[str],
) -> None:
    """Ours, the reference (its first ``ref_repeat`` rounds) and the floor, interleaved ``repeat`` times;
    medians printed. ``flags``: ours' own (``--workers 2``), not given to the reference."""
    from visdb_diff import diff_visdb

    folder = work / name.replace(" ", "_")
    ours_cmd = [sys.executable, "-m", "msprobe_dask", "graph_visualize", *args, *flags]
    inputs = [Path(a) for a in args if not a.startswith("-")]
    json_files = [p for d in inputs for p in sorted(d.rglob("*.json"))]
    loads, ours, ref, floor = [], [], [], []
    for k in range(max(1, repeat)):
        loads.append(os.getloadavg()[0])
        ours.append(_checked(measure([*ours_cmd, "-o", str(folder / f"ours{k}")]), ours_cmd))
        if reference and k < ref_repeat:
            ref_cmd = [reference, "graph_visualize", *args]
            ref.append(_checked(measure([*ref_cmd, "-o", str(folder / f"ref{k}")]), ref_cmd))
        floor.append(measure_floor(json_files, _db(folder / f"ours{k}"), folder / f"floor{k}"))
    print(f"{name}: load (1 min) {min(loads):.1f}-{max(loads):.1f}; medians of {repeat} runs")
    report(name, median(ours), median(ref) if ref else None)
    if ref:
        problems = diff_visdb(str(_db(folder / "ours0")), str(_db(folder / "ref0")))
        print(f"{name}: vis.db {'identical' if not problems else 'DIFFERS: ' + problems[0]}")
    f = median(floor)
    print(f"{name}: floor {f.summary}; ours / floor {median(ours).cpu / f.cpu:.1f}x CPU")
    sys.stdout.flush()


def _checked(run: Measurement, cmd: list[str]) -> Measurement:
    if run.returncode != 0:
        raise SystemExit(f"failed ({run.returncode}): {' '.join(cmd)}")
    return run


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reference", default=shutil.which("msprobe"), help="the reference msprobe executable")
    p.add_argument("--nodes", type=int, default=100_000, help="nodes per side of the synthetic dump")
    p.add_argument("--repeat", type=int, default=3, help="rounds (medians reported)")
    p.add_argument("--ref-repeat", type=int, default=1, help="rounds the reference runs in")
    p.add_argument("--skip-synthetic", action="store_true")
    p.add_argument("--skip-build", action="store_true", help="only the compare cases")
    p.add_argument("--skip-compare", action="store_true", help="only the build cases")
    p.add_argument("--flags", default="", help="flags for ours only, e.g. '--workers 2'")
    p.add_argument("--target", type=Path, help="a dump folder (or rank tree) of your own, as -tp")
    p.add_argument("--golden", type=Path, help="its golden dump, as -gp")
    a = p.parse_args()
    flags = shlex.split(a.flags)
    compile_ours()
    work = Path(tempfile.mkdtemp(prefix="bench_graph_"))
    try:
        cases: list[tuple[str, Path, Path | None]] = []
        data = ROOT / "tests" / "data" / "transformer_big"
        cases.append(("transformer_big", data / "target", data / "golden"))
        if a.target:
            cases = [(a.target.name, a.target, a.golden)]
        if not a.skip_synthetic:
            syn = work / "synthetic"
            make_synthetic(syn / "target", a.nodes, 1)
            make_synthetic(syn / "golden", a.nodes, 2)
            cases.append((f"synthetic_{a.nodes}", syn / "target", syn / "golden"))
        for name, tp, gp in cases:
            if not a.skip_compare and gp is not None:
                bench(
                    f"{name} compare",
                    ["-tp", str(tp), "-gp", str(gp)],
                    a.reference,
                    work,
                    a.repeat,
                    a.ref_repeat,
                    flags,
                )
            if not a.skip_build:
                bench(f"{name} build", ["-tp", str(tp)], a.reference, work, a.repeat, a.ref_repeat, flags)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
