"""Inputs the reference refuses: one clear line on stderr, exit code 2, nothing left in OUT."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from msprobe_dask.cli import main as cli_main

DATA = Path(__file__).resolve().parents[1] / "data"


def _copy_dump(src: Path, dst: Path) -> Path:
    dst.mkdir(parents=True)
    for name in ("construct.json", "dump.json", "stack.json"):
        shutil.copyfile(src / name, dst / name)
    return dst


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    rc = cli_main(["graph_visualize", *args])
    err = capsys.readouterr().err.strip()
    return rc, err


def _assert_refused(rc: int, err: str, out: Path, *needles: str) -> None:
    assert rc == 2
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("msprobe-dask: error: "), err
    for n in needles:
        assert n in lines[0], lines[0]
    assert not out.exists() or not any(out.iterdir()), list(out.iterdir())


def test_empty_construct_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    rc, err = _run(["-tp", str(DATA / "L1_only" / "target"), "-o", str(out)], capsys)
    _assert_refused(rc, err, out, "construct.json", "L0 or mix")


@pytest.mark.parametrize(
    ("target", "golden", "expected"),
    [
        ("L1_only/target", "L1_only/golden", "construct.json"),  # empty construct.json
        ("multirank/target", "stat_mix/golden", "different folder structure"),
        ("ms_vs_pt/target", "ms_vs_pt/golden", "-lm"),  # two frameworks without a layer mapping
    ],
)
def test_refused_compare(
    target: str, golden: str, expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    rc, err = _run(["-tp", str(DATA / target), "-gp", str(DATA / golden), "-o", str(out)], capsys)
    _assert_refused(rc, err, out, expected)


def test_mixed_folders(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tree = tmp_path / "mixed"
    _copy_dump(DATA / "multirank" / "target" / "step0" / "rank0", tree / "rank0")
    _copy_dump(DATA / "multirank" / "target" / "step0" / "rank1", tree / "step1")
    out = tmp_path / "out"
    rc, err = _run(["-tp", str(tree), "-o", str(out)], capsys)
    _assert_refused(rc, err, out, str(tree), "step<N>")


def test_missing_stack_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dump = _copy_dump(DATA / "stat_mix" / "target", tmp_path / "dump")
    (dump / "stack.json").unlink()
    out = tmp_path / "out"
    rc, err = _run(["-tp", str(dump), "-o", str(out)], capsys)
    _assert_refused(rc, err, out, "stack.json")


def test_truncated_dump_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dump = _copy_dump(DATA / "stat_mix" / "target", tmp_path / "dump")
    text = (dump / "dump.json").read_text()
    (dump / "dump.json").write_text(text[: len(text) // 2])
    out = tmp_path / "out"
    rc, err = _run(["-tp", str(dump), "-o", str(out)], capsys)
    _assert_refused(rc, err, out, "dump.json", "not valid JSON")


def test_target_is_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    rc, err = _run(["-tp", str(DATA / "stat_mix" / "target" / "dump.json"), "-o", str(out)], capsys)
    _assert_refused(rc, err, out, "not a folder")


def test_existing_output_folder_is_left_alone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("x")
    rc, err = _run(["-tp", str(DATA / "L1_only" / "target"), "-o", str(out)], capsys)
    assert rc == 2 and [p.name for p in out.iterdir()] == ["keep.txt"]
