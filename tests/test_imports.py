"""Nothing imported that the command does not use: ``--help`` and a statistics compare start without
numpy, ml_dtypes, openpyxl, dask.array or distributed (each costs 0.05-0.5 s of CPU at start)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import case_dir

HEAVY = ("numpy", "ml_dtypes", "openpyxl", "dask.array", "distributed", "pandas", "zarr")


def imported_modules(args: list[str]) -> set[str]:
    """The modules a CLI run imported, read from ``python -X importtime``'s report on stderr."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "msprobe_dask", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return {
        line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")
    }


def heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))


@pytest.mark.parametrize("args", [["--help"], ["compare", "--help"]], ids=["help", "compare-help"])
def test_help_imports_nothing_heavy(args: list[str]) -> None:
    modules = imported_modules(args)
    assert "msprobe_dask.cli" in modules  # the report is read (a test that cannot fail is none)
    assert heavy(modules) == []


def test_statistics_csv_compare_imports_nothing_heavy(tmp_path: Path) -> None:
    case = case_dir("stat_mix")
    out = tmp_path / "out"
    args = ["compare", "-q", "-tp", str(case / "target"), "-gp", str(case / "golden"), "-o", str(out)]
    modules = imported_modules(args)
    assert "msprobe_dask.pipeline.compare" in modules
    assert heavy(modules) == []
    # the command shows no HTML repr: jinja2 is looked for (importtime lists it) but not loaded
    assert "dask.widgets" in modules and "jinja2.environment" not in modules
    assert "dask.system" in modules and "psutil._pslinux" not in modules
    assert len(list(out.glob("compare_result_*.csv"))) == 1


@pytest.mark.skipif(sys.platform != "linux", reason="psutil is refused to dask.system on Linux only")
def test_dask_without_jinja2_and_psutil_elsewhere() -> None:
    """The CLI's hook refuses jinja2 to dask.widgets and psutil to dask.system only (their CPU count is
    the same): another importer gets them."""
    code = (
        "import os, sys\nfrom msprobe_dask.cli import LeanDask\n"
        "sys.meta_path.insert(0, LeanDask())\n"
        "import dask.widgets, dask.system\n"
        "assert dask.widgets.FILTERS == {} and 'jinja2' not in sys.modules\n"
        "assert dask.system.psutil is None and 'psutil' not in sys.modules\n"
        "assert dask.system.CPU_COUNT == len(os.sched_getaffinity(0))\n"
        "import jinja2, psutil; print(jinja2.Environment.__name__, psutil.Process.__name__)"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split() == ["Environment", "Process"]


def test_graph_visualize_imports_no_divergence_analysis(tmp_path: Path) -> None:
    """Without --report, graph_visualize only offers the analysis' options (analysis/tolerance.py): the
    analysis and the report are not imported (0.06e9 instructions, ~1% of the transformer's compare)."""
    case = case_dir("stat_mix")
    out = tmp_path / "out"
    args = ["graph_visualize", "-q", "-tp", str(case / "target"), "-gp", str(case / "golden"), "-o", str(out)]
    modules = imported_modules(args)
    assert "msprobe_dask.graph.api" in modules
    assert "msprobe_dask.analysis.tolerance" in modules
    unused = (
        "msprobe_dask.analysis.divergence",
        "msprobe_dask.report.cli",
        "msprobe_dask.summary.divergence",
    )
    assert sorted(modules & set(unused)) == []
    assert len(list(out.glob("compare_*.vis.db"))) == 1
