"""The compare columns' names are typed once, in columns.py: the modules that make and check the graph's
compare rows read them by the names columns.py gives them, so that a column renamed there is renamed in
every row (a name typed again would keep the old one in some rows)."""

from __future__ import annotations

import ast
from pathlib import Path

from msprobe_dask import columns

PACKAGE = Path(columns.__file__).parent
READERS = ("graph/cells.py", "graph/stat_cells.py", "graph/checks.py")
"""The modules that read the compare columns by their names."""

NAMES = {
    *columns.BASE_COLUMNS,
    *columns.DIFF_COLUMNS,
    *columns.STAT_COLUMNS,
    *columns.TENSOR_COLUMNS,
    *columns.MD5_COLUMNS,
    *columns.TAIL_COLUMNS,
}


def typed_names(source: str) -> list[tuple[int, str]]:
    """(line, text) of each str constant of ``source`` that is a column's name."""
    tree = ast.parse(source)
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in NAMES
    ]


def test_the_graph_rows_read_the_column_names_from_columns_py() -> None:
    typed = {module: typed_names((PACKAGE / module).read_text()) for module in READERS}
    assert typed == {module: [] for module in READERS}


def test_the_check_sees_a_typed_name() -> None:
    assert typed_names('"""NPU Dtype: 1"""\nx = NPU_DTYPE\nrow["NPU Dtype"] = 1\n') == [(3, "NPU Dtype")]
