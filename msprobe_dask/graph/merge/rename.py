"""Renaming a node of a merged graph: its id, its key in the node map, and its item keys.

Every merge step that renames (PP marks and layer renumbering, ``_rank{r}`` API suffixes, VPP chunk
moves, API collections) goes through ``rename_node`` so that items stay keyed by ``<node id>.<rest>``
and their ``full_op_name`` follows the id. ``data_name`` is left alone: it names the tensor file.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from msprobe_dask.dump.markers import LEAF_KEYS
from msprobe_dask.graph.model import Node

_RANK_MARK = "_rank"
_RANK_SUFFIX = re.compile(_RANK_MARK + r"(\d+)")
"""The ``_rank{r}`` a parallel merge appends to the API name (id part 1) of another rank's API node
(graph_visualize.md §6), the one definition of what the matches, the checkers and the merge read."""
_TRAILING_RANK = re.compile(_RANK_SUFFIX.pattern + "$")
_RANK_BEFORE_DOT = re.compile(_RANK_SUFFIX.pattern + r"\.")


def rank_suffixed(node_id: str, rank: int) -> str:
    """``Tensor.__mul__.0.forward`` -> ``Tensor.__mul___rank1.0.forward``: ``_rank{r}`` on id part 1."""
    parts = node_id.split(".")
    if len(parts) > 1:
        parts[1] += f"{_RANK_MARK}{rank}"
    return ".".join(parts)


def without_rank_suffixes(node_id: str) -> str:
    """``node_id`` with every ``_rank{r}`` removed (a fuzzy match's key, §3.2)."""
    return _RANK_SUFFIX.sub("", node_id)


def without_trailing_rank(api: str) -> str:
    """An API name without the ``_rank{r}`` it ends with, if any (the checkers' ignore class, §3.4)."""
    return _TRAILING_RANK.sub("", api)


def ranks_mapped(node_id: str, rank_map: Mapping[int, int]) -> str:
    """``node_id`` with each ``_rank{r}.`` of a rank in ``rank_map`` made that of its mapped rank."""
    return _RANK_BEFORE_DOT.sub(
        lambda m: f"{_RANK_MARK}{rank_map.get(int(m.group(1)), int(m.group(1)))}.", node_id
    )


def _renamed(name: Any, old: str, new: str) -> Any:
    if isinstance(name, str) and (name == old or name.startswith(old + ".")):
        return new + name[len(old) :]
    return name


def _rekeyed(data: dict[str, dict[str, Any]], old: str, new: str) -> dict[str, dict[str, Any]]:
    out = {}
    for key, item in data.items():
        item = dict(item)
        if LEAF_KEYS.full_op_name in item:
            item[LEAF_KEYS.full_op_name] = _renamed(item[LEAF_KEYS.full_op_name], old, new)
        out[_renamed(key, old, new)] = item
    return out


def rename_items(node: Node, old: str) -> None:
    """Re-key ``node``'s items from ``old`` (the id they were built under) to its current id."""
    if old != node.id:
        node.input_data = _rekeyed(node.input_data, old, node.id)
        node.output_data = _rekeyed(node.output_data, old, node.id)


def rename_node(nodes: dict[str, Node], node: Node, new_id: str, items_from: str | None = None) -> None:
    """Give ``node`` the id ``new_id`` in ``nodes`` (the graph's map) and in its items.

    ``items_from`` is the id its items are still keyed under when that is not its current id (a
    node that was only marked, like the PP ``%{position}%{rank}`` marks)."""
    old = node.id
    if nodes.get(old) is node:
        del nodes[old]
    node.id = new_id
    nodes[new_id] = node
    rename_items(node, items_from if items_from is not None else old)
