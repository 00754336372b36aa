"""A leaf whose dtype is null is a value, not a tensor, as the reference reads it: dtype cells
``<class 'NoneType'>``, shape ``[]``, every statistic None (tests/data/dtype_null, the reference's csv)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from conftest import case_dir, read_csv, reference_file, run_cli


def test_null_dtype_rows_equal_the_reference(tmp_path: Path) -> None:
    case = case_dir("dtype_null")
    result = run_cli(
        "compare", "-tp", str(case / "target" / "dump.json"), "-gp", str(case / "golden" / "dump.json"),
        "-o", str(tmp_path), "-q",
    )
    assert result.returncode == 0, result.stderr
    (ours,) = tmp_path.glob("*.csv")
    expected = read_csv(reference_file("dtype_null", "compare_csv"))
    got = read_csv(ours)
    null_row = next(row for row in got if row[0] == "Functional.embedding.0.forward.input.1")
    assert null_row[2:6] == ["<class 'NoneType'>", "<class 'NoneType'>", "[]", "[]"]
    assert got == expected


def test_null_dtype_tensor_row_equals_the_reference(tmp_path: Path) -> None:
    """In tensor mode the leaf's file is read and compared as the reference does (not an error row: its
    null dtype claims nothing of the file)."""
    dump = tmp_path / "dump"
    shutil.copytree(case_dir("tensor_mix"), dump, ignore=shutil.ignore_patterns("ref"))
    for side in ("target", "golden"):
        path = dump / side / "dump.json"
        data = json.loads(path.read_text())
        data["data"]["Functional.embedding.0.forward"]["input_args"][0]["dtype"] = None
        path.write_text(json.dumps(data))
    out = tmp_path / "out"
    result = run_cli(
        "compare", "-tp", str(dump / "target" / "dump.json"), "-gp", str(dump / "golden" / "dump.json"),
        "-o", str(out), "-q",
    )
    assert result.returncode == 0, result.stderr
    (ours,) = out.glob("*.csv")
    header, row = read_csv(reference_file("dtype_null", "tensor_csv"))
    got = read_csv(ours)
    assert got[0] == header
    stack = header.index("NPU_Stack_Info")
    assert got[1][:stack] == row[:stack]
