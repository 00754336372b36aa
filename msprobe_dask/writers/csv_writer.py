"""compare_result_*.csv: UTF-8, header row, minimal quoting, ``\\n`` line ends (pandas ``to_csv``)."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, TextIO

from msprobe_dask.table import CompareTable
from msprobe_dask.writers.atomic import atomic_path
from msprobe_dask.writers.cells import cell_text, neutralise


def _write_rows(f: TextIO, rows: Iterable[Sequence[Any]]) -> None:
    texts: dict[str, str] = {}  # most text cells are one of a few (dtypes, shapes, N/A, results)

    def line(row: Sequence[Any]) -> list[str]:
        return [
            (texts.get(v) or texts.setdefault(v, neutralise(v))) if v.__class__ is str else cell_text(v)
            for v in row
        ]

    csv.writer(f, lineterminator="\n").writerows(map(line, rows))


def write_csv(table: CompareTable, path: Path) -> Path:
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8", newline="") as f:
        csv.writer(f, lineterminator="\n").writerow(table.columns)
        _write_rows(f, table.rows)
    return path


def csv_lines(rows: Iterable[Sequence[Any]]) -> bytes:
    """The csv lines of ``rows`` as write_csv writes them, UTF-8: a part of the file, made by a task."""
    text = io.StringIO(newline="")
    _write_rows(text, rows)
    return text.getvalue().encode("utf-8")


def header_line(columns: Sequence[str]) -> bytes:
    text = io.StringIO(newline="")
    csv.writer(text, lineterminator="\n").writerow(columns)
    return text.getvalue().encode("utf-8")
