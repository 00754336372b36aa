"""Where a compare result goes and how its table is written: the reference's file names, the path
line scripts parse, csv or xlsx. Used by compare, its kernel-dump and -da drivers alike."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from msprobe_dask.errors import OutputError
from msprobe_dask.writers.atomic import prepare_output_dir

if TYPE_CHECKING:
    from msprobe_dask.table import CompareTable


def name_stamp() -> str:
    """The time in a result's file name, as msProbe writes it (``compare_result_{stamp}.csv``,
    ``report_{stamp}.html``, ``multi_ranks_compare_merge_{stamp}.xlsx``): local time to the second."""
    return time.strftime("%Y%m%d%H%M%S")


def result_name(label: str, suffix: str, stamp: str, debug: bool = False) -> str:
    prefix = "debug_compare_result" if debug else "compare_result"
    return f"{prefix}_{label}_{stamp}{suffix}" if label else f"{prefix}_{stamp}{suffix}"


def result_path(full_label: str, out: Path, xlsx: bool, stamp: str, debug: bool = False) -> Path:
    """Where a rank's result goes (its folder made): 'graph/step0/rank0' -> out/graph/step0/..._rank0_..."""
    sub, _, label = full_label.rpartition("/")
    if sub:
        out = prepare_output_dir(out / sub)
    path = out / result_name(label, ".xlsx" if xlsx else ".csv", stamp, debug)
    if path.exists():
        raise OutputError(path, "already exists and is not replaced; run again for a new name")
    return path


def write_table(table: CompareTable, path: Path, xlsx: bool) -> Path:
    if xlsx:
        from msprobe_dask.writers.xlsx_writer import write_xlsx

        return write_xlsx(table, path)
    from msprobe_dask.writers.csv_writer import write_csv

    return write_csv(table, path)


def result_path_line(path: Path) -> str:
    """The reference's last line, which scripts parse."""
    return f"The result file path is: {path.resolve()}."
