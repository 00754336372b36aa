"""The summary of a graph_visualize run, read back from the vis.db it wrote (see ``summary.nodes``)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from msprobe_dask.summary.model import RunSummary
from msprobe_dask.summary.nodes import summarise_nodes

NODES = (
    "SELECT step, rank, node_name, node_type, precision_index, stack_id,"
    " CASE WHEN precision_index > 0 THEN input_data END, CASE WHEN precision_index > 0 THEN output_data END"
    " FROM tb_nodes WHERE data_source = 'NPU' ORDER BY step, rank, node_order"
)


def summarise_visdb(path: str | Path) -> RunSummary:
    """The summary of one vis.db (build or compare) as graph_visualize wrote it."""
    # immutable: a read-only connection to a WAL-mode file would leave its -wal and -shm files behind
    connection = sqlite3.connect(Path(path).resolve().as_uri() + "?mode=ro&immutable=1", uri=True)
    try:

        def stack_text(stack_id: str) -> str | None:
            row = connection.execute("SELECT stack_info FROM tb_stack WHERE id = ?", (stack_id,)).fetchone()
            return row[0] if row else None

        summary = summarise_nodes("graph_visualize", connection.execute(NODES), stack_text)
    finally:
        connection.close()
    summary.paths.append(str(path))
    return summary
