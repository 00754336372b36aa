"""The summary of a graph's tb_nodes rows as they are made (summary/nodes.NodeGroup): what the run's
summary reads back from the vis.db (tests/graph/visdb_summary.py), made beside the rows (graph/rows.py)."""

from __future__ import annotations

from operator import itemgetter
from typing import Any

from msprobe_dask.columns import VISDB_NODE_COLUMNS
from msprobe_dask.dump.markers import BATCH_P2P
from msprobe_dask.graph.item_text import exported_cells
from msprobe_dask.graph.jsontext import dumps
from msprobe_dask.graph.model import Graph, Node
from msprobe_dask.summary.nodes import (
    JUDGED_PRECISIONS,
    SUMMARY_KEYS,
    NodeGroup,
    group_label,
    items_of_texts,
    precision_result,
)


def merged_summary(summary: NodeGroup | None, later: NodeGroup | None) -> NodeGroup | None:
    """The summary of the nodes of ``summary`` and then of ``later`` (None: no nodes)."""
    if later is None:
        return summary
    if summary is None:
        summary = NodeGroup(later.summary.label)
    summary.merge(later)
    return summary


_NAME_AND_TYPE = itemgetter(*map(VISDB_NODE_COLUMNS.index, ("node_name", "node_type")))
_PRECISION = itemgetter(VISDB_NODE_COLUMNS.index("precision_index"))


def summarise_rows(
    g: Graph,
    nodes: list[Node],
    rows: list[list[Any]],
    md5_mode: bool,
    texts: list[tuple[str, str] | None] | None,
    read: dict[int, list[dict[str, str]]] | None = None,
) -> NodeGroup:
    """The summary of ``nodes``' rows (what linking across ranks changes of a row later is no part of
    it), as it is read from the vis.db (tests/graph/visdb_summary.py), keeping only the nodes it may show.
    A judged node's items are read from the items it holds, as exported (item_text.exported_cells), or
    from its texts (``texts``, as chunk_rows takes them); ``read``: what the C row maker has read of
    them already, by row (node_rows)."""
    group = NodeGroup(group_label(g.step, g.rank))
    add = group.add_judged

    def items_of(i: int) -> list[dict[str, Any]]:
        text = texts[i] if texts is not None else None
        if text is not None:
            return items_of_texts(*text)
        node = nodes[i]
        batch_p2p = BATCH_P2P in node.id
        return [
            exported_cells(item, SUMMARY_KEYS, md5_mode, batch_p2p)
            for data in (node.input_data, node.output_data)
            for item in data.values()
        ]

    precisions = list(map(_PRECISION, rows))
    group.count(precisions)
    read_cells = (read or {}).get
    for i, precision in enumerate(precisions):
        if precision in JUDGED_PRECISIONS:
            name, node_type = _NAME_AND_TYPE(rows[i])
            cells = read_cells(i)
            add(name, str(node_type), precision_result(precision), i, items_of(i) if cells is None else cells)
    return group.trimmed(lambda i: dumps(nodes[i].stack))
