"""The compare columns' names are typed once, in columns.py, and a row's Result texts once, in
judge/rules.py and columns.py: the modules that make, judge and read compare rows (the graph's rows
and checkers, compare's table, its judge and highlights, compare -da's records and walk, the summary
and the report) read them by the names given them there, so that a text changed there changes in
every row (a text typed again would keep the old one in some rows)."""

from __future__ import annotations

import ast
from pathlib import Path

from msprobe_dask import columns
from msprobe_dask.judge import rules

PACKAGE = Path(columns.__file__).parent
READERS = (
    "graph/cells.py",
    "graph/stat_cells.py",
    "graph/checks.py",
    "graph/compare.py",
    "analysis/rank_rows.py",
    "analysis/records.py",
    "analysis/row_errors.py",
    "analysis/cli.py",
    "analysis/divergence.py",
    "analysis/first_diff.py",
    "analysis/flow.py",
    "analysis/quiet_rows.py",
    "analysis/unsettled.py",
    "judge/highlight.py",
    "metrics/kernel.py",
    "report/results.py",
    "summary/table.py",
    "table.py",
)
"""The modules that read the compare columns and the Result texts by their names."""

NAMES = {
    *columns.BASE_COLUMNS,
    *columns.DIFF_COLUMNS,
    *columns.STAT_COLUMNS,
    *columns.TENSOR_COLUMNS,
    *columns.MD5_COLUMNS,
    *columns.TAIL_COLUMNS,
    columns.NPU_P2P_OP,
    columns.NPU_P2P_PEER,
    columns.BENCH_P2P_OP,
    columns.BENCH_P2P_PEER,
    rules.PASS,
    rules.WARNING,
    rules.ERROR,
    columns.MD5_DIFFERENT,
    columns.REACHED,
    columns.NOT_REACHED,
}


def typed_names(source: str) -> list[tuple[int, str]]:
    """(line, text) of each str constant of ``source`` that is a column's name or a Result text."""
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
