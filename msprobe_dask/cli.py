"""Command line: ``msprobe-dask {compare,graph_visualize,...}`` with msprobe's flags.

Each sub-command lives in its own module that provides ``add_parser(subparsers)``; the parser's
``run(args) -> int`` is stored as the ``run`` default. User mistakes (``UserError``) print one line
and exit 2; ``--debug`` shows the traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import traceback

from msprobe_dask.errors import UserError

COMMAND_MODULES = (
    "msprobe_dask.pipeline.compare_cli",
    "msprobe_dask.graph.cli",
    "msprobe_dask.pipeline.merge_cli",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="msprobe-dask", description=__doc__.splitlines()[0])
    parser.add_argument("--debug", action="store_true", help="show the Python traceback of an error")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for module_name in COMMAND_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:
                continue
            raise
        module.add_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    debug = args.debug or "--debug" in argv
    try:
        return int(args.run(args) or 0)
    except UserError as exc:
        if debug:
            traceback.print_exc()
        print(f"msprobe-dask: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("msprobe-dask: interrupted", file=sys.stderr)
        return 130
