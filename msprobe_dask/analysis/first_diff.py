"""Where a multi-rank run first diverges (compare.md §7.3), from each rank's records.

Three stages, each stopping the search when it finds something:

1. before any communication: the first not-same entry of each rank;
2. during communication: each rank's communication ops form a chain; the compute ops after a
   communication op hang from it (their position is its *sub-layer*). Communication ops that take
   part in the same collective or point-to-point exchange are linked across ranks and share one
   *layer*, the earliest depth every participant can have reached. The earliest (layer, sub-layer)
   that is not the same wins, on every rank where it occurs;
3. after the last communication op: the first not-same entry of each rank.

Pure functions over plain data: ``RankEntries`` per rank in, ``{rank: [entry names]}`` out.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from msprobe_dask.analysis.comm_apis import P2P_RECV, P2P_SEND, api_of, exchange, is_communication
from msprobe_dask.columns import NPU_DTYPE, NPU_MAX, NPU_NAME, NPU_P2P_PEER
from msprobe_dask.dump.markers import BATCH_P2P

IGNORED = ("Torch.empty", "Torch.fill", "Tensor.__setitem__")


@dataclass(frozen=True, slots=True)
class Entry:
    """One dump entry of one rank, as the analyzer sees it."""

    name: str
    is_same: bool
    peers: frozenset[int] | None = None  # ranks it communicates with (None: the whole world)


@dataclass
class CommNode:
    rank: int
    index: int  # position in the rank's chain of communication ops
    entry: Entry
    after: list[Entry] = field(default_factory=list)  # compute ops up to the next communication op
    layer: int = 0


def peers_of(name: str, items: Sequence[Mapping[str, Any]], rank: int) -> frozenset[int] | None:
    """Who a communication op talks to, from its input items (``comm_apis.exchange``)."""
    inputs = [item for item in items if item.get("state") == "input"]
    cells = ((i.get(NPU_NAME, ""), i.get(NPU_P2P_PEER), i.get(NPU_MAX), i.get(NPU_DTYPE)) for i in inputs)
    return exchange(api_of(name), cells, rank)[0]


def entries_of(records: Mapping[str, Mapping[str, Any]], rank: int) -> list[Entry]:
    """The analyzer's view of one rank's records, in dump order, without the ignored entries."""
    entries = []
    for name, record in records.items():
        if any(word in name for word in IGNORED):
            continue
        peers = peers_of(name, record["op_items"], rank) if is_communication(name) else None
        entries.append(Entry(name, bool(record["is_same"]), peers))
    return entries


def _before_communication(ranks: Mapping[int, list[Entry]]) -> dict[int, list[str]]:
    found = {}
    for rank, entries in ranks.items():
        for entry in entries:
            if is_communication(entry.name):
                break
            if not entry.is_same:
                found[rank] = [entry.name]
                break
    return found


def _chains(ranks: Mapping[int, list[Entry]]) -> dict[int, list[CommNode]]:
    chains: dict[int, list[CommNode]] = {}
    for rank, entries in ranks.items():
        nodes: list[CommNode] = []
        for entry in entries:
            if is_communication(entry.name):
                nodes.append(CommNode(rank, len(nodes), entry))
            elif nodes:
                nodes[-1].after.append(entry)
        chains[rank] = nodes
    return chains


def _link(chains: Mapping[int, list[CommNode]]) -> list[list[CommNode]]:
    """Groups of communication ops that are one exchange across ranks.

    Collectives: the n-th op of an api within the same set of participants. Point-to-point: the
    n-th send from A to B with the n-th receive on B from A. batch_isend_irecv: the n-th batch of
    two ranks that name each other as peers.
    """
    world = frozenset(chains)
    groups: dict[tuple[Any, ...], list[CommNode]] = defaultdict(list)
    counters: dict[tuple[Any, ...], int] = defaultdict(int)
    for rank, nodes in chains.items():
        for node in nodes:
            api = api_of(node.entry.name)
            direction = node.entry.name.rsplit(".", 1)[-1]
            peers = node.entry.peers
            if api in P2P_SEND or api in P2P_RECV:
                other = min(peers) if peers else -1
                pair = (rank, other) if api in P2P_SEND else (other, rank)
                base: tuple[Any, ...] = ("p2p", direction, pair)
            elif api == BATCH_P2P:
                for other in sorted(peers or ()):
                    key = ("batch", direction, frozenset((rank, other)))
                    number = counters[(key, rank)]
                    counters[(key, rank)] += 1
                    groups[(key, number)].append(node)
                continue
            else:
                members = world if peers is None else frozenset(peers | {rank})
                base = ("collective", api, direction, members)
            number = counters[(base, rank)]
            counters[(base, rank)] += 1
            groups[(base, number)].append(node)
    return [nodes for nodes in groups.values() if len(nodes) > 1]


def _assign_layers(chains: Mapping[int, list[CommNode]], links: Iterable[list[CommNode]]) -> None:
    """Layer = chain depth, raised so that linked ops share the deepest participant's layer."""
    links = list(links)
    for nodes in chains.values():
        for node in nodes:
            node.layer = node.index
    total = sum(len(nodes) for nodes in chains.values())
    for _ in range(total + 1):
        changed = False
        for group in links:
            top = max(node.layer for node in group)
            for node in group:
                if node.layer < top:
                    node.layer, changed = top, True
        for nodes in chains.values():
            for before, node in zip(nodes, nodes[1:]):
                if node.layer <= before.layer:
                    node.layer, changed = before.layer + 1, True
        if not changed:
            return


def _during_communication(ranks: Mapping[int, list[Entry]]) -> dict[int, list[str]]:
    chains = _chains(ranks)
    _assign_layers(chains, _link(chains))
    candidates: list[tuple[int, int, int, str]] = []
    for rank, nodes in chains.items():
        for node in nodes[:-1] if nodes else []:
            if not node.entry.is_same:
                candidates.append((node.layer, 0, rank, node.entry.name))
                continue
            for position, entry in enumerate(node.after, start=1):
                if not entry.is_same:
                    candidates.append((node.layer, position, rank, entry.name))
                    break
        if nodes and not nodes[-1].entry.is_same:
            candidates.append((nodes[-1].layer, 0, rank, nodes[-1].entry.name))
    if not candidates:
        return {}
    best = min((layer, sub) for layer, sub, _, _ in candidates)
    found: dict[int, list[str]] = {}
    for layer, sub, rank, name in sorted(candidates, key=lambda c: c[2]):
        if (layer, sub) == best:
            found.setdefault(rank, []).append(name)
    return found


def _after_communication(ranks: Mapping[int, list[Entry]]) -> dict[int, list[str]]:
    found = {}
    for rank, entries in ranks.items():
        last = max((i for i, e in enumerate(entries) if is_communication(e.name)), default=-1)
        for entry in entries[last + 1 :]:
            if not entry.is_same:
                found[rank] = [entry.name]
                break
    return found


def first_divergence(ranks: Mapping[int, list[Entry]]) -> tuple[str, dict[int, list[str]]]:
    """(stage, {rank: [entry names]}) of the first divergence; stage '' and {} when there is none."""
    ranks = dict(sorted(ranks.items()))
    for stage, search in (
        ("before communication", _before_communication),
        ("during communication", _during_communication),
        ("after communication", _after_communication),
    ):
        found = search(ranks)
        if found:
            return stage, found
    return "", {}
