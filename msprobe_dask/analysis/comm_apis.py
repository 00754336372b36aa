"""Which dump entries are communication ops, and their api: ``Distributed.all_reduce.3.forward`` is
``all_reduce``'s call (the names of torch.distributed's and MindSpore's communication APIs)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from msprobe_dask.analysis.row_errors import number
from msprobe_dask.dump.markers import BATCH_P2P, IRECV, ISEND, PEER_ARGUMENTS, PROCESS_GROUP

COMM_PREFIXES = ("Distributed.", "MintDistributed.", "communication.comm_func.")
COMM_KEYWORDS = (
    "send",
    "recv",
    "broadcast",
    "all_reduce",
    "reduce",
    "all_gather",
    "gather",
    ISEND,
    IRECV,
    "scatter",
    "reduce_scatter",
    "all_to_all",
    "barrier",
)
P2P_SEND = ("send", ISEND)
P2P_RECV = ("recv", IRECV)
POINT_TO_POINT = (*P2P_SEND, *P2P_RECV, BATCH_P2P)  # the APIs whose peers are their arguments' ranks


def is_communication(name: str) -> bool:
    """A communication op's entry: a communication prefix, and an api that holds one of COMM_KEYWORDS."""
    return name.startswith(COMM_PREFIXES) and _communication_api(api_of(name))


@lru_cache(maxsize=1024)
def _communication_api(api: str) -> bool:
    """An api that holds one of COMM_KEYWORDS: a dump names a few apis, each entry one of them (R8's
    comm nodes, 8 ranks of 21,450 communication rows: the rows' test 0.14 -> 0.06 s of thread CPU)."""
    return any(word in api for word in COMM_KEYWORDS)


def api_of(name: str) -> str:
    """``Distributed.all_reduce.3.forward`` -> ``all_reduce``."""
    parts = name.split(".")
    return parts[-3] if len(parts) >= 3 else name


def exchange(
    api: str, rows: Iterable[tuple[Any, Any, Any, Any]], rank: int
) -> tuple[frozenset[int] | None, int | None]:
    """Who ``rank``'s call of communication ``api`` talks to, and the root it names, from its rows
    (NPU Name, NPU P2POp peer, NPU max, NPU Dtype): a point-to-point op (send/recv/isend/irecv,
    batch_isend_irecv) its src/dst argument's rank or its P2POps' peers; a collective the ranks of its
    process group (None, the whole world, without one), its src/dst argument a root, not a peer."""
    peers: set[int] = set()
    root: int | None = None
    group: frozenset[int] | None = None
    for name, p2p_peer, high, dtype in rows:
        peer = None if p2p_peer is None else peer_rank(p2p_peer)  # (most rows have no P2POp)
        if peer is not None:
            peers.add(peer)
        if str(name).rsplit(".", 1)[-1] in PEER_ARGUMENTS:
            root = peer_rank(high)
            if root is not None:
                peers.add(root)
        if dtype == PROCESS_GROUP:
            group = _group_ranks(str(high))
    if api in POINT_TO_POINT:
        return frozenset(peers - {rank}), root
    return (None if group is None else frozenset(group - {rank})), root


def peer_rank(value: Any) -> int | None:
    """A cell that names a rank (a number, or its csv text), as the rank; None otherwise."""
    as_number = number(value)
    return int(as_number) if as_number is not None and as_number.is_integer() else None


_RANKS = re.compile(r"-?\d+")


@lru_cache(maxsize=256)
def _group_ranks(text: str) -> frozenset[int]:
    """The ranks of a process group's cell (its rank list's text; a rank's nodes name a few groups)."""
    return frozenset(int(m) for m in _RANKS.findall(text))
