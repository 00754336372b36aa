"""``-progress_log``: PROGRESS lines as msprobe writes them, growing with the finished tasks."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from msprobe_dask.cli import main

DATA = Path(__file__).resolve().parents[1] / "data"
LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \(\d+\) \[INFO\] PROGRESS: (\{.*\})$")


def _progress(err: str) -> list[dict]:
    out = []
    for line in err.splitlines():
        m = LINE.match(line)
        if m:
            out.append(json.loads(m.group(1)))
    return out


def test_progress_grows_to_99_then_ends_at_100(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    case = DATA / "multirank"
    argv = ["graph_visualize", "-tp", str(case / "target"), "-gp", str(case / "golden")]
    assert main([*argv, "-o", str(tmp_path), "-progress_log", "-q"]) == 0
    msgs = _progress(capsys.readouterr().err)
    values = [m["current_progress"] for m in msgs]
    assert values[0] == 0.0 and values[-2:] == [100, 100]
    running = values[1:-2]
    assert len(running) > 3 and running == sorted(running) and max(running) <= 99.0  # as tasks finish
    assert all(isinstance(v, float) for v in values[:-2]) and all(type(v) is int for v in values[-2:])
    assert [m["process_running"] for m in msgs[-2:]] == [True, False]
    assert all(m["error_msg"] == [] for m in msgs)


def test_an_error_is_logged_and_ends_the_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "missing"
    assert main(["graph_visualize", "-tp", str(missing), "-o", str(tmp_path / "out"), "-progress_log"]) == 2
    err = capsys.readouterr().err
    last = _progress(err)[-1]
    assert last["process_running"] is False and str(missing) in last["error_msg"][0]
    assert not (tmp_path / "out").exists()


def test_without_the_flag_no_progress_lines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["graph_visualize", "-tp", str(DATA / "stat_mix" / "target"), "-o", str(tmp_path), "-q"]) == 0
    assert _progress(capsys.readouterr().err) == []


def test_local_worker_processes_give_the_same_db(tmp_path: Path) -> None:
    from visdb_diff import diff_visdb

    case = DATA / "multirank"
    args = ["graph_visualize", "-q", "-tp", str(case / "target"), "-gp", str(case / "golden")]
    assert main([*args, "-o", str(tmp_path / "threads")]) == 0
    assert main([*args, "-o", str(tmp_path / "procs"), "--workers", "2"]) == 0
    (a,) = (tmp_path / "threads").glob("*.vis.db")
    (b,) = (tmp_path / "procs").glob("*.vis.db")
    assert diff_visdb(str(b), str(a)) == []
