"""The README's claims that code can check: its Python blocks run, in order and in one namespace, from a
folder holding tests/data; every flag of its command lines is one the command (or the workflow script)
takes; every file it names exists; every row of its table of deliberate differences names tests that
exist and name the row."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import DATA

from msprobe_dask.cli import build_parser

ROOT = Path(__file__).parent.parent
README = ROOT / "README.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)
COMMAND_LINE = re.compile(r"(?:msprobe-dask|python -m msprobe_dask) (\w+)([^#\n]*)")
FLAG = re.compile(r"(?<![\w/])(-{1,2}[A-Za-z][\w-]*)")
WORKFLOW_LINE = re.compile(r"workflows/(\w+\.py)([^\n`#]*)")
LONG_FLAG = re.compile(r"(?<![\w/'])(--[a-z][\w-]*)")
NAMED_FILE = re.compile(r"`((?:msprobe_dask|workflows|tests|docs)/[\w/.-]+)`")
DIFFERENCE = re.compile(r"^\| (D\d+) \|.*\| ([^|]+) \|$", re.MULTILINE)


def test_readme_has_python_blocks() -> None:
    assert len(BLOCK.findall(README.read_text(encoding="utf-8"))) >= 3


def test_readme_python_blocks_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("pandas")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "data").symlink_to(DATA)
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "__readme__"}
    for i, block in enumerate(BLOCK.findall(README.read_text(encoding="utf-8"))):
        exec(compile(block, f"README.md python block {i + 1}", "exec"), namespace)
    assert (tmp_path / "out" / "compare_result.csv").is_file()


def test_readme_command_lines_use_the_commands_flags() -> None:
    subparsers = next(a for a in build_parser()._actions if a.dest == "command")
    commands = subparsers.choices  # type: ignore[attr-defined]
    seen, unknown = 0, []
    for command, rest in COMMAND_LINE.findall(README.read_text(encoding="utf-8")):
        if command not in commands:
            continue
        flags = {flag for action in commands[command]._actions for flag in action.option_strings}
        unknown += [f"{command} {flag}" for flag in FLAG.findall(rest) if flag not in flags]
        seen += 1
    assert seen > 15 and not unknown, unknown


def test_readme_workflow_lines_use_the_scripts_flags() -> None:
    flags: dict[str, set[str]] = {}
    for script, rest in WORKFLOW_LINE.findall(README.read_text(encoding="utf-8")):
        flags.setdefault(script, set()).update(LONG_FLAG.findall(rest))
    unknown = []
    for script, named in sorted(flags.items()):
        if named:
            command = [sys.executable, str(ROOT / "workflows" / script), "--help"]
            shown = subprocess.run(command, capture_output=True, text=True, timeout=120, check=True).stdout
            unknown += [f"{script} {flag}" for flag in sorted(named) if flag not in shown]
    assert len(flags) > 10 and not unknown, unknown


def test_readme_names_files_that_exist() -> None:
    named = NAMED_FILE.findall(README.read_text(encoding="utf-8"))
    assert len(named) > 20 and not [path for path in named if not (ROOT / path).exists()]


def test_each_deliberate_difference_names_tests_that_pin_it() -> None:
    rows = DIFFERENCE.findall(README.read_text(encoding="utf-8"))
    assert [d for d, _ in rows] == [f"D{n}" for n in range(1, len(rows) + 1)]
    for difference, cell in rows:
        named, folder = [], ROOT / "tests"
        for part in re.findall(r"[\w/.]*test[\w/.]*", cell):
            path = ROOT / part if part.startswith("tests") else folder / part
            assert path.exists(), f"{difference} names {part}, which does not exist"
            folder = path if path.is_dir() else path.parent
            named += sorted(path.rglob("*.py")) if path.is_dir() else [path]
        word = re.compile(rf"\b{difference}\b")
        assert any(word.search(p.read_text(encoding="utf-8")) for p in named), (
            f"no test of {cell} names {difference}"
        )
