"""Communication across ranks: which nodes exchange data, what each one received, and a happens-before
clock over the whole job.

Links, from each rank's nodes in execution order:
- ``send``/``isend`` from A to B with the receive (``recv``/``irecv``) on B from A: the n-th with the
  n-th;
- ``batch_isend_irecv``: the n-th batch of A that names B with the n-th batch of B that names A; what
  A sent to B is its P2POp ``isend`` tensors whose peer is B;
- a collective (``all_reduce``, ``all_gather``, ``reduce_scatter``, ``broadcast``, ...): the n-th call
  of that api by the same set of ranks (its process group, else the whole job); each participant
  receives every other one's data, except ``broadcast``/``scatter``, where only the root sends.

The clock is a Lamport clock: each node ticks its rank's clock; a receive is later than its send; the
nodes of a collective or a batch share one time, after every participant's previous node. So a node
that happens before another (on one rank, or through a link) has a smaller time.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from msprobe_dask.analysis.comm_apis import P2P_RECV, P2P_SEND
from msprobe_dask.analysis.flow import Node, TensorError
from msprobe_dask.dump.markers import BATCH_P2P

ROOT_SENDS = ("broadcast", "scatter")

Key = tuple[int, int]  # (rank, node index)


@dataclass(frozen=True, slots=True)
class Sent:
    """What one node received from one peer: the peer, its node and the error of what it sent."""

    rank: int
    node: str
    error: float
    tensors: tuple[TensorError, ...] = ()  # the tensors sent point to point (their values, not the race)


@dataclass
class Links:
    received: dict[Key, list[Sent]] = field(default_factory=dict)
    clock: dict[Key, int] = field(default_factory=dict)  # the times of the communication nodes
    stamped: dict[int, list[int]] = field(default_factory=dict)  # each rank's clock keys' indexes, in order

    def time(self, rank: int, index: int) -> int:
        """A node's time: a communication node's from the clock; any other node ticks its rank's clock
        once after the node before it (so the nodes after a communication node count on from its time)."""
        time = self.clock.get((rank, index))
        if time is not None:
            return time
        stamped = self.stamped.get(rank, [])
        at = bisect_right(stamped, index)
        if not at:
            return index + 1
        before = stamped[at - 1]
        return self.clock[(rank, before)] + index - before


def _direction(node: Node) -> str:
    return node.name.rsplit(".", 1)[-1]


def _sent(node: Node, to: int | None = None) -> tuple[TensorError, ...]:
    """The tensors a node sends: its inputs (to one peer: its P2POp isend tensors for that peer)."""
    if to is not None and any(t.sent_to is not None for t in node.inputs):
        return tuple(t for t in node.inputs if t.sent_to == to)
    return node.inputs


def _sends_in(node: Node) -> bool:
    """Whether a collective member's data goes to the others: every member's, except for broadcast and
    scatter, where only the root's does."""
    comm = node.comm
    return comm is None or comm.api not in ROOT_SENDS or comm.root is None or comm.root == node.rank


def _message(rank: int, node: Node, tensors: tuple[TensorError, ...], point_to_point: bool) -> Sent:
    error = max((t.error for t in tensors), default=0.0)
    return Sent(rank, node.name, error, tensors if point_to_point else ())


def _groups(ranks: Mapping[int, Sequence[Node]]) -> tuple[list[tuple[Key, Key]], list[list[Key]]]:
    """(point-to-point pairs (sender, receiver), groups of nodes that take part in one exchange)."""
    if len(ranks) < 2:  # (a node's peers never hold its own rank: one rank exchanges nothing)
        return [], []
    world = frozenset(ranks)
    slots: dict[tuple[object, ...], list[Key]] = defaultdict(list)
    sends: dict[tuple[str, int, int, int], Key] = {}
    receives: dict[tuple[str, int, int, int], Key] = {}
    count: dict[tuple[object, ...], int] = defaultdict(int)

    def number(base: tuple[object, ...], rank: int) -> int:
        count[(base, rank)] += 1
        return count[(base, rank)] - 1

    collectives: dict[tuple[object, ...], tuple[object, ...]] = {}  # (a rank's calls of one collective)
    for rank, nodes in ranks.items():
        for node in nodes:
            comm = node.comm
            if comm is None:
                continue
            key = (rank, node.index)
            direction = _direction(node)
            base: tuple[object, ...] | None = collectives.get((comm, direction, rank))
            if base is not None:
                slots[(base, number(base, rank))].append(key)
                continue
            peers = sorted(world - {rank} if comm.peers is None else comm.peers)
            if comm.api == BATCH_P2P:
                for peer in peers:
                    base = ("batch", direction, frozenset((rank, peer)))
                    slots[(base, number(base, rank))].append(key)
            elif comm.api in P2P_SEND + P2P_RECV:
                for peer in peers:
                    sender, receiver = (rank, peer) if comm.api in P2P_SEND else (peer, rank)
                    table = sends if comm.api in P2P_SEND else receives
                    base = ("p2p", direction, sender, receiver, comm.api in P2P_SEND)
                    table[(direction, sender, receiver, number(base, rank))] = key
            else:
                base = ("collective", comm.api, direction, frozenset(peers) | {rank})
                collectives[(comm, direction, rank)] = base
                slots[(base, number(base, rank))].append(key)
    pairs = [(sender, receives[slot]) for slot, sender in sends.items() if slot in receives]
    return pairs, [keys for keys in slots.values() if len(keys) > 1]


