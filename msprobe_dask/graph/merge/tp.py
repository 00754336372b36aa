"""API collections of a parallel group, and the TP merge of one tensor-parallel group (§6.4).

The first graph of a group is the main graph: it is merged in place and the others are read (their
collections' API nodes are moved into it). After a PP merge the ids of the moved layers' APIs carry
``_rank{r}`` with the ranks of their own pp group; ``rank_maps`` (one per other graph) translate
those of the main graph's pp group into the other graph's so twins are still found.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from msprobe_dask.dump.markers import LEAF_KEYS, STATS
from msprobe_dask.graph.merge.params import differing_keys, is_output_key, merge_stats, tp_header
from msprobe_dask.graph.merge.pp import NOT_MERGED_ROOT_CHILDREN, subtree
from msprobe_dask.graph.merge.rename import rank_suffixed, ranks_mapped, rename_node
from msprobe_dask.graph.model import API_COLLECTION, COLLECTION, MODULE, Graph, Node

_COLL = re.compile(rf"^{API_COLLECTION}(?:_Rank\d+)?\.(\d+)$")
_ALL_RANKS = f"{API_COLLECTION}_All_Ranks"
_RANK_OF_COLL = re.compile(r"_Rank(\d+)")
_REDUCES = ("_reduce_scatter_base", "reduce_scatter_tensor", "all_reduce")


# ------------------------------------------------------------------------------------ API collections


def _rank_collection(main: Graph, coll: Node, k: str, rank: int, rename_apis: bool) -> Node:
    """``coll`` (of ``main`` or of another rank's graph) named ``Apis_Between_Modules_Rank{rank}.k``
    in ``main``'s node map (its APIs ``_rank{rank}`` with ``rename_apis``): the graph it comes from
    keeps it under its old ids (see merge_api_collections)."""
    old_id = coll.id
    rename_node(main.nodes, coll, f"{API_COLLECTION}_Rank{rank}.{k}")
    if coll.id == old_id:
        del main.nodes[old_id]
    if rename_apis:
        for api in coll.children:
            rename_node(main.nodes, api, rank_suffixed(api.id, rank))
    return coll


def merge_api_collections(graphs: Sequence[Graph]) -> None:
    """Wrap each root ``Apis_Between_Modules.k`` of the main graph into a new
    ``Apis_Between_Modules_All_Ranks.j`` holding ``Apis_Between_Modules_Rank{r}.k`` of every rank
    (APIs of the other ranks renamed ``_rank{r}``); existing ``_All_Ranks`` collections (from a PP
    merge) absorb the other graphs' ``_Rank`` collections.

    As the reference does, the nodes taken from another graph are renamed in the main graph's node
    map alone and stay in the other's under their old ids, and a collection renamed to the id it has
    leaves the map. Where the groups overlap (a rank in two of them, graph_visualize.md section 6.3),
    that shows: a graph merged as another rank's and then as a main graph wraps its own
    ``Apis_Between_Modules_Rank{r}.k``, found under no id (node_match: its APIs are not compared); a
    graph merged twice as another rank's gives its collections again (APIs ``_rank{r}_rank{r}``)."""
    main, others = graphs[0], graphs[1:]
    root = main.root
    j = sum(1 for c in root.children if c.id.startswith(_ALL_RANKS + "."))
    for pos, child in enumerate(list(root.children)):
        m = _COLL.match(child.id)
        if m:
            k, old_id = m.group(1), child.id
            wrapper = Node(f"{_ALL_RANKS}.{j}", COLLECTION, parent=root)
            j += 1
            main.nodes[wrapper.id] = wrapper
            root.children[pos] = wrapper
            child.parent = wrapper
            wrapper.children.append(_rank_collection(main, child, k, main.rank, False))
            for g in others:
                other = g.nodes.get(old_id)
                if other is None or other.type != COLLECTION:
                    continue
                _absorb(main, wrapper, [_rank_collection(main, other, k, g.rank, True)])
        elif child.id.startswith(_ALL_RANKS + "."):
            for g in others:
                other = g.nodes.get(child.id)
                if other is not None:
                    _absorb(main, child, list(other.children))


def _absorb(main: Graph, parent: Node, colls: list[Node]) -> None:
    """``colls`` (with their API children, of another graph) under ``parent`` of ``main``."""
    for coll in colls:
        coll.parent = parent
        parent.children.append(coll)
        for node in (coll, *coll.children):
            main.nodes[node.id] = node


def sort_collections(g: Graph) -> None:
    """``_All_Ranks`` children in rank order (after the TP merge)."""
    for child in g.root.children:
        if child.id.startswith(_ALL_RANKS + "."):
            child.children.sort(key=lambda c: int(m.group(1)) if (m := _RANK_OF_COLL.search(c.id)) else 0)


# ------------------------------------------------------------------------------------ node merge


def _mapped(node_id: str, rank_map: Mapping[int, int] | None) -> str:
    if not rank_map:
        return node_id
    return ranks_mapped(node_id, rank_map)


def _twins(
    node: Node, others: Sequence[Graph], rank_maps: Sequence[Mapping[int, int] | None]
) -> list[Node] | None:
    """The node with the same id and ancestors in every other graph, or None if one lacks it."""
    anc = node.ancestors()
    out = []
    for g, rmap in zip(others, rank_maps):
        twin = g.nodes.get(_mapped(node.id, rmap))
        if twin is None or twin.ancestors() != [_mapped(a, rmap) for a in anc]:
            return None
        out.append(twin)
    return out


def _merge(node: Node, twins: Sequence[Node], keys: Sequence[str], header: str) -> None:
    if keys:
        node.merge_info = [header] + merge_stats(node, twins, keys)


def _kind(node_id: str) -> tuple[str, str]:
    parts = node_id.split(".")
    return (parts[-2], parts[-3]) if len(parts) >= 3 else ("", "")


def _first(data: Mapping[str, dict], index: int) -> dict | None:
    items = list(data.values())
    return items[index] if len(items) > index else None


def _reduce_input(reduce: Node) -> dict | None:
    return _first(reduce.input_data, 0 if "all_reduce" in reduce.id else 1)


def _same_stats(a: dict | None, b: dict | None) -> bool:
    return a is not None and b is not None and all(a.get(s) == b.get(s) for s in STATS)


class RankMaps(NamedTuple):
    """A TP merge after PP merges, for each other graph: ``ids`` the ranks whose ``_rank{r}`` in an id
    of the main graph are that graph's ``_rank{ids[r]}``; ``header`` the rank a moved node's data
    comes from there, by the rank it comes from in the main graph."""

    ids: Sequence[Mapping[int, int]]
    header: Sequence[Mapping[int, int]]


class _TPMerge:
    def __init__(
        self,
        graphs: Sequence[Graph],
        ranks: Sequence[int],
        rank_maps: RankMaps | None,
        origins: Mapping[Node, int] | None,
    ) -> None:
        self.main = graphs[0]
        self.others = list(graphs[1:])
        self.ranks = list(ranks)
        self.rank_maps = rank_maps
        self.origins = origins or {}

    def header(self, node: Node) -> str:
        """The first merge-info line: the ranks the node's data comes from (a node moved in by a PP
        merge comes from its own stage's rank and that rank's twins)."""
        origin = self.origins.get(node)
        if origin is None or self.rank_maps is None:
            return tp_header(self.ranks)
        return tp_header([origin] + [m.get(origin, origin) for m in self.rank_maps.header])

    def twins(self, node: Node) -> list[Node] | None:
        return _twins(node, self.others, self.rank_maps.ids if self.rank_maps else [None] * len(self.others))

    def substitute_matmuls(self, module: Node) -> None:
        """Row forward / Column backward: a matmul whose output feeds a reduce gets its inputs merged
        and the reduce's output as its output."""
        matmuls = [c for c in module.children if "matmul" in c.id]
        reduces = [c for c in module.children if any(r in c.id for r in _REDUCES)]
        for mm in matmuls:
            out = _first(mm.output_data, 0)
            reduce = next((r for r in reduces if _same_stats(out, _reduce_input(r))), None)
            if reduce is None or out is None:
                continue
            twins = self.twins(mm)
            merged = []  # (no twins: the note alone)
            if twins:
                keys = [k for k in differing_keys(mm, twins) if not is_output_key(mm, k)]
                merged = [self.header(mm), *merge_stats(mm, twins, keys)]
            src = _first(reduce.output_data, 0)
            if src is not None:
                for s in STATS:
                    out[s] = src.get(s)
            name = src.get(LEAF_KEYS.full_op_name, reduce.id) if src is not None else reduce.id
            mm.merge_info = [*merged, f"The output of this data is merged from {name}"]

    def first_pass(self) -> None:
        for node in list(self.main.nodes.values()):
            parent = node.parent
            if parent is None or parent.type != MODULE or parent.id in NOT_MERGED_ROOT_CHILDREN:
                continue
            if node.id.startswith("Distributed") or node.merge_info:
                continue
            direction, cls = _kind(node.id)
            if (direction == "forward" and "RowParallelLinear" in cls) or (
                direction == "backward" and "ColumnParallelLinear" in cls
            ):
                self.substitute_matmuls(node)
            twins = self.twins(node)
            if twins is not None:
                _merge(node, twins, differing_keys(node, twins), self.header(node))

    def second_pass(self) -> None:
        """Column forward .. next Row sibling: force-merge what the first pass left, except the
        replicated tensors (Column input, Row output and bias)."""
        for col in list(self.main.nodes.values()):
            direction, cls = _kind(col.id)
            if direction != "forward" or "ColumnParallelLinear" not in cls or col.parent is None:
                continue
            siblings = col.parent.children
            start = siblings.index(col)
            end = next(
                (i for i in range(start + 1, len(siblings)) if "RowParallelLinear" in siblings[i].id), None
            )
            if end is None:
                continue
            row = siblings[end]
            keep = {f"{col.id}.input.0", f"{row.id}.parameters.bias"}
            keep.update(f"{m.id}.input.0" for m in col.children if "matmul" in m.id)
            keep.update(row.output_data)
            for m in row.children:
                if "matmul" in m.id:
                    keep.update(m.output_data)
            for top in siblings[start : end + 1]:
                for node in subtree(top):
                    if node.id.startswith("Distributed") or node.merge_info:
                        continue
                    twins = self.twins(node)
                    if twins is not None:
                        keys = [k for k in differing_keys(node, twins, force=True) if k not in keep]
                        _merge(node, twins, keys, self.header(node))


def merge_tp_group(
    graphs: Sequence[Graph],
    ranks: Sequence[int],
    rank_maps: RankMaps | None = None,
    origins: Mapping[Node, int] | None = None,
) -> Graph:
    """TP-merge ``graphs`` (main first) in place into the main graph and return it. After a PP merge,
    ``rank_maps`` map the main graph's ranks onto each other graph's, and ``origins`` gives the rank
    of the nodes the PP merge moved into the main graph."""
    job = _TPMerge(graphs, ranks, rank_maps, origins)
    if job.others:  # a group of one rank (tp 1) has nothing to merge: no node gets merge info
        job.first_pass()
        job.second_pass()
    return job.main
