"""D35: a readable tensor file that is not what dump.json says of it (another dtype, another shape or
element count, 0-d, empty; a .pt holding no tensor, D27; a file of no numbers, D27, whatever dump.json
says) is an ``error`` row naming the file, what it holds and what dump.json says, where the reference
compares the file as it is and may say ``pass``.

tests/data/tensor_claims (make_claims.py): PyTorch ``.pt`` and MindSpore ``.npy`` pairs whose target files
were replaced; ``ref/*.csv`` is the reference's csv of each pair. Every cell but the Result and Err_message
of the replaced files' rows equals the reference's (and the metrics of a file of no numbers, ``unsupported``
here: D27); the ``ok_*`` rows equal it whole.
"""

from __future__ import annotations

import csv
import json
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from msprobe_dask.cli import main
from msprobe_dask.columns import TENSOR_METRIC_COLUMNS
from msprobe_dask.dump.tensor_handle import TensorHandle
from msprobe_dask.metrics.claims import disagreement
from msprobe_dask.metrics.tensor import measure_pair, measure_pair_delayed
from msprobe_dask.metrics.tensor_cells import TensorMetrics

DATA = Path(__file__).resolve().parents[1] / "data"
CLAIMS = DATA / "tensor_claims"
NOT_TENSORS = ("list", "dict")  # a .pt holding no tensor (D27)
NOT_NUMBERS = {  # an .npy of no numbers (D27): case -> the dtype the message names
    "str_int4": "str1024",
    "bytes_int4": "bytes64",
    "void_int4": "void32",
    "record_int4": "void32",
    "datetime_int4": "datetime64[s]",
    "timedelta_int4": "timedelta64[s]",
    "str_f32": "str1024",
}


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def _compare(kind: str, out: Path, *more: str, convert: Path | None = None) -> tuple[int, Path]:
    sides = {side: CLAIMS / kind / side for side in ("target", "golden")}
    if convert is not None:  # as zarr stores
        for side, folder in sides.items():
            assert main(["convert", "-q", str(folder), "-o", str(convert / side)]) == 0
            sides[side] = convert / side
    argv = [
        "compare",
        "-q",
        "-tp",
        str(sides["target"] / "dump.json"),
        "-gp",
        str(sides["golden"] / "dump.json"),
    ]
    code = main([*argv, "-o", str(out), *more])
    (written,) = out.glob("*.csv")
    return code, written


RUNS = {
    "pt": ("pt", ()),
    "ms": ("ms", ()),
    "pt-workers-2": ("pt", ("--workers", "2")),  # the files are read by the worker processes
    "ms-zarr": ("ms", ("zarr",)),
    "pt-zarr": ("pt", ("zarr",)),
}


