"""Collectives linked across ranks by their group (graph_visualize.md §5): a row's items are parsed only
when a link may need them, and the vis.db's last task gets only the cells linking set."""

from __future__ import annotations

import json

from msprobe_dask.graph.distributed import link_distributed
from msprobe_dask.graph.rows import COL, NODE_COLUMNS, GraphRows
from msprobe_dask.writers.visdb import linked_cells

NAME = "Distributed.all_reduce.0.forward"


def _graph(rank: int, group: str | None) -> GraphRows:
    """One all_reduce row of ``rank``; ``group``: the JSON text of its group item, or no group item."""
    row: list = [None] * len(NODE_COLUMNS)
    row[COL["id"]] = f"NPU_0_{rank}_{NAME}"
    row[COL["node_name"]] = NAME
    row[COL["input_data"]] = "{}" if group is None else f'{{"{NAME}.input.group": {group}}}'
    row[COL["matched_distributed"]] = "{}"
    row[COL["is_distributed"]] = 1
    return GraphRows("NPU", 0, rank, nodes=[row])


def _value(g: GraphRows) -> dict:
    return json.loads(g.nodes[0][COL["matched_distributed"]])


def test_a_group_is_linked_whether_its_id_key_is_escaped_or_not() -> None:
    plain = '{"type": "torch.ProcessGroup", "group_ranks": "[0, 1]", "group_id": "g"}'
    escaped = plain.replace('"group_id"', '"group\\u005fid"')  # the same item, its key escaped
    a, b = _graph(0, plain), _graph(1, escaped)
    link_distributed([a, b], overflow=False)
    assert _value(a) == {"communications_type": "send_receive", "nodes_info": {"1": ["Nan", NAME]}}
    assert _value(b) == {"communications_type": "send_receive", "nodes_info": {"0": ["Nan", NAME]}}
    assert linked_cells([*a.nodes, *b.nodes]) == [
        (a.nodes[0][COL["matched_distributed"]], a.nodes[0][COL["id"]]),
        (b.nodes[0][COL["matched_distributed"]], b.nodes[0][COL["id"]]),
    ]


def test_rows_without_a_group_id_stay_unlinked_and_give_no_cell() -> None:
    no_id = '{"type": "torch.ProcessGroup", "group_ranks": "[0, 1]"}'
    graphs = [_graph(0, no_id), _graph(1, no_id), _graph(2, None)]
    link_distributed(graphs, overflow=False)
    assert [_value(g) for g in graphs] == [{}, {}, {}]
    assert linked_cells([row for g in graphs for row in g.nodes]) == []
