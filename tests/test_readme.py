"""The README's Python blocks run, in order and in one namespace, from a folder holding tests/data."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import DATA

README = Path(__file__).parent.parent / "README.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


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
