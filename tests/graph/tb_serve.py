"""Start TensorBoard with exactly one ``graph_ascend`` plugin (the one from tb-graph-ascend).

Run by tests/graph/test_plugin.py with the Python of the environment that has tensorboard and
tb-graph-ascend: ``python tb_serve.py LOGDIR PORT``. Loading the plugin class directly (instead of
``tensorboard --logdir``) avoids "Duplicate plugins for name graph_ascend" when another package
(mindstudio-probe) registers the same plugin name.
"""

from __future__ import annotations

import sys


def main(logdir: str, port: str) -> int:
    from importlib import metadata

    from tensorboard import default, program

    eps = metadata.entry_points().select(group="tensorboard_plugins")
    chosen = [
        ep
        for ep in eps
        if ep.name == "graph_ascend"
        and ep.dist is not None
        and ep.dist.metadata["Name"].replace("_", "-").lower() == "tb-graph-ascend"
    ]
    if not chosen:
        print("tb_serve: tb-graph-ascend does not register a graph_ascend plugin", file=sys.stderr)
        return 3
    tb = program.TensorBoard(plugins=default.get_static_plugins() + [chosen[0].load()])
    tb.configure(
        argv=[None, "--logdir", logdir, "--host", "127.0.0.1", "--port", port, "--load_fast", "false"]
    )
    return tb.main()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
