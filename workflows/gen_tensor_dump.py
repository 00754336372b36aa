"""Generate a tensor-mode dump pair (target/ and golden/) for the tensor benchmarks.

    python workflows/gen_tensor_dump.py OUT --format pt  --gb 2     # many tensors, torch.save .pt files
    python workflows/gen_tensor_dump.py OUT --format npy --gb 2     # many tensors, MindSpore-style .npy
    python workflows/gen_tensor_dump.py OUT --format pt --big-gb 4  # one tensor of 4 GB per side

The ``.pt`` files are what the PyTorch dumper writes (``torch.save`` of one tensor), so this runs under a
Python that has torch (the reference's venv: the ``python`` beside its ``msprobe``); ``.npy`` needs numpy
only.
Many tensors: sizes log-uniform from 4 KiB to 8 MiB, dtypes float32 / float16 / bfloat16 in turn (the
``.npy`` variant: float32 / float16, as ``np.save`` of bfloat16 writes raw ``|V2`` bytes that neither tool
reads as numbers). The golden side is the target times (1 + a relative noise of 1e-3), in the same dtype.
The big tensor is written slab by slab through a memory map, never whole in memory (as .pt: saved by
torch from that map). The reference reads a MindSpore (.npy) dump only with mindspore installed.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np

SLAB = 1 << 26  # elements generated at a time for the big tensor


def _entry(framework: str, dtype: str, shape: list[int], data_name: str, stats: list[float]) -> dict:
    kind = "torch.Tensor" if framework == "pytorch" else "mindspore.Tensor"
    spelled = f"torch.{dtype}" if framework == "pytorch" else dtype.capitalize()
    entry = {"type": kind, "dtype": spelled, "shape": shape}
    entry.update(zip(("Max", "Min", "Mean", "Norm"), stats))
    if framework == "pytorch":
        entry["requires_grad"] = False
    entry["data_name"] = data_name
    return entry


def _stats(array: np.ndarray) -> list[float]:
    flat = array.reshape(-1).astype(np.float32)
    return [float(flat.max()), float(flat.min()), float(flat.mean()), float(np.linalg.norm(flat))]


def _write_dump(side: Path, framework: str, data: dict) -> None:
    header = {"task": "tensor", "level": "L1", "framework": framework}
    header["dump_data_dir"] = str(side / "dump_tensor_data")
    (side / "dump.json").write_text(json.dumps({**header, "data": data}, indent=1))
    (side / "stack.json").write_text("{}")
    (side / "construct.json").write_text("{}")


def _save(path: Path, array: np.ndarray, dtype: str) -> None:
    if path.suffix == ".npy":
        np.save(path, array.astype(dtype))
        return
    import torch

    tensor = torch.from_numpy(np.ascontiguousarray(array, dtype=np.float32)).to(getattr(torch, dtype))
    torch.save(tensor, path)


def many(out: Path, fmt: str, gb: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    dtypes = ["float32", "float16", "bfloat16"] if fmt == "pt" else ["float32", "float16"]
    framework = "pytorch" if fmt == "pt" else "mindspore"
    sides = {name: out / name for name in ("target", "golden")}
    for side in sides.values():
        (side / "dump_tensor_data").mkdir(parents=True)
    data: dict[str, dict] = {name: {} for name in sides}
    written, i = 0, 0
    while written < gb * 1e9:
        dtype = dtypes[i % len(dtypes)]
        itemsize = 4 if dtype == "float32" else 2
        nbytes = math.exp(rng.uniform(math.log(4 << 10), math.log(8 << 20)))
        cols = 256
        rows = max(1, int(nbytes / itemsize / cols))
        target = rng.standard_normal((rows, cols), dtype=np.float32)
        golden = target * (1 + rng.normal(0, 1e-3, target.shape).astype(np.float32))
        api = f"Functional.linear.{i}.forward"
        for name, array in (("target", target), ("golden", golden)):
            data_name = f"{api}.output.0.{fmt}"
            _save(sides[name] / "dump_tensor_data" / data_name, array, dtype)
            entry = _entry(framework, dtype, [rows, cols], data_name, _stats(array))
            data[name][api] = {"input_args": [], "input_kwargs": {}, "output": [entry]}
        written += rows * cols * itemsize
        i += 1
    for name, side in sides.items():
        _write_dump(side, framework, data[name])
    print(f"{out}: {i} tensors per side, {written / 1e9:.2f} GB per side")


def big(out: Path, gb: float, seed: int, fmt: str) -> None:
    rng = np.random.default_rng(seed)
    size = int(gb * 1e9) // 4
    cols = 1 << 12
    shape = (size // cols, cols)
    api = "Functional.matmul.0.forward"
    data_name = f"{api}.output.0.npy"
    framework = "pytorch" if fmt == "pt" else "mindspore"
    arrays = {}
    for name in ("target", "golden"):
        (out / name / "dump_tensor_data").mkdir(parents=True)
        path = out / name / "dump_tensor_data" / data_name
        arrays[name] = np.lib.format.open_memmap(path, "w+", np.float32, shape)
    flat_t, flat_g = arrays["target"].reshape(-1), arrays["golden"].reshape(-1)
    for start in range(0, flat_t.size, SLAB):
        stop = min(start + SLAB, flat_t.size)
        flat_t[start:stop] = rng.standard_normal(stop - start, dtype=np.float32)
        noise = rng.normal(0, 1e-3, stop - start).astype(np.float32)
        flat_g[start:stop] = flat_t[start:stop] * (1 + noise)
    for name, array in arrays.items():
        array.flush()
        if fmt == "pt":  # torch.save straight from the memory map, then the .npy goes
            import torch

            npy = out / name / "dump_tensor_data" / data_name
            torch.save(torch.from_numpy(np.load(npy, mmap_mode="r+")), npy.with_suffix(".pt"))
            npy.unlink()
        name_in_dump = data_name if fmt == "npy" else data_name[: -len("npy")] + "pt"
        entry = _entry(framework, "float32", list(shape), name_in_dump, [0.0, 0.0, 0.0, 0.0])
        _write_dump(out / name, framework, {api: {"input_args": [], "input_kwargs": {}, "output": [entry]}})
    print(f"{out}: one {fmt} tensor of {shape} float32 per side, {flat_t.nbytes / 1e9:.2f} GB per side")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="folder to create (target/ and golden/ inside)")
    parser.add_argument("--format", choices=("pt", "npy"), default="pt")
    parser.add_argument("--gb", type=float, default=2.0, help="tensor bytes per side (many tensors)")
    parser.add_argument("--big-gb", type=float, help="write one float32 .npy tensor of this size instead")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.out.exists():
        parser.error(f"{args.out} exists")
    if args.big_gb:
        big(args.out, args.big_gb, args.seed, args.format)
    else:
        many(args.out, args.format, args.gb, args.seed)


if __name__ == "__main__":
    main()
