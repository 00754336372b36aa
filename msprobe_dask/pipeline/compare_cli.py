"""``msprobe-dask compare``: msprobe compare's flags over the compare API, plus the writers."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from msprobe_dask.analysis.tolerance import add_tolerance_options, tolerance_of
from msprobe_dask.cli_args import add_command, add_output, add_run_options, add_sides, name_long_forms
from msprobe_dask.columns import NPU_NAME, TENSOR_METRIC_COLUMNS
from msprobe_dask.dump.layouts import open_dump
from msprobe_dask.errors import ConfigError
from msprobe_dask.pipeline.compare import RankResult, compare, compare_to_files
from msprobe_dask.pipeline.compare_modes import add_mode_options
from msprobe_dask.pipeline.pairing import MatchOptions
from msprobe_dask.pipeline.part_file import WrittenRank, temporaries
from msprobe_dask.pipeline.scheduler import RunOptions
from msprobe_dask.summary.model import GroupSummary, RunSummary
from msprobe_dask.summary.table import summarise_table
from msprobe_dask.summary.text import print_run_end, unreadable_line
from msprobe_dask.writers.atomic import output_dir, track
from msprobe_dask.writers.result_files import name_stamp, result_path, result_path_line, write_table


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = add_command(
        subparsers,
        "compare",
        "compare a target dump with a golden dump (msprobe compare): a csv or xlsx per (step, rank)",
        "msprobe-dask compare -tp run_npu/dump.json -gp run_gpu/dump.json -o out",
        "msprobe-dask compare -tp run_npu/step0 -gp run_gpu/step0 -o out --xlsx   # every rank",
        "msprobe-dask compare -tp run_npu -gp run_gpu -o out -da                  # + first divergence",
        "msprobe-dask compare -tp ms_run -gp pt_run -o out -am                    # MindSpore vs PyTorch",
        "msprobe-dask compare -tp kernel_a -gp kernel_b -o out --rank 0,1 --step 0",
        "msprobe-dask compare -tp A -gp B -o out --scheduler tcp://HOST:8786       # on a dask cluster",
    )
    add_sides(p, golden_required=True)
    add_output(p, required=False)
    name_long_forms(p, "target_path", "golden_path", "output_path")
    add_mode_options(p)
    p.add_argument("--xlsx", action="store_true", help="write .xlsx instead of .csv")
    p.add_argument("-fm", "--fuzzy_match", action="store_true", help="pair entries that differ in call count")
    p.add_argument(
        "-am",
        "--api_mapping",
        nargs="?",
        const=True,
        default=None,
        metavar="YAML",
        help="MindSpore vs PyTorch API names (built-in table, or this yaml on top of it)",
    )
    p.add_argument(
        "-cm",
        "--cell_mapping",
        nargs="?",
        const=True,
        default=None,
        metavar="YAML",
        help="MindSpore Cell vs PyTorch Module names (Cell -> Module, or this yaml)",
    )
    p.add_argument(
        "-dm", "--data_mapping", default=None, metavar="YAML", help="explicit 'target row: golden row' pairs"
    )
    p.add_argument(
        "-lm",
        "--layer_mapping",
        nargs="?",
        const=True,
        default=None,
        metavar="YAML",
        help="MindSpore vs PyTorch layer names (uses stack.json and construct.json)",
    )
    p.add_argument(
        "-tensor_log", "--is_print_compare_log", action="store_true", help="log every row's tensor metrics"
    )
    add_run_options(p)
    p.add_argument(
        "-da",
        "--diff_analyze",
        action="store_true",
        help="also write the reference's first-diff json per rank and diff_analyze_{ts}.json",
    )
    p.add_argument(
        "--report", action="store_true", help="also write OUT/report_{ts}.html (as msprobe-dask report OUT)"
    )
    add_tolerance_options(p)
    p.add_argument("--rank", metavar="0,1,...", help="static-graph kernel dumps: compare these ranks only")
    p.add_argument("--step", metavar="0,1,...", help="static-graph kernel dumps: compare these steps only")
    p.add_argument(
        "--skip-missing-ranks",
        dest="skip_missing_ranks",
        action="store_true",
        help="skip ranks present on one side only (with a warning) instead of failing",
    )
    p.set_defaults(run=run)


def tracked(path: Path) -> Path:
    """``path``, whose temporary files the rank's tasks write wherever they run, removed by this
    process if the run is stopped."""
    for tmp in temporaries(path):
        track(tmp)
    return path


def summarise_result(result: RankResult) -> GroupSummary:
    table = result.table
    return summarise_table(result.label, table.columns, table.rows, table.entries)


def _log_tensor_rows(result: RankResult) -> None:
    if result.table.mode != "tensor":
        return
    from msprobe_dask.msprobe_log import log_tensor_compare

    for record in result.table.records():
        log_tensor_compare(record[NPU_NAME], ((column, record[column]) for column in TENSOR_METRIC_COLUMNS))


def run(args: argparse.Namespace) -> int:
    from msprobe_dask.pipeline.stages import StageLog

    log = None if args.quiet else StageLog()
    run_options = RunOptions(
        address=args.scheduler, workers=args.workers, progress=log is not None, stage_log=log
    )
    with output_dir(args.output_path) as out:
        code = _run(args, out, run_options)
    if log is not None:
        log.close()
    return code


def _run(args: argparse.Namespace, out: Path, run_options: RunOptions) -> int:
    kernel = not args.diff_analyze and (
        args.rank is not None or args.step is not None or open_dump(args.target_path).layout == "kernel"
    )
    if kernel:  # (the reference reads only -tp -gp -o --xlsx --rank --step there, and ignores the rest: D38)
        for flag, given in (
            ("--report", args.report),
            ("-tensor_log", args.is_print_compare_log),
            ("-fm", args.fuzzy_match),
            ("-am", args.api_mapping),
            ("-cm", args.cell_mapping),
            ("-dm", args.data_mapping),
            ("-lm", args.layer_mapping),
        ):
            if given:
                raise ConfigError(flag, "is not made for MindSpore kernel dumps")
    unused = "the first divergence of kernel dumps is their first row that is not pass" if kernel else None
    if args.quiet and not args.report:
        unused = "sets the summary's first divergence, which -q does not print (add --report)"
    tol = tolerance_of(args, unused)
    if args.diff_analyze:
        from msprobe_dask.analysis.cli import write_diff_analyze

        write_diff_analyze(args, out, run_options)  # then the tables, as without -da (D23)
    elif kernel:
        from msprobe_dask.pipeline.kernel_cli import run_kernel_compare

        return run_kernel_compare(args, out, run_options)
    match = MatchOptions(
        fuzzy=args.fuzzy_match,
        api_mapping=args.api_mapping,
        cell_mapping=args.cell_mapping,
        data_mapping=args.data_mapping,
        layer_mapping=args.layer_mapping,
    )
    stamp = name_stamp()
    debug = Path(args.target_path).name == "debug.json" or (Path(args.target_path) / "debug.json").is_file()
    dumps = (args.target_path, args.golden_path)
    skip = args.skip_missing_ranks
    results: list[WrittenRank | RankResult]
    if args.is_print_compare_log or args.report:  # the report reads the tables
        results = list(compare(*dumps, match=match, run=run_options, skip_missing_ranks=skip))
    else:  # statistics ranks written part by part by their tasks
        results = compare_to_files(
            *dumps,
            lambda label: tracked(result_path(label, out, args.xlsx, stamp, debug)),
            match=match,
            run=run_options,
            skip_missing_ranks=skip,
            summary_tolerance=None if args.quiet else tol,
            xlsx=args.xlsx,
        )
    if args.layer_mapping:
        from msprobe_dask.pipeline.layer_mapping_files import write_layer_mapping_files

        write_layer_mapping_files(args.target_path, args.golden_path, args.layer_mapping, out, stamp)
    summary, path_lines = RunSummary("compare"), []
    unreadable: list[str] = []
    started = time.perf_counter()
    for result in results:
        if isinstance(result, RankResult):
            unreadable += result.tensor_messages
            if args.is_print_compare_log:
                _log_tensor_rows(result)
        if isinstance(result, RankResult) and result.table.rows:
            path: Path | None = write_table(
                result.table, result_path(result.label, out, args.xlsx, stamp, debug), args.xlsx
            )
            summary.groups.append(summarise_result(result))
        elif isinstance(result, RankResult):
            path = None
        else:
            path = result.path
            if path is not None and result.summary is not None:
                summary.groups.append(result.summary)
        if path is None:
            print("warning: no comparable entries found; no result file written", file=sys.stderr)
            continue
        path_lines.append(result_path_line(path))
    run_options.log_written(len(path_lines), "xlsx" if args.xlsx else "csv", started)
    tables = [(r.label, r.table) for r in results if isinstance(r, RankResult) and r.table.rows]
    found = None
    if args.report or not args.quiet:  # the first divergence (not imported with -q: 0.1e9 instructions)
        from msprobe_dask.analysis.divergence import RankNodes
        from msprobe_dask.summary.divergence import analyse_rank_nodes, rank_table_nodes
        from msprobe_dask.summary.first_divergence import apply_divergence

        nodes = [
            (
                r.label,
                RankNodes.of(rank_table_nodes(r.label, r.table, tol))
                if isinstance(r, RankResult)
                else r.nodes,
            )
            for r in results
            if (r.table.entries if isinstance(r, RankResult) else r.path is not None)
        ]
        found = analyse_rank_nodes(((label, n) for label, n in nodes if n is not None), tol)
        apply_divergence(summary, found)
    if args.report:
        from msprobe_dask.report.cli import report_path_line, write_run_report

        report = write_run_report(
            tables, out, summary=summary, found=found, target=args.target_path, golden=args.golden_path
        )
        path_lines.insert(0, report_path_line(report))
    print_run_end(summary, path_lines, args.quiet)
    if unreadable:
        if run_options.stage_log is not None:  # the stage lines held (pipeline/stages.py) come before
            run_options.stage_log.close()
        print(unreadable_line(unreadable), file=sys.stderr)
        return 1
    return 0
