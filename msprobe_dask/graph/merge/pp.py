"""PP merge of one pipeline-parallel group (graph_visualize.md §6.5).

Contract, for the merge driver::

    result = merge_pp_group(graphs)

* ``graphs``: the rank graphs of one pp group in pipeline order (``graphs[0]`` is the main graph,
  the first stage; ``Graph.rank`` gives the ``r`` of the ``_rank{r}`` suffixes). Run the API
  collection merge of the group (§6.4) first: this module leaves ``Apis_Between_Modules*`` alone.
* The main graph is merged in place. Subtrees of the other graphs are *moved* into it (their Node
  objects are re-parented and renamed), so the other graphs must not be used afterwards.
* ``result.graph`` is the main graph; ``result.merged`` its nodes marked PP-merged (main layers whose
  twins were moved next to them, and their backward twins); ``result.moved`` the tops of the moved
  subtrees, each with its rank; ``result.ranks`` the group's ranks in pipeline order. VPP (vpp.py)
  reads ``merged`` and ``moved``; TP after PP maps ``_rank{ranks[i]}`` of one group onto
  ``_rank{...}`` of the other group's rank at the same position i.

Moved nodes are first renamed ``<id>%{position}%{rank}`` (position = index in their parent on their
own rank), exactly like the reference does, so they never collide with main ids and a recursive
``merge`` stops at them; after sorting, the marks are replaced by the final ids: layer modules get
their new layer index (inherited by their descendants), APIs get ``_rank{r}``.
"""

from __future__ import annotations

import re
from collections.abc import Container, Iterator, Sequence
from dataclasses import dataclass, field

from msprobe_dask.errors import DumpError
from msprobe_dask.graph.merge.params import differing_keys, is_output_key
from msprobe_dask.graph.merge.rename import rank_suffixed, rename_node
from msprobe_dask.graph.model import API, API_COLLECTION, MODULE, Graph, Node

LAYERS = re.compile(r"(layers\.|layer\.)\d+(\.)")
MAX_DEPTH = 1000
NOT_MERGED_ROOT_CHILDREN = ("optimizer", "clip_grad")  # the modules PP does not merge, nor TP their children


