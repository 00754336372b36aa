"""D14: batch_isend_irecv nodes are linked across ranks (the reference leaves them unlinked)."""

from __future__ import annotations

import json
from pathlib import Path

from msprobe_dask.graph.api import build_graphs
from msprobe_dask.graph.distributed import link_distributed
from msprobe_dask.graph.p2p import P2POp
from msprobe_dask.graph.rows import COL, NODE_COLUMNS, GraphRows

DATA = Path(__file__).resolve().parents[1] / "data"
BATCH = "Distributed.batch_isend_irecv.0.forward"


def _links(result) -> dict[tuple[str, int], dict]:
    out = {}
    for g in result.graphs:
        for row in g.nodes:
            if "batch_isend_irecv" in row[COL["node_name"]]:
                out[(g.source, g.rank)] = json.loads(row[COL["matched_distributed"]])
    return out


def test_ring_of_four_ranks_is_linked_both_ways() -> None:
    # each rank r sends to r+1 and receives from r-1 in one batch (the real gloo dump)
    links = _links(build_graphs(DATA / "multirank" / "target" / "step0"))
    for r in range(4):
        nxt, prev = str((r + 1) % 4), str((r - 1) % 4)
        assert links[("NPU", r)] == {
            "communications_type": "send_receive",
            "nodes_info": {nxt: ["Nan", BATCH], prev: ["Nan", BATCH]},
        }


def test_compare_links_carry_the_peer_precision_index() -> None:
    result = build_graphs(DATA / "multirank" / "target" / "step0", DATA / "multirank" / "golden" / "step0")
    links = _links(result)
    precision = {
        g.rank: row[COL["precision_index"]]
        for g in result.graphs
        if g.source == "NPU"
        for row in g.nodes
        if row[COL["node_name"]] == BATCH
    }
    for r in range(4):
        info = links[("NPU", r)]["nodes_info"]
        for peer, (index, name) in info.items():
            assert name == BATCH
            assert index == str(precision[int(peer)])
        assert links[("Bench", r)]["nodes_info"]  # bench rows are linked too, with "Nan"


def _graph(rank: int, ops: list[P2POp], name: str = BATCH) -> GraphRows:
    row: list = [None] * len(NODE_COLUMNS)
    row[COL["node_name"]] = name
    row[COL["input_data"]] = "{}"
    row[COL["matched_distributed"]] = "{}"
    row[COL["is_distributed"]] = 1
    return GraphRows("NPU", 0, rank, nodes=[row], p2p={name: ops})


def _value(g: GraphRows) -> dict:
    return json.loads(g.nodes[0][COL["matched_distributed"]])


def test_one_way_batch_is_typed_send_and_receive() -> None:
    a = _graph(0, [P2POp("isend", "1", "g")])
    b = _graph(1, [P2POp("irecv", "0", "g")])
    link_distributed([a, b], overflow=False)
    assert _value(a) == {"communications_type": "send", "nodes_info": {"1": ["Nan", BATCH]}}
    assert _value(b) == {"communications_type": "receive", "nodes_info": {"0": ["Nan", BATCH]}}


def test_no_link_without_a_counterpart_or_with_another_group() -> None:
    a = _graph(0, [P2POp("isend", "1", "g"), P2POp("isend", "2", "g")])
    b = _graph(1, [P2POp("irecv", "0", "other")])  # other group
    c = _graph(2, [P2POp("isend", "0", "g")])  # sends back instead of receiving
    link_distributed([a, b, c], overflow=False)
    assert _value(a) == _value(b) == _value(c) == {}


def test_nth_send_pairs_with_nth_receive() -> None:
    first, second = "Distributed.batch_isend_irecv.0.forward", "Distributed.batch_isend_irecv.1.forward"
    a = GraphRows("NPU", 0, 0)
    b = GraphRows("NPU", 0, 1)
    for name in (first, second):
        a.nodes.append(_graph(0, [], name).nodes[0])
        a.p2p[name] = [P2POp("isend", "1", "g")]
        b.nodes.append(_graph(1, [], name).nodes[0])
        b.p2p[name] = [P2POp("irecv", "0", "g")]
    link_distributed([a, b], overflow=False)
    for g, peer in ((a, "1"), (b, "0")):
        for row, name in zip(g.nodes, (first, second)):
            assert json.loads(row[COL["matched_distributed"]])["nodes_info"] == {peer: ["Nan", name]}
