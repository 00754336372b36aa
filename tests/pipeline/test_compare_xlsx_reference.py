"""Our xlsx equals the reference's xlsx cell for cell (value and type), except D6: rows the legacy
rules flag are filled red/yellow and their reasons are appended to Err_message."""

from __future__ import annotations

import json
from pathlib import Path

import openpyxl
import pytest
from conftest import reference_file
from test_compare_csv_reference import run_compare

from msprobe_dask.writers.xlsx_package import FILLS

CASES = ["stat_mix", "tensor_mix", "md5_mix", "xor_mix", "L0_only", "L1_only", "transformer_big"]


def _rows(path: Path) -> list[tuple]:
    return list(openpyxl.load_workbook(path).active.iter_rows())


def assert_same_xlsx_except_d6(ours_path: Path, ref_path: Path) -> int:
    """Value and type of every cell equal, except D6: the reference writes no fills, ours fills the
    rows the legacy rules flag (red over yellow) and appends one reason per rule that fired to
    Err_message. Returns the number of highlighted rows."""
    ours, ref = _rows(ours_path), _rows(ref_path)
    header = [c.value for c in ref[0]]
    assert [c.value for c in ours[0]] == header
    assert len(ours) == len(ref)
    message_col = header.index("Err_message")
    highlighted = 0
    for i, (a, b) in enumerate(zip(ours[1:], ref[1:]), start=1):
        fill = a[0].fill.fgColor.rgb if a[0].fill.fill_type == "solid" else None
        ours_messages, ref_messages = json.loads(a[message_col].value), json.loads(b[message_col].value)
        assert ours_messages[: len(ref_messages)] == ref_messages
        reasons = ours_messages[len(ref_messages) :]
        assert all(r.startswith("highlight ") for r in reasons)
        if reasons:
            highlighted += 1
            expected = (
                FILLS["red"] if any(r.startswith("highlight red") for r in reasons) else FILLS["yellow"]
            )
            assert fill == expected and all(c.fill.fgColor.rgb == expected for c in a)
        else:
            assert fill is None
        for column, x, y in zip(header, a, b):
            if column != "Err_message":
                assert (x.value, type(x.value)) == (y.value, type(y.value)), f"row {i} column {column}"
    return highlighted


@pytest.mark.parametrize("case", CASES)
def test_xlsx_equals_reference_except_d6(case: str, tmp_path: Path) -> None:
    highlighted = assert_same_xlsx_except_d6(
        run_compare(case, tmp_path, "--xlsx"), reference_file(case, "compare_xlsx")
    )
    if case != "md5_mix" and case != "xor_mix":
        assert highlighted > 0
