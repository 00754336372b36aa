"""Who a communication op talks to: one rule (analysis/comm_apis.exchange) for the -da first-diff
analysis (first_diff.peers_of, of a rank's items) and the divergence analysis (flow's Comm, of its rows)."""

from __future__ import annotations

from typing import Any

import pytest

from msprobe_dask.analysis.comm_apis import exchange
from msprobe_dask.analysis.first_diff import peers_of
from msprobe_dask.analysis.flow import column_nodes
from msprobe_dask.analysis.row_errors import RowColumns
from msprobe_dask.dump.markers import PROCESS_GROUP

GROUP = ("Distributed.all_reduce.0.forward.input.group", None, "[0, 1, 2, 3]", PROCESS_GROUP)
CASES: dict[str, tuple[str, list[tuple[Any, ...]], frozenset[int] | None, int | None]] = {
    "send dst": (
        "Distributed.send.0.forward",
        [("Distributed.send.0.forward.input.dst", None, 3, "int")],
        frozenset({3}),
        3,
    ),
    "recv src as text": (
        "Distributed.recv.0.forward",
        [("Distributed.recv.0.forward.input.src", None, "2", "int")],
        frozenset({2}),
        2,
    ),
    "all_reduce in a group": ("Distributed.all_reduce.0.forward", [GROUP], frozenset({0, 2, 3}), None),
    "all_reduce in the world": ("Distributed.all_reduce.0.forward", [], None, None),
    "broadcast's root is no peer": (
        "Distributed.broadcast.0.forward",
        [("Distributed.broadcast.0.forward.input.src", None, 0, "int")],
        None,
        0,
    ),
    "batch_isend_irecv's P2POps": (
        "Distributed.batch_isend_irecv.0.forward",
        [
            ("Distributed.batch_isend_irecv.0.forward.input.0", 0, 1.5, "torch.float32"),
            ("Distributed.batch_isend_irecv.0.forward.input.1", 2, 1.5, "torch.float32"),
        ],
        frozenset({0, 2}),
        None,
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_first_diff_and_the_divergence_analyses_see_the_same_peers(case: str) -> None:
    entry, rows, peers, root = CASES[case]
    assert exchange(entry.split(".")[1], rows, 1) == (peers, root)
    items = [
        {"state": "input", "NPU Name": n, "NPU P2POp peer": p, "NPU max": m, "NPU Dtype": d}
        for n, p, m, d in rows
    ]
    assert peers_of(entry, items, 1) == peers
    if not rows:
        return
    columns = {
        "NPU Name": [r[0] for r in rows],
        "NPU P2POp peer": [r[1] for r in rows],
        "NPU max": [r[2] for r in rows],
        "NPU Dtype": [r[3] for r in rows],
        "api_origin_name": [entry] * len(rows),
        "state": ["input"] * len(rows),
    }
    (node,) = column_nodes(RowColumns.of_columns(len(rows), columns), 1, 0.0)
    assert node.comm is not None and node.comm.peers == peers
