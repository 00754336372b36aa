"""compare_result_*.xlsx: one sheet ``Sheet1`` with the reference's cell types, plus D6 fills.

Diff and relative-error columns are text, statistics and tensor metrics are numbers (``inf`` and
``Nan`` as text), ``Requires_grad Consistent`` is a bool. Rows flagged by the legacy highlighting
rules are filled red or yellow and their reasons appended to Err_message (D6).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from msprobe_dask.columns import DIFF_COLUMNS
from msprobe_dask.pipeline.table import CompareTable
from msprobe_dask.writers.atomic import atomic_path
from msprobe_dask.writers.cells import neutralise

FILLS = {"red": "FFFF0000", "yellow": "FFFFFF00"}
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


def write_xlsx(table: CompareTable, path: Path) -> Path:
    from openpyxl import Workbook
    from openpyxl.cell import WriteOnlyCell
    from openpyxl.styles import PatternFill

    fills = {
        name: PatternFill(start_color=rgb, end_color=rgb, fill_type="solid") for name, rgb in FILLS.items()
    }
    text_names = DIFF_COLUMNS if table.mode == "statistics" else []
    text_columns = {i for i, name in enumerate(table.columns) if name in text_names}
    message_column = table.columns.index("Err_message")
    workbook = Workbook(write_only=True)
    chunks = range(0, max(len(table.rows), 1), MAX_ROWS_PER_SHEET)
    for part, start in enumerate(chunks):
        sheet = workbook.create_sheet("Sheet1" if len(chunks) == 1 else f"part_{part}")
        sheet.append(table.columns)
        for index in range(start, min(start + MAX_ROWS_PER_SHEET, len(table.rows))):
            row = list(table.rows[index])
            color = table.highlights[index] if table.highlights else None
            if table.highlight_reasons:
                row[message_column] = _with_reasons(row[message_column], table.highlight_reasons[index])
            cells = []
            for i, value in enumerate(row):
                cell = WriteOnlyCell(sheet, value=_text_cell(value) if i in text_columns else _cell(value))
                if color:
                    cell.fill = fills[color]
                cells.append(cell)
            sheet.append(cells)
    with atomic_path(path) as tmp:
        workbook.save(tmp)
    return path
