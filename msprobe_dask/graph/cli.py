"""``msprobe-dask graph_visualize``: msprobe's flags (graph_visualize.md §0.1)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from msprobe_dask.cli_args import (
    add_command,
    add_output,
    add_run_options,
    add_sides,
    graph_dump_folder,
    name_long_forms,
    parallel_size,
)
from msprobe_dask.graph.merge import DEFAULT_ORDER


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    from msprobe_dask.analysis.tolerance import add_tolerance_options

    p = add_command(
        subparsers,
        "graph_visualize",
        "build (one dump) or compare (two) the model hierarchy graphs into build_{ts}.vis.db / "
        "compare_{ts}.vis.db, for `msprobe-dask view OUT` (TensorBoard with tb-graph-ascend)",
        "msprobe-dask graph_visualize -tp run_npu -o out                       # build",
        "msprobe-dask graph_visualize -tp run_npu/dump.json -gp run_gpu/dump.json -o out   # compare",
        "msprobe-dask graph_visualize -tp run_npu -gp run_gpu -o out -oc       # + overflow levels",
        "msprobe-dask graph_visualize -tp run_npu/step0 -gp run_gpu/step0 -o out   # every rank",
        "msprobe-dask graph_visualize -tp run --rank_size 4 --tp 2 --pp 2 -o out   # merge TP/PP ranks",
        "msprobe-dask view out                                                 # open it in a browser",
    )
    add_sides(p, golden_required=False, golden_help="golden side (Bench), as TARGET: compare mode")
    add_output(p, required=True)
    name_long_forms(p, "target_path", "golden_path", "output_path")
    p.add_argument(
        "-lm",
        "--layer_mapping",
        dest="layer_mapping",
        nargs="?",
        const=True,
        metavar="YAML",
        help="match layers across frameworks; optionally a yaml mapping file",
    )
    p.add_argument(
        "-oc",
        "--overflow_check",
        dest="overflow_check",
        action="store_true",
        help="mark overflow levels (medium/high/critical) per node",
    )
    p.add_argument(
        "-fm",
        "--fuzzy_match",
        dest="fuzzy_match",
        action="store_true",
        help="match APIs by name and call order under matched modules",
    )
    p.add_argument(
        "-tensor_log",
        "--is_print_compare_log",
        dest="is_print_compare_log",
        action="store_true",
        help="log each tensor comparison (tensor mode)",
    )
    p.add_argument(
        "-progress_log",
        "--is_print_progress_log",
        dest="is_print_progress_log",
        action="store_true",
        help="log progress as PROGRESS: {json} lines",
    )
    for flag, what, default in (
        ("--rank_size", "world size", None),
        ("--tp", "tensor-parallel size", None),
        ("--pp", "pipeline-parallel size", None),
        ("--vpp", "virtual-pipeline size", [1]),
    ):
        p.add_argument(
            flag,
            type=parallel_size(flag, what),
            nargs="+",
            default=default,
            metavar="N",
            help=f"parallel merge: the {what} (one value, or one per side)",
        )
    p.add_argument("--order", nargs="+", default=[DEFAULT_ORDER], help="parallel merge: rank order")
    p.add_argument(
        "--file_type", choices=("db", "json"), default="db", help="output type (json: merge builds only)"
    )
    add_run_options(p)
    p.add_argument(
        "--report",
        action="store_true",
        help="with -gp: also compare the dumps' rows and write OUT/report_{ts}.html (msprobe-dask report)",
    )
    add_tolerance_options(p)
    p.set_defaults(run=run)
    return p


class ProgressLog:
    """``-progress_log``: ``PROGRESS: {json}`` lines as msprobe logs them (graph_visualize.md §8.1).

    The percentage is the share of finished tasks, held at 99 until the run has finished; then
    ``100`` twice, running and not running. An error is logged with its message.
    """

    def __init__(self) -> None:
        self.current = 0.0
        self._emit(0.0, True)

    def __call__(self, percent: float) -> None:
        percent = min(float(percent), 99.0)
        if percent > self.current:
            self.current = percent
            self._emit(percent, True)

    def finished(self) -> None:
        self._emit(100, True)
        self._emit(100, False)

    def failed(self, message: str) -> None:
        self._emit(self.current, False, [message])

    @staticmethod
    def _emit(percent: float, running: bool, errors: list[str] | None = None) -> None:
        import json

        from msprobe_dask.msprobe_log import log_info

        msg = {"current_progress": percent, "process_running": running, "error_msg": errors or []}
        log_info(f"PROGRESS: {json.dumps(msg)}")


def run(args: argparse.Namespace) -> int:
    from msprobe_dask.graph.gcpause import rare_full_collections

    with rare_full_collections():  # from the start: the modules imported and the plan all live on
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    from msprobe_dask.errors import ConfigError, UserError
    from msprobe_dask.graph.api import visualize
    from msprobe_dask.pipeline.scheduler import RunOptions

    parallel = None
    if args.rank_size:
        from msprobe_dask.graph.merge.strategy import parse_params

        compare = bool(args.golden_path)
        parallel = parse_params(args.rank_size, args.tp, args.pp, args.vpp, args.order, compare)
    if args.report and not args.golden_path:
        raise ConfigError("--report", "needs -gp GOLDEN: the report is about a compare")
    if args.report and parallel and parallel[0].rank_size != parallel[1].rank_size:
        raise ConfigError(
            "--report",
            f"compares the dumps rank by rank: --rank_size gives the target {parallel[0].rank_size} ranks "
            f"and the golden {parallel[1].rank_size}",
        )
    from msprobe_dask.analysis.tolerance import tolerance_of

    unused = None
    if not args.golden_path:
        unused = "sets the first divergence of a compare: add -gp GOLDEN"
    elif args.quiet and not args.report:
        unused = "sets the first divergence of the summary, which -q does not print"
    tolerance = tolerance_of(args, unused)
    if args.file_type == "json":
        if args.golden_path:
            raise ConfigError("--file_type", "json output is not supported in graph comparison mode")
        if not parallel:
            print(
                "--file_type json is only supported in graph merge builds; writing a vis.db", file=sys.stderr
            )
    from msprobe_dask.pipeline.stages import StageLog

    log = ProgressLog() if args.is_print_progress_log else None
    stages = None if args.quiet else StageLog()
    run_options = RunOptions(
        address=args.scheduler,
        workers=args.workers,
        progress=not args.quiet,
        on_progress=log,
        stage_log=stages,
    )
    try:
        done = visualize(
            graph_dump_folder(args.target_path),
            graph_dump_folder(args.golden_path) if args.golden_path else None,
            output_path=args.output_path,
            overflow_check=args.overflow_check,
            fuzzy_match=args.fuzzy_match,
            layer_mapping=args.layer_mapping,
            tensor_log=args.is_print_compare_log,
            parallel=parallel,
            json_output=args.file_type == "json",
            run=run_options,
            tolerance=None if args.quiet else tolerance,  # (-q: nothing prints the first divergence)
        )
    except UserError as exc:
        if log is not None:
            log.failed(str(exc))
        raise
    if log is not None:
        log.finished()
    if stages is not None:
        stages.close()
    if not args.quiet and done.summary is not None:
        from msprobe_dask.summary.text import summary_lines

        done.summary.paths.append(done.path)
        print("\n".join(summary_lines(done.summary)))
    if args.report:
        from msprobe_dask.report.cli import report_of_dumps

        report_of_dumps(
            args, Path(args.output_path), RunOptions(address=args.scheduler, workers=args.workers)
        )
    print(f"wrote {done.path}", file=sys.stderr)
    if done.unreadable:  # rows whose tensor files could not be read: 1 and a last line counting them
        from msprobe_dask.summary.text import unreadable_line

        print(unreadable_line(list(done.unreadable)), file=sys.stderr)
        return 1
    return 0
