"""The diff of two int statistics (an int64 tensor's Max or Min) is printed as the reference prints it:
``9`` where both sides' column holds only ints, ``9.0`` where a column also holds a text (a bool or
dtype argument's value, ``Nan``, the ``N/A`` of an unmatched row) or a float, the reference then reading
the column as float64 (tests/data/int_diffs, the reference's csv and xlsx: bfloat16, empty and 0-d
tensors, None/bool/slice arguments, nested outputs). A target row left unmatched keeps the golden
statistics ints (``9``, not ``9.0``) and makes the diffs floats."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import case_dir, read_csv, reference_file
from test_compare_xlsx_reference import assert_same_xlsx_except_d6

from msprobe_dask.cli import main


def _compare(out: Path, side: str, *extra: str) -> Path:
    case = case_dir("int_diffs")
    target, golden = case / f"npu{side}" / "dump.json", case / f"bench{side}" / "dump.json"
    assert main(["compare", "-q", "-tp", str(target), "-gp", str(golden), "-o", str(out), *extra]) == 0
    (path,) = out.iterdir()
    return path


def _max_diff(rows: list[list[str]], name: str) -> str:
    return next(row for row in rows if row[0] == name)[rows[0].index("Max diff")]


RUNS = [
    ("", "compare_csv", "9.0"),
    ("_ints", "compare_ints_csv", "9"),
    ("_extra", "compare_extra_csv", "9.0"),  # an unmatched target row: golden ints stay ints, diffs floats
    ("_types", "compare_types_csv", "9.0"),
]


@pytest.mark.parametrize(("side", "run", "diff"), RUNS)
@pytest.mark.parametrize("pure", [False, True], ids=["kernel", "python"])
def test_int_diffs_equal_the_reference(
    side: str, run: str, diff: str, pure: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if pure:
        from msprobe_dask.writers import csv_writer

        monkeypatch.setattr(csv_writer, "native", None)
    ours, ref = read_csv(_compare(tmp_path, side)), read_csv(reference_file("int_diffs", run))
    assert _max_diff(ref, "Torch.sum.0.forward.output.0") == diff
    assert ours == ref


def test_int_diffs_xlsx_equals_the_reference_except_d6(tmp_path: Path) -> None:
    assert_same_xlsx_except_d6(_compare(tmp_path, "", "--xlsx"), reference_file("int_diffs", "compare_xlsx"))
