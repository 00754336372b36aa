"""The streaming xlsx writer: what openpyxl reads back equals what openpyxl itself writes (values and
types, fills, sheet names), including the awkward cells; and the compare table's sheet split."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import openpyxl
import pytest
from openpyxl.styles import PatternFill

from msprobe_dask.table import CompareTable, columns_for
from msprobe_dask.writers import xlsx_writer
from msprobe_dask.writers.xlsx_package import FILLS, column_letter, write_workbook

AWKWARD: list[Any] = [
    "plain",
    "a & b < c > d",
    " leading and trailing ",
    "tab\there",
    "line\nbreak",
    "bell\x07 and nul\x00",
    "_x0041_ stays literal",
    "中文 ünïcode 🙂",
    "\"quoted\" 'single'",
    "x" * 40_000,
    "",
    None,
    True,
    False,
    0,
    -17,
    2**60,
    3.0,
    0.1 + 0.2,
    1e-300,
    -1.5e300,
    np.float64(0.25),
    math.nan,
    math.inf,
]


ESCAPED = {"\x00": "_x0000_", "\x07": "_x0007_", "_x0041_": "_x005F_x0041_"}


def _read(path: Path) -> list[tuple[str, list[list[tuple[Any, type, str | None]]]]]:
    book = openpyxl.load_workbook(path)
    return [
        (
            sheet.title,
            [
                [
                    (c.value, type(c.value), c.fill.fgColor.rgb if c.fill.fill_type == "solid" else None)
                    for c in row
                ]
                for row in sheet.iter_rows()
            ],
        )
        for sheet in book
    ]


def _openpyxl_writes(path: Path, sheets: list[tuple[str, list[tuple[list[Any], str | None]]]]) -> Path:
    """The same sheets written by openpyxl (the reference's writer), with illegal characters as
    Excel's _xHHHH_ escapes (openpyxl refuses them; ours escapes them)."""
    book = openpyxl.Workbook()
    book.remove(book.active)
    for name, rows in sheets:
        sheet = book.create_sheet(name)
        for r, (values, fill) in enumerate(rows, start=1):
            for c, value in enumerate(values, start=1):
                if isinstance(value, str):
                    for raw, escaped in ESCAPED.items():
                        value = value.replace(raw, escaped)
                cell = sheet.cell(r, c, value)
                if fill:
                    cell.fill = PatternFill(start_color=FILLS[fill], end_color=FILLS[fill], fill_type="solid")
    book.save(path)
    return path


def test_cells_read_back_as_openpyxl_writes_them(tmp_path: Path) -> None:
    # each awkward value alone in its column, rows unfilled, red and yellow; two sheets
    rows: list[tuple[list[Any], str | None]] = [(AWKWARD, None), (AWKWARD, "red"), (AWKWARD[::-1], "yellow")]
    sheets = [("Sheet1", rows), ("A & <b>", rows[:1])]
    ours = write_workbook(tmp_path / "ours.xlsx", [(n, len(AWKWARD), r) for n, r in sheets])
    theirs = _openpyxl_writes(tmp_path / "theirs.xlsx", sheets)
    assert _read(ours) == _read(theirs)
    [(_, cells), _] = _read(ours)
    assert cells[0][AWKWARD.index(3.0)][:2] == (3, int)  # %.16g, as the reference's openpyxl writes
    assert cells[0][AWKWARD.index("_x0041_ stays literal")][0] == "_x005F_x0041_ stays literal"
    assert cells[0][AWKWARD.index("x" * 40_000)][0] == "x" * 32767  # openpyxl's cut, Excel's limit


def test_column_letters() -> None:
    assert [column_letter(i) for i in (0, 25, 26, 27, 701, 702)] == ["A", "Z", "AA", "AB", "ZZ", "AAA"]


def test_compare_table_splits_into_parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    columns = columns_for("md5", False)
    rows = [[f"Torch.add.{i}.forward.output.0", *["x"] * (len(columns) - 1)] for i in range(5)]
    for row in rows:
        row[columns.index("Err_message")] = "[]"
    table = CompareTable("md5", columns, rows)
    monkeypatch.setattr(xlsx_writer, "MAX_ROWS_PER_SHEET", 2)
    book = openpyxl.load_workbook(xlsx_writer.write_xlsx(table, tmp_path / "t.xlsx"))
    assert book.sheetnames == ["part_0", "part_1", "part_2"]
    assert [len(list(sheet.iter_rows())) for sheet in book] == [3, 3, 2]  # header on each
    assert [c.value for c in next(book["part_2"].iter_rows())] == columns
    assert [p.name for p in tmp_path.iterdir()] == ["t.xlsx"]  # no temporary sheet file left
