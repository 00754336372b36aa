"""Collectives linked across ranks by their group (graph_visualize.md §5): a row's items are parsed only
when a link may need them, the rows held for the link are those it may read or set, and the vis.db's
last task gets only the cells linking set."""

from __future__ import annotations

import json

from msprobe_dask.graph.distributed import link_distributed, link_rows
from msprobe_dask.graph.rows import COL, NODE_COLUMNS, GraphRows
from msprobe_dask.writers.visdb import linked_cells

NAME = "Distributed.all_reduce.0.forward"


def _graph(rank: int, group: str | None, name: str = NAME) -> GraphRows:
    """One all_reduce row of ``rank``; ``group``: the JSON text of its group item, or no group item."""
    row: list = [None] * len(NODE_COLUMNS)
    row[COL["id"]] = f"NPU_0_{rank}_{name}"
    row[COL["node_name"]] = name
    row[COL["node_type"]] = 0
    row[COL["output_data"]] = '{"an output": "held by no link"}'
    row[COL["input_data"]] = "{}" if group is None else f'{{"{name}.input.group": {group}}}'
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


def test_the_rows_held_for_the_link_are_those_it_may_read_or_set_with_its_cells_only() -> None:
    """(Each (step, rank)'s are held until every rank is made: graph/held.py COMM_LINK.)"""
    plain = '{"type": "torch.ProcessGroup", "group_ranks": "[0, 1]", "group_id": "g"}'
    escaped = plain.replace('"group_id"', '"group\\u005fid"')
    no_id = '{"type": "torch.ProcessGroup", "group_ranks": "[0, 1]"}'
    rows = [
        _graph(0, plain).nodes[0],
        _graph(0, escaped).nodes[0],
        _graph(0, no_id).nodes[0],  # never linked: not held
        _graph(0, None, "Distributed.send.0.forward").nodes[0],  # its dst parameter: read
        _graph(0, None, "Distributed.batch_isend_irecv.0.forward").nodes[0],  # its ops (p2p)
        [*_graph(0, plain).nodes[0][:-1], 0],  # not a communication row
    ]
    kept = link_rows(rows, {"Distributed.batch_isend_irecv.0.forward": []})
    assert [row[COL["node_name"]] for row in kept] == [
        NAME,
        NAME,
        "Distributed.send.0.forward",
        "Distributed.batch_isend_irecv.0.forward",
    ]
    assert all(row[COL["output_data"]] is None and row[COL["node_type"]] is None for row in kept)
    assert kept[0][COL["input_data"]] == rows[0][COL["input_data"]]


def test_a_group_linked_from_its_held_rows_gets_the_cells_of_its_whole_rows() -> None:
    plain = '{"type": "torch.ProcessGroup", "group_ranks": "[0, 1]", "group_id": "g"}'
    whole = [_graph(0, plain), _graph(1, plain)]
    held = [GraphRows("NPU", 0, g.rank, nodes=link_rows(g.nodes, {})) for g in whole]
    link_distributed(whole, overflow=False)
    link_distributed(held, overflow=False)
    assert (
        linked_cells(row for g in held for row in g.nodes)
        == linked_cells(row for g in whole for row in g.nodes)
        != []
    )
