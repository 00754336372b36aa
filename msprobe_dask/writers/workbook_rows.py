"""The rows of a result workbook's first sheet, read back (merge_result's rank workbooks, the report's
xlsx results)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from msprobe_dask.errors import DumpError


def first_sheet_rows(path: Path) -> list[tuple[Any, ...]]:
    """Every row's values; a file that is not a readable workbook (not a zip, a damaged sheet, an XML
    entity bomb that the parser stops) is one DumpError naming it, however far the reading got."""
    import openpyxl

    try:
        workbook = openpyxl.load_workbook(path, read_only=True, data_only=True)
        try:
            return list(workbook.worksheets[0].iter_rows(values_only=True))
        finally:
            workbook.close()
    except Exception as exc:  # noqa: BLE001 - any unreadable workbook is the user's file problem
        raise DumpError(path, f"cannot be read as xlsx: {exc}") from None
