"""The in-memory graph of one (step, rank, side): nodes in a parent/children hierarchy."""

from __future__ import annotations

import marshal
import pickle
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from operator import attrgetter
from typing import Any

from msprobe_dask.graph.gcpause import collections_paused

ROOT_ID = "DefaultModel"
MODULE, API, COLLECTION = 0, 1, 9
API_COLLECTION = "Apis_Between_Modules"
"""The name of a COLLECTION node (consecutive APIs between modules): ``{API_COLLECTION}.{k}``; a TP
merge's ``{API_COLLECTION}_All_Ranks.{j}`` holds each rank's, ``{API_COLLECTION}_Rank{r}.{k}``."""

API_PREFIXES = tuple(
    "Tensor. Torch. Functional. NPU. VF. Distributed. Aten. Mint. Primitive. Jit. MintFunctional. "
    "MindSpeed.".split()
)
# the same prefixes as the reference matches them: each "." is any character but a newline
_API_RE = re.compile("^(" + "|".join(API_PREFIXES) + ")")


def node_type_of(node_id: str) -> int:
    """API if the id starts with an API prefix, else module (Module., Cell., optimizer, clip_grad,
    DefaultModel and unknown prefixes alike: no module prefix starts like an API one). The string
    tests answer for the usual ids, the regex for the rest."""
    if node_id.startswith(API_PREFIXES):
        return API
    if node_id.startswith(("Module.", "Cell.")):
        return MODULE
    return API if _API_RE.match(node_id) else MODULE


NO_ITEMS: dict[str, dict[str, Any]] = {}
NO_LINES: list[str] = []
"""The items, link and merge_info of the nodes of a graph built (build.py) that have none: one object
each, shared, never changed (such a node's items, link and merge_info are replaced, never changed in
place). A graph holds a node per entry: four empty containers of its own cost a node 240 bytes, 2.5x
the node itself (one rank of 1,001,000 entries a side: 340 MB). A Node made otherwise gets its own."""


@dataclass(slots=True, eq=False)
class Node:
    id: str
    type: int
    parent: Node | None = None
    children: list[Node] = field(default_factory=list)
    input_data: dict[str, dict[str, Any]] = field(default_factory=dict)
    output_data: dict[str, dict[str, Any]] = field(default_factory=dict)
    stack: list[str] = field(default_factory=list)
    micro: int | None = None
    link: list[str] = field(default_factory=list)
    precision: int | float | None = None
    overflow: str | None = None
    merge_info: list[str] = field(default_factory=list)  # parallel_merge_info lines (§6.4 step 5)

    def attach(self, parent: Node) -> None:
        if self.parent is None and parent is not self:
            self.parent = parent
            parent.children.append(self)

    def ancestors(self) -> list[str]:
        """Ids from the root down to the parent (empty for the root); a cycle gives []."""
        out: list[str] = []
        seen = {id(self)}
        p = self.parent
        while p is not None:
            if id(p) in seen:
                return []
            seen.add(id(p))
            out.append(p.id)
            p = p.parent
        out.reverse()
        return out


