"""graph_visualize on step*/rank*/ trees where a rank or a step is on one side only. The reference
compares the (step, rank) pairs both sides hold, ranks paired by id, and says nothing of the others;
we compare the same pairs (the vis.db is the reference's) and name the others in a warning line."""

from __future__ import annotations

import shutil
import sqlite3
import sys
from pathlib import Path

import pytest
from conftest import DATA, case_dir

from msprobe_dask.cli import main

sys.path.insert(0, str(Path(__file__).parent))
from visdb_diff import diff_visdb  # noqa: E402


def _copies(case: str, tmp_path: Path, target_drops: list[str], golden_drops: list[str]) -> tuple[Path, Path]:
    sides = []
    for side, drops in (("target", target_drops), ("golden", golden_drops)):
        copy = Path(shutil.copytree(case_dir(case) / side, tmp_path / side))
        for folder in drops:
            shutil.rmtree(copy / folder)
        sides.append(copy)
    return sides[0], sides[1]


def _visualize(target: Path, golden: Path, out: Path) -> Path:
    assert main(["graph_visualize", "-q", "-tp", str(target), "-gp", str(golden), "-o", str(out)]) == 0
    (path,) = out.glob("*.vis.db")
    return path


def test_ranks_on_one_side_are_named_and_the_others_compared_as_the_reference(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    drops = (["step0/rank3", "step1/rank3"], ["step0/rank1", "step1/rank1"])
    target, golden = _copies("multirank", tmp_path, *drops)
    ours = _visualize(target, golden, tmp_path / "out")
    assert caplog.messages == [
        "step0/rank1, step1/rank1 only in the target; not compared",
        "step0/rank3, step1/rank3 only in the golden; not compared",
    ]
    (ref,) = (DATA / "multirank" / "ref" / "vis_ranks_one_side_only").glob("*.vis.db")
    assert diff_visdb(str(ours), str(ref)) == []


def test_a_step_on_one_side_is_named_and_the_others_compared(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    target, golden = _copies("multistep", tmp_path, [], ["step2"])
    ours = _visualize(target, golden, tmp_path / "out")
    assert caplog.messages == ["step2 only in the target; not compared"]
    with sqlite3.connect(ours) as db:
        assert db.execute("SELECT DISTINCT step FROM tb_nodes ORDER BY step").fetchall() == [(0,), (1,)]


def test_the_report_compares_the_ranks_the_graphs_compared(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """--report compares the dumps row by row again: the same (step, rank) pairs as the vis.db, where it
    said 'no report' (naming compare's --skip-missing-ranks, a flag graph_visualize has not)."""
    target, golden = _copies("multirank", tmp_path, ["step0/rank3", "step1/rank3"], [])
    out = tmp_path / "out"
    args = ["graph_visualize", "-q", "--report", "-tp", str(target), "-gp", str(golden), "-o", str(out)]
    assert main(args) == 0
    assert "no report" not in capsys.readouterr().err
    assert caplog.messages == ["step0/rank3, step1/rank3 only in the golden; not compared"]
    (report,) = out.glob("report_*.html")
    text = report.read_text()
    assert "step1/rank2" in text and "rank3" not in text
