"""compare_result_*.xlsx: one sheet ``Sheet1`` with the reference's cell types, plus D6 fills.

Diff and relative-error columns are text, statistics and tensor metrics are numbers (``inf`` and
``Nan`` as text), ``Requires_grad Consistent`` is a bool. Rows flagged by the legacy highlighting
rules are filled red or yellow and their reasons appended to Err_message (D6).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from msprobe_dask.columns import DIFF_COLUMNS, ERR_MESSAGE, NAN
from msprobe_dask.table import CompareTable
from msprobe_dask.writers.atomic import atomic_path
from msprobe_dask.writers.cells import neutralise
from msprobe_dask.writers.xlsx_package import Row, rows_xml, sheet_head, write_workbook

MAX_ROWS_PER_SHEET = 1_048_500


def _float_cell(value: float) -> float | str:
    if math.isnan(value):
        return NAN
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value


def _text_cell(value: Any) -> str:
    if isinstance(value, float):
        return str(_float_cell(value))
    return neutralise(str(value))


def _cell(value: Any) -> Any:
    if value is None:  # an empty cell (the kernel compare's missing values)
        return None
    if isinstance(value, bool) or isinstance(value, int):
        return value
    if isinstance(value, float):
        return _float_cell(value)
    return neutralise(str(value))


def _with_reasons(message: str, reasons: list[str]) -> str:
    if not reasons:
        return message
    return json.dumps(json.loads(message) + reasons)


def sheet_rows(table: CompareTable, start: int, stop: int) -> Iterator[Row]:
    """A sheet's rows: the header, then the table's rows from ``start`` to ``stop``."""
    yield table.columns, None
    yield from data_rows(table, start, stop)


def data_rows(table: CompareTable, start: int, stop: int) -> Iterator[Row]:
    """The cells (and fill) of the table's rows from ``start`` to ``stop``."""
    text_names = DIFF_COLUMNS if table.mode == "statistics" else []
    text_columns = [i for i, name in enumerate(table.columns) if name in text_names]
    message_column = table.columns.index(ERR_MESSAGE)
    texts: dict[str, str] = {}  # most texts come again and again: each is neutralised once
    for index in range(start, stop):
        row = table.rows[index]
        cells = [
            (texts.get(v) or texts.setdefault(v, neutralise(v)))
            if v.__class__ is str
            else v
            if (v.__class__ is float and v - v == 0) or v.__class__ is bool
            else _cell(v)
            for v in row
        ]
        for i in text_columns:
            if row[i].__class__ is not str:
                cells[i] = _text_cell(row[i])
        if table.highlight_reasons and table.highlight_reasons[index]:
            message = _with_reasons(row[message_column], table.highlight_reasons[index])
            cells[message_column] = _cell(message)
        yield cells, table.highlights[index] if table.highlights else None


def sheet_names(rows: int) -> list[str]:
    """The sheets of a table of ``rows`` rows: ``Sheet1``, or ``part_0``, ``part_1``... of at most
    ``MAX_ROWS_PER_SHEET`` rows each."""
    sheets = max(1, -(-rows // MAX_ROWS_PER_SHEET))
    return ["Sheet1"] if sheets == 1 else [f"part_{part}" for part in range(sheets)]


def header_xml(columns: list[str]) -> bytes:
    """A sheet's XML up to its first table row: its head and the header row."""
    return (sheet_head() + rows_xml(1, len(columns), [(columns, None)])).encode("utf-8")


def part_xml(table: CompareTable, first: int) -> tuple[tuple[int, bytes], ...]:
    """The XML of a part of a rank's table whose first row is row ``first`` of the rank's table:
    (sheet, its rows' XML) for each sheet the part's rows go to."""
    sections = []
    start = 0
    while start < len(table.rows):
        sheet, at = divmod(first + start, MAX_ROWS_PER_SHEET)
        stop = min(len(table.rows), start + MAX_ROWS_PER_SHEET - at)
        xml = rows_xml(at + 2, len(table.columns), data_rows(table, start, stop))  # (row 1: the header)
        sections.append((sheet, xml.encode("utf-8")))
        start = stop
    return tuple(sections)


def write_xlsx(table: CompareTable, path: Path) -> Path:
    names = sheet_names(len(table.rows))
    sheets = [
        (name, len(table.columns), sheet_rows(table, start, min(start + MAX_ROWS_PER_SHEET, len(table.rows))))
        for name, start in zip(names, range(0, len(names) * MAX_ROWS_PER_SHEET, MAX_ROWS_PER_SHEET))
    ]
    with atomic_path(path) as tmp:
        write_workbook(tmp, sheets)
    return path