def link(ranks: Mapping[int, Sequence[Node]], counts: Mapping[int, int] | None = None) -> Links:
    """What every communication node received, and the clock. ``ranks``: each rank's nodes in execution
    order, or only its communication nodes, with ``counts`` the number of nodes of each rank."""
    sizes = counts if counts is not None else {rank: len(nodes) for rank, nodes in ranks.items()}
    ranks = {rank: [node for node in nodes if node.comm is not None] for rank, nodes in ranks.items()}
    nodes = {(rank, node.index): node for rank, rank_nodes in ranks.items() for node in rank_nodes}
    pairs, groups = _groups(ranks)
    links = Links()
    for sender, receiver in pairs:
        source = nodes[sender]
        links.received.setdefault(receiver, []).append(_message(sender[0], source, _sent(source), True))
    for group in groups:
        batch = nodes[group[0]].comm.api == BATCH_P2P  # type: ignore[union-attr]
        if batch:  # what each member sent to each other one
            for key in group:
                for other in group:
                    if other != key:
                        sent = _sent(nodes[other], key[0])
                        links.received.setdefault(key, []).append(
                            _message(other[0], nodes[other], sent, True)
                        )
            continue
        senders = [k for k in group if _sends_in(nodes[k])]
        shared = [_message(k[0], nodes[k], nodes[k].inputs, False) for k in senders]
        for key in group:  # one list for the whole collective; a node skips its own rank's entry
            links.received.setdefault(key, []).extend(shared)
    links.stamped = {rank: [node.index for node in comms] for rank, comms in ranks.items()}
    links.clock = _clock(links.stamped, sizes, pairs, groups)
    return links


def _components(groups: Sequence[Sequence[Key]]) -> dict[Key, tuple[Key, ...]]:
    """Groups that share a node are one exchange (a ring of batches): each node's whole component, in
    order. Where no node is in two groups (collectives alone), each group is its component."""
    group_of: dict[Key, int] = {}
    for at, group in enumerate(groups):
        for key in group:
            if key in group_of:
                return _joined(groups)
            group_of[key] = at
    ordered = [tuple(sorted(group)) for group in groups]
    return {key: ordered[at] for key, at in group_of.items()}


def _joined(groups: Sequence[Sequence[Key]]) -> dict[Key, tuple[Key, ...]]:
    """``_components`` of groups that share nodes: joined by union-find."""
    parent: dict[Key, Key] = {}

    def root(key: Key) -> Key:
        while parent.setdefault(key, key) != key:
            key = parent[key] = parent[parent[key]]
        return key

    for group in groups:
        for key in group[1:]:
            parent[root(key)] = root(group[0])
    members: dict[Key, set[Key]] = defaultdict(set)
    for key in parent:
        members[root(key)].add(key)
    ordered = {top: tuple(sorted(keys)) for top, keys in members.items()}
    return {key: ordered[root(key)] for key in parent}


def _clock(
    comms: Mapping[int, Sequence[int]],
    sizes: Mapping[int, int],
    pairs: Sequence[tuple[Key, Key]],
    groups: Sequence[Sequence[Key]],
) -> dict[Key, int]:
    """Lamport times of the communication nodes (``comms``: their indexes in each rank, in order; ``sizes``:
    each rank's number of nodes): run every rank forward, a receive waiting for its send and a group for
    all its members; when every rank waits (a link the dumps do not complete), the least advanced one goes
    on. Every other node is ready when reached and ticks its rank's clock once (``Links.time``)."""
    if not pairs and not groups:  # (every node ready when reached: the n-th node of a rank at n + 1)
        return {(rank, index): index + 1 for rank, own in comms.items() for index in own}
    send_of = {receiver: sender for sender, receiver in pairs}
    group_of = _components(groups)
    position = dict.fromkeys(sizes, 0)
    now = dict.fromkeys(sizes, 0)
    following = {rank: 0 for rank in sizes}  # each rank's next communication node, in comms[rank]
    clock: dict[Key, int] = {}

    def ready(key: Key) -> bool:
        sender = send_of.get(key)
        if sender is not None and sender not in clock:
            return False
        return all(position[r] == i for r, i in group_of.get(key, ()))

    def stamp(keys: Sequence[Key]) -> None:
        time = max(now[r] for r, _ in keys) + 1
        sender = send_of.get(keys[0])
        if sender is not None:
            time = max(time, clock[sender] + 1)
        for r, i in keys:
            clock[(r, i)] = time
            now[r] = time
            position[r] = i + 1

    def forward(rank: int) -> None:
        """Run the rank's nodes up to its next communication node (each ticks once)."""
        own = comms.get(rank, ())
        while following[rank] < len(own) and own[following[rank]] < position[rank]:
            following[rank] += 1
        nxt = own[following[rank]] if following[rank] < len(own) else sizes[rank]
        if nxt > position[rank]:
            now[rank] += nxt - position[rank]
            position[rank] = nxt

    while any(position[r] < sizes[r] for r in sizes):
        moved = False
        for rank in sizes:
            while position[rank] < sizes[rank]:
                before = position[rank]
                forward(rank)
                moved = moved or position[rank] != before
                if position[rank] >= sizes[rank]:
                    break
                key = (rank, position[rank])
                if not ready(key):
                    break
                stamp(group_of.get(key) or (key,))
                moved = True
        if not moved:
            waiting = [r for r in sizes if position[r] < sizes[r]]
            rank = min(waiting, key=lambda r: (now[r], r))
            stamp([(rank, position[rank])])
    return clock
