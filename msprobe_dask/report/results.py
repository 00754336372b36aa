"""Compare results read back from an output folder: every ``compare_result_*.csv`` / ``.xlsx`` below it
(the newest of each (step, rank) when a folder holds several runs), as tables the report and the
divergence analysis read."""

from __future__ import annotations

import csv
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from msprobe_dask.analysis.findings import step_key
from msprobe_dask.analysis.row_entries import entry_and_state
from msprobe_dask.columns import MAX_RELATIVE_ERR, NORM_RELATIVE_ERR, NPU_MD5, NPU_NAME
from msprobe_dask.errors import DumpError, UserError
from msprobe_dask.writers.workbook_rows import first_sheet_rows

RESULT = re.compile(r"^compare_result_(?:(?P<label>.+)_)?(?P<stamp>\d{14})\.(?P<kind>csv|xlsx)$")
MODE_COLUMNS = {NORM_RELATIVE_ERR: "statistics", MAX_RELATIVE_ERR: "tensor", NPU_MD5: "md5"}


@dataclass
class ReadTable:
    """A written compare table: its header, its rows of cells (texts; xlsx numbers stay numbers) and the
    dump entry of each row, read from the row's name."""

    mode: str
    columns: list[str]
    rows: list[list[Any]]
    entries: list[str] = field(default_factory=list)
    path: Path | None = None

    def records(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, row)) for row in self.rows]


def _cells(path: Path) -> list[list[Any]]:
    if path.suffix == ".csv":
        csv.field_size_limit(sys.maxsize)  # a cell as long as compare writes it (a deep stack's text)
        try:
            with open(path, encoding="utf-8", newline="") as f:
                return [list(row) for row in csv.reader(f)]
        except (UnicodeDecodeError, csv.Error) as exc:
            raise DumpError(path, f"cannot be read as a compare result: {exc}") from None
    return [["" if c is None else c for c in row] for row in first_sheet_rows(path)]


def read_table(path: Path) -> ReadTable | None:
    """The table of one result file; None for a file that is not a dump compare's result (a kernel
    dump's table has no dump entries)."""
    cells = _cells(path)
    if not cells:
        return None
    header = [str(c) for c in cells[0]]
    mode = next((m for c, m in MODE_COLUMNS.items() if c in header), None)
    if mode is None or NPU_NAME not in header:
        return None
    rows = [row + [""] * (len(header) - len(row)) for row in cells[1:]]
    name_at = header.index(NPU_NAME)
    entries = [entry_and_state(str(row[name_at]))[0] for row in rows]
    return ReadTable(mode, header, rows, entries, path)


def read_results(out: Path) -> list[tuple[str, ReadTable]]:
    """(label, table) of every compare result below ``out``, labels as the compare names them
    (``step0/rank2``), sorted by label."""
    if not out.is_dir():
        raise UserError(out, "is not a folder of compare results")
    newest: dict[str, tuple[str, Path]] = {}
    for path in out.rglob("compare_result_*"):
        match = RESULT.match(path.name)
        if not match or not path.is_file():
            continue
        parts = [*path.parent.relative_to(out).parts, *([match["label"]] if match["label"] else [])]
        label = "/".join(parts)
        if label not in newest or match["stamp"] > newest[label][0]:
            newest[label] = (match["stamp"], path)
    results = []
    for label in sorted(newest, key=step_key):
        table = read_table(newest[label][1])
        if table is not None:
            results.append((label, table))
    if not results:
        raise UserError(out, "holds no compare_result_*.csv or .xlsx of a dump compare")
    return results
