"""A step or rank one side holds and the other not is named in one wording by compare and graph_visualize
(dump/source.one_side_warnings: ``step2 only in the target; not compared``), every layout alike."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import DATA, case_dir

from msprobe_dask.cli import main

COMMANDS = {
    "compare": ["compare", "--skip-missing-ranks"],
    "graph_visualize": ["graph_visualize"],
}


def _warnings(
    command: str, case: str, tmp_path: Path, drops: dict[str, list[str]], caplog: pytest.LogCaptureFixture
) -> list[str]:
    sides = []
    for side in ("target", "golden"):
        copy = Path(shutil.copytree(case_dir(case) / side, tmp_path / side))
        for folder in drops.get(side, []):
            shutil.rmtree(copy / folder)
        sides.append(copy)
    argv = [*COMMANDS[command], "-q", "-tp", str(sides[0]), "-gp", str(sides[1]), "-o", str(tmp_path / "out")]
    caplog.clear()
    assert main(argv) == 0
    return caplog.messages


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_step_on_one_side(command: str, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    messages = _warnings(command, "multistep", tmp_path, {"golden": ["step2"]}, caplog)
    assert messages == ["step2 only in the target; not compared"]


@pytest.mark.parametrize("command", list(COMMANDS))
def test_ranks_on_one_side(command: str, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    drops = {"target": ["step0/rank3", "step1/rank3"], "golden": ["step0/rank1", "step1/rank1"]}
    assert _warnings(command, "multirank", tmp_path, drops, caplog) == [
        "step0/rank1, step1/rank1 only in the target; not compared",
        "step0/rank3, step1/rank3 only in the golden; not compared",
    ]


def test_a_kernel_dumps_rank_and_step_on_one_side(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """(kernel_npy: rank 2 only in the target, step 2 only in the golden)"""
    target, golden = DATA / "kernel_npy" / "target", DATA / "kernel_npy" / "golden"
    assert main(["compare", "-q", "-tp", str(target), "-gp", str(golden), "-o", str(tmp_path)]) == 0
    assert caplog.messages == [
        "step0/rank2 only in the target; not compared",
        "step2/rank0 only in the golden; not compared",
    ]
