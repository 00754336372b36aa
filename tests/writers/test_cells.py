"""Cell formatting of the csv writer, including D9 (formula-looking cells are neutralised)."""

from __future__ import annotations

import csv
from pathlib import Path

from msprobe_dask.table import CompareTable
from msprobe_dask.writers.cells import cell_text
from msprobe_dask.writers.csv_writer import write_csv


def test_floats_print_as_the_reference_prints_them() -> None:
    assert cell_text(float("nan")) == "Nan"
    assert cell_text(float("inf")) == " inf"
    assert cell_text(float("-inf")) == " -inf"
    assert cell_text(-0.11319565773010254) == "-0.11319565773010254"
    assert cell_text(True) == "True"
    assert cell_text("-0.5") == "-0.5"


def test_d9_formula_cells_are_neutralised_and_the_write_completes(tmp_path: Path) -> None:
    """The reference aborts the whole write with 'Malicious value'; we prefix a quote and go on."""
    table = CompareTable(
        mode="md5",
        columns=["NPU Name", "Err_message"],
        rows=[["=cmd|' /C calc'!A0", "[]"], ["a;@SUM(1)", "[]"], ["plain", "-1"]],
    )
    path = write_csv(table, tmp_path / "r.csv")
    rows = list(csv.reader(open(path, encoding="utf-8")))
    assert rows[1][0] == "'=cmd|' /C calc'!A0"
    assert rows[2][0] == "'a;@SUM(1)"
    assert rows[3] == ["plain", "-1"]
