"""``-lm``: which Bench node each NPU node is compared with (graph_visualize.md §3.2, "Layer mapping").

The mapping is the one ``compare -lm`` builds (``match.layer_mapping.entry_pairs``): every dump.json
entry gets a place in its side's layer tree from construct.json, the NPU names are rewritten with the
yaml, and the n-th NPU entry of a place pairs with the n-th Bench entry there. Here it stays at the
entry (node) level: NPU entry -> Bench entry, ``N/A`` when it has no partner. Nodes that are not
dump entries (the root, ``Apis_Between_Modules``) are absent and so match a Bench node of the same
name. ``-lm`` without a file runs the same algorithm with no renames.

A yaml file that cannot be used (missing, not yaml, empty, wrong shape) does not stop the run: as in
the reference, a warning says so and the mapping is empty, so nodes match by their own names (still
without the ancestor check).
"""

from __future__ import annotations

from pathlib import Path

from msprobe_dask.columns import NA
from msprobe_dask.errors import ConfigError
from msprobe_dask.graph.model import Graph
from msprobe_dask.match.layer_mapping import construct_parents, entry_pairs, load_layer_yaml
from msprobe_dask.match.mapfile import warn


def layer_mapping(npu: Graph, bench: Graph, spec: str | bool) -> dict[str, str]:
    """NPU entry -> Bench entry (or ``N/A``) for ``-lm`` (``spec`` True) or ``-lm FILE``."""
    path = spec if isinstance(spec, str) else None
    try:
        table = load_layer_yaml(path, allow_empty=False)
    except ConfigError as exc:
        warn(f"{exc}; the layer mapping is not used: nodes are matched by their own names")
        return {}
    pairs = entry_pairs(
        list(npu.data),
        construct_parents(Path(npu.folder) / "construct.json"),
        list(bench.data),
        construct_parents(Path(bench.folder) / "construct.json"),
        table,
        path,
    )
    return {entry: pairs.get(entry, NA) for entry in npu.data}
