"""One side of a merge: the rank graphs of one step -> one merged graph per data-parallel replica.

Per strategy (§6.2): NoParallel only wraps the API collections; TP merges each tp group; PP/VPP
merge each pp group (VPP then folds the model chunks); TP+PP and Full merge each pp group first and
then TP-merge the pp-merged graphs of each tp group, translating the ``_rank{r}`` ids of one pp group
onto the other. Every merged graph keeps the rank of its group's first rank.

The groups are found in the rank graphs (strategy.rank_marks); where they split the ranks into
replicas that share none (``replicas``), each replica can be built and merged alone (``merge_replica``).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from msprobe_dask.errors import DumpError
from msprobe_dask.graph.merge.pp import merge_pp_group, subtree
from msprobe_dask.graph.merge.strategy import (
    FULL,
    NO_PARALLEL,
    PP,
    TP,
    TP_PP,
    VPP,
    ParallelParams,
    RankMarks,
    pp_groups,
    rank_marks,
    tp_groups,
)
from msprobe_dask.graph.merge.tp import RankMaps, merge_api_collections, merge_tp_group, sort_collections
from msprobe_dask.graph.merge.vpp import merge_vpp
from msprobe_dask.graph.model import Graph


def _missing(side: Path, ranks: Sequence[int], rank: int, params: ParallelParams) -> DumpError:
    return DumpError(
        side, f"[{params.side}] the parallel group {list(ranks)} names rank {rank}, which has no rank folder"
    )


def _members(by_rank: dict[int, Graph], ranks: Sequence[int], params: ParallelParams) -> list[Graph]:
    missing = [r for r in ranks if r not in by_rank]
    if missing:
        raise _missing(Path(next(iter(by_rank.values())).folder).parent, ranks, missing[0], params)
    return [by_rank[r] for r in ranks]


def check_members(marks: Sequence[RankMarks], params: ParallelParams, side: Path) -> None:
    """Refuse, before any rank is built, the first group ``merge_side`` would merge of the ranks of
    ``marks`` that names a rank none of them is, as ``merge_side`` refuses it (after building them all)."""
    strategy = params.strategy
    if strategy == NO_PARALLEL:
        return
    groups = tp_groups(marks, params) if strategy == TP else pp_groups(marks, params)
    ranks = {m.rank for m in marks}
    for group in groups:
        missing = [r for r in group if r not in ranks]
        if missing:
            raise _missing(side, group, missing[0], params)


def _tp(graphs: list[Graph], ranks: Sequence[int], rank_maps=None, origins=None) -> Graph:
    merge_api_collections(graphs)
    return merge_tp_group(graphs, ranks, rank_maps, origins)


def _pp(graphs: list[Graph], params: ParallelParams):
    merge_api_collections(graphs)
    result = merge_pp_group(graphs)
    if params.vpp > 1:
        merge_vpp(result, params.vpp)
    return result


def _tp_over_pp(results: list, id_maps: Sequence[Mapping[int, int]]) -> Graph:
    """TP+PP: the pp-merged graphs of one tp group TP-merged, the ``_rank{r}`` ids of the first
    translated onto each other's by ``id_maps`` (``_id_maps``); the ranks a moved node's data comes
    from are its pp group's twins in the others' pp groups."""
    main = results[0]
    header_maps = [dict(zip(main.ranks, other.ranks)) for other in results[1:]]
    origins = {n: rank for top, rank in main.moved.items() for n in subtree(top)}
    graphs = [r.graph for r in results]
    main = _tp(graphs, [g.rank for g in graphs], RankMaps(id_maps, header_maps), origins)
    sort_collections(main)  # (a TP merge alone keeps its group's order: [1, 0] gives Rank1, Rank0)
    return main


def _id_maps(tp_of: Sequence[Sequence[int]], count: int, main: Sequence[int]) -> list[dict[int, int]]:
    """For the i-th other graph of a TP merge over pp-merged graphs (of ``count``; the first merged of
    the pp group ``main``), the rank each tp group's first rank is translated to: that group's i-th
    (the reference's, over every tp group; the same as the twins' pp groups give when the tp groups are
    Megatron's, none for a rank that begins no tp group: where the groups overlap or run down, the moved
    APIs of such a rank find no twin). Only the ranks of ``main`` are kept: the only ``_rank{r}`` of
    the main graph's ids (a replica task's plan would otherwise carry every tp group for each replica)."""
    keep = set(main)
    return [{g[0]: g[i] for g in tp_of if len(g) > i and g[0] in keep} for i in range(1, count)]


def _head_groups(strategy: str, tp_of: Sequence[Sequence[int]], pp_heads: Sequence[int]) -> list[list[int]]:
    """The pp-merged graphs (by their group's first rank) each TP merge takes: TP+PP all of them, in the
    pp groups' order (one graph); Full those each tp group holds, in its order."""
    if strategy == TP_PP:
        return [list(pp_heads)]
    return [heads for group in tp_of if (heads := [r for r in group if r in pp_heads])]


def merge_side(graphs: Sequence[Graph], params: ParallelParams) -> list[Graph]:
    """Merge the rank graphs of one side and step (any order) into one graph per dp replica, each a
    copy with nodes of its own: where the groups overlap, a rank in two of them gives its API
    collections to the first group's graph and keeps them in its own (tp.merge_api_collections), and
    the reference compares each merged graph apart (the compare of one not seen in the other)."""
    return [copy.deepcopy(g) for g in _merged_side(graphs, params)]


def _merged_side(graphs: Sequence[Graph], params: ParallelParams) -> list[Graph]:
    """``merge_side``'s graphs, before they are copied."""
    by_rank = {g.rank: g for g in graphs}
    ordered = [by_rank[r] for r in sorted(by_rank)]
    strategy = params.strategy
    if strategy == NO_PARALLEL:
        merge_api_collections(ordered)
        return ordered
    marks = [rank_marks(g) for g in ordered]
    if strategy == TP:
        return [_tp(_members(by_rank, ranks, params), ranks) for ranks in tp_groups(marks, params)]
    if strategy in (PP, VPP):
        return [_pp(_members(by_rank, ranks, params), params).graph for ranks in pp_groups(marks, params)]
    assert strategy in (TP_PP, FULL)
    tp_of = tp_groups(marks, params)
    pp_done = {}
    for ranks in pp_groups(marks, params):
        result = _pp(_members(by_rank, ranks, params), params)
        pp_done[result.graph.rank] = result
    return [
        _tp_over_pp([pp_done[r] for r in heads], _id_maps(tp_of, len(heads), pp_done[heads[0]].ranks))
        for heads in _head_groups(strategy, tp_of, list(pp_done))
    ]


class Replica(NamedTuple):
    """The ranks of one merged graph: ``tp`` TP-merged (TP; TP+PP: the heads of ``pp``), each group of
    ``pp`` PP-merged first."""

    tp: list[int]
    pp: list[list[int]]
    id_maps: list[dict[int, int]] = []  # (TP+PP: driver._id_maps)

    @property
    def members(self) -> list[int]:
        return self.tp + [r for group in self.pp for r in group if r not in self.tp]


def replicas(marks: Sequence[RankMarks], params: ParallelParams) -> list[Replica] | None:
    """The replicas ``merge_side`` makes of the ranks of ``marks`` (by rank), in its order; None where
    its groups do not split the ranks into replicas that share none (a rank in two groups or in none,
    a group naming a rank that is not there, a pp group no tp group takes): ``merge_side`` then merges
    the side whole, as its graphs are changed by each group they are in."""
    strategy = params.strategy
    if strategy == NO_PARALLEL:
        out = [Replica([m.rank], []) for m in marks]
    elif strategy == TP:
        out = [Replica(group, []) for group in tp_groups(marks, params)]
    elif strategy in (PP, VPP):
        out = [Replica([], [group]) for group in pp_groups(marks, params)]
    else:
        pp_of = {group[0]: group for group in pp_groups(marks, params)}
        tp_of = tp_groups(marks, params)
        out = [
            Replica(heads, [pp_of[r] for r in heads], _id_maps(tp_of, len(heads), pp_of[heads[0]]))
            for heads in _head_groups(strategy, tp_of, list(pp_of))
        ]
        if sum(len(rep.tp) for rep in out) != len(pp_of):
            return None
    members = sorted(r for rep in out for r in rep.members)
    return out if members == [m.rank for m in marks] else None


def merge_replica(by_rank: Mapping[int, Graph], replica: Replica, params: ParallelParams) -> Graph:
    """The merged graph of ``replica`` (of ``replicas``) from the graphs of its members, as
    ``merge_side`` makes it."""
    strategy = params.strategy
    if strategy == NO_PARALLEL:
        graphs = [by_rank[r] for r in replica.tp]
        merge_api_collections(graphs)
        return graphs[0]
    if strategy == TP:
        return _tp([by_rank[r] for r in replica.tp], replica.tp)
    if strategy in (PP, VPP):
        return _pp([by_rank[r] for r in replica.pp[0]], params).graph
    return _tp_over_pp([_pp([by_rank[r] for r in group], params) for group in replica.pp], replica.id_maps)
