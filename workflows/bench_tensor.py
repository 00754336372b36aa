"""Benchmark: tensor-mode compare of big dumps, ours against the reference and against the floor.

    python workflows/bench_tensor.py [--gb 2] [--big-gb 4] [--repeat 3] [--reference-repeat 1]
        [--reference $(which msprobe)] [--torch-python PYTHON] [--scratch DIR]
        [--only many-pt,many-npy,big] [--keep]

Generates (``gen_tensor_dump.py``) a dump of many tensors per format (``.pt`` through the torch of
``--torch-python``, by default the Python beside ``--reference``; ``.npy``) and one pair of a single big
float32 tensor, then runs, interleaved and ``--repeat`` times: the floor (one process reads every tensor
byte once and reduces it with numpy), the floor on 2 processes (the files shared out by bytes: what this
host gives two processes, the ceiling of ours' "2 workers vs 1"), ours (the default threaded scheduler,
then ``--workers 1`` and ``--workers 2``) and the reference. It prints
medians of wall time, CPU time (user + system of the whole process tree), GB/s of tensor bytes read (both
sides) and peak RSS summed over the process tree (sampled every 20 ms). For the big pair it also checks
our csv's metrics against a float64 numpy computation over the whole arrays (1e-6 relative).
The generated data goes under ``--scratch`` and is deleted at the end unless ``--keep``.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from msprobe_dask.columns import TENSOR_METRIC_COLUMNS

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from measure import Measurement, compile_ours, measure  # noqa: E402

EPS32 = float(np.finfo(np.float32).eps)

FLOOR = """
import sys, numpy as np
from pathlib import Path
buf = bytearray(64 << 20)
total = 0.0
for name in sys.argv[1:]:
    for path in sorted(Path(name).iterdir()) if Path(name).is_dir() else [Path(name)]:
        with open(path, "rb", buffering=0) as f:
            while n := f.readinto(buf):
                total += float(np.add.reduce(np.frombuffer(buf, np.float32, n // 4)))
print(total)
"""

# The floor on two processes: the files dealt, largest first, to the process with fewer bytes so far,
# both run at once. Its speed-up over FLOOR is what this host gives two processes reading and reducing
# page-cached bytes: the ceiling of ours' "2 workers vs 1".
FLOOR_ON_2 = """
import subprocess, sys
from pathlib import Path
files = sorted((p for d in sys.argv[2:] for p in Path(d).iterdir()), key=lambda p: -p.stat().st_size)
halves, sizes = ([], []), [0, 0]
for path in files:
    i = sizes.index(min(sizes))
    halves[i].append(str(path))
    sizes[i] += path.stat().st_size
procs = [subprocess.Popen([sys.executable, "-c", sys.argv[1], *h], stdout=subprocess.DEVNULL) for h in halves]
sys.exit(max(p.wait() for p in procs))
"""


def tensor_bytes(dump: Path) -> int:
    return sum(
        p.stat().st_size
        for side in ("target", "golden")
        for p in (dump / side / "dump_tensor_data").iterdir()
    )


def commands(dump: Path, out: Path, reference: str | None) -> dict[str, list[str]]:
    """The runs on ``dump``; the reference only on PyTorch (.pt) dumps: it needs mindspore for .npy ones."""
    target, golden = str(dump / "target" / "dump.json"), str(dump / "golden" / "dump.json")
    ours = [sys.executable, "-m", "msprobe_dask", "compare", "-q", "-tp", target, "-gp", golden]
    tensor_dirs = [str(dump / side / "dump_tensor_data") for side in ("target", "golden")]
    runs = {
        "floor": [sys.executable, "-c", FLOOR, *tensor_dirs],
        "floor on 2": [sys.executable, "-c", FLOOR_ON_2, FLOOR, *tensor_dirs],
        "ours": [*ours, "-o", str(out / "ours")],
        "ours --workers 1": [*ours, "--workers", "1", "-o", str(out / "ours1")],
        "ours --workers 2": [*ours, "--workers", "2", "-o", str(out / "ours2")],
    }
    if reference and json.loads((dump / "target" / "dump.json").read_text())["framework"] == "pytorch":
        runs["reference"] = [reference, "compare", "-tp", target, "-gp", golden, "-o", str(out / "ref")]
    return runs


def bench(
    name: str, dump: Path, reference: str | None, repeat: int, ref_repeat: int, timeout: float
) -> dict[str, list[Measurement]]:
    nbytes = tensor_bytes(dump)
    results: dict[str, list[Measurement]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(repeat):
            runs = commands(dump, Path(tmp), reference if i < ref_repeat else None)
            for label, command in runs.items():
                run = measure(command, timeout)
                print(f"  {label}: {run.summary}", flush=True)
                if run.returncode != 0:
                    print(f"{name}: {label} failed or timed out (rc={run.returncode}): {' '.join(command)}")
                    continue
                results.setdefault(label, []).append(run)
            check_same_csvs(Path(tmp))
            for folder in Path(tmp).iterdir():
                shutil.rmtree(folder)
    print(f"\n{name}: {nbytes / 1e9:.2f} GB of tensor files (both sides), median of {repeat}")
    print(f"{'':18} {'wall s':>8} {'CPU s':>8} {'GB/s':>7} {'peak MiB':>9}")
    for label, runs in results.items():
        wall = statistics.median(r.wall for r in runs)
        cpu = statistics.median(r.cpu for r in runs)
        peak = statistics.median(r.tree_peak_mib for r in runs)
        print(f"{label:18} {wall:8.2f} {cpu:8.2f} {nbytes / 1e9 / wall:7.2f} {peak:9.0f}")
    med = {label: statistics.median(r.wall for r in runs) for label, runs in results.items()}
    if {"ours", "floor", "ours --workers 1", "ours --workers 2"} - med.keys():
        return results
    if "reference" in med:
        print(f"ours vs reference: {med['reference'] / med['ours']:.1f}x faster")
    print(f"ours vs floor: {med['ours'] / med['floor']:.2f}x the floor's time")
    print(f"2 workers vs 1: {med['ours --workers 1'] / med['ours --workers 2']:.2f}x faster")
    if "floor on 2" in med:
        ceiling = med["floor"] / med["floor on 2"]
        print(f"the floor on 2 processes vs 1 (this host's ceiling): {ceiling:.2f}x faster")
    return results


def _csv(folder: Path) -> list[list[str]]:
    (path,) = folder.glob("*.csv")
    with open(path, newline="") as f:
        return list(csv.reader(f))


def _differences(ours: list[list[str]], other: list[list[str]]) -> list[tuple[str, str, str, str]]:
    """(row, column, ours, other) for every metric cell that differs; EucDist within 1e-12 relative passes
    (its float64 dot is summed in an order that depends on BLAS's threads, see README)."""
    header = other[0]
    if len(ours) != len(other):
        return [("rows", "", str(len(ours)), str(len(other)))]
    found = []
    for a, b in zip(ours[1:], other[1:]):
        for column in TENSOR_METRIC_COLUMNS:
            x, y = a[header.index(column)], b[header.index(column)]
            if x != y and not (column == "EucDist" and math.isclose(float(x), float(y), rel_tol=1e-12)):
                found.append((a[0], column, x, y))
    return found


def check_same_csvs(out: Path) -> None:
    """Ours gives one answer whatever the scheduler, and the reference's (metric columns)."""
    ours = _csv(out / "ours")
    for other in ("ours1", "ours2", "ref"):
        if list((out / other).glob("*.csv")):
            differ = _differences(ours, _csv(out / other))
            if differ:
                print(f"WARNING: ours and {other} differ in {len(differ)} cells, e.g. {differ[:3]}")


def bench_store(dump: Path) -> None:
    """Convert both sides to zarr stores: time, bytes before and after; then ours on the stores."""
    with tempfile.TemporaryDirectory(dir=dump) as tmp:
        stores = Path(tmp)
        for side in ("target", "golden"):
            convert = [sys.executable, "-m", "msprobe_dask", "convert", "-q", str(dump / side)]
            run = measure([*convert, "-o", str(stores / side)])
            before = sum(p.stat().st_size for p in (dump / side).rglob("*") if p.is_file())
            after = sum(p.stat().st_size for p in (stores / side).rglob("*") if p.is_file())
            print(
                f"convert {side}: {run.wall:.1f} s wall, {run.cpu:.1f} s CPU, {before / 1e9:.3f} GB -> "
                f"{after / 1e9:.3f} GB ({after / before:.2f}), rc={run.returncode}"
            )
        compare = [sys.executable, "-m", "msprobe_dask", "compare", "-q", "-tp", str(stores / "target")]
        run = measure([*compare, "-gp", str(stores / "golden"), "-o", str(stores / "out")])
        print(f"ours on the stores: {run.summary}")


def float64_metrics(dump: Path) -> dict[str, float]:
    """The six metrics of the big pair in float64 numpy over the whole arrays (read in slabs of float64
    copies, the sums of each slab added exactly). The reference shows a cosine above 0.9999 with 6
    decimals: 1.0 for 0.9999995, a relative difference of 5e-7."""
    (n_path,) = (dump / "target" / "dump_tensor_data").iterdir()
    (b_path,) = (dump / "golden" / "dump_tensor_data").iterdir()
    from msprobe_dask.dump.tensor_file import open_tensor, read_flat

    npu, bench = (open_tensor(path) for path in (n_path, b_path))
    dots, n_sq, b_sq, diff_sq, max_abs, max_rel, under1, under5 = [], [], [], [], 0.0, 0.0, 0, 0
    for start in range(0, npu.size, 1 << 26):
        n = read_flat(npu, start, start + (1 << 26)).astype(np.float64)
        b = read_flat(bench, start, start + (1 << 26)).astype(np.float64)
        dots.append(n @ b)
        n_sq.append(n @ n)
        b_sq.append(b @ b)
        diff = n - b
        diff_sq.append(diff @ diff)
        max_abs = max(max_abs, float(np.max(np.abs(diff))))
        zero = b == 0  # the metric's rule: float32's eps added to both sides where bench is 0
        n[zero] += EPS32
        b[zero] += EPS32
        relative = np.abs((n - b) / b)
        max_rel = max(max_rel, float(np.max(relative)))
        under1 += int(np.sum(relative < 0.001))
        under5 += int(np.sum(relative < 0.005))
    return {
        "Cosine": math.fsum(dots) / math.sqrt(math.fsum(n_sq) * math.fsum(b_sq)),
        "EucDist": math.sqrt(math.fsum(diff_sq)),
        "MaxAbsErr": max_abs,
        "MaxRelativeErr": max_rel,
        "One Thousandth Err Ratio": under1 / npu.size,
        "Five Thousandths Err Ratio": under5 / npu.size,
    }


def check_big_metrics(dump: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        run = measure(commands(dump, Path(tmp), None)["ours"])
        assert run.returncode == 0
        header, row = _csv(Path(tmp) / "ours")[:2]
    expected = float64_metrics(dump)
    worst = 0.0
    for column, value in expected.items():
        ours = float(row[header.index(column)])
        worst = max(worst, abs(ours - value) / abs(value) if value else abs(ours))
        print(f"  {column:28} ours {ours!r:24} float64 numpy {value!r}")
    print(f"big pair: largest relative difference from float64 numpy {worst:.1e} (target < 1e-6)")


def generate(torch_python: str, dump: Path, *args: str) -> None:
    if not dump.exists():
        subprocess.run([torch_python, str(HERE / "gen_tensor_dump.py"), str(dump), *args], check=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--gb", type=float, default=2.0, help="tensor bytes per side of the many-tensor dumps"
    )
    parser.add_argument("--big-gb", type=float, default=4.0, help="size of the one big tensor per side")
    parser.add_argument("--repeat", type=int, default=3, help="runs of ours and of the floor")
    parser.add_argument("--reference-repeat", type=int, default=1, help="runs of the reference (slow)")
    parser.add_argument("--reference", default=shutil.which("msprobe"), help="the reference's msprobe")
    parser.add_argument("--torch-python", help="a Python with torch (default: the one beside --reference)")
    parser.add_argument("--scratch", type=Path, default=Path(tempfile.gettempdir()) / "bench_tensor")
    parser.add_argument("--only", default="many-pt,many-npy,big")
    parser.add_argument("--keep", action="store_true", help="keep the generated dumps")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds before a run is killed")
    args = parser.parse_args()
    compile_ours()
    reference = args.reference if args.reference and Path(args.reference).exists() else None
    torch_python = args.torch_python or str(Path(reference or sys.executable).with_name("python"))
    wanted = args.only.split(",")
    try:
        for fmt in ("pt", "npy"):
            if f"many-{fmt}" in wanted:
                dump = args.scratch / f"many_{fmt}"
                generate(torch_python, dump, "--format", fmt, "--gb", str(args.gb))
                bench(
                    f"many tensors, .{fmt}", dump, reference, args.repeat, args.reference_repeat, args.timeout
                )
                bench_store(dump)
        if "big" in wanted:
            dump = args.scratch / "big"
            generate(torch_python, dump, "--format", "pt", "--big-gb", str(args.big_gb))
            bench("one big tensor, .pt", dump, reference, args.repeat, args.reference_repeat, args.timeout)
            check_big_metrics(dump)
    finally:
        if not args.keep:
            shutil.rmtree(args.scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