@pytest.mark.parametrize("run", list(RUNS))
def test_files_not_as_dumped_are_errors_where_the_reference_says_pass(
    run: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kind, more = RUNS[run]
    zarr = tmp_path / "stores" if more == ("zarr",) else None
    code, written = _compare(kind, tmp_path / "out", *(() if zarr else more), convert=zarr)
    ours, ref = _rows(written), _rows(CLAIMS / "ref" / f"{kind}.csv")
    assert [r["NPU Name"] for r in ours] == [r["NPU Name"] for r in ref]
    replaced = 0
    for mine, theirs in zip(ours, ref):
        case = mine["NPU Name"].split(".")[1]
        if case.startswith("ok_") or case == "unsqueeze":  # the same values, sizes of 1 aside
            assert mine == theirs, case
            continue
        replaced += 1
        # the reference: the file compared as it is (cast to float where numpy can), never an error here
        assert theirs["Result"] == "pass" and theirs["Err_message"] == "[]", case
        if case in NOT_NUMBERS:  # not measured (D27)
            theirs = {**theirs, **dict.fromkeys(TENSOR_METRIC_COLUMNS, "unsupported")}
        assert {k: v for k, v in mine.items() if k not in ("Result", "Err_message")} == {
            k: v for k, v in theirs.items() if k not in ("Result", "Err_message")
        }, case
        assert mine["Result"] == "error", case
        (message,) = json.loads(mine["Err_message"])
        data_name = f"{mine['NPU Name']}.{'pt' if kind == 'pt' else 'npy'}"
        assert data_name in message, message
        if case in NOT_NUMBERS:
            assert f"the file holds {NOT_NUMBERS[case]} [2, 3, 4], not numbers" in message, message
        elif case not in NOT_TENSORS:
            claimed = "torch.float32" if kind == "pt" else "Float32"
            if case == "f32_for_bf16":
                claimed = "torch.bfloat16"
            assert f"dump.json says {claimed} [2, 3, 4]" in message, message
    assert replaced == 13
    assert code == 1
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith(f"msprobe-dask: {replaced} row(s) could not be read"), last


def test_graph_node_of_a_file_not_as_dumped_is_an_error(tmp_path: Path) -> None:
    """graph_visualize on tensor_mix whose Tensor.__add__.0 output is float64 of the same values: the
    reference's node says pass (precision_index 0, recorded in ref/graph_tensor_mix_f64.json), ours an
    error (precision_index 1) with the reference's cells."""
    ref = json.loads((CLAIMS / "ref" / "graph_tensor_mix_f64.json").read_text())
    target = tmp_path / "target"
    shutil.copytree(DATA / "tensor_mix" / "target", target)
    (replacement,) = (CLAIMS / "graph").iterdir()
    shutil.copyfile(replacement, target / "dump_tensor_data" / replacement.name)
    golden = DATA / "tensor_mix" / "golden"
    assert (
        main(["graph_visualize", "-q", "-tp", str(target), "-gp", str(golden), "-o", str(tmp_path / "out")])
        == 1
    )
    (db,) = (tmp_path / "out").glob("*.vis.db")
    with sqlite3.connect(db) as connection:
        ((precision, outputs),) = connection.execute(
            "SELECT precision_index, output_data FROM tb_nodes WHERE node_name = ? AND data_source = 'NPU'",
            (ref["node"],),
        ).fetchall()
    assert ref["precision_index"] == 0 and precision == 1
    ((name, theirs),) = ref["output_data"].items()
    mine = json.loads(outputs)[name]
    assert theirs["Result"] == "pass" and theirs["Cosine"] == "1.0"
    assert {k: v for k, v in mine.items() if k not in ("Result", "Err_message")} == {
        k: v for k, v in theirs.items() if k not in ("Result", "Err_message")
    }
    assert mine["Result"] == "error"
    assert "the file holds float64 [2, 8, 32], dump.json says torch.float32 [2, 8, 32]" in mine["Err_message"]


@pytest.mark.parametrize("case", ["f64", "reshape", "ok_same"])
def test_every_path_marks_a_file_not_as_dumped(case: str) -> None:
    """One shot, chunked and lazy (dask.array reduction) give the same row for a pair and its claims."""
    n, b = (
        CLAIMS / "pt" / side / "dump_tensor_data" / f"Torch.{case}.0.forward.input.0.pt"
        for side in ("target", "golden")
    )
    claims = (("torch.float32", "[2, 3, 4]"),) * 2
    one_shot = measure_pair(n, b, claims=claims)
    assert one_shot.unreadable == (case != "ok_same")
    assert measure_pair(n, b, claims=claims, big_elems=1, chunk_elems=5) == one_shot
    for big in (1, None):
        assert (
            measure_pair_delayed(n, b, claims, big_elems=big, chunk_elems=5).compute(scheduler="sync")
            == one_shot
        )


def _handle(element: np.dtype | str, shape: tuple[int, ...], kind: str = "npy") -> TensorHandle:
    return TensorHandle(Path("x." + kind), kind, element, shape, 0, (1,) * len(shape))  # type: ignore[arg-type]


F32 = np.dtype(np.float32)


@pytest.mark.parametrize(
    "element, shape, claim, wrong",
    [
        (F32, (2, 3), ("torch.float32", "[2, 3]"), False),
        (F32, (2, 3), ("Float32", "[2, 3]"), False),
        (F32, (1, 2, 3), ("torch.float32", "[2, 3, 1]"), False),  # sizes of 1 are squeezed away
        (F32, (), ("torch.float32", "[1]"), False),
        (F32, (2, 3), ("BFloat16", "[2, 3]"), False),  # MindSpore writes bfloat16 as a float32 .npy
        ("bfloat16", (2, 3), ("torch.bfloat16", "[2, 3]"), False),
        (np.dtype(">f4"), (2, 3), ("Float32", "[2, 3]"), False),  # a big-endian .npy of the dtype
        (F32, (2, 3), ("torch.hifloat8", "[2, 3]"), False),  # a dtype no tensor file holds: not checked
        (F32, (2, 3), ("float", "(2, 3)"), False),  # cells of another form: not checked
        (F32, (2, 3), ("torch.bfloat16", "[2, 3]"), True),
        (np.dtype(np.float64), (2, 3), ("torch.float32", "[2, 3]"), True),
        (np.dtype(np.int64), (2, 3), ("Int32", "[2, 3]"), True),
        (F32, (3, 2), ("torch.float32", "[2, 3]"), True),
        (F32, (0, 3), ("torch.float32", "[2, 3]"), True),
        (F32, (), ("torch.float32", "[2, 3]"), True),
    ],
)
def test_disagreement(
    element: np.dtype | str, shape: tuple[int, ...], claim: tuple[str, str], wrong: bool
) -> None:
    problem = disagreement(_handle(element, shape), claim)
    assert (problem is not None) == wrong, problem
    if wrong:
        assert (
            problem
            == f"x.npy: the file holds {_name(element)} {list(shape)}, dump.json says {claim[0]} {claim[1]}"
        )


def _name(element: np.dtype | str) -> str:
    return element if isinstance(element, str) else element.name


@pytest.mark.parametrize("case", sorted(NOT_NUMBERS))
def test_every_path_marks_a_file_of_no_numbers(case: str) -> None:
    """A file of no numbers is an error whatever dump.json says of it (``Int4``, not checked; or nothing
    known), on the one-shot, chunked and lazy paths alike."""
    n, b = (
        CLAIMS / "ms" / side / "dump_tensor_data" / f"Mint.{case}.0.forward.input.0.npy"
        for side in ("target", "golden")
    )
    one_shot = measure_pair(n, b, claims=(("Int4", "[2, 3, 4]"),) * 2)
    assert one_shot == TensorMetrics.filled(
        "unsupported", f"{n}: the file holds {NOT_NUMBERS[case]} [2, 3, 4], not numbers", unreadable=True
    )
    assert measure_pair(n, b) == one_shot
    assert measure_pair(n, b, big_elems=1, chunk_elems=5) == one_shot
    for big in (1, None):
        lazy = measure_pair_delayed(n, b, None, big_elems=big, chunk_elems=5).compute(scheduler="sync")
        assert lazy == one_shot
    both = measure_pair(n, n).message.split("; ")
    assert both == [one_shot.message] * 2
