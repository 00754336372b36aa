"""Regenerate tests/data/tensors/edge: hand-made tensor dumps for metric edge cases and the reference's cells.

Needs torch and the reference tool, so run it with the oracle interpreter, never from the tests:

    /work/ref/v/bin/python tests/data/tensors/make_edge.py

- ``edge/pt``: a PyTorch tensor dump pair (one ``Torch.<case>.0.forward`` entry per case, input.0 only),
  compared by running ``msprobe compare`` itself; the cells are read back from its csv.
- ``edge/npy``: ``.npy`` cases. MindSpore is not installed next to the reference here, so its npy reader
  (``np.load(allow_pickle=False)`` then ``np.squeeze``) is reproduced and the reference's own tensor checks
  and metric functions are called in-process.
- ``edge/expected.json``: ``{"pt/<data_name>": [6 cells as the csv text, bench data_name], ...}``.
- ``evil_*.pt``: zips shaped like torch.save output whose pickle names a forbidden global.
"""

from __future__ import annotations

import ast
import csv
import glob
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
EDGE = HERE / "edge"
COLUMNS = [
    "Cosine",
    "EucDist",
    "MaxAbsErr",
    "MaxRelativeErr",
    "One Thousandth Err Ratio",
    "Five Thousandths Err Ratio",
]
NAN, INF = float("nan"), float("inf")
T = torch.tensor


