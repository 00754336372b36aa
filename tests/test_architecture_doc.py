"""docs/architecture.md names only what exists: every module path, and every ``module.py:name``."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"
PATH = re.compile(r"`(msprobe_dask/[\w/.]*?)(?::(\w+))?`")


def _defined(path: Path) -> set[str]:
    """The names a module defines at its top level (functions, classes, assignments, imports)."""
    names: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:  # ``A = ...`` and ``A, B = ...``
                names.update(t.id for t in ast.walk(target) if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def test_every_module_and_name_in_the_architecture_doc_exists() -> None:
    text = DOC.read_text(encoding="utf-8")
    found = PATH.findall(text)
    assert len(found) > 40, "the doc names the modules it describes as `msprobe_dask/...`"
    wrong = []
    for path, name in found:
        where = ROOT / path
        if not where.exists():
            wrong.append(f"{path}: no such file or folder")
        elif name and name not in _defined(where):
            wrong.append(f"{path}: defines no {name}")
    assert not wrong, "docs/architecture.md names what does not exist:\n" + "\n".join(wrong)


def test_the_check_sees_a_missing_name() -> None:
    assert "build_table" in _defined(ROOT / "msprobe_dask" / "table.py")
    assert "no_such_name" not in _defined(ROOT / "msprobe_dask" / "table.py")
    tensor_cells = ROOT / "msprobe_dask" / "metrics" / "tensor_cells.py"
    assert {"THOUSANDTH", "FIVE_THOUSANDTHS"} <= _defined(tensor_cells)
