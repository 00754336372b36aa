"""The point-to-point ops inside a ``batch_isend_irecv`` node (graph_visualize.md §2.7).

The dump records each ``P2POp`` of the batch as one output item carrying ``op`` (isend/irecv),
``peer`` (the other global rank) and ``group_id``. The vis.db drops those fields from the items, so
whatever needs them (cross-rank linking, pipeline-group discovery) reads them from the graph.
"""

from __future__ import annotations

from typing import NamedTuple

from msprobe_dask.dump.markers import BATCH_P2P, IRECV, ISEND, P2P_KEYS
from msprobe_dask.graph.model import Node


class P2POp(NamedTuple):
    op: str  # ISEND or IRECV
    peer: str  # the other rank, as a string
    group_id: str


def batch_p2p_ops(node: Node) -> list[P2POp]:
    """The batch's ops in output order; items without an op or a peer are left out."""
    if BATCH_P2P not in node.id:
        return []
    ops = []
    for item in node.output_data.values():
        op, peer = item.get(P2P_KEYS.op), item.get(P2P_KEYS.peer)
        if op in (ISEND, IRECV) and peer is not None and not isinstance(peer, bool):
            ops.append(P2POp(op, str(peer), str(item.get(P2P_KEYS.group_id, ""))))
    return ops
