"""Our compare csv equals the reference's csv cell for cell on the real dumps in tests/data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import case_dir, read_csv, reference_file

from msprobe_dask.cli import main

SAME_CASES = ["stat_mix", "tensor_mix", "fuzzy_tensor", "md5_mix", "xor_mix", "L0_only", "L1_only", "transformer_big", "fuzzy"]


def run_compare(case: str, out: Path, *extra: str) -> Path:
    target, golden = case_dir(case) / "target" / "dump.json", case_dir(case) / "golden" / "dump.json"
    assert main(["compare", "-q", "-tp", str(target), "-gp", str(golden), "-o", str(out), *extra]) == 0
    files = [p for p in out.iterdir() if not p.name.startswith(".")]
    assert len(files) == 1, files
    return files[0]


def assert_same_cells(ours: list[list[str]], ref: list[list[str]]) -> None:
    assert ours[0] == ref[0], "header differs"
    assert len(ours) == len(ref), f"{len(ours) - 1} rows, the reference has {len(ref) - 1}"
    for i, (a, b) in enumerate(zip(ours, ref)):
        for column, x, y in zip(ref[0], a, b):
            assert x == y, f"row {i} ({b[0]}), column {column!r}: ours {x!r}, reference {y!r}"


@pytest.mark.parametrize("case", SAME_CASES)
def test_csv_equals_reference(case: str, tmp_path: Path) -> None:
    ours = read_csv(run_compare(case, tmp_path))
    assert_same_cells(ours, read_csv(reference_file(case, "compare_csv")))


def test_ms_vs_pt_differs_only_by_d7(tmp_path: Path) -> None:
    """D7: MindSpore dumps carry no requires_grad; the reference then flags every tensor row with a
    Required_Grad error. We show N/A and do not judge it; every other cell is the reference's."""
    ours = read_csv(run_compare("ms_vs_pt", tmp_path))
    ref = read_csv(reference_file("ms_vs_pt", "compare_csv"))
    header = ref[0]
    msg_col, result_col = header.index("Err_message"), header.index("Result")
    grad_cols = header.index("NPU Requires_grad"), header.index("Bench Requires_grad")
    d7_rows = 0
    for a, b in zip(ours[1:], ref[1:]):
        ref_messages = json.loads(b[msg_col])
        grad_message = "error: The Required_Grad of NPU and Bench are inconsistent"
        if grad_message in ref_messages:
            d7_rows += 1
            assert "N/A" in (b[grad_cols[0]], b[grad_cols[1]])
            ref_messages.remove(grad_message)
            assert json.loads(a[msg_col]) == ref_messages
            assert a[result_col] == ("error" if any(m.startswith("error") for m in ref_messages)
                                     else "warning" if ref_messages else "pass")
            a, b = a[:result_col], b[:result_col]
        assert a == b
    assert d7_rows > 0
