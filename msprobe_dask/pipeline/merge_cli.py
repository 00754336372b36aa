"""``msprobe-dask merge_result -i DIR -o OUT -config cfg.yaml``: the multi-rank communication-op
workbook (compare.md §8), from our per-rank xlsx results or the reference's.

Each rank's workbook is read as one Dask task; the merge and the write happen once at the end.
"""

from __future__ import annotations

import argparse
import sys

from msprobe_dask.cli_args import add_command, add_output, add_run_options
from msprobe_dask.pipeline.scheduler import RunOptions, computing
from msprobe_dask.writers.atomic import output_dir
from msprobe_dask.writers.merge_result import (
    load_config,
    merge_sheets,
    read_rank_sheet,
    result_files,
    write_merge,
)
from msprobe_dask.writers.result_files import name_stamp


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = add_command(
        subparsers,
        "merge_result",
        "merge the communication ops of multi-rank xlsx results into one workbook (msprobe merge_result)",
        "msprobe-dask compare -tp run_npu/step0 -gp run_gpu/step0 -o xlsx_dir --xlsx",
        "msprobe-dask merge_result -i xlsx_dir -o out -config config.yaml",
    )
    p.add_argument(
        "-i",
        "--input_dir",
        metavar="XLSX_DIR",
        required=True,
        help="folder of compare_result_rank{N}_{ts}.xlsx files",
    )
    add_output(p, required=True, flags=("-o", "--output_dir"))
    p.add_argument(
        "-config",
        "--config-path",
        dest="config_path",
        required=True,
        help="yaml with 'api' (entry prefixes) and optionally 'compare_index' (columns)",
    )
    add_run_options(p, quiet=False)
    p.set_defaults(run=run)


def _warn(message: str) -> None:
    print(message, file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    import dask

    config = load_config(args.config_path)
    files = result_files(args.input_dir, warn=_warn)
    with output_dir(args.output_dir) as out:  # removed again if the merge finds nothing to write
        with computing(RunOptions(address=args.scheduler, workers=args.workers)) as compute:
            sheets = compute([dask.delayed(read_rank_sheet)(rank, path, config.apis) for rank, path in files])
        ranks, workbook = merge_sheets(sheets, config, warn=_warn)
        name = f"multi_ranks_compare_merge_{name_stamp()}.xlsx"
        path = write_merge(out / name, ranks, workbook)
    print(f"The compare results of the multi-ranks are merged and saved in: {path}.")
    return 0
