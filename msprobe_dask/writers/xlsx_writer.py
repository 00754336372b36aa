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

from msprobe_dask.columns import DIFF_COLUMNS
from msprobe_dask.table import CompareTable
from msprobe_dask.writers.atomic import atomic_path
from msprobe_dask.writers.cells import neutralise
from msprobe_dask.writers.xlsx_package import Row, write_workbook

MAX_ROWS_PER_SHEET = 1_048_500


def _float_cell(value: float) -> float | str:
    if math.isnan(value):
        return "Nan"
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
    text_names = DIFF_COLUMNS if table.mode == "statistics" else []
    text_columns = {i for i, name in enumerate(table.columns) if name in text_names}
    message_column = table.columns.index("Err_message")
    yield table.columns, None
    for index in range(start, stop):
        row = list(table.rows[index])
        if table.highlight_reasons:
            row[message_column] = _with_reasons(row[message_column], table.highlight_reasons[index])
        cells = [_text_cell(value) if i in text_columns else _cell(value) for i, value in enumerate(row)]
        yield cells, table.highlights[index] if table.highlights else None


def write_xlsx(table: CompareTable, path: Path) -> Path:
    starts = range(0, max(len(table.rows), 1), MAX_ROWS_PER_SHEET)
    sheets = [
        (
            "Sheet1" if len(starts) == 1 else f"part_{part}",
            len(table.columns),
            sheet_rows(table, start, min(start + MAX_ROWS_PER_SHEET, len(table.rows))),
        )
        for part, start in enumerate(starts)
    ]
    with atomic_path(path) as tmp:
        write_workbook(tmp, sheets)
    return path