@dataclass
class PPResult:
    graph: Graph
    ranks: list[int]
    merged: set[Node] = field(default_factory=set)
    moved: dict[Node, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class _Mark:
    original: str
    position: int
    rank: int


def is_backward(node_id: str) -> bool:
    return "backward" in node_id.split(".")


def is_forward(node_id: str) -> bool:
    return "forward" in node_id.split(".")


def with_layer_index(node_id: str, index: int) -> str:
    """``...decoder.layers.0.mlp...`` -> ``...decoder.layers.{index}.mlp...`` (every layers pattern)."""
    return LAYERS.sub(rf"\g<1>{index}\g<2>", node_id)


def _forward_twin(node_id: str) -> str:
    parts = node_id.split(".")
    if len(parts) >= 2 and parts[-2] == "backward":
        parts[-2] = "forward"
    return ".".join(parts)


def subtree(node: Node, skip: Container[Node] = ()) -> Iterator[Node]:
    """``node`` and its descendants, pre-order, leaving out the subtrees of the nodes in ``skip``."""
    stack = [node]
    while stack:
        n = stack.pop()
        if n in skip:
            continue
        yield n
        stack.extend(reversed(n.children))


class _Merger:
    def __init__(self, graphs: Sequence[Graph]) -> None:
        self.main = graphs[0]
        self.others = list(graphs[1:])
        self.result = PPResult(self.main, [g.rank for g in graphs])
        self.marks: dict[Node, _Mark] = {}
        self.parents: dict[Node, None] = {}  # main nodes that received moved nodes, first seen first

    # -------------------------------------------------------------------------------- marking

    def _move(self, top: Node, position: int, rank: int, new_parent: Node) -> None:
        """Mark ``top``'s subtree ``%{position}%{rank}``, add it to the main map, attach it."""
        self.marks[top] = _Mark(top.id, position, rank)
        for n in subtree(top):
            for i, child in enumerate(n.children):
                self.marks[child] = _Mark(child.id, i, rank)
        for n in subtree(top):
            mark = self.marks[n]
            n.id = f"{mark.original}%{mark.position}%{mark.rank}"
            self.main.nodes[n.id] = n
        top.parent = new_parent
        new_parent.children.append(top)
        self.result.moved[top] = rank
        self.parents[new_parent] = None

    def _move_twin(self, twin: Node, rank: int, new_parent: Node) -> None:
        old_parent = twin.parent
        position = old_parent.children.index(twin) if old_parent is not None else 0
        self._move(twin, position, rank, new_parent)

    # -------------------------------------------------------------------------------- merging

    def _merge_one(self, node: Node) -> bool:
        """§6.5 for one main node; True when its module children are to be merged too."""
        found = [g.nodes.get(node.id) for g in self.others]
        twins = [t for t in found if t is not None]
        if len(twins) < len(found):
            return False
        keys = differing_keys(node, twins)
        out_diff = any(is_output_key(node, k) for k in keys)
        in_diff = any(not is_output_key(node, k) for k in keys)
        backward = is_backward(node.id)
        twin_fwd = self.main.nodes.get(_forward_twin(node.id)) if backward else None
        if (in_diff and out_diff and LAYERS.search(node.id)) or (
            twin_fwd is not None and twin_fwd in self.result.merged
        ):
            self.result.merged.add(node)
            parent = node.parent or self.main.root
            for rank, twin in zip(self.result.ranks[1:], twins):
                self._move_twin(twin, rank, parent)
            return False
        if out_diff and not in_diff and is_forward(node.id):
            node.output_data = twins[-1].output_data
        elif in_diff and not out_diff and backward:
            node.input_data = twins[-1].input_data
        own = {c.id for c in node.children}
        for rank, twin in zip(self.result.ranks[1:], twins):
            for i, child in enumerate(list(twin.children)):
                if child.id not in own:
                    self._move(child, i, rank, node)
        return True

    def merge(self, top: Node) -> None:
        stack = [(top, 0)]
        while stack:
            node, depth = stack.pop()
            if depth > MAX_DEPTH:
                raise DumpError(None, f"{node.id}: the model hierarchy is deeper than {MAX_DEPTH} levels")
            if self._merge_one(node):
                modules = [c for c in node.children if c.type == MODULE]
                stack.extend((c, depth + 1) for c in reversed(modules))

    # -------------------------------------------------------------------------------- ordering

    def _sort_and_number(self, parent: Node) -> dict[Node, int]:
        """Order ``parent``'s children and give each moved child its ``pp_index``."""
        marked = [c for c in parent.children if c in self.result.moved]
        rest = [c for c in parent.children if c not in self.result.moved]
        backward = is_backward(parent.id)
        if backward:
            marked.sort(key=lambda c: (-self.marks[c].rank, self.marks[c].position))
            parent.children[:] = marked + rest
        else:
            marked.sort(key=lambda c: (self.marks[c].rank, self.marks[c].position))
            parent.children[:] = rest + marked
        index: dict[Node, int] = {}
        counter = -1
        for c in reversed(parent.children) if backward else parent.children:
            if LAYERS.search(c.id):
                counter += 1
            if c in self.result.moved:
                index[c] = counter
        return index

    def _root_unique(self) -> dict[Node, int]:
        """Other ranks' root children missing on the main root, when the root holds layers."""
        root = self.main.root
        if not any(LAYERS.search(c.id) for c in root.children):
            return {}
        own = {c.id for c in root.children}
        rest = list(root.children)
        for rank, g in zip(self.result.ranks[1:], self.others):
            for i, child in enumerate(list(g.root.children)):
                if child.id not in own and not child.id.startswith(API_COLLECTION):
                    self._move(child, i, rank, root)
        marked = root.children[len(rest) :]
        marked.sort(key=lambda c: (self.marks[c].position, self.marks[c].rank))
        root.children[:] = rest + marked
        index: dict[Node, int] = {}
        counter = sum(1 for c in rest if LAYERS.search(c.id)) - 1
        for c in marked:
            if LAYERS.search(c.id):
                counter += 1
            index[c] = counter
        return index

    def _rename(self, top: Node, pp_index: int) -> None:
        rank = self.marks[top].rank
        for n in list(subtree(top)):
            original = self.marks[n].original
            if n.type == API:
                new_id = rank_suffixed(original, rank)
            elif LAYERS.search(original):
                new_id = with_layer_index(original, pp_index)
            else:
                new_id = original
            rename_node(self.main.nodes, n, new_id, items_from=original)

    def run(self) -> PPResult:
        for child in list(self.main.root.children):
            if child.type == MODULE and child.id not in NOT_MERGED_ROOT_CHILDREN:
                self.merge(child)
        for parent in list(self.parents):
            for top, pp_index in self._sort_and_number(parent).items():
                self._rename(top, pp_index)
        for top, pp_index in self._root_unique().items():
            self._rename(top, pp_index)
        return self.result


def merge_pp_group(graphs: Sequence[Graph]) -> PPResult:
    """Merge the graphs of one pp group into ``graphs[0]`` (see the module docstring)."""
    return _Merger(graphs).run()
