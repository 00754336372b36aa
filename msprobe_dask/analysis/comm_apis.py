"""Which dump entries are communication ops, and their api: ``Distributed.all_reduce.3.forward`` is
``all_reduce``'s call (the names of torch.distributed's and MindSpore's communication APIs)."""

from __future__ import annotations

from msprobe_dask.dump.markers import BATCH_P2P

COMM_PREFIXES = ("Distributed.", "MintDistributed.", "communication.comm_func.")
COMM_KEYWORDS = (
    "send",
    "recv",
    "broadcast",
    "all_reduce",
    "reduce",
    "all_gather",
    "gather",
    "isend",
    "irecv",
    "scatter",
    "reduce_scatter",
    "all_to_all",
    "barrier",
)
P2P_SEND = ("send", "isend")
P2P_RECV = ("recv", "irecv")
POINT_TO_POINT = (*P2P_SEND, *P2P_RECV, BATCH_P2P)  # the APIs whose peers are their arguments' ranks


def is_communication(name: str) -> bool:
    """A communication op's entry: a communication prefix, and an api that holds one of COMM_KEYWORDS."""
    if not name.startswith(COMM_PREFIXES):
        return False
    api = api_of(name)
    return any(word in api for word in COMM_KEYWORDS)


def api_of(name: str) -> str:
    """``Distributed.all_reduce.3.forward`` -> ``all_reduce``."""
    parts = name.split(".")
    return parts[-3] if len(parts) >= 3 else name
