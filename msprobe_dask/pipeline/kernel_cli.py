"""``compare`` on MindSpore static-graph kernel dumps: ``--rank``/``--step`` filters and the result files.

One ``compare_result_{rank}_{step}_{ts}.csv`` (or ``.xlsx``) per (rank, step) in both dumps. Every table
is computed before the first file is written, so a bad input leaves no result behind.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from msprobe_dask.dump.source import log_warning
from msprobe_dask.errors import ConfigError
from msprobe_dask.pipeline.kernel_compare import compare_kernels
from msprobe_dask.pipeline.kernel_table import KernelTable, csv_view, xlsx_view
from msprobe_dask.pipeline.scheduler import RunOptions
from msprobe_dask.summary.model import RunSummary
from msprobe_dask.summary.table import summarise_table
from msprobe_dask.summary.text import print_run_end
from msprobe_dask.writers.result_files import name_stamp, result_path, result_path_line, write_table


def parse_ids(flag: str, text: str | None) -> list[int] | None:
    """``"0,1"`` -> [0, 1]; None when the flag is not given; ConfigError naming the flag otherwise."""
    if text is None:
        return None
    parts = [part.strip() for part in text.split(",")]
    if not parts or not all(part.isdigit() for part in parts):
        raise ConfigError(flag, f"expected a comma list of non-negative integers (e.g. 0,1), got {text!r}")
    return [int(part) for part in parts]


def _warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


def run_kernel_compare(args: argparse.Namespace, out: Path, run_options: RunOptions) -> int:
    ranks, steps = parse_ids("--rank", args.rank), parse_ids("--step", args.step)
    results = compare_kernels(
        args.target_path, args.golden_path, ranks=ranks, steps=steps, run=run_options, warn=log_warning
    )
    stamp = name_stamp()
    summary, path_lines = RunSummary("compare"), []
    started = time.perf_counter()
    for result in results:
        for message in dict.fromkeys(result.warnings):
            _warn(message)
        if result.table is None or not result.table.rows:
            _warn(f"rank {result.rank} step {result.step}: no tensors to compare; no result file written")
            continue
        view = xlsx_view(result.table) if args.xlsx else csv_view(result.table)
        path = write_table(
            view, result_path(f"{result.rank}_{result.step}", out, args.xlsx, stamp), args.xlsx
        )
        summary.groups.append(
            summarise_table(f"step{result.step}/rank{result.rank}", *_csv_cells(result.table))
        )
        path_lines.append(result_path_line(path))
    run_options.log_written(len(path_lines), "xlsx" if args.xlsx else "csv", started)
    print_run_end(summary, path_lines, args.quiet)
    return 0


def _csv_cells(table: KernelTable) -> tuple[list[str], list[list[Any]]]:
    view = csv_view(table)
    return view.columns, view.rows
