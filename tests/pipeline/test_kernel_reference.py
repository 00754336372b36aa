"""MindSpore static-graph kernel compare (compare.md §2.5) against the reference's own outputs.

tests/data/kernel_npy (``*.npy`` leaves, ``rank_{R}/Net/{graph}/{step}``) and kernel_stat
(``statistic.csv`` leaves, ``{time}/{device}/Net/1/{iteration}``) were written by
workflows/gen_kernel_dump.py; ref/ holds the reference's results (commands in ref/commands.txt, run with
an import shim because the reference needs MindSpore installed to reach its kernel compare). Every csv
is equal cell for cell and every xlsx value for value and type, after mapping the absolute input paths
the reference wrote (its run's tests/data folder) onto ours.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import openpyxl
import pytest
from conftest import DATA, read_csv

from msprobe_dask.cli import main

REF_ROOT = "/work/main/tests/data/"  # where the reference ran (see ref/commands.txt)
OUR_ROOT = os.path.realpath(DATA) + "/"
STAMP = re.compile(r"_\d{14}(?=\.(csv|xlsx)$)")


def kernel_compare(out: Path, case: str, *extra: str, target: str = "", golden: str = "") -> int:
    tp = DATA / (target or f"{case}/target")
    gp = DATA / (golden or f"{case}/golden")
    return main(["compare", "-q", "-tp", str(tp), "-gp", str(gp), "-o", str(out), *extra])


def outputs(folder: Path) -> dict[str, Path]:
    """Result files by name without the time stamp."""
    return {STAMP.sub("", p.name): p for p in folder.glob("compare_result_*") if not p.name.startswith(".")}


def ours_root(cell: object) -> object:
    return cell.replace(REF_ROOT, OUR_ROOT) if isinstance(cell, str) else cell


def assert_same_csv(ours: Path, ref: Path) -> None:
    mine, theirs = read_csv(ours), [[ours_root(c) for c in row] for row in read_csv(ref)]
    assert mine[0] == theirs[0]
    assert len(mine) == len(theirs)
    for i, (a, b) in enumerate(zip(mine, theirs)):
        assert a == b, (
            f"{ours.name} row {i}: {[(mine[0][k], x, y) for k, (x, y) in enumerate(zip(a, b)) if x != y]}"
        )


CSV_RUNS = [
    ("kernel_npy", "compare_csv", ["--rank", "0,1", "--step", "0,1"]),
    ("kernel_npy", "compare_rank1_csv", ["--rank", "1"]),
    ("kernel_npy", "compare_step1_csv", ["--rank", "0,1,2", "--step", "1"]),
    ("kernel_stat", "compare_csv", ["--rank", "0,1"]),
]


@pytest.mark.parametrize(("case", "run", "extra"), CSV_RUNS)
def test_csv_equals_reference(case: str, run: str, extra: list[str], tmp_path: Path) -> None:
    assert kernel_compare(tmp_path, case, *extra) == 0
    ours, ref = outputs(tmp_path), outputs(DATA / case / "ref" / run)
    assert sorted(ours) == sorted(ref)
    for name in ref:
        assert_same_csv(ours[name], ref[name])


def _cells(path: Path) -> list[list[openpyxl.cell.Cell]]:
    book = openpyxl.load_workbook(path)
    assert book.sheetnames == ["Sheet1"]
    return [list(row) for row in book.active.iter_rows()]


@pytest.mark.parametrize("case", ["kernel_npy", "kernel_stat"])
def test_xlsx_equals_reference(case: str, tmp_path: Path) -> None:
    """Value and type of every cell; the reference fills nothing, and neither do we in this mode."""
    assert kernel_compare(tmp_path, case, "--rank", "0,1", "--xlsx") == 0
    ours, ref = outputs(tmp_path), outputs(DATA / case / "ref" / "compare_xlsx")
    assert sorted(ours) == sorted(ref)
    for name in ref:
        mine, theirs = _cells(ours[name]), _cells(ref[name])
        assert len(mine) == len(theirs)
        for a_row, b_row in zip(mine, theirs):
            assert len(a_row) == len(b_row)
            for a, b in zip(a_row, b_row):
                expected = ours_root(b.value)
                assert (a.value, type(a.value)) == (expected, type(expected)), f"{name} {a.coordinate}"
                assert a.fill.fill_type is None and b.fill.fill_type is None


def test_every_common_rank_and_step_without_flags(tmp_path: Path) -> None:
    """D15: a kernel dump is recognised without --rank (the reference needs it, or it fails looking for
    proc folders); all (rank, step) pairs in both dumps are compared, as --rank 0,1 --step 0,1 does here
    (rank 2 is only in the target, step 2 only in the golden). --step alone filters steps."""
    assert kernel_compare(tmp_path / "all", "kernel_npy") == 0
    ref = outputs(DATA / "kernel_npy" / "ref" / "compare_csv")
    ours = outputs(tmp_path / "all")
    assert sorted(ours) == sorted(ref)
    for name in ref:
        assert_same_csv(ours[name], ref[name])
    assert kernel_compare(tmp_path / "step1", "kernel_npy", "--step", "1") == 0
    assert sorted(outputs(tmp_path / "step1")) == sorted(
        outputs(DATA / "kernel_npy" / "ref" / "compare_step1_csv")
    )


def test_worker_processes_give_the_same_files(tmp_path: Path) -> None:
    """The per-(rank, step) tasks run in two local worker processes: same files, cell for cell."""
    assert kernel_compare(tmp_path, "kernel_stat", "--workers", "2") == 0
    ours, ref = outputs(tmp_path), outputs(DATA / "kernel_stat" / "ref" / "compare_csv")
    assert sorted(ours) == sorted(ref)
    for name in ref:
        assert_same_csv(ours[name], ref[name])


def test_reference_runs_we_refuse(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """D16: no (rank, step) in common, or npy against statistic.csv data: the reference exits 0 and
    writes nothing (the second with an ERROR log line); we exit 2 with one line and write nothing."""
    for case, run in (("kernel_npy", "compare_no_common"), ("kernel_stat", "compare_mode_mismatch")):
        commands = (DATA / case / "ref" / "commands.txt").read_text()
        assert re.search(rf"\[{run}\]\n.*\n  rc=0\n  outputs: \n", commands), run
    assert kernel_compare(tmp_path / "a", "kernel_npy", "--rank", "2") == 2
    assert "no (rank, step) is in both kernel dumps within --rank/--step" in capsys.readouterr().err
    assert kernel_compare(tmp_path / "b", "", target="kernel_npy/target", golden="kernel_stat/golden") == 2
    assert "holds statistic data but the target's rank 0 step 0 holds npy data" in capsys.readouterr().err
    assert not list(tmp_path.rglob("compare_result*"))
