"""Nothing imported that the command does not use: ``--help`` and a statistics compare start without
numpy, ml_dtypes, openpyxl, dask.array or distributed (each costs 0.05-0.5 s of CPU at start)."""

from __future__ import annotations

import re
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


def python_output(code: str) -> str:
    """What ``python -c code`` prints (it must succeed)."""
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout


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
    assert python_output(code).split() == ["Environment", "Process"]


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


def test_yaml_reader_pattern_listed_is_the_same_class() -> None:
    """cli.lean_yaml_reader hands PyYAML's reader the class that lists the characters its own excludes:
    the two match the same code points, all of them tried."""
    from msprobe_dask.cli import YAML_NON_PRINTABLE, YAML_NON_PRINTABLE_AS_LISTED

    every = "".join(map(chr, range(sys.maxunicode + 1)))
    excluded = [m.start() for m in re.finditer(YAML_NON_PRINTABLE, every)]
    listed = [m.start() for m in re.finditer(YAML_NON_PRINTABLE_AS_LISTED, every)]
    assert len(excluded) > 60 and listed == excluded


def test_yaml_reader_pattern_is_the_installed_one() -> None:
    """The pattern the command's process answers for is the installed PyYAML's (else its reader compiles its
    own, and the start is 0.05e9 instructions slower), and the command's process reads YAML as before."""
    from msprobe_dask.cli import YAML_NON_PRINTABLE, YAML_NON_PRINTABLE_AS_LISTED

    code = (
        "import sys\nfrom msprobe_dask.cli import lean_yaml_reader\n"
        "import yaml.reader\nplain = yaml.reader.Reader.NON_PRINTABLE.pattern\n"
        "for name in [m for m in sys.modules if m == 'yaml' or m.startswith('yaml.')]:\n"
        "    del sys.modules[name]\n"
        "lean_yaml_reader()\nimport yaml, dask\n"
        "try:\n    yaml.safe_load('a: \\x07')\nexcept yaml.reader.ReaderError as e:\n    error = str(e)\n"
        "print(ascii(plain)); print(ascii(yaml.reader.Reader.NON_PRINTABLE.pattern))\n"
        "print(yaml.safe_load('a: [1, 2.5]')); print(ascii(error.splitlines()[0]))"
    )
    assert python_output(code).splitlines() == [
        ascii(YAML_NON_PRINTABLE),
        ascii(YAML_NON_PRINTABLE_AS_LISTED),
        "{'a': [1, 2.5]}",
        ascii("unacceptable character #x0007: special characters are not allowed"),
    ]
