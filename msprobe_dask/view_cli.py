"""``msprobe-dask view OUT``: TensorBoard with the tb-graph-ascend plugin, from this environment, on the
vis.db files below OUT; prints the address and serves until interrupted.

Only tb-graph-ascend's ``graph_ascend`` plugin is loaded (by its entry point), so that a second package
registering the same name (mindstudio-probe) does not stop TensorBoard.
"""

from __future__ import annotations

import argparse
import socket
import sys
import threading
from pathlib import Path
from typing import Any

from msprobe_dask.cli_args import add_command, add_debug
from msprobe_dask.errors import ConfigError

PLUGIN = "graph_ascend"
PLUGIN_PACKAGE = "tb-graph-ascend"


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = add_command(
        subparsers,
        "view",
        "open graph_visualize's vis.db files in TensorBoard with the tb-graph-ascend plugin",
        "msprobe-dask view out                       # http://127.0.0.1:6006/#graph_ascend",
        "msprobe-dask view out --port 0              # any free port",
        "msprobe-dask view out --host 0.0.0.0        # reachable from other machines",
    )
    p.add_argument("logdir", metavar="OUT", help="a graph_visualize output folder (vis.db files below it)")
    p.add_argument("--host", default="127.0.0.1", help="address to serve on (default 127.0.0.1)")
    p.add_argument(
        "--port", type=int, default=6006, metavar="PORT", help="port (default 6006; 0: a free one)"
    )
    add_debug(p)
    p.set_defaults(run=run)


def graph_ascend_plugin() -> Any:
    """The plugin class tb-graph-ascend registers; ConfigError when it (or TensorBoard) is missing."""
    from importlib import metadata

    entry_points = [
        ep
        for ep in metadata.entry_points().select(group="tensorboard_plugins", name=PLUGIN)
        if ep.dist is not None and ep.dist.metadata["Name"].replace("_", "-").lower() == PLUGIN_PACKAGE
    ]
    if not entry_points:
        raise ConfigError(None, f"{PLUGIN_PACKAGE} is not installed here: pip install 'msprobe-dask[viewer]'")
    return entry_points[0].load()


def tensorboard(logdir: Path, host: str, port: int) -> Any:
    """A configured TensorBoard with the built-in plugins and tb-graph-ascend's."""
    try:
        from tensorboard import default, program
    except ImportError:
        raise ConfigError(
            None, "tensorboard is not installed here: pip install 'msprobe-dask[viewer]'"
        ) from None
    board = program.TensorBoard(plugins=default.get_static_plugins() + [graph_ascend_plugin()])
    board.configure(
        argv=[None, "--logdir", str(logdir), "--host", host, "--port", str(port), "--load_fast", "false"]
    )
    return board


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def run(args: argparse.Namespace) -> int:
    logdir = Path(args.logdir)
    if not logdir.is_dir():
        raise ConfigError(logdir, "is not a folder")
    if not any(logdir.rglob("*.vis.db")):
        raise ConfigError(logdir, "holds no .vis.db file (write one with msprobe-dask graph_visualize)")
    port = args.port or _free_port(args.host)
    url = tensorboard(logdir, args.host, port).launch()
    print(f"TensorBoard with tb-graph-ascend: {url}#{PLUGIN}  (Ctrl-C stops it)", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    print("stopped", file=sys.stderr)
    return 0
