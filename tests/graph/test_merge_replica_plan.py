"""A merge's replicas known before its build (graph/merge/driver.replicas, from each rank's marks): each
replica's ranks built and merged alone give the graph the whole side's merge gives it; groups that do not
split the ranks into replicas merge the side whole (graph/merge/sides.py: the first replica task)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from msprobe_dask.errors import DumpError
from msprobe_dask.graph.merge.driver import Replica, merge_side, replicas
from msprobe_dask.graph.merge.export_json import graph_documents
from msprobe_dask.graph.merge.sides import SidePlan, marks_of, merged_replicas, rank_folders, side_plan
from msprobe_dask.graph.merge.strategy import ParallelParams, RankMarks
from msprobe_dask.graph.tasks import build_task

DATA = Path(__file__).resolve().parents[1] / "data" / "tp_pp_merge"
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "workflows"))

from gen_merge_replicas import write_replicas  # noqa: E402


def _unmarked(count: int) -> list[RankMarks]:
    return [RankMarks(r, None, None) for r in range(count)]


def test_the_default_groups_split_into_replicas() -> None:
    # graph_visualize.md 6.2: (8, tp2, pp2): tp [[0,1],[2,3],[4,5],[6,7]], pp [[0,4],[1,5],[2,6],[3,7]]
    # (the ranks of the first pp group, each the first of a tp group -> its second)
    assert replicas(_unmarked(8), ParallelParams(8, 2, 2)) == [
        Replica([0, 1], [[0, 4], [1, 5]], [{0: 1, 4: 5}]),
        Replica([2, 3], [[2, 6], [3, 7]], [{2: 3, 6: 7}]),
    ]
    assert replicas(_unmarked(8), ParallelParams(8, 2, 1)) == [
        Replica([r, r + 1], []) for r in range(0, 8, 2)
    ]
    assert replicas(_unmarked(4), ParallelParams(4, 1, 2, 2)) == [
        Replica([], [[0, 2]]),
        Replica([], [[1, 3]]),
    ]


@pytest.mark.parametrize(
    "marks, params",
    [
        # tp groups found that share rank 1 (and leave rank 3 out)
        (
            [RankMarks(0, [0, 1], None), RankMarks(1, [1, 2], None), *_unmarked(4)[2:]],
            ParallelParams(4, 2, 1),
        ),
        # a tp group naming rank 4, which is not there
        ([RankMarks(0, [0, 4], None), *_unmarked(4)[1:]], ParallelParams(4, 2, 1)),
        # Full (dp 2): pp chains 0 -> 4 and 1 -> 5, tp groups [0, 1] and [1, 0]: the heads 0 and 1 in
        # two replicas
        ([RankMarks(0, [0, 1], 4), RankMarks(1, [1, 0], 5), *_unmarked(8)[2:]], ParallelParams(8, 2, 2)),
        # the same chains, a tp group [0, 2] (no head but 0): the pp group of 1 in no replica
        ([RankMarks(0, [0, 2], 4), RankMarks(1, None, 5), *_unmarked(8)[2:]], ParallelParams(8, 2, 2)),
    ],
    ids=["shared", "missing", "heads", "unused"],
)
def test_groups_that_do_not_split_the_ranks_merge_the_side_whole(marks, params) -> None:
    assert replicas(marks, params) is None


@pytest.mark.parametrize(
    "tp_0, tp_1, ids",
    [([0, 1], [1, 0], [{0: 1}]), ([0, 2], None, [{0: 2}])],
    ids=["heads", "unused"],
)
def test_tp_and_pp_merge_every_pp_group_into_one_graph(tp_0, tp_1, ids) -> None:
    # graph_visualize.md 6.2 (tp * pp = rank_size): one graph of the pp groups in their order, whatever
    # the tp groups found (the reference on tp_pp_merge with these groups: rank_list [0])
    marks = [RankMarks(0, tp_0, 2), RankMarks(1, tp_1, 3), *_unmarked(4)[2:]]
    assert replicas(marks, ParallelParams(4, 2, 2)) == [Replica([0, 1], [[0, 2], [1, 3]], ids)]


def test_each_replica_merged_alone_is_the_whole_sides(tmp_path: Path) -> None:
    write_replicas(DATA / "target", tmp_path, tp=2, pp=2, dp=3)
    folders, params = rank_folders(tmp_path), ParallelParams(12, 2, 2)
    plan = side_plan(folders, params, marks_of(folders[:5], 0), marks_of(folders[5:], 0))
    assert plan.replicas == [
        Replica(
            [2 * i, 2 * i + 1],
            [[2 * i, 2 * i + 6], [2 * i + 1, 2 * i + 7]],
            [{2 * i: 2 * i + 1, 2 * i + 6: 2 * i + 7}],
        )
        for i in range(3)
    ]
    whole = merge_side([build_task(f, 0, r) for r, f in folders], params)
    by_task = [[(i, g) for i, (g,) in merged_replicas([plan], "", 0, k, 2, kept=True)] for k in range(2)]
    assert [[(i, g.rank) for i, g in task] for task in by_task] == [[(0, 0)], [(1, 2), (2, 4)]]
    assert [graph_documents(g) for task in by_task for _, g in task] == [graph_documents(g) for g in whole]
    in_one = SidePlan(params, folders, None)
    assert [i for i, _ in merged_replicas([in_one], "", 0, 1, 2)] == []  # (the task k = 0 merges it whole)
    assert [graph_documents(g) for _, (g,) in merged_replicas([in_one], "", 0, 0, 2)] == [
        graph_documents(g) for g in whole
    ]


def test_a_group_naming_a_rank_no_folder_holds_is_refused_before_any_build() -> None:
    folders = [(r, f"/dump/rank{r}") for r in range(4)]
    marks = [RankMarks(0, [0, 4], None), *_unmarked(4)[1:]]
    with pytest.raises(DumpError) as refused:
        side_plan(folders, ParallelParams(4, 2, 1), marks)
    assert str(refused.value.path) == "/dump" and "[NPU] the parallel group [0, 4] names rank 4" in str(
        refused.value
    )
