"""Kernel compare on bad input: exit 2, one line naming the flag or the file, no result file at all
(the broken (rank, step) is the last one compared, so a partial run would have written the others)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import DATA

from msprobe_dask.cli import main

HEADER = (
    "Op Type,Op Name,Task ID,Stream ID,Timestamp,IO,Slot,Data Size,Data Type,Shape,Max Value,Min Value,"
    "L2Norm Value\n"
)
LINE = 'Add,Default--Add-op1,3,0,1717200000000001,output,0,48,float32,"(4,3)",1.5,-2.0,3.25\n'
NPY = "Add.Default--Add-op1.3.0.1717200000000001.output.0.DefaultFormat.npy"


def run(out: Path, target: Path, golden: Path, *extra: str) -> int:
    return main(["compare", "-q", "-tp", str(target), "-gp", str(golden), "-o", str(out), *extra])


def assert_refused(capsys: pytest.CaptureFixture[str], out: Path, *words: str) -> None:
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    for word in words:
        assert word in lines[0], lines[0]
    assert not out.exists() or not any(out.iterdir())


def two_steps(root: Path, step1: str, name: str = "statistic.csv") -> tuple[Path, Path]:
    """A target and a golden tree, rank 0 steps 0 and 1; the target's step 1 holds ``step1``."""
    for side in ("target", "golden"):
        for step in (0, 1):
            leaf = root / side / "rank_0" / "Net" / "1" / str(step)
            leaf.mkdir(parents=True)
            bad = side == "target" and step == 1
            (leaf / name).write_text(step1 if bad else HEADER + LINE)
    return root / "target", root / "golden"


