"""Dump files and folders that cannot be read (permission denied) and a stack.json that is a FIFO, found by
workflows/hostile_campaign.py: one line naming the file, exit 2, no traceback, nothing written; a rank
whose folder cannot be searched is not taken for a rank without its dump (which --skip-missing-ranks would
leave out in silence). Root reads anything: as root the command runs without the capabilities that let it
(``setpriv``), so that a file's permissions hold."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import case_dir

WITHOUT_DAC = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search"] if os.geteuid() == 0 else []
COMMANDS = ["compare", "graph_visualize"]


def python_denied(*argv: str) -> subprocess.CompletedProcess[str]:
    """``python ARGV`` for which a file's permissions hold (as root: without DAC override)."""
    if WITHOUT_DAC and shutil.which("setpriv") is None:
        pytest.skip("runs as root, and without setpriv a file's permissions do not hold")
    return subprocess.run([*WITHOUT_DAC, sys.executable, *argv], capture_output=True, text=True, timeout=120)


def run_denied(*argv: str) -> subprocess.CompletedProcess[str]:
    """``python -m msprobe_dask ARGV -q`` so; -q: a run slowed past the time the stage lines are held (a
    loaded host) prints only its error line."""
    return python_denied("-m", "msprobe_dask", *argv, "-q")


def ranks(tmp_path: Path) -> tuple[Path, Path]:
    """A copy of the multirank case's step0 trees (4 ranks)."""
    for side in ("target", "golden"):
        shutil.copytree(case_dir("multirank") / side / "step0", tmp_path / side)
    return tmp_path / "target", tmp_path / "golden"


def assert_refused(proc: subprocess.CompletedProcess[str], out: Path, *words: str) -> None:
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert all(word in lines[0] for word in words), (words, lines[0])
    assert not out.exists() or not any(out.iterdir()), list(out.iterdir())


@pytest.mark.parametrize("workers", [(), ("--workers", "2")], ids=["in-process", "workers-2"])
@pytest.mark.parametrize("command", COMMANDS)
def test_a_rank_whose_dump_json_cannot_be_read(tmp_path: Path, command: str, workers: tuple) -> None:
    target, golden = ranks(tmp_path)
    dump = target / "rank1" / "dump.json"
    dump.chmod(0)
    proc = run_denied(command, "-tp", str(target), "-gp", str(golden), "-o", str(tmp_path / "out"), *workers)
    assert_refused(proc, tmp_path / "out", str(dump), "Permission denied")


SCAN = """import sys
from pathlib import Path
from msprobe_dask.dump.source import DumpSource
from msprobe_dask.errors import DumpError
from msprobe_dask.pipeline.part_scan import is_statistics_dump
try:
    is_statistics_dump(DumpSource(Path(sys.argv[1])))
except DumpError as exc:
    print(exc)
"""


def test_an_unreadable_dump_json_is_refused_before_the_other_ranks_run(tmp_path: Path) -> None:
    """compare took a rank whose dump.json's head could not be read for one not laid out for parts,
    compared after the other ranks' parts (after minutes, its stage lines printed: three lines)."""
    target, _ = ranks(tmp_path)
    dump = target / "rank1" / "dump.json"
    dump.chmod(0)
    assert python_denied("-c", SCAN, str(dump)).stdout.strip() == f"{dump}: cannot be read: Permission denied"


@pytest.mark.parametrize("command", COMMANDS)
def test_a_dump_folder_that_cannot_be_listed(tmp_path: Path, command: str) -> None:
    """Was an internal error (PermissionError from a layout's look into the folder)."""
    target, golden = ranks(tmp_path)
    golden.chmod(0)
    proc = run_denied(command, "-tp", str(target), "-gp", str(golden), "-o", str(tmp_path / "out"))
    golden.chmod(0o755)
    assert_refused(proc, tmp_path / "out", str(golden), "cannot be listed: Permission denied")


@pytest.mark.parametrize("mode", [0, 0o444], ids=["no-permission", "not-searchable"])
@pytest.mark.parametrize("command", COMMANDS)
def test_a_rank_folder_that_cannot_be_searched(tmp_path: Path, command: str, mode: int) -> None:
    """compare took it for a rank without a dump.json: with --skip-missing-ranks, left out in silence."""
    target, golden = ranks(tmp_path)
    (target / "rank1").chmod(mode)
    skip = ["--skip-missing-ranks"] if command == "compare" else []
    proc = run_denied(command, "-tp", str(target), "-gp", str(golden), "-o", str(tmp_path / "out"), *skip)
    (target / "rank1").chmod(0o755)
    assert_refused(proc, tmp_path / "out", str(target / "rank1"), "Permission denied")


@pytest.mark.parametrize("command", COMMANDS)
def test_a_stack_json_that_is_a_fifo(tmp_path: Path, command: str) -> None:
    """compare took a stack.json that is not a regular file for none (no NPU_Stack_Info column), exit 0."""
    target, golden = ranks(tmp_path)
    stack = target / "rank2" / "stack.json"
    stack.unlink()
    os.mkfifo(stack)
    proc = run_denied(command, "-tp", str(target), "-gp", str(golden), "-o", str(tmp_path / "out"))
    assert_refused(proc, tmp_path / "out", str(stack), "is a FIFO")
