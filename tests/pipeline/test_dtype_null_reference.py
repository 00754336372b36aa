"""A leaf whose dtype is null is a value, not a tensor, as the reference reads it: dtype cells
``<class 'NoneType'>``, shape ``[]``, every statistic None (tests/data/dtype_null, the reference's csv)."""

from __future__ import annotations

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