def _seeded(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


PT_CASES = {
    "size1": (T([2.0]), T([2.5])),
    "zerod_f32": (T(3.5), T(3.0)),
    "zerod_nan_nan": (T(NAN), T(NAN)),
    "zerod_inf_inf": (T(INF), T(INF)),
    "zerod_inf_one": (T(INF), T(1.0)),
    "zerod_nan_one": (T(NAN), T(1.0)),
    "zerod_int64": (T(3), T(5)),
    "zerod_bool": (T(True), T(False)),
    "zerod_uint8": (T(2, dtype=torch.uint8), T(3, dtype=torch.uint8)),
    "zerod_b_zero": (T(0.5), T(0.0)),
    "zerod_both_zero": (T(0.0), T(0.0)),
    "zerod_bf16": (T(1.5, dtype=torch.bfloat16), T(1.25, dtype=torch.bfloat16)),
    "nan_same": (T([1.0, NAN, 3.0, 4.0]), T([1.5, NAN, 3.0, 4.1])),
    "nan_diff": (T([1.0, NAN, 3.0, 4.0]), T([1.5, 2.0, NAN, 4.1])),
    "inf_signs": (T([INF, 2.0, -INF, 4.0]), T([-INF, 2.5, INF, 4.0])),
    "inf_vs_nan": (T([INF, 2.0]), T([NAN, 2.0])),
    "nan_one_side": (T([1.0, 2.0, 3.0]), T([1.0, NAN, 3.0])),
    "int64": (T([1, 2, 3, 0, -7]), T([1, 2, 4, 0, 5])),
    "int64_b_zero": (T([5, 2, 3]), T([0, 2, 0])),
    "bool": (T([True, False, True, True]), T([True, True, False, True])),
    "bool_same": (T([True, False]), T([True, False])),
    "bf16": (torch.linspace(-2, 3, 37).bfloat16(), (torch.linspace(-2, 3, 37) * 1.003).bfloat16()),
    "f16": (torch.linspace(-2, 3, 21).half(), (torch.linspace(-2, 3, 21) * 1.002).half()),
    "f64": (
        torch.linspace(-2, 3, 19, dtype=torch.float64),
        torch.linspace(-2, 3, 19, dtype=torch.float64) * 1.0004,
    ),
    "f16_vs_f32": (torch.linspace(-1, 1, 11).half(), torch.linspace(-1, 1, 11)),
    "int_vs_float": (T([1, 2, 3]), T([1.0, 2.5, 3.0])),
    "zeros_both": (torch.zeros(4), torch.zeros(4)),
    "zeros_npu": (torch.zeros(4), torch.ones(4)),
    "zeros_bench": (torch.ones(4), torch.zeros(4)),
    "tiny_norm": (T([1e-200, 0.0], dtype=torch.float64), T([1e-200, 0.0], dtype=torch.float64)),
    "b_has_zero": (T([0.5, 1.0, 2.0]), T([0.0, 1.0, 2.001])),
    "squeeze_match": (torch.arange(6.0).reshape(1, 6), torch.arange(6.0).reshape(6, 1) * 1.01),
    "shape_diff": (torch.ones(2, 3), torch.ones(3, 2)),
    "empty_npu": (torch.ones(0, 3), torch.ones(2, 3)),
    "empty_both": (torch.ones(0, 3), torch.ones(0, 3)),
    "empty_bench": (torch.ones(2, 3), torch.ones(0, 3)),
    "empty_shape_diff": (torch.ones(0, 3), torch.ones(3, 0)),
    "noncontig": (
        torch.arange(12.0).reshape(3, 4).t(),
        (torch.arange(12.0).reshape(3, 4) * 1.1).t().contiguous(),
    ),
    "storage_offset": (torch.arange(20.0)[5:15], torch.arange(10.0) + 5.0001),
    "float8": (
        T([1.0, 2.0, -0.5, 4.0]).to(torch.float8_e4m3fn),
        T([1.0, 2.5, -0.5, 4.0]).to(torch.float8_e4m3fn),
    ),
    "parameter": (torch.nn.Parameter(T([1.0, 2.0, 3.0])), T([1.0, 2.0, 3.1])),
    "cos_high": (torch.linspace(1, 2, 50), torch.linspace(1, 2, 50) + 1e-5),
    "big_values": (T([3e38, -3e38, 1.0]), T([-3e38, 3e38, 1.0])),
    "neg_cos": (T([1.0, -2.0, 3.0]), T([-1.0, 2.0, -3.0])),
    "random": (torch.randn(3, 5, 7, generator=_seeded(0)), torch.randn(3, 5, 7, generator=_seeded(1))),
    "complex": (
        torch.complex(torch.randn(6, generator=_seeded(2)), torch.randn(6, generator=_seeded(3))),
        torch.complex(torch.randn(6, generator=_seeded(4)), torch.randn(6, generator=_seeded(5))),
    ),
    "complex_vs_f32": (torch.complex(T([1.0, 2.0, 0.5]), T([3.0, -1.0, 2.0])), T([1.5, 2.0, 0.0])),
    "complex_imag_nan": (
        torch.complex(T([1.0, 2.0, 3.0]), T([NAN, 1.0, 2.0])),
        torch.complex(T([1.5, 2.0, 3.0]), T([0.0, 1.0, 2.0])),
    ),
    "complex_zerod": (torch.complex(T(1.0), T(2.0)), torch.complex(T(1.5), T(-2.0))),
}

_F4 = np.linspace(-2, 3, 12, dtype=np.float32)
NPY_CASES = {
    "fortran": (np.asfortranarray(_F4.reshape(3, 4)), np.asfortranarray((_F4 * 1.001).reshape(3, 4))),
    "bigendian": (_F4.astype(">f4"), (_F4 * np.float32(1.0007)).astype(">f4")),
    "int32": (np.array([1, 2, 0, 4], np.int32), np.array([1, 3, 0, 0], np.int32)),
    "f64": (_F4.astype(np.float64), _F4.astype(np.float64) * 1.0003),
    "zerod": (np.array(2.0, np.float32), np.array(2.5, np.float32)),
    "nan_same": (np.array([1, np.nan, 2], np.float32), np.array([1.1, np.nan, 2], np.float32)),
}


def _stats(values: np.ndarray) -> dict:
    if values.size == 0 or values.dtype == bool:
        return {"Max": None, "Min": None, "Mean": None, "Norm": None}
    f = values.astype(np.float64)
    return {"Max": f.max(), "Min": f.min(), "Mean": f.mean(), "Norm": float(np.sqrt((f * f).sum()))}


def _as_numpy(t: torch.Tensor | np.ndarray) -> np.ndarray:
    if isinstance(t, np.ndarray):
        return t.astype(t.dtype.newbyteorder("="))
    t = t.detach()
    return t.float().numpy() if t.dtype in (torch.bfloat16, torch.float8_e4m3fn) else t.numpy()


def _build(root: Path, cases: dict, side: str, framework: str, ext: str) -> None:
    folder = root / side / "dump_tensor_data"
    folder.mkdir(parents=True, exist_ok=True)
    data = {}
    for name, pair in cases.items():
        value, npu = (pair[0] if side == "target" else pair[1]), pair[0]
        entry = f"Torch.{name}.0.forward" if ext == "pt" else f"Mint.{name}.0.forward"
        data_name = f"{entry}.input.0.{ext}"
        if ext == "pt":
            torch.save(value, folder / data_name)
        else:
            np.save(folder / data_name, value)
        leaf = {
            "type": "torch.Tensor" if ext == "pt" else "mindspore.Tensor",
            "dtype": "torch.float32" if ext == "pt" else "Float32",  # same text both sides: rows stay matched
            "shape": list(npu.shape),
            **{k: (float(v) if v is not None else None) for k, v in _stats(_as_numpy(value)).items()},
            "requires_grad": False,
            "data_name": data_name,
        }
        data[entry] = {"input_args": [leaf], "input_kwargs": {}, "output": []}
    dump = {"task": "tensor", "level": "L1", "framework": framework, "dump_data_dir": None, "data": data}
    (root / side / "dump.json").write_text(json.dumps(dump, indent=1))
    (root / side / "stack.json").write_text("{}")
    (root / side / "construct.json").write_text("{}")


def _run_reference(root: Path) -> dict:
    out = Path("/tmp/msprobe_dask_edge_ref")
    shutil.rmtree(out, ignore_errors=True)
    subprocess.run(
        [str(Path(sys.executable).parent / "msprobe"), "compare", "-tp", str(root / "target/dump.json"),
         "-gp", str(root / "golden/dump.json"), "-o", str(out)],
        check=True, capture_output=True,
    )  # fmt: skip
    result = {}
    with open(glob.glob(str(out / "*.csv"))[0], newline="") as f:
        for row in csv.DictReader(f):
            npu, bench = ast.literal_eval(row["Data_name"])
            result[f"pt/{npu}"] = [row[c] for c in COLUMNS] + [bench]
    return result


def _run_reference_npy(root: Path) -> dict:
    from msprobe.core.common.const import CompareConst
    from msprobe.core.common.file_utils import load_npy
    from msprobe.core.compare.npy_compare import CompareResult, ValidateTensor, compare_ops_apply

    result = {}
    for name in NPY_CASES:
        data_name = f"Mint.{name}.0.forward.input.0.npy"
        n = np.squeeze(load_npy(str(root / "target/dump_tensor_data" / data_name)))
        b = np.squeeze(load_npy(str(root / "golden/dump_tensor_data" / data_name)))
        checked = ValidateTensor().check_tensor(CompareResult(n, b, False, ""))
        cells, _ = compare_ops_apply(
            checked.n_value, checked.b_value, checked.error_flag, checked.err_msg,
            column_names=CompareConst.ALL_COMPARE_INDEX,
        )  # fmt: skip
        result[f"npy/{data_name}"] = [str(c) for c in cells[:6]] + [data_name]
    return result


def _evil_pt(path: Path, pickle_bytes: bytes) -> None:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr("archive/data.pkl", pickle_bytes)
        zf.writestr("archive/byteorder", "little")
        zf.writestr("archive/data/0", b"\x00" * 4)
        zf.writestr("archive/version", "3\n")


def main() -> None:
    shutil.rmtree(EDGE, ignore_errors=True)
    for side in ("target", "golden"):
        _build(EDGE / "pt", PT_CASES, side, "pytorch", "pt")
        _build(EDGE / "npy", NPY_CASES, side, "mindspore", "npy")
    expected = {**_run_reference(EDGE / "pt"), **_run_reference_npy(EDGE / "npy")}
    (EDGE / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")
    # protocol-2 pickles calling os.system("true") / builtins.eval("1+1") on load
    _evil_pt(HERE / "evil_os_system.pt", b"\x80\x02cos\nsystem\nX\x04\x00\x00\x00true\x85R.")
    _evil_pt(HERE / "evil_eval.pt", b"\x80\x02cbuiltins\neval\nX\x03\x00\x00\x001+1\x85R.")


if __name__ == "__main__":
    main()
