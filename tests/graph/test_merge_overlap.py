"""Parallel merges whose groups overlap or run down, against the reference's vis.db on the same layouts.

Each case writes a layout from tests/data's tp_merge or tp_pp_merge with workflows/gen_merge_replicas.py
(``regroup`` makes a rank's process groups name other ranks) and runs graph_visualize on it;
tests/data/merge_oracle/ref/<case>/ holds what msprobe 26.2.0 wrote for the same command on the same
layout (xz-compressed). What they pin (graph/merge/driver.py, tp.py, graph/node_match.py):

* overlap_tp_compare: tp groups [0,1], [1,2], [2,1] (rank 1 in three, three graphs) on both sides.
  A graph merged as another rank's keeps its API collections under their old ids: merged then as a
  main graph (rank 1 in [1,2]) it wraps its own ``Apis_Between_Modules_Rank1.k``, which no id finds,
  so that neither they nor their APIs are compared; merged again as another's (in [2,1]) it gives them
  again, their APIs ``_rank1_rank1`` in every graph that holds them (0, 1 and 2); each graph compared
  apart.
* overlap_full_build: Full (8 ranks, tp 2, pp 2) with tp groups [0,1], [2,1], [3,2]: each tp group's
  pp-merged graphs in its order (rank_list [0, 2, 3]); a moved API's ``_rank{r}`` translated by each
  tp group's first rank to its second (none for 6: not merged; a substituted matmul then gets the note
  alone), the merge info's ranks by the pp groups.
* tp_pp_down_build: TP+PP with tp groups [1,0], [3,2]: one graph of the pp groups in their order
  (rank 0), the same translation.
* tp_down_build: TP with the group [1,0]: rank 1's graph, its ``_All_Ranks`` collections in the
  group's order (Rank1, then Rank0).
"""

from __future__ import annotations

import lzma
import sys
from pathlib import Path

import pytest
from visdb_diff import diff_visdb

from msprobe_dask.cli import main as cli_main

DATA = Path(__file__).resolve().parents[1] / "data"
REF = DATA / "merge_oracle" / "ref"
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "workflows"))

from gen_merge_replicas import regroup, write_replicas  # noqa: E402

# case: (source, tp, pp, dp, {rank: its groups' ranks}, graph_visualize arguments after -tp/-gp)
CASES = {
    "overlap_tp_compare": (
        "tp_merge",
        (2, 1, 2),
        {0: [0, 1], 1: [1, 2], 2: [2, 1], 3: [2, 1]},
        ["--rank_size", "4", "4", "--tp", "2", "2", "--pp", "1", "1"],
    ),
    "overlap_full_build": (
        "tp_pp_merge",
        (2, 2, 2),
        {0: [0, 1], 1: [0, 1], 2: [2, 1], 3: [3, 2]},
        ["--rank_size", "8", "--tp", "2", "--pp", "2"],
    ),
    "tp_pp_down_build": (
        "tp_pp_merge",
        (2, 2, 1),
        {0: [1, 0], 1: [1, 0], 2: [3, 2], 3: [3, 2]},
        ["--rank_size", "4", "--tp", "2", "--pp", "2"],
    ),
    "tp_down_build": (
        "tp_merge",
        (2, 1, 1),
        {0: [1, 0], 1: [1, 0]},
        ["--rank_size", "2", "--tp", "2", "--pp", "1"],
    ),
}


def _layout(tmp_path: Path, case: str) -> tuple[Path, list[str]]:
    source, (tp, pp, dp), groups, args = CASES[case]
    dump = tmp_path / "dump"
    write_replicas(DATA / source / "target", dump, tp, pp, dp)
    for rank, ranks in groups.items():
        regroup(dump, rank, ranks)
    sides = ["-tp", str(dump), "-gp", str(dump)] if case.endswith("compare") else ["-tp", str(dump)]
    return dump, sides + args


def _reference(tmp_path: Path, case: str) -> Path:
    packed = next((REF / case).glob("*.vis.db.xz"))
    out = tmp_path / packed.name[: -len(".xz")]
    out.write_bytes(lzma.decompress(packed.read_bytes()))
    return out


@pytest.mark.parametrize("workers", [[], ["--workers", "2"]], ids=["here", "workers2"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_the_merge_gives_the_references_vis_db(tmp_path: Path, case: str, workers: list[str]) -> None:
    _, args = _layout(tmp_path, case)
    out = tmp_path / "out"
    assert cli_main(["graph_visualize", "-q", *args, *workers, "-o", str(out)]) == 0
    problems = diff_visdb(str(next(out.glob("*.vis.db"))), str(_reference(tmp_path, case)))
    assert not problems, "\n".join(problems[:20])


def test_the_cases_reach_what_they_pin(tmp_path: Path) -> None:
    """The reference's outputs show the behaviours the cases are for."""
    import sqlite3

    def rows(case: str, sql: str) -> list[tuple]:
        con = sqlite3.connect(_reference(tmp_path, case))
        try:
            return con.execute(sql).fetchall()
        finally:
            con.close()

    names = "SELECT rank, node_name FROM tb_nodes WHERE data_source = 'NPU'"
    compare = rows("overlap_tp_compare", names)
    assert {(r, "Tensor.float_rank1_rank1.1.forward") for r in range(3)} <= set(compare)  # given twice
    links = (
        "SELECT rank, matched_node_link FROM tb_nodes WHERE data_source = 'NPU' AND node_name = '{}'"
        " ORDER BY rank"
    )
    coll = rows("overlap_tp_compare", links.format("Apis_Between_Modules_Rank1.0"))
    assert [(r, link == "[]") for r, link in coll] == [(0, False), (1, True), (2, False)]
    config = "SELECT rank_list FROM tb_config"
    assert rows("overlap_full_build", config) == [("[0, 2, 3]",)]
    assert rows("tp_pp_down_build", config) == [("[0]",)]
    note_alone = rows(
        "overlap_full_build",
        "SELECT count(*) FROM tb_nodes WHERE parallel_merge_info LIKE '[\"The output of this data%'",
    )
    assert note_alone[0][0] > 0
    wrapped = rows(
        "tp_down_build", "SELECT sub_nodes FROM tb_nodes WHERE node_name = 'Apis_Between_Modules_All_Ranks.0'"
    )
    assert wrapped == [('["Apis_Between_Modules_Rank1.0", "Apis_Between_Modules_Rank0.0"]',)]
