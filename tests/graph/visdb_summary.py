"""The summary of a graph_visualize run read back from the vis.db it wrote: what the run's own summary
(made from its chunks' rows, graph/row_summary.py ``summarise_rows``) must equal."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from msprobe_dask.judge.rules import UNREADABLE
from msprobe_dask.summary.model import RunSummary
from msprobe_dask.summary.nodes import summarise_nodes, unreadable_problems

NODES = (
    "SELECT step, rank, node_name, node_type, precision_index, stack_id,"
    " CASE WHEN precision_index > 0 THEN input_data END, CASE WHEN precision_index > 0 THEN output_data END"
    " FROM tb_nodes WHERE data_source = 'NPU' ORDER BY step, rank, node_order"
)
UNREADABLE_NODES = (
    "SELECT input_data, output_data FROM tb_nodes WHERE data_source = 'NPU' AND precision_index = 1"
    " AND (instr(input_data, ?) OR instr(output_data, ?)) ORDER BY step, rank, node_order"
)


def _read_only(path: str | Path) -> sqlite3.Connection:
    # immutable: a read-only connection to a WAL-mode file would leave its -wal and -shm files behind
    return sqlite3.connect(Path(path).resolve().as_uri() + "?mode=ro&immutable=1", uri=True)


def _items(*texts: str | None) -> list[dict[str, Any]]:
    return [item for text in texts for item in json.loads(text or "{}").values() if isinstance(item, dict)]


def unreadable_rows(path: str | Path) -> list[str]:
    """Why each row of the vis.db whose tensor files could not be read is an error, in node order."""
    connection = _read_only(path)
    try:
        found = connection.execute(UNREADABLE_NODES, (UNREADABLE, UNREADABLE)).fetchall()
    finally:
        connection.close()
    return [problem for texts in found for problem in unreadable_problems(_items(*texts))]


def summarise_visdb(path: str | Path) -> RunSummary:
    """The summary of one vis.db (build or compare) as graph_visualize wrote it."""
    connection = _read_only(path)
    try:

        def stack_text(stack_id: str) -> str | None:
            row = connection.execute("SELECT stack_info FROM tb_stack WHERE id = ?", (stack_id,)).fetchone()
            return row[0] if row else None

        return summarise_nodes("graph_visualize", connection.execute(NODES), stack_text)
    finally:
        connection.close()
