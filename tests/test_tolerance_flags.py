"""--atol/--rtol set the first divergence of the summary and the report: where a run reads neither
(a graph_visualize build, compare or graph_visualize -q without --report, kernel dumps) one given is
refused in
one line, exit 2, nothing written, not parsed and ignored; compare --report on kernel dumps, which
make no report, likewise; and graph_visualize --report on a merge whose sides have different rank counts,
which a compare rank by rank cannot pair (it wrote the vis.db and warned "no report", exit 0)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import case_dir, run_cli

STAT = case_dir("stat_mix")
KERNEL = case_dir("kernel_npy")
PP = case_dir("pp_merge")
MERGE = ["--rank_size", "2", "1", "--tp", "1", "1", "--pp", "2", "1"]


@pytest.mark.parametrize(
    ("argv", "flag", "why"),
    [
        (["graph_visualize", "-tp", str(STAT / "target"), "--atol", "1e-3"], "--atol", "-gp GOLDEN"),
        (
            [
                "graph_visualize",
                "-tp",
                str(STAT / "target"),
                "-gp",
                str(STAT / "golden"),
                "-q",
                "--rtol",
                "1",
            ],
            "--rtol",
            "-q",
        ),
        (
            ["compare", "-tp", str(STAT / "target"), "-gp", str(STAT / "golden"), "-q", "--rtol", "0.5"],
            "--rtol",
            "-q",
        ),
        (
            ["compare", "-tp", str(KERNEL / "target"), "-gp", str(KERNEL / "golden"), "--rtol", "0.5"],
            "--rtol",
            "kernel",
        ),
        (
            ["compare", "-tp", str(KERNEL / "target"), "-gp", str(KERNEL / "golden"), "--report"],
            "--report",
            "kernel",
        ),
        (
            ["graph_visualize", "-tp", str(PP / "target"), "-gp", str(PP / "golden"), *MERGE, "--report"],
            "--report",
            "the target 2 ranks and the golden 1",
        ),
    ],
)
def test_a_tolerance_nothing_reads_is_refused(argv: list[str], flag: str, why: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = run_cli(*argv, "-o", str(out))
    assert proc.returncode == 2, proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith(f"msprobe-dask: error: {flag}: ") and why in line, line
    assert not out.exists()


@pytest.mark.parametrize("command", ["compare", "graph_visualize"])
def test_a_tolerance_is_read_where_the_summary_prints(command: str, tmp_path: Path) -> None:
    argv = [command, "-tp", str(STAT / "target"), "-gp", str(STAT / "golden")]
    default = run_cli(*argv, "-o", str(tmp_path / "a"))
    looser = run_cli(*argv, "--rtol", "0.5", "-o", str(tmp_path / "b"))
    assert default.returncode == looser.returncode == 0
    first = [
        line
        for line in (default.stdout, looser.stdout)
        for line in line.splitlines()
        if line.startswith("First divergence:")
    ]
    assert len(first) == 2 and first[0] != first[1], first


@pytest.mark.parametrize("command", ["compare", "graph_visualize"])
@pytest.mark.parametrize(
    ("flag", "value"),
    [("--rtol", "-0.1"), ("--atol", "nan"), ("--rtol", "inf"), ("--atol", "1e309")],
)
def test_a_tolerance_that_is_no_tolerance_is_refused(
    command: str, flag: str, value: str, tmp_path: Path
) -> None:
    """A negative tolerance would count every node as diverging, one that adds no error too; NaN none
    (1e309: a finite text whose float is inf)."""
    out = tmp_path / "out"
    proc = run_cli(
        command, "-tp", str(STAT / "target"), "-gp", str(STAT / "golden"), flag, value, "-o", str(out)
    )
    assert proc.returncode == 2, proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith(f"msprobe-dask: error: {flag}: must be a finite number, 0 or more"), line
    assert not out.exists()