@pytest.mark.parametrize("value", ["a", "0,x", "-1", "1,,2", ""])
def test_rank_that_is_not_a_list_of_ids(
    value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    npy = DATA / "kernel_npy"
    assert run(tmp_path / "out", npy / "target", npy / "golden", "--rank", value) == 2
    assert_refused(capsys, tmp_path / "out", "--rank", "comma list")


def test_rank_on_a_dump_json_tree(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The reference runs its kernel compare on it, finds nothing and exits 0 (D16)."""
    step = DATA / "multirank" / "target" / "step0"
    assert run(tmp_path / "out", step, step, "--rank", "0") == 2
    assert_refused(capsys, tmp_path / "out", str(step), "not a MindSpore static-graph kernel dump")


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", ["is empty"]),
        ("Op Type,Op Name,Task ID,Stream ID,Timestamp,IO,Slot\n", ["has 7 columns", "at least 13"]),
        (HEADER + LINE[:-10] + "\n", ["line 2 has 12 fields, the header has 13"]),
        (HEADER + LINE.replace("1.5", "abc"), ["line 2", "Max Value 'abc' is not a number"]),
        (HEADER + LINE.replace("1.5", ""), ["line 2", "Max Value '' is not a number"]),
        (HEADER + LINE.replace("1717200000000001", "soon"), ["line 2", "Timestamp 'soon'"]),
    ],
)
def test_malformed_statistic_csv(
    text: str, words: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target, golden = two_steps(tmp_path, text)
    assert run(tmp_path / "out", target, golden) == 2
    assert_refused(
        capsys, tmp_path / "out", str(target / "rank_0" / "Net" / "1" / "1" / "statistic.csv"), *words
    )


def _npy_trees(root: Path) -> tuple[Path, Path, Path]:
    for side in ("target", "golden"):
        for step in (0, 1):
            leaf = root / side / "rank_0" / "Net" / "1" / str(step)
            leaf.mkdir(parents=True)
            np.save(leaf / NPY, np.arange(12, dtype=np.float32))
    return root / "target", root / "golden", root / "target" / "rank_0" / "Net" / "1" / "1" / NPY


def test_truncated_npy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target, golden, bad = _npy_trees(tmp_path)
    bad.write_bytes(bad.read_bytes()[:-8])
    assert run(tmp_path / "out", target, golden) == 2
    assert_refused(capsys, tmp_path / "out", str(bad), "truncated")


def test_npy_of_python_objects_is_not_unpickled(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target, golden, bad = _npy_trees(tmp_path)
    np.save(bad, np.array([{"x": 1}], dtype=object), allow_pickle=True)
    assert run(tmp_path / "out", target, golden, "--workers", "1") == 2  # the problem crosses processes too
    assert_refused(capsys, tmp_path / "out", str(bad), "Python objects")


def test_one_side_npy_the_other_statistic(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target, golden, bad = _npy_trees(tmp_path)
    leaf = golden / "rank_0" / "Net" / "1" / "1"
    shutil.rmtree(leaf)
    leaf.mkdir()
    (leaf / "statistic.csv").write_text(HEADER + LINE)
    assert run(tmp_path / "out", target, golden) == 2
    assert_refused(capsys, tmp_path / "out", str(leaf), "statistic data", "rank 0 step 1 holds npy data")


def test_one_step_in_two_formats(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two graphs of one (rank, step) are compared as one: they must be in the same format."""
    target, golden, _ = _npy_trees(tmp_path)
    other = target / "rank_0" / "Net" / "2" / "1"
    other.mkdir(parents=True)
    (other / "statistic.csv").write_text(HEADER + LINE)
    assert run(tmp_path / "out", target, golden) == 2
    assert_refused(capsys, tmp_path / "out", str(other), "holds a statistic.csv while")


def test_statistic_csv_without_its_header_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """D21: read as a header, a data line leaves every statistic empty: refused rather than all-NaN rows."""
    target, golden = two_steps(tmp_path, LINE * 2)
    assert run(tmp_path / "out", target, golden) == 2
    assert_refused(capsys, tmp_path / "out", "statistic.csv", "line 1 is not a header")


@pytest.mark.parametrize("kind", ["npy", "statistic"])
def test_file_symlinked_out_of_the_dump_is_refused(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """D20: a kernel dump's file that is a symlink out of the dump is refused."""
    if kind == "npy":
        target, golden, bad = _npy_trees(tmp_path / "dumps")
    else:
        target, golden = two_steps(tmp_path / "dumps", HEADER + LINE)
        bad = target / "rank_0" / "Net" / "1" / "1" / "statistic.csv"
    outside = tmp_path / f"elsewhere{bad.suffix}"
    bad.rename(outside)
    bad.symlink_to(outside)
    assert run(tmp_path / "out", target, golden) == 2
    assert_refused(capsys, tmp_path / "out", str(bad), f"resolves to {outside}, outside")


def test_refused_run_removes_the_folders_it_made(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    npy = DATA / "kernel_npy"
    assert run(tmp_path / "new" / "out", npy / "target", npy / "golden", "--rank", "9") == 2
    assert_refused(capsys, tmp_path / "new", "no (rank, step) is in both kernel dumps")
    assert not (tmp_path / "new").exists()


KERNEL_IGNORED = [  # (the flag as given, then as named in the refusal)
    (["-tensor_log"], "-tensor_log"),
    (["--is_print_compare_log"], "-tensor_log"),
    (["-fm"], "-fm"),
    (["-am"], "-am"),
    (["-cm", "map.yaml"], "-cm"),
    (["-dm", "map.yaml"], "-dm"),
    (["--layer_mapping"], "-lm"),
]


@pytest.mark.parametrize(("given", "named"), KERNEL_IGNORED)
def test_flags_the_kernel_compare_ignores_are_refused(
    given: list[str], named: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The reference accepts them on kernel dumps and reads none of them (only -tp -gp -o --xlsx --rank
    --step matter there, D38): not flags parsed and ignored."""
    for case in ("kernel_npy", "kernel_stat"):
        target, golden = DATA / case / "target", DATA / case / "golden"
        assert run(tmp_path / "out", target, golden, "--rank", "0", *given) == 2
        assert_refused(capsys, tmp_path / "out", named, "not made for MindSpore kernel dumps")
        assert run(tmp_path / "out", target, golden, *given) == 2  # (a kernel tree recognised by itself)
        assert_refused(capsys, tmp_path / "out", named)
