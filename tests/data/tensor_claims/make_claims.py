"""Regenerate tests/data/tensor_claims: tensor dumps whose target files are readable but not what dump.json
says (another dtype, shape or element count, 0-d, empty, not a tensor), with the reference's csv (D35).

Needs torch and the reference tool, so run it with the oracle interpreter, never from the tests:

    /work/ref/v/bin/python tests/data/tensor_claims/make_claims.py

- ``pt/{target,golden}``: a PyTorch tensor dump pair, one ``Torch.<case>.0.forward`` entry per case
  (input.0 only). Both dump.json files say what the golden file holds (float32 [2, 3, 4], or the case's
  ``claimed`` tensor); the target's file is the case's replacement. ``ok_*`` cases hold what they say.
- ``ms/{target,golden}``: the same for MindSpore ``.npy`` dumps (``Mint.<case>.0.forward``); ``ok_bf16``
  says ``BFloat16`` of a float32 ``.npy``, as MindSpore's dumper writes a bfloat16 tensor; the ``*_int4``
  cases say ``Int4`` (a dtype not checked) of a file of numbers (``ok_int4``) or of none (strings, bytes,
  void, records, datetimes, timedeltas), which the reference casts to float where numpy can.
- ``graph/Tensor.__add__.0.forward.output.0.pt``: tests/data/tensor_mix's target tensor of that name as
  float64; ``ref/graph_tensor_mix_f64.json``: the NPU row (precision_index, output_data) of that node in
  the reference's graph_visualize vis.db of tensor_mix with this file in its target.
- ``ref/pt.csv``, ``ref/ms.csv``: the reference's ``msprobe compare`` csv of each pair. MindSpore is not
  installed next to the reference, so its ms compare runs with a stand-in ``mindspore`` module whose
  every attribute is a dummy (the compare itself only loads ``.npy`` files with numpy; checked on the
  corpus' ms_vs_pt_tensor -am: the reference's csv but for the last digit of one EucDist cell).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import json
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import types
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
T = torch.tensor
BASE = torch.linspace(-2.0, 3.0, 24).reshape(2, 3, 4)

PT_CASES = {  # case -> (what dump.json says it is, what the target's file holds)
    "ok_same": (BASE, BASE),
    "ok_bf16": (BASE.bfloat16(), BASE.bfloat16()),
    "ok_zerod": (T(1.5), T(1.5)),
    "ok_empty": (torch.ones(0, 4), torch.ones(0, 4)),
    "ok_noncontig": (BASE, BASE.transpose(0, 2).contiguous().transpose(0, 2)),
    "ok_view": (BASE, torch.stack([torch.zeros_like(BASE), BASE])[1]),
    "f64": (BASE, BASE.double()),
    "f16": (BASE, BASE.half()),
    "bf16": (BASE, BASE.bfloat16()),
    "int64": (BASE, BASE.long()),
    "bool": (BASE, BASE != 0),
    "f32_for_bf16": (BASE.bfloat16(), BASE),
    "reshape": (BASE, BASE.reshape(6, 4)),
    "unsqueeze": (BASE, BASE.unsqueeze(0)),
    "fewer": (BASE, BASE[:, :, :2].contiguous()),
    "more": (BASE, torch.cat([BASE, BASE], -1)),
    "zerod": (BASE, T(1.0)),
    "empty": (BASE, torch.ones(0, 4)),
    "list": (BASE, [BASE]),
    "dict": (BASE, {"x": BASE}),
}
_B = BASE.numpy()
MS_CASES = {
    "ok_same": (_B, _B, "Float32"),
    "ok_bf16": (_B, _B, "BFloat16"),
    "f64": (_B, _B.astype(np.float64), "Float32"),
    "f16": (_B, _B.astype(np.float16), "Float32"),
    "int32": (_B, _B.astype(np.int32), "Float32"),
    "reshape": (_B, _B.reshape(6, 4), "Float32"),
    "unsqueeze": (_B, _B[None], "Float32"),
    "zerod": (_B, np.array(1.0, np.float32), "Float32"),
    "empty": (_B, np.ones((0, 4), np.float32), "Float32"),
    "ok_int4": (_B.astype(np.int8), _B.astype(np.int8), "Int4"),  # a dtype not checked, numbers held
    "str_int4": (_B, _B.astype(str), "Int4"),  # no numbers (D27), whatever dump.json says
    "bytes_int4": (_B, _B.astype("S8"), "Int4"),
    "void_int4": (_B, _B.view("V4"), "Int4"),
    "record_int4": (_B, _B.view([("x", "<f4")]), "Int4"),
    "datetime_int4": (_B, _B.astype(np.int64).astype("M8[s]"), "Int4"),
    "timedelta_int4": (_B, _B.astype(np.int64).astype("m8[s]"), "Int4"),
    "str_f32": (_B, _B.astype(str), "Float32"),
}


def _stats(values: np.ndarray) -> dict:
    if values.size == 0 or values.dtype == bool:
        return {"Max": None, "Min": None, "Mean": None, "Norm": None}
    f = values.astype(np.float64)
    return {"Max": f.max(), "Min": f.min(), "Mean": f.mean(), "Norm": float(np.sqrt((f * f).sum()))}


def _leaf(kind: str, dtype: str, claimed: np.ndarray, data_name: str) -> dict:
    return {
        "type": kind,
        "dtype": dtype,
        "shape": list(claimed.shape),
        **{k: (float(v) if v is not None else None) for k, v in _stats(claimed).items()},
        "requires_grad": False,
        "data_name": data_name,
    }


def _write_dump(folder: Path, framework: str, data: dict) -> None:
    dump = {"task": "tensor", "level": "L1", "framework": framework, "dump_data_dir": None, "data": data}
    (folder / "dump.json").write_text(json.dumps(dump, indent=1))
    (folder / "stack.json").write_text("{}")
    (folder / "construct.json").write_text("{}")


def _build_pt(root: Path) -> None:
    for side in ("target", "golden"):
        folder = root / side / "dump_tensor_data"
        folder.mkdir(parents=True)
        data = {}
        for name, (claimed, held) in PT_CASES.items():
            entry = f"Torch.{name}.0.forward"
            data_name = f"{entry}.input.0.pt"
            torch.save(held if side == "target" else claimed, folder / data_name)
            values = claimed.float().numpy() if claimed.dtype == torch.bfloat16 else claimed.numpy()
            leaf = _leaf("torch.Tensor", str(claimed.dtype), values, data_name)
            data[entry] = {"input_args": [leaf], "input_kwargs": {}, "output": []}
        _write_dump(root / side, "pytorch", data)


def _build_ms(root: Path) -> None:
    for side in ("target", "golden"):
        folder = root / side / "dump_tensor_data"
        folder.mkdir(parents=True)
        data = {}
        for name, (claimed, held, dtype) in MS_CASES.items():
            entry = f"Mint.{name}.0.forward"
            data_name = f"{entry}.input.0.npy"
            with open(folder / data_name, "wb") as f:
                np.save(f, held if side == "target" else claimed)
            leaf = _leaf("mindspore.Tensor", dtype, claimed, data_name)
            data[entry] = {"input_args": [leaf], "input_kwargs": {}, "output": []}
        _write_dump(root / side, "mindspore", data)


def _reference_csv(root: Path, to: Path, stand_in: bool) -> None:
    out = Path("/tmp/msprobe_dask_claims_ref")
    shutil.rmtree(out, ignore_errors=True)
    msprobe = [str(Path(sys.executable).parent / "msprobe")]
    launcher = [sys.executable, __file__, "--stand-in"] if stand_in else msprobe
    subprocess.run(
        [*launcher, "compare", "-tp", str(root / "target/dump.json"), "-gp", str(root / "golden/dump.json"),
         "-o", str(out)],
        check=True, capture_output=True,
    )  # fmt: skip
    (csv,) = out.glob("*.csv")
    to.parent.mkdir(exist_ok=True)
    shutil.copyfile(csv, to)


class _Dummy:
    def __init__(self, *args: object, **kwargs: object) -> None:
        pass

    def __call__(self, *args: object, **kwargs: object) -> _Dummy:
        return _Dummy()

    def __getattr__(self, name: str) -> object:
        return _dummy_class(name) if name[:1].isupper() else _Dummy()

    def __iter__(self):  # noqa: ANN204
        return iter(())

    def __mro_entries__(self, bases: tuple) -> tuple:
        return (object,)

    def __bool__(self) -> bool:
        return False


class _DummyMeta(type):
    def __getattr__(cls, name: str) -> object:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Dummy()


def _dummy_class(name: str) -> type:
    return _DummyMeta(name, (_Dummy,), {})


class _StandIn(types.ModuleType):
    def __getattr__(self, name: str) -> object:
        if name.startswith("__"):
            raise AttributeError(name)
        value = _dummy_class(name) if name[:1].isupper() else _Dummy()
        setattr(self, name, value)
        return value


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):  # noqa: ANN001, ANN201
        if name == "mindspore" or name.startswith("mindspore."):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):  # noqa: ANN001, ANN201
        module = _StandIn(spec.name)
        module.__path__ = []
        module.__version__ = "2.9.0"
        return module

    def exec_module(self, module):  # noqa: ANN001, ANN201
        pass


GRAPH_NODE = "Tensor.__add__.0.forward"


def _reference_graph_node() -> None:
    """The float64 file and the reference's graph_visualize node row of tensor_mix holding it."""
    mix = HERE.parent / "tensor_mix"
    name = f"{GRAPH_NODE}.output.0.pt"
    (HERE / "graph").mkdir(exist_ok=True)
    torch.save(torch.load(mix / "target" / "dump_tensor_data" / name).double(), HERE / "graph" / name)
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / "target"
        shutil.copytree(mix / "target", target)
        shutil.copyfile(HERE / "graph" / name, target / "dump_tensor_data" / name)
        out = Path(tmp) / "out"
        msprobe = str(Path(sys.executable).parent / "msprobe")
        argv = [msprobe, "graph_visualize", "-tp", str(target), "-gp", str(mix / "golden"), "-o", str(out)]
        subprocess.run(argv, check=True, capture_output=True)
        (db,) = out.glob("*.vis.db")
        with sqlite3.connect(db) as connection:
            query = (
                "SELECT precision_index, output_data FROM tb_nodes WHERE node_name = ? AND data_source = ?"
            )
            ((precision, outputs),) = connection.execute(query, (GRAPH_NODE, "NPU")).fetchall()
    record = {
        "command": f"msprobe graph_visualize -tp tensor_mix/target (its {name} replaced by graph/{name}, "
        "float64 of its values) -gp tensor_mix/golden",
        "node": GRAPH_NODE,
        "precision_index": precision,
        "output_data": json.loads(outputs),
    }
    (HERE / "ref" / "graph_tensor_mix_f64.json").write_text(json.dumps(record, indent=1) + "\n")


def main() -> None:
    for kind, build in (("pt", _build_pt), ("ms", _build_ms)):
        shutil.rmtree(HERE / kind, ignore_errors=True)
        build(HERE / kind)
        _reference_csv(HERE / kind, HERE / "ref" / f"{kind}.csv", stand_in=kind == "ms")
    _reference_graph_node()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--stand-in"]:  # the reference's CLI, with the stand-in for mindspore
        sys.meta_path.insert(0, _Finder())
        from msprobe.msprobe import main as reference_main

        sys.argv = ["msprobe", *sys.argv[2:]]
        sys.exit(reference_main())
    main()
