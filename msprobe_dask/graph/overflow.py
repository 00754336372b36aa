"""``-oc``: overflow levels from the raw dump.json entries (graph_visualize.md §4)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from msprobe_dask.dump.markers import LEAF_KEYS, MAX, MEAN, MIN, NORM
from msprobe_dask.graph.model import Graph, Node

SPECIAL = {"inf", "-inf", "nan"}

# api -> (ignored input indices, ignored input names, ignored output indices); None = not listed
IGNORE_RULES: dict[str, tuple[set[int] | None, set[str] | None, set[int] | None]] = {
    "torch.empty": (None, None, {0}),
    "torch.empty_like": (None, None, {0}),
    "torch.empty_strided": (None, None, {0}),
    "distributed.recv": ({0}, {"tensor"}, None),
    "distributed.all_gather": ({0}, None, None),
    "distributed.reduce_scatter": ({0}, {"output"}, None),
    "distributed._reduce_scatter_base": ({0}, None, None),
    "distributed.all_gather_into_tensor": ({0}, None, None),
    "distributed.reduce_scatter_tensor": ({0}, None, None),
    "tensor.masked_fill_": ({0}, None, None),
}


def _anomalous(element: Any) -> bool:
    if isinstance(element, dict):
        return any(k in element and str(element[k]).lower() in SPECIAL for k in (MAX, MIN, MEAN))
    if isinstance(element, list):
        return any(_anomalous(e) for e in element)
    return False


def _norms(elements: list[Any]) -> list[float]:
    out = []
    for e in elements:
        if isinstance(e, dict) and e.get(LEAF_KEYS.type) == "torch.Tensor":
            v = e.get(NORM)
            if (
                v is not None
                and not (isinstance(v, float) and math.isnan(v))
                and not isinstance(v, (str, bool))
            ):
                out.append(v)
    return out


def _ignored(api: str, args: list[Any], kwargs: Mapping[str, Any], outs: list[Any]) -> bool:
    rule = IGNORE_RULES.get(api)
    if rule is None:
        return False
    in_idx, in_names, out_idx = rule
    if in_idx is not None and args:
        if any(_anomalous(a) and i not in in_idx for i, a in enumerate(args)):
            return False
    if in_names is not None:
        if any(_anomalous(v) and k not in in_names for k, v in kwargs.items()):
            return False
    if out_idx is not None:
        if any(_anomalous(o) and i not in out_idx for i, o in enumerate(outs)):
            return False
    return True


def entry_level(name: str, entry: Any, framework: str) -> str | None:
    if not isinstance(entry, dict):
        return None
    args = entry.get("input_args", entry.get("input", []))
    kwargs = entry.get("input_kwargs", {})
    outs = entry.get("output", [])
    args = args if isinstance(args, list) else [args]
    kwargs = kwargs if isinstance(kwargs, dict) else {}
    outs = outs if isinstance(outs, list) else [outs]
    in_bad = any(_anomalous(a) for a in args) or any(_anomalous(v) for v in kwargs.values())
    out_bad = any(_anomalous(o) for o in outs)
    level = None
    if not in_bad and out_bad:
        level = "critical"
    elif in_bad and out_bad:
        level = "high"
    elif in_bad:
        level = "medium"
    elif framework == "pytorch":
        nin = _norms(args + list(kwargs.values()))
        nout = _norms(outs)
        if nin and nout:
            mi, mo = max(nin), max(nout)
            if (mi == 0 and mo > 100) or (mi != 0 and mo / mi > 100):
                level = "high"
    if level is None:
        return None
    api = ".".join(name.split(".")[:2]).lower()
    if _ignored(api, args, kwargs, outs):
        return None
    return level


def check_overflow(g: Graph) -> None:
    overflow_levels(g, g.nodes.values())


def overflow_levels(g: Graph, nodes: Iterable[Node]) -> None:
    """Set the overflow level of ``nodes`` from their dump.json entries (nodes without one have none).
    Per node, so that graph/chunks.py can do it in the chunk jobs, where the entries are parsed."""
    data, framework = g.data, g.framework
    for node in nodes:
        if node.id in data:
            level = entry_level(node.id, data[node.id], framework)
            if level is not None:
                node.overflow = level
