"""The arguments every command shares, spelled once: the two sides, the output folder, where the graph
runs, -q and --debug, and the examples shown at the end of each ``--help``."""

from __future__ import annotations

import argparse
import os
from typing import Any

TARGET_HELP = "target side (NPU): a dump.json, the folder holding it, or a rank*/ or step*/ run folder"
GOLDEN_HELP = "golden side (Bench): as TARGET"


def add_command(subparsers: argparse._SubParsersAction, name: str, summary: str, *examples: str) -> Any:
    """A sub-command's parser, with its examples at the end of its ``--help``."""
    return subparsers.add_parser(
        name,
        help=summary,
        description=summary,
        epilog=examples_text(*examples),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def examples_text(*examples: str) -> str:
    return "examples:\n" + "\n".join(f"  {line}" for line in examples)


def add_sides(p: argparse.ArgumentParser, golden_required: bool, golden_help: str = GOLDEN_HELP) -> None:
    p.add_argument("-tp", "--target_path", metavar="TARGET", required=True, help=TARGET_HELP)
    p.add_argument("-gp", "--golden_path", metavar="GOLDEN", required=golden_required, help=golden_help)


def graph_dump_folder(path: str | os.PathLike[str]) -> str:
    """graph_visualize reads folders: a dump.json (or debug.json) given stands for the folder holding it."""
    path = os.fspath(path)
    if os.path.basename(path) in ("dump.json", "debug.json") and os.path.isfile(path):
        return os.path.dirname(path) or "."
    return path


def name_long_forms(p: argparse.ArgumentParser, *dests: str) -> None:
    """The usage line of ``p``: these arguments with their short and long forms, as msprobe's help
    names them (``-tp/--target_path TARGET``), then ``[options]``."""
    actions = {action.dest: action for action in p._actions}
    parts = []
    for dest in dests:
        action = actions[dest]
        part = f"{'/'.join(action.option_strings)} {action.metavar}"
        parts.append(part if action.required else f"[{part}]")
    p.usage = " ".join(["%(prog)s", *parts, "[options]"])


def add_output(
    p: argparse.ArgumentParser, required: bool, flags: tuple[str, ...] = ("-o", "--output_path")
) -> None:
    if required:
        p.add_argument(*flags, metavar="OUT", required=True, help="output folder (created if missing)")
    else:
        p.add_argument(*flags, metavar="OUT", default="./output", help="output folder (default ./output)")


def add_run_options(p: argparse.ArgumentParser, quiet: bool = True) -> None:
    """Where the graph runs, -q and --debug: the same on every command."""
    p.add_argument("--scheduler", metavar="tcp://HOST:PORT", help="run on this running dask scheduler")
    p.add_argument(
        "--workers", metavar="N", type=int, default=0, help="start a local cluster of N worker processes"
    )
    if quiet:
        p.add_argument(
            "-q",
            "--quiet",
            action="store_true",
            help="no progress and no summary: only errors and the result path",
        )
    add_debug(p)


def add_debug(p: argparse.ArgumentParser) -> None:
    p.add_argument("--debug", action="store_true", help="show the Python traceback of an error")


def parallel_size(flag: str, what: str) -> Any:
    """The type of --tp/--pp/--vpp/--rank_size: an integer; for ``--tp`` given a path, a hint that the
    target path is ``-tp`` (one dash)."""

    def parse(text: str) -> int:
        try:
            return int(text)
        except ValueError:
            hint = ""
            if flag == "--tp" and (os.sep in text or os.path.exists(text)):
                hint = f"; {text!r} looks like a path: the target path is -tp (one dash)"
            raise argparse.ArgumentTypeError(f"{flag} is the {what}, an integer{hint}") from None

    return parse
