"""One side of a merge: the rank graphs of one step -> one merged graph per data-parallel replica.

Per strategy (§6.2): NoParallel only wraps the API collections; TP merges each tp group; PP/VPP
merge each pp group (VPP then folds the model chunks); TP+PP and Full merge each pp group first and
then TP-merge the pp-merged graphs of each tp group, translating the ``_rank{r}`` ids of one pp group
onto the other. Every merged graph keeps the rank of its group's first rank.
"""

from __future__ import annotations

from collections.abc import Sequence

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
    pp_groups,
    tp_groups,
)
from msprobe_dask.graph.merge.tp import merge_api_collections, merge_tp_group, sort_collections
from msprobe_dask.graph.merge.vpp import merge_vpp
from msprobe_dask.graph.model import Graph


def _members(by_rank: dict[int, Graph], ranks: Sequence[int], params: ParallelParams) -> list[Graph]:
    missing = [r for r in ranks if r not in by_rank]
    if missing:
        raise DumpError(
            None,
            f"[{params.side}] the parallel group {list(ranks)} names rank {missing[0]}, "
            "which has no rank folder",
        )
    return [by_rank[r] for r in ranks]


def _tp(graphs: list[Graph], ranks: Sequence[int], rank_maps=None, origins=None) -> Graph:
    merge_api_collections(graphs)
    main = merge_tp_group(graphs, ranks, rank_maps, origins)
    sort_collections(main)
    return main


def _pp(graphs: list[Graph], params: ParallelParams):
    merge_api_collections(graphs)
    result = merge_pp_group(graphs)
    if params.vpp > 1:
        merge_vpp(result, params.vpp)
    return result


def merge_side(graphs: Sequence[Graph], params: ParallelParams) -> list[Graph]:
    """Merge the rank graphs of one side and step (any order) into one graph per dp replica."""
    by_rank = {g.rank: g for g in graphs}
    ordered = [by_rank[r] for r in sorted(by_rank)]
    strategy = params.strategy
    if strategy == NO_PARALLEL:
        merge_api_collections(ordered)
        return ordered
    if strategy == TP:
        return [_tp(_members(by_rank, ranks, params), ranks) for ranks in tp_groups(ordered, params)]
    if strategy in (PP, VPP):
        return [_pp(_members(by_rank, ranks, params), params).graph for ranks in pp_groups(ordered, params)]
    assert strategy in (TP_PP, FULL)
    tp_of = tp_groups(ordered, params)
    pp_done = {}
    for ranks in pp_groups(ordered, params):
        result = _pp(_members(by_rank, ranks, params), params)
        pp_done[result.graph.rank] = result
    out = []
    for ranks in tp_of:
        heads = [r for r in ranks if r in pp_done]
        if not heads:
            continue
        results = [pp_done[r] for r in heads]
        main = results[0]
        maps = [dict(zip(main.ranks, other.ranks)) for other in results[1:]]
        origins = {n: rank for top, rank in main.moved.items() for n in subtree(top)}
        out.append(_tp([r.graph for r in results], heads, maps, origins))
    return out
