"""A freshly built graph in a flat form that pickles fast, and back (for a build run in a forked child).

Pickling a Graph as it is would recurse along the parent/child links (too deep for pickle on long
chains) and costs more than the build. Here the nodes become parallel lists (ids, types, parent and
children as positions, stacks as positions in a list of the distinct stack lists), which pickle as
plain lists and turn back into Nodes in a fraction of the build's time. Lazily parsed dump.json
entries go without the file's bytes when the receiving process holds the same bytes (``text``): a
third of the transfer's cost on a 100,000-node dump.

Only what ``build_graph`` sets is carried: a node holding anything else (items, links, compare or
overflow results, merge info) is refused with ``ValueError``, and the caller builds in-process.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from msprobe_dask.dump.entries import DumpEntries
from msprobe_dask.graph.model import Graph, Node

# the Graph fields carried as they are (root and nodes are rebuilt)
_GRAPH_FIELDS = tuple(f.name for f in fields(Graph) if f.name not in ("root", "nodes"))


def encode(g: Graph, text: bytes | None = None) -> tuple[Any, ...]:
    """``text``: dump.json's bytes as the decoding process holds them (None: it holds none)."""
    nodes = list(g.nodes.values())
    position = {id(node): i for i, node in enumerate(nodes)}
    stacks: list[list[str]] = []
    stack_position: dict[int, int] = {}
    types, parents, children, stack_of, micro = [], [], [], [], []
    for node in nodes:
        if node.input_data or node.output_data or node.link or node.merge_info:
            raise ValueError(f"{node.id}: holds more than a build sets")
        if node.precision is not None or node.overflow is not None:
            raise ValueError(f"{node.id}: holds more than a build sets")
        types.append(node.type)
        try:
            parents.append(-1 if node.parent is None else position[id(node.parent)])
            children.append([position[id(c)] for c in node.children])
        except KeyError:
            raise ValueError(f"{node.id}: linked to a node the graph does not hold") from None
        k = stack_position.get(id(node.stack))
        if k is None:
            k = stack_position[id(node.stack)] = len(stacks)
            stacks.append(node.stack)
        stack_of.append(k)
        micro.append(node.micro)
    rest = {name: getattr(g, name) for name in _GRAPH_FIELDS}
    entries = None
    if text is not None and isinstance(g.data, DumpEntries):
        entries = g.data.without_text(text)
        if entries is not None:
            rest["data"] = None
    root = position.get(id(g.root))
    if root is None:
        raise ValueError("the root is not among the graph's nodes")
    ids = [node.id for node in nodes]
    keys = list(g.nodes)
    flat = ids, None if keys == ids else keys, types, parents, children, stacks, stack_of, micro, root
    return *flat, rest, entries


def decode(flat: tuple[Any, ...], text: bytes | None = None) -> Graph:
    """``text``: the bytes given to encode."""
    ids, keys, types, parents, children, stacks, stack_of, micro, root, rest, entries = flat
    nodes = [
        Node(node_id, kind, None, [], {}, {}, stacks[k], m)
        for node_id, kind, k, m in zip(ids, types, stack_of, micro)
    ]
    for node, up, below in zip(nodes, parents, children):
        if up >= 0:
            node.parent = nodes[up]
        if below:
            node.children = [nodes[i] for i in below]
    if entries is not None:
        if text is None:
            raise ValueError("the entries were sent without the bytes they are read from")
        rest = {**rest, "data": DumpEntries.with_text(entries, text)}
    return Graph(root=nodes[root], nodes=dict(zip(keys or ids, nodes)), **rest)
