"""``msprobe-dask report OUT``: the HTML report of the compare results written below OUT."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from msprobe_dask.analysis.findings import Divergence
from msprobe_dask.analysis.tolerance import Tolerance, add_tolerance_options, tolerance_of
from msprobe_dask.cli_args import add_command, add_debug
from msprobe_dask.errors import UserError
from msprobe_dask.pipeline.scheduler import RunOptions
from msprobe_dask.summary.divergence import analyse_tables
from msprobe_dask.summary.first_divergence import apply_divergence
from msprobe_dask.summary.model import RunSummary
from msprobe_dask.summary.table import summarise_table
from msprobe_dask.summary.text import print_run_end
from msprobe_dask.writers.atomic import unused_name
from msprobe_dask.writers.result_files import name_stamp


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = add_command(
        subparsers,
        "report",
        "one self-contained HTML file about the compare results in OUT: OUT/report_{ts}.html from the "
        "compare_result_*.csv/.xlsx files below OUT (error along execution order per rank, first "
        "divergence per rank and step, summary, top rows)",
        "msprobe-dask report out",
        "msprobe-dask compare -tp run_npu -gp run_gpu -o out --report   # the same, in the compare",
    )
    p.add_argument("output_path", metavar="OUT", help="a compare's output folder")
    p.add_argument("-q", "--quiet", action="store_true", help="print only the report's path")
    add_debug(p)
    add_tolerance_options(p)
    p.set_defaults(run=run)


def tables_summary(
    labelled: Sequence[tuple[str, Any]], tol: Tolerance
) -> tuple[RunSummary, Divergence | None]:
    """The summary of ``(label, table)`` pairs, as compare's end prints it, and their first divergence."""
    groups = [summarise_table(label, t.columns, t.rows, t.entries) for label, t in labelled]
    summary = RunSummary("compare", groups)
    found = analyse_tables(labelled, tol)
    apply_divergence(summary, found)
    return summary, found


def write_run_report(
    labelled: Sequence[tuple[str, Any]],
    out: Path,
    *,
    summary: RunSummary,
    found: Divergence | None,
    target: str = "TARGET",
    golden: str = "GOLDEN",
    title: str = "",
) -> Path:
    """OUT/report_{ts}.html of ``(label, table)`` pairs (``CompareTable``s or tables read back), their
    summary and first divergence (``tables_summary``)."""
    from msprobe_dask.report.html import write_report
    from msprobe_dask.report.model import report_data

    title = title or f"msprobe-dask compare report: {target} against {golden}"
    data = report_data(labelled, summary, found, title=title, target=target, golden=golden)
    return write_report(unused_name(out / f"report_{name_stamp()}.html"), data)


def report_of_dumps(args: argparse.Namespace, out: Path, run: RunOptions) -> Path | None:
    """graph_visualize --report: compare the two dumps' rows (the compare command's tables) and write
    their report; a warning and None where they cannot be compared row by row (a parallel merge).
    The ranks and steps are those the graphs compared: both sides' (the graph run has named the
    others, so the compare's own lines about them are not repeated)."""
    import logging

    from msprobe_dask.pipeline.compare import compare
    from msprobe_dask.pipeline.pairing import MatchOptions

    pairing_log = logging.getLogger("msprobe_dask")
    pairing_log.disabled = True
    try:
        results = compare(
            args.target_path,
            args.golden_path,
            match=MatchOptions(fuzzy=args.fuzzy_match),
            run=run,
            skip_missing_ranks=True,
        )
    except UserError as exc:
        print(f"warning: no report: {exc}", file=sys.stderr)
        return None
    finally:
        pairing_log.disabled = False
    tables = [(r.label, r.table) for r in results if r.table.rows]
    summary, found = tables_summary(tables, tolerance_of(args))
    path = write_run_report(
        tables, out, summary=summary, found=found, target=args.target_path, golden=args.golden_path
    )
    print(report_path_line(path))  # (the job's first divergence: the graph's summary has named it)
    return path


def report_path_line(path: Path) -> str:
    return f"The report file path is: {path.resolve()}."


def run(args: argparse.Namespace) -> int:
    from msprobe_dask.report.results import read_results

    out = Path(args.output_path)
    labelled = read_results(out)
    summary, found = tables_summary(labelled, tolerance_of(args))
    title = f"msprobe-dask report of {out.resolve()}"
    path = write_run_report(labelled, out, summary=summary, found=found, title=title)
    print_run_end(summary, [report_path_line(path)], args.quiet)
    return 0
