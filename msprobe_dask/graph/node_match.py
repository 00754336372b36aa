"""Which nodes of two graphs are compared (graph_visualize.md §3.2): by id and ancestors, by a
mapping of names, or fuzzily (API call numbers ignored below matched modules)."""

from __future__ import annotations

import re
from collections.abc import Mapping

from msprobe_dask.graph.merge.rename import without_rank_suffixes
from msprobe_dask.graph.model import API, Graph, Node


def _bfs(g: Graph) -> list[Node]:
    """The graph's nodes breadth first from the root (a node under two parents twice)."""
    order = [g.root]
    for node in order:  # (the list read as it grows: the queue itself)
        order.extend(node.children)
    return order


def _fuzzy_key(node_id: str) -> str:
    return without_rank_suffixes(re.sub(r"\.\d+\.", ".", node_id))


def _has_ancestors(node: Node, ids: list[str]) -> bool:
    """``node.ancestors() == ids``, without building the list when the parents' ids match."""
    p, i = node.parent, len(ids) - 1
    while p is not None:
        if i < 0 or ids[i] != p.id:
            return node.ancestors() == ids  # (a parent cycle makes ancestors() empty)
        p, i = p.parent, i - 1
    return i == -1


def _linked(npu: Node, bench: Node) -> tuple[Node, Node]:
    """The pair, each node linked to the other (its ancestors' ids and its id)."""
    npu.link = bench.ancestors() + [bench.id]
    bench.link = npu.ancestors() + [npu.id]
    return npu, bench


def match_pairs(
    npu: Graph, bench: Graph, fuzzy: bool = False, mapping: Mapping[str, str] | None = None
) -> list[tuple[Node, Node]]:
    """Set ``link`` on matched nodes of both sides; return the matched pairs in BFS order."""
    pairs: list[tuple[Node, Node]] = []
    if fuzzy:
        for node in _bfs(npu):
            if node.type == API:
                continue
            b = bench.nodes.get(node.id)
            if b is None:
                continue
            pairs.append(_linked(node, b))
            counts: dict[str, int] = {}
            bkeys: dict[str, Node] = {}
            for c in b.children:
                if c.type == API:
                    k = _fuzzy_key(c.id)
                    counts[k] = counts.get(k, 0) + 1
                    bkeys.setdefault(f"{k}{counts[k]}", c)
            counts = {}
            for c in node.children:
                if c.type != API or npu.nodes.get(c.id) is not c:
                    continue  # (an API another group's merge moved out of this graph: never matched)
                k = _fuzzy_key(c.id)
                counts[k] = counts.get(k, 0) + 1
                bc = bkeys.get(f"{k}{counts[k]}")
                if bc is not None:
                    pairs.append(_linked(c, bc))
        return pairs
    if mapping is not None:
        for node in _bfs(npu):
            target = mapping.get(node.id, node.id)
            b = bench.nodes.get(target)
            if b is None:
                continue
            pairs.append(_linked(node, b))
        return pairs
    known: dict[Node, list[str]] = {}  # node -> ancestors(), filled parents first (BFS)
    # a node's children's ancestors() (one list for all of them: these lists are never changed)
    below: dict[Node, list[str]] = {}
    find = bench.nodes.get
    for node in _bfs(npu):
        up = node.parent
        if up is None or up not in known:
            anc = node.ancestors()
        else:
            found = below.get(up)
            anc = below[up] = known[up] + [up.id] if found is None else found
        known[node] = anc
        b = find(node.id)
        if b is None or not _has_ancestors(b, anc):
            continue
        node.link = anc + [b.id]
        b.link = node.link  # (one list: links are replaced, never changed)
        pairs.append((node, b))
    return pairs
