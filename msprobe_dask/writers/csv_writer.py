"""compare_result_*.csv: UTF-8, header row, minimal quoting, ``\\n`` line ends (pandas ``to_csv``)."""

from __future__ import annotations

import csv
from pathlib import Path

from msprobe_dask.pipeline.table import CompareTable
from msprobe_dask.writers.atomic import atomic_path
from msprobe_dask.writers.cells import cell_text


def write_csv(table: CompareTable, path: Path) -> Path:
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(table.columns)
        for row in table.rows:
            writer.writerow([cell_text(v) for v in row])
    return path