@dataclass(slots=True, eq=False)
class Graph:
    """One side of one (step, rank): ``nodes`` in creation order, ``root`` = DefaultModel."""

    root: Node
    nodes: dict[str, Node]
    # the raw dump.json ``data``: a dict, or entries parsed on lookup (dump/entries.py) if built lazily
    data: Mapping[str, Any]
    task: str
    framework: str
    data_path: str | None
    micro_steps: int = 1
    megatron: bool = False
    step: int = 0
    rank: int = 0
    header: dict[str, Any] = field(default_factory=dict)  # dump.json's fields besides data (JSON export)
    folder: str = ""  # the dump folder: -lm reads its construct.json and stack.json
    no_md5: bool = False  # dump.json's text has no "md5" key, so compare_mode need not walk ``data``
    items_pending: bool = False  # built without the nodes' items: node_items.parse_items gives them

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled flat (see _flat): a Graph goes to another process when a dask task that needs it
        runs there. Pickled as it is, it would recurse along the parent/child links (too deep for
        pickle on long chains) and cost more than the build."""
        flat = _flat(self)
        if flat is None:  # a node linked to one the graph does not hold: pickled as it is
            return _graph_of_fields, (tuple(getattr(self, name) for name in _GRAPH_FIELDS),)
        return _unflat, (*flat, tuple(getattr(self, name) for name in _REST_FIELDS))

    def sorted_nodes(self) -> list[Node]:
        """Post-order DFS from the root (children in order, root last), each node once."""
        tree = self._tree_post_order()
        return tree if tree is not None else self._post_order()

    def _tree_post_order(self) -> list[Node] | None:
        """sorted_nodes() of a tree, 5x faster: the pre-order that takes children right to left,
        reversed. None if a node is reached twice (shared by two parents, or on a cycle)."""
        limit = len(self.nodes) + 1  # a cycle makes the walk go on forever
        out: list[Node] = []
        stack = [self.root]
        pop, push, take = stack.pop, stack.extend, out.append
        while stack:
            node = pop()
            take(node)
            push(node.children)
            if len(out) > limit:
                return None
        if len(set(map(id, out))) != len(out):
            return None
        out.reverse()
        return out

    def _post_order(self) -> list[Node]:
        out: list[Node] = []
        seen: set[int] = set()
        stack: list[tuple[Node, int]] = [(self.root, 0)]
        seen.add(id(self.root))
        while stack:
            node, i = stack[-1]
            if i < len(node.children):
                stack[-1] = (node, i + 1)
                child = node.children[i]
                if id(child) not in seen:
                    seen.add(id(child))
                    stack.append((child, 0))
            else:
                stack.pop()
                out.append(node)
        return out


_GRAPH_FIELDS = tuple(f.name for f in fields(Graph))
_REST_FIELDS = tuple(name for name in _GRAPH_FIELDS if name not in ("root", "nodes"))
# the Node fields that most nodes leave empty: carried for the nodes that hold something
_SPARSE = ("input_data", "output_data", "link", "precision", "overflow", "merge_info")
_STACK = attrgetter("stack")


def _graph_of_fields(values: tuple[Any, ...]) -> Graph:
    return Graph(*values)


def _flat(g: Graph) -> tuple[bytes, bool] | None:
    """The graph's nodes as parallel lists, marshalled (whether they are), else pickled (a value of a
    type marshal does not take): ids, types, parent and children as positions,
    stacks as positions in a list of the distinct stack lists (equal stacks stay one list), micro
    steps, and for each field of _SPARSE the {position: value} of the nodes that hold one. None if a
    node is linked to one the graph does not hold."""
    nodes = list(g.nodes.values())
    position = {id(node): i for i, node in enumerate(nodes)}
    root = position.get(id(g.root))
    if root is None:
        return None
    stack_position: dict[int, int] = {}
    stacks: list[list[str]] = []
    stack_of = []
    for stack in map(_STACK, nodes):
        k = stack_position.get(id(stack))
        if k is None:
            k = stack_position[id(stack)] = len(stacks)
            stacks.append(stack)
        stack_of.append(k)
    try:
        parents = [-1 if (up := node.parent) is None else position[id(up)] for node in nodes]
        children = [[position[id(c)] for c in below] if (below := node.children) else None for node in nodes]
    except KeyError:
        return None
    sparse = tuple(
        {
            i: v
            for i, v in enumerate(map(attrgetter(name), nodes))
            if v is not None and (v or v.__class__ not in (dict, list))
        }
        for name in _SPARSE
    )
    ids = [node.id for node in nodes]
    keys = list(g.nodes)
    types = [node.type for node in nodes]
    micro = [node.micro for node in nodes]
    flat = (
        ids,
        None if keys == ids else keys,
        types,
        parents,
        children,
        stacks,
        stack_of,
        micro,
        root,
        sparse,
    )
    try:  # (marshal: 5x faster than pickle to write these lists, 2x to read; one rank of 50,000 entries
        # sends each side's graph to the other worker)
        return marshal.dumps(flat), True
    except ValueError:
        return pickle.dumps(flat, protocol=pickle.HIGHEST_PROTOCOL), False


def _unflat(flat: bytes, marshalled: bool, rest: tuple[Any, ...]) -> Graph:
    with collections_paused():  # (see gcpause: objects that all live on)
        ids, keys, types, parents, children, stacks, stack_of, micro, root, sparse = (
            marshal.loads(flat) if marshalled else pickle.loads(flat)
        )
        nodes = [
            Node(node_id, kind, None, [], NO_ITEMS, NO_ITEMS, stacks[k], m, NO_LINES, None, None, NO_LINES)
            for node_id, kind, k, m in zip(ids, types, stack_of, micro)
        ]
        for node, up, below in zip(nodes, parents, children):
            if up >= 0:
                node.parent = nodes[up]
            if below:
                node.children = [nodes[i] for i in below]
    for name, held in zip(_SPARSE, sparse):
        for i, value in held.items():
            setattr(nodes[i], name, value)
    return Graph(nodes[root], dict(zip(keys or ids, nodes)), *rest)
