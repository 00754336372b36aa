"""Small dumps made in tmp_path: statistics and tensor dumps of a three-level model, and the hostile
files the cases put into them."""

from __future__ import annotations

import copy
import json
import os
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

MODULE = "Module.layer.Linear.forward.0"
APIS = ("Functional.linear.0.forward", "Functional.relu.0.forward", "Tensor.__add__.0.forward")


def _stat(value: float, data_name: str | None = None) -> dict[str, Any]:
    item: dict[str, Any] = {
        "type": "torch.Tensor",
        "dtype": "torch.float32",
        "shape": [2, 3],
        "Max": value + 1.0,
        "Min": value - 1.0,
        "Mean": value,
        "Norm": abs(value) + 2.0,
        "requires_grad": False,
    }
    if data_name:
        item["data_name"] = data_name
    return item


def entries(tensor: bool = False, names: tuple[str, ...] = (MODULE, *APIS)) -> dict[str, Any]:
    data = {}
    for i, name in enumerate(names):
        inp = f"{name}.input.0.npy" if tensor else None
        out = f"{name}.output.0.npy" if tensor else None
        data[name] = {
            "input_args": [_stat(0.5 * i, inp), {"type": "int", "value": 3}],
            "input_kwargs": {"alpha": {"type": "float", "value": 1.5}},
            "output": [_stat(0.25 * i, out)],
        }
    return data


def write_dump(
    folder: Path, data: dict[str, Any] | None = None, task: str = "statistics", text: str | None = None
) -> Path:
    """dump.json (or ``text`` as dump.json), construct.json and stack.json of one rank in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    data = entries(task == "tensor") if data is None else data
    # graph_visualize reads tensors only where dump_data_dir names a folder (graph_visualize.md §3.3)
    data_dir = str(folder.resolve() / "dump_tensor_data") if task == "tensor" else None
    doc = {"task": task, "level": "mix", "framework": "pytorch", "dump_data_dir": data_dir, "data": data}
    (folder / "dump.json").write_text(json.dumps(doc, indent=1) if text is None else text)
    construct = {name: (None if name.startswith("Module.") else MODULE) for name in data}
    (folder / "construct.json").write_text(json.dumps(construct, indent=1))
    (folder / "stack.json").write_text(json.dumps({"0": [list(data), ["File model.py, line 1, in f"]]}))
    if task == "tensor":
        tensors = folder / "dump_tensor_data"
        tensors.mkdir(exist_ok=True)
        rng = np.random.default_rng(len(str(folder)))
        for body in data.values():
            for item in (*body.get("input_args", ()), *body.get("output", ())):
                if isinstance(item, dict) and "data_name" in item:
                    np.save(tensors / item["data_name"], rng.standard_normal((2, 3)).astype(np.float32))
    return folder


def dump_text_with(data_edit: str) -> str:
    """A dump.json text whose second API entry's body is replaced by the raw JSON ``data_edit``."""
    doc = {"task": "statistics", "level": "mix", "framework": "pytorch", "data": entries()}
    text = json.dumps(doc, indent=1)
    body = json.dumps(doc["data"][APIS[1]], indent=1).replace("\n", "\n  ")
    assert body in text
    return text.replace(body, data_edit, 1)


def edited(data_edit: dict[str, Any]) -> dict[str, Any]:
    data = copy.deepcopy(entries())
    data.update(data_edit)
    return data


def nested(levels: int) -> str:
    return "[" * levels + "]" * levels


def zipped_pickle(path: Path, pickle_bytes: bytes) -> None:
    """A .pt-shaped zip (torch.save's layout) holding ``pickle_bytes`` as its data.pkl."""
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("archive/data.pkl", pickle_bytes)
        zf.writestr("archive/byteorder", "little")
        zf.writestr("archive/version", "3\n")


def evil_pickle(module: str, name: str, marker: Path) -> bytes:
    """A protocol-2 pickle that calls ``module.name('touch marker')`` when loaded."""
    text = f"touch {marker}".encode()
    arg = b"X" + len(text).to_bytes(4, "little") + text
    return b"\x80\x02c" + f"{module}\n{name}\n".encode() + b"(" + arg + b"tR."


def mkfifo(path: Path) -> Path:
    path.unlink(missing_ok=True)
    os.mkfifo(path)
    return path
