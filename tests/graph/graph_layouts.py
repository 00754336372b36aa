"""Inputs of graph_visualize's layouts of many ranks, for the tests that kill its workers
(tests/hostile/test_layout_kills.py on local worker processes, tests/pipeline/test_cluster_failure.py
on a cluster): each gives the command's input flags, writing what it generates into ``folder``."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data"


def ranks(folder: Path) -> list[str]:
    """A tree of 4 ranks a side (tests/data/multirank): on two local worker processes one task makes
    each rank (graph/run_setup.one_task_a_rank), leaving its chunks' rows and its Part in spool files;
    on a cluster each rank's builds, chunks and inserts are tasks of their own."""
    tree = DATA / "multirank"
    return ["-tp", str(tree / "target" / "step0"), "-gp", str(tree / "golden" / "step0")]


def merge(folder: Path) -> list[str]:
    """Two data-parallel replicas a side (tests/graph/test_merge_replicas.py), TP/PP merged a replica a
    task (graph/merge/plan.py); on local worker processes each replica's rows go through a spool file
    to their one reader."""
    sys.path.insert(0, str(DATA.parents[1] / "workflows"))
    from gen_merge_replicas import write_replicas

    write_replicas(DATA / "pp_merge" / "target", folder / "target", tp=1, pp=2, dp=2)
    write_replicas(DATA / "pp_merge" / "golden", folder / "golden", tp=1, pp=1, dp=2)
    parallel = ["--rank_size", "4", "2", "--tp", "1", "1", "--pp", "2", "1"]
    return ["-tp", str(folder / "target"), "-gp", str(folder / "golden"), *parallel]


LAYOUTS: dict[str, Callable[[Path], list[str]]] = {"ranks": ranks, "merge": merge}
