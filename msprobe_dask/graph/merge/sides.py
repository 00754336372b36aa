"""One side of a parallel merge, a step at a time: its rank folders, the marks tasks that read each
rank's groups (graph/merge/marks.py) and the groups task that makes them its replicas (SidePlan); then,
in a replica task, the merged graphs of its run of replicas, one replica at a time (``merged_replicas``).
graph/merge/plan.py lays these tasks out with the replica tasks and the vis.db's write chain."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from msprobe_dask.dump import graph_layouts as layout
from msprobe_dask.errors import DumpError
from msprobe_dask.graph.chunks import let_go
from msprobe_dask.graph.merge.driver import Replica, check_members, merge_replica, merge_side, replicas
from msprobe_dask.graph.merge.marks import read_marks
from msprobe_dask.graph.merge.strategy import ParallelParams, RankMarks, validate
from msprobe_dask.graph.model import Graph
from msprobe_dask.graph.tasks import build_task


def rank_folders(path: Path) -> list[tuple[int, str]]:
    """(rank, folder) of a merge input: only ``rank<N>`` folders are allowed (no ``proc<pid>``)."""
    for name in os.listdir(path):
        if not (layout.RANK_DIR.match(name) and (path / name).is_dir()):
            raise DumpError(path / name, "is not a rank<N> folder: a graph merge takes only rank folders")
    return [(r, str(path / n)) for r, n in layout.rank_dirs(path)]


MARK_RANKS = 16
"""The ranks a marks task reads (16 ranks of tp_pp_merge: about 0.03 s of CPU; 384 ranks, 24 tasks)."""


class SidePlan(NamedTuple):
    """One side's rank folders (rank, folder) of a step and its replicas (None: merged whole)."""

    params: ParallelParams
    folders: list[tuple[int, str]]
    replicas: list[Replica] | None


def marks_of(folders: list[tuple[int, str]], step: int) -> list[RankMarks]:
    """The marks of these ranks (marks.read_marks)."""
    return [read_marks(f, step, r) for r, f in folders]


def side_plan(folders: list[tuple[int, str]], params: ParallelParams, *marks: list[RankMarks]) -> SidePlan:
    """The side's replicas, from its marks tasks' (in rank order); groups that name a rank no folder
    holds are refused here, before the side is built whole."""
    found = [m for batch in marks for m in batch]
    split = replicas(found, params)
    if split is None and folders:
        check_members(found, params, Path(folders[0][1]).parent)
    return SidePlan(params, folders, split)


def lazy_side_plan(path: Path, step: int, params: ParallelParams, first: bool):
    """The lazy SidePlan of one side and step (validating the parameters on the first step)."""
    import dask

    folders = rank_folders(path)
    if first:
        validate(params, len(folders))
    name = f"{step}-{params.side}"
    marks = [
        dask.delayed(marks_of, pure=True)(
            folders[j : j + MARK_RANKS], step, dask_key_name=f"marks-{name}-{j}"
        )
        for j in range(0, len(folders), MARK_RANKS)
    ]
    return dask.delayed(side_plan, pure=True)(folders, params, *marks, dask_key_name=f"groups-{name}")


def _replica_graph(plan: SidePlan, step: int, i: int) -> tuple[Graph, list[Graph]]:
    """The merged graph of replica ``i`` and the rank graphs it was made of (its ranks built and merged)."""
    assert plan.replicas is not None
    replica, folder = plan.replicas[i], dict(plan.folders)
    built = {r: build_task(folder[r], step, r) for r in replica.members}
    return merge_replica(built, replica, plan.params), list(built.values())


def _merged(plan: SidePlan, step: int) -> list[Graph]:
    """Every merged graph of the side."""
    if plan.replicas is None:
        return merge_side([build_task(f, step, r) for r, f in plan.folders], plan.params)
    return [_replica_graph(plan, step, i)[0] for i in range(len(plan.replicas))]


def replica_count(merged: list[int], where: str) -> int:
    if len(set(merged)) > 1:
        raise DumpError(
            where,
            f"parallel merge failed: the NPU side merges into {merged[0]} dp replicas, the Bench side into "
            f"{merged[1]}",
        )
    return merged[0]


def _block(k: int, total: int, count: int) -> range:
    """The replicas of the task k of ``count``, of ``total``: a run of them, so that the tasks in turn
    give them in order (the write chain)."""
    return range(k * total // count, (k + 1) * total // count)


def merged_replicas(
    plans: list[SidePlan], where: str, step: int, k: int, count: int, kept: bool = False
) -> Iterator[tuple[int, list[Graph]]]:
    """(i, the merged graph of replica i of each side) for the replicas of the task k of ``count``
    (``_block``), one replica at a time, each let go (chunks.let_go) when the next is asked for, unless
    ``kept``; where a side is merged whole, every replica in the task k = 0 (none in the others)."""
    if any(p.replicas is None for p in plans):
        if k == 0:
            merged = [_merged(p, step) for p in plans]
            replica_count([len(m) for m in merged], where)
            yield from enumerate(map(list, zip(*merged)))
        return
    total = replica_count([len(p.replicas or ()) for p in plans], where)
    for i in _block(k, total, count):
        made = [_replica_graph(p, step, i) for p in plans]
        yield i, [g for g, _ in made]
        if not kept:
            let_go([g for merged, built in made for g in (merged, *built)])


def replica_tasks(params: ParallelParams) -> int:
    """The replica tasks of a step: one a data-parallel replica that ``params`` give (the groups found
    may make more or fewer: a task then merges a run of them, or none)."""
    return max(1, params.rank_size // (params.tp * params.pp))
