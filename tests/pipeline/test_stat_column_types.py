"""Which statistics columns print an int as ``3.0``: each side's column the reference holds as float64
(every row of that side a number, none NaN, one a float). The expected rows are the reference's
(mindstudio-probe 26.2.0) on these dumps; an int argument equal on both sides passes whatever the
typing, as the reference compares the values."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from msprobe_dask.cli import main

API = "Functional.add.0.forward"
NAN = float("nan")


def _tensor(top: float, dtype: str = "torch.float32") -> dict[str, Any]:
    stats = dict(zip(("Max", "Min", "Mean", "Norm"), (top, -1.0, 0.5, 9.75)))
    return {"type": "torch.Tensor", "dtype": dtype, "shape": [3, 1], **stats, "requires_grad": False}


def _dump(folder: Path, *arguments: dict[str, Any]) -> Path:
    folder.mkdir()
    data = {API: {"input_args": [_tensor(4.25), *arguments], "output": [_tensor(4.25)]}}
    doc = {"task": "statistics", "level": "mix", "framework": "pytorch", "data": data}
    (folder / "dump.json").write_text(json.dumps(doc))
    return folder / "dump.json"


INT = {"type": "int", "value": 3}
INT_TENSOR = _tensor(3, "torch.int64")
# (target's arguments, golden's, the int row's NPU max, Bench max, Max diff, MaxRelativeErr, Result)
CASES = {
    "all numbers": ((INT,), (INT,), "3.0", "3.0", "0", "0", "pass"),
    "an int tensor": (
        (INT_TENSOR,),
        (INT_TENSOR,),
        "3.0",
        "3.0",
        "0",
        "0",
        "pass",
    ),
    "NaN on the target side": ((INT, _tensor(NAN)), (INT, _tensor(5.0)), "3", "3.0", "0.0", "0.0%", "pass"),
    "NaN on the golden side": ((INT, _tensor(5.0)), (INT, _tensor(NAN)), "3.0", "3", "0.0", "0.0%", "pass"),
    "an infinity": ((INT, _tensor(float("inf"))), (INT, _tensor(5.0)), "3.0", "3.0", "0", "0", "pass"),
    "None on both sides": ((INT, _tensor(None)), (INT, _tensor(None)), "3", "3", "0", "0", "pass"),  # type: ignore[arg-type]
}


@pytest.mark.parametrize("case", list(CASES))
def test_int_argument_row_as_the_reference_writes_it(tmp_path: Path, case: str) -> None:
    target_args, golden_args, npu_max, bench_max, diff, rel, result = CASES[case]
    target, golden = _dump(tmp_path / "target", *target_args), _dump(tmp_path / "golden", *golden_args)
    assert main(["compare", "-tp", str(target), "-gp", str(golden), "-o", str(tmp_path / "out"), "-q"]) == 0
    (path,) = (tmp_path / "out").glob("*.csv")
    rows = {row["NPU Name"]: row for row in csv.DictReader(path.open(encoding="utf-8"))}
    row = rows[f"{API}.input.1"]
    got = (row["NPU max"], row["Bench max"], row["Max diff"], row["MaxRelativeErr"], row["Result"])
    assert got == (npu_max, bench_max, diff, rel, result)
