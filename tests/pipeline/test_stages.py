"""Progress by named stage: one line per stage when stderr is not a terminal, a live line on one, none
with -q."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from conftest import case_dir, run_cli

from msprobe_dask.pipeline.stages import Stage, StageLog, StageProgress

LINE = re.compile(r"^(.+?) ([\d,]+)/([\d,]+)(?: (\w[\w-]*))? \(\d+\.\d s\)$")


def run_ok(*args: str) -> subprocess.CompletedProcess[str]:
    proc = run_cli(*args, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc


def stage_lines(stderr: str) -> dict[str, tuple[int, int, str | None]]:
    found = {}
    for line in stderr.splitlines():
        if m := LINE.match(line):
            found[m[1]] = (int(m[2].replace(",", "")), int(m[3].replace(",", "")), m[4])
    return found


def test_compare_logs_a_line_per_stage(tmp_path: Path) -> None:
    data = case_dir("multirank")
    proc = run_ok("compare", "-tp", str(data / "target"), "-gp", str(data / "golden"), "-o", str(tmp_path))
    assert stage_lines(proc.stderr) == {
        "parse and match": (8, 8, "ranks"),
        "judge": (8, 8, "parts"),  # one part per rank (pipeline/chunked.py)
        "write csv": (8, 8, "files"),
    }


def test_tensor_compare_logs_metrics_and_judge(tmp_path: Path) -> None:
    data = case_dir("tensor_mix")
    proc = run_ok("compare", "-tp", str(data / "target"), "-gp", str(data / "golden"), "-o", str(tmp_path))
    stages = stage_lines(proc.stderr)
    assert list(stages) == ["parse and match", "tensor metrics", "judge", "write csv"]
    done, total, unit = stages["tensor metrics"]
    assert done == total >= 1 and unit == "batches"


@pytest.mark.parametrize("workers", [(), ("--workers", "2")], ids=["here", "workers"])
def test_graph_visualize_logs_its_stages(workers: tuple[str, ...], tmp_path: Path) -> None:
    """The stages in this process; on two worker processes, whose 8 (step, rank)s are each made by one
    task (graph/run_setup.py: one_task_a_rank), those tasks' stage and the inserts, link and write."""
    data = case_dir("multirank")
    proc = run_ok(
        "graph_visualize",
        "-tp",
        str(data / "target"),
        "-gp",
        str(data / "golden"),
        "-o",
        str(tmp_path),
        *workers,
    )
    if workers:
        assert stage_lines(proc.stderr) == {
            "build and compare graphs": (8, 8, "ranks"),
            "insert rows": (8, 8, "batches"),
            "link ranks": (1, 1, None),
            "write vis.db": (1, 1, None),
        }
        return
    assert stage_lines(proc.stderr) == {
        "build graphs": (16, 16, "graphs"),
        "match graphs": (8, 8, "ranks"),
        "graph rows": (8, 8, "chunks"),
        "insert rows": (8, 8, "batches"),
        "compare graphs": (8, 8, "ranks"),
        "link ranks": (1, 1, None),
        "write vis.db": (1, 1, None),
    }


def test_quiet_logs_no_stage(tmp_path: Path) -> None:
    data = case_dir("multirank")
    proc = run_ok(
        "compare", "-q", "-tp", str(data / "target"), "-gp", str(data / "golden"), "-o", str(tmp_path)
    )
    assert proc.stderr == ""


def test_live_line_is_redrawn_and_cleared() -> None:
    import dask

    written: list[str] = []
    tasks = [dask.delayed(abs)(i, dask_key_name=f"build-0-{i}-NPU") for i in range(3)]
    with StageProgress(StageLog(written.append), live=True):
        dask.compute(*tasks, scheduler="sync")
    assert written[-1] == "\r\x1b[K"
    assert any("build graphs 3/3 graphs" in text for text in written)
    assert Stage("build graphs", "graphs") == Stage("build graphs", "graphs")


def test_a_young_command_holds_its_lines_until_it_succeeds() -> None:
    written: list[str] = []
    log = StageLog(written.append, hold_seconds=60)
    log.line("build graphs 2/2 graphs (0.1 s)")
    assert written == []  # a bad input found now would end with its error line alone
    log.close()
    assert written == ["build graphs 2/2 graphs (0.1 s)\n"]
    late = StageLog(written.append, hold_seconds=0)
    late.line("write vis.db 1/1 (0.0 s)")
    assert written[-1] == "write vis.db 1/1 (0.0 s)\n"
