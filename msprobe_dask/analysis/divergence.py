"""Where two runs first diverge, across every rank and step of a job, and how it spread.

The rule, node by node in execution order (``flow`` gives each tensor a dimensionless error with an
absolute floor ``atol``; ``links`` says what each communication node received and when):

- a node is an **origin** when its output error exceeds what it received by more than ``rtol``:
  ``output error > max(input error, error received from peers) + rtol`` (the input error of a backward
  node also counts its forward's inputs: the activations it saved), or when one of its inputs differs by
  more than ``rtol`` and no earlier node made that tensor (a parameter or data that differs);
- a node **received** the divergence when its output error exceeds its own inputs' but not what a peer
  sent (``all_reduce`` with a rank whose data differs), or when it uses a tensor a peer sent it that
  differs: it names that rank.

The first divergence of the job is the origin with the smallest happens-before time (steps in order;
within a step, the Lamport time of ``links``; a tie goes to the lower rank). Its path is the origin
followed by the first node of every rank it reached, in time order, each naming the rank it came from.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any, cast

from msprobe_dask.analysis.findings import ORIGIN, RECEIVED, Divergence, Finding, step_and_rank, step_key
from msprobe_dask.analysis.flow import LightNode, Node, TensorError, column_nodes
from msprobe_dask.analysis.links import Links, Sent, link
from msprobe_dask.analysis.quiet_rows import QuietRun
from msprobe_dask.analysis.row_entries import Signature
from msprobe_dask.analysis.row_errors import READ_COLUMNS, RowColumns
from msprobe_dask.analysis.tolerance import DEFAULT_TOLERANCE, Tolerance
from msprobe_dask.columns import NPU_P2P_OP, NPU_P2P_PEER
from msprobe_dask.dump.markers import PARAMETERS_GRAD


def _fmt(value: float) -> str:
    return "inf" if math.isinf(value) else f"{value:.3g}"


@dataclass
class _Known:
    """Tensors a rank has seen so far, by NPU (max, min): the rank that sent them and its node (one
    shared value for the rank's own: a rank of 1M entries knows 2M tensors)."""

    tensors: dict[Signature, tuple[int | None, str]] = field(default_factory=dict)

    def add(self, tensor: TensorError, sender: int | None = None, via: str = "") -> None:
        if tensor.signature is not None:
            self.tensors.setdefault(tensor.signature, _OWN if sender is None and not via else (sender, via))

    def get(self, tensor: TensorError) -> tuple[int | None, str] | None:
        return self.tensors.get(tensor.signature) if tensor.signature is not None else None


_OWN: tuple[int | None, str] = (None, "")


def _forward_of(name: str) -> str:
    """The forward node whose inputs a backward node (or a parameters_grad node) also uses."""
    for part in (".backward", "." + PARAMETERS_GRAD):
        if part in name:
            return name.replace(part, ".forward", 1)
    return ""


def _judge(
    step: str,
    node: Node,
    time: int,
    input_error: float,
    received: Sequence[Sent],
    known: _Known,
    tol: Tolerance,
) -> Finding | None:
    """Whether one node is an origin, received the divergence from a peer, or neither."""

    def found(
        kind: str, tensor: TensorError, reason: str, sender: int | None = None, via: str = ""
    ) -> Finding:
        return Finding(
            step, node.rank, node.name, node.index, time, kind, tensor.name, tensor.error,
            input_error, sender, via, reason, node.code_line,
        )  # fmt: skip

    new_inputs = [t for t in node.inputs if t.error > tol.rtol and known.get(t) is None]
    if new_inputs:
        worst = max(new_inputs, key=lambda t: t.error)
        return found(
            ORIGIN,
            worst,
            f"input {worst.name} differs (error {_fmt(worst.error)}) and no earlier node made it",
        )
    from_peers = max((s for s in received if s.rank != node.rank), key=lambda s: s.error, default=None)
    peer_error = from_peers.error if from_peers else 0.0
    worst_out = max((t for t in node.outputs if known.get(t) is None), key=lambda t: t.error, default=None)
    if worst_out and worst_out.error > tol.limit(max(input_error, peer_error)):
        peers = f" and what it received ({_fmt(peer_error)})" if from_peers else ""
        return found(
            ORIGIN,
            worst_out,
            f"output error {_fmt(worst_out.error)} exceeds its inputs' ({_fmt(input_error)}){peers}",
        )
    if worst_out and from_peers and worst_out.error > tol.limit(input_error):
        reason = f"output error {_fmt(worst_out.error)}; rank {from_peers.rank} sent error {_fmt(peer_error)}"
        return found(RECEIVED, worst_out, reason, from_peers.rank, from_peers.node)
    tensors = node.inputs + node.outputs
    arrived = [(t, k) for t in tensors if (k := known.get(t)) and k[0] is not None and t.error > tol.rtol]
    if arrived:
        tensor, (sender, via) = max(arrived, key=lambda a: a[0].error)
        reason = f"{tensor.name} (error {_fmt(tensor.error)}) is what rank {sender} sent"
        return found(RECEIVED, tensor, reason, sender, via)
    return None


def _input_error(name: str, own: float | None, forward_input: dict[str, float], previous: float) -> float:
    """A node's input error: its inputs' largest (``own``, None: none), the forward node's for a backward
    node (the activations it saved), the node before it's for a parameters_grad node (no inputs: made
    by the backward node before it)."""
    forward_input[name] = own or 0.0
    input_error = max(own or 0.0, forward_input.get(_forward_of(name), 0.0))
    return input_error if own is not None else max(input_error, previous)


@dataclass
class Walk:
    """Where a rank's walk has got to, to go on from there: the tensors it has seen, each node's input
    error by name, the last node's input error, and how many of the rank's nodes it has read."""

    known: _Known = field(default_factory=_Known)
    forward_input: dict[str, float] = field(default_factory=dict)
    previous: float = 0.0
    count: int = 0


def walk_rank(
    step: str, nodes: Iterable[Node | LightNode | QuietRun], links: Links, tol: Tolerance, walk: Walk
) -> Iterator[Finding]:
    """The findings of one rank, in execution order (as the walk reaches them), from ``walk`` on (which
    holds where the walk has got to once every node is read; not its ``count``)."""
    known, forward_input, previous = walk.known, walk.forward_input, walk.previous
    setdefault = known.tensors.setdefault
    for node in nodes:
        if node.__class__ is QuietRun:
            run = cast(QuietRun, node)
            forward_input.update(dict.fromkeys(run.names, 0.0))
            for name, own in run.tail:
                previous = _input_error(name, own, forward_input, previous)
            for signature in run.signatures:
                setdefault(signature, _OWN)
            continue
        if node.__class__ is tuple:
            name, own, signatures = node  # type: ignore[misc]
            previous = _input_error(name, own, forward_input, previous)
            for signature in signatures:
                known.tensors.setdefault(signature, _OWN)
            continue
        node = cast(Node, node)
        key = (node.rank, node.index)
        received = links.received.get(key, [])
        for sent in received:
            for tensor in sent.tensors:
                known.add(tensor, sent.rank, sent.node)
        own = max((t.error for t in node.inputs), default=None)
        input_error = previous = _input_error(node.name, own, forward_input, previous)
        finding = _judge(step, node, links.time(node.rank, node.index), input_error, received, known, tol)
        for tensor in node.inputs + node.outputs:
            known.add(tensor)
        if finding:
            yield finding
    walk.previous = previous


def _steps(groups: Mapping[str, Any]) -> list[str]:
    return sorted(groups, key=step_key)


def _path(origin: Finding, firsts: Sequence[Finding]) -> tuple[Finding, ...]:
    """The origin, then each rank of its step whose first divergence came (through others) from it."""
    reached = {origin.rank}
    path = [origin]
    pending = sorted(
        (f for f in firsts if f.step == origin.step and f.kind == RECEIVED and f.rank != origin.rank),
        key=lambda f: (f.time, f.rank),
    )
    changed = True
    while changed:
        changed = False
        for finding in list(pending):
            if finding.received_from in reached:
                reached.add(finding.rank)
                path.append(finding)
                pending.remove(finding)
                changed = True
    return (origin, *sorted(path[1:], key=lambda f: (f.time, f.rank)))


def analyse_nodes(groups: Mapping[str, Mapping[int, Sequence[Node]]], tol: Tolerance) -> Divergence:
    """The divergence of a job from its nodes: ``{step: {rank: nodes in execution order}}``."""
    origins: list[Finding] = []
    firsts: list[Finding] = []
    for step in _steps(groups):
        ranks = groups[step]
        links = link(ranks)
        for rank in sorted(ranks):
            findings = list(walk_rank(step, ranks[rank], links, tol, Walk()))
            origins.extend(f for f in findings if f.kind == ORIGIN)
            if findings:
                firsts.append(findings[0])
    counts = {(step, rank): len(nodes) for step, ranks in groups.items() for rank, nodes in ranks.items()}
    return _answer(groups, origins, firsts, counts, tol)


@dataclass(frozen=True)
class RankNodes:
    """A rank's nodes as ``analyse_firsts`` reads them: their number, the communication nodes among them,
    and ``read``: all of them in execution order, or those after where the walk got ``ahead`` (read once,
    as far as the walk goes: decoded part by part, a rank of 1M entries is never whole in memory)."""

    count: int
    # the communication nodes among them, read when the links across ranks are made (never for a job
    # of one rank: it exchanges nothing)
    comms: Callable[[], Sequence[Node]]
    # (given the indexes of the nodes that received something from a peer: ``flow.walk_nodes``' receiving)
    read: Callable[[Collection[int]], Iterable[Node | LightNode | QuietRun]]
    # a tensor's error exceeds rtol somewhere in the rank: else no rule finds a node there (see
    # flow.walk_nodes) and the rank is not walked
    exceeds: bool = True
    # a rank alone in its job (no link changes its walk), walked through its first nodes before they were
    # all made: its first origin there (where the walk stops), or where the walk got to (``read`` then
    # gives the nodes after them); None: walked here from its start
    ahead: Finding | Walk | None = None

    @classmethod
    def of(cls, nodes: Sequence[Node]) -> RankNodes:
        return cls(len(nodes), lambda: [node for node in nodes if node.comm is not None], lambda _: nodes)


def analyse_firsts(groups: Mapping[str, Mapping[int, RankNodes]], tol: Tolerance) -> Divergence:
    """``analyse_nodes``' origin, first divergent node of each (step, rank) and path, each rank walked
    only as far as its first origin (so ``origins`` holds each rank's first origin: a rank's later
    origins are never earlier, its clock runs forward)."""
    origins: list[Finding] = []
    firsts: list[Finding] = []
    for step in _steps(groups):
        ranks = groups[step]
        links = Links()  # (one rank: no link, each node at its own time, ``Links.time``)
        if len(ranks) > 1:
            links = link(
                {rank: nodes.comms() for rank, nodes in ranks.items()}, {r: n.count for r, n in ranks.items()}
            )
        for rank in sorted(r for r, nodes in ranks.items() if nodes.exceeds):
            first = None
            ahead = ranks[rank].ahead
            receiving = {index for (at, index), sent in links.received.items() if at == rank and sent}
            walked = (
                (ahead,)
                if isinstance(ahead, Finding)
                else walk_rank(step, ranks[rank].read(receiving), links, tol, ahead or Walk())
            )
            for finding in walked:
                first = first or finding
                if finding.kind == ORIGIN:
                    origins.append(finding)
                    break
            if first is not None:
                firsts.append(first)
    counts = {(step, rank): nodes.count for step, ranks in groups.items() for rank, nodes in ranks.items()}
    return _answer(groups, origins, firsts, counts, tol)


def _answer(
    groups: Mapping[str, Any],
    origins: list[Finding],
    firsts: list[Finding],
    counts: dict[tuple[str, int], int],
    tol: Tolerance,
) -> Divergence:
    order = {step: i for i, step in enumerate(_steps(groups))}
    origins.sort(key=lambda f: (order[f.step], f.time, f.rank, f.index))
    origin = origins[0] if origins else None
    return Divergence(
        tolerance=tol,
        origin=origin,
        origins=tuple(origins),
        firsts=tuple(firsts),
        path=_path(origin, firsts) if origin else (),
        nodes=counts,
    )


def table_columns(table: Any) -> RowColumns:
    """A ``CompareTable``'s rows (or a ``table.ColumnTable``'s cells, or a table read back: columns, rows,
    entries) as the columns ``flow`` reads, with each row's dump entry and, where the table knows them
    (not read back from a csv), its P2POp's op and peer."""
    cells = getattr(table, "cells", None)
    columns: dict[str, Sequence[Any]]
    if cells is None:
        rows = table.rows
        count = len(rows)
        columns = {
            column: list(map(itemgetter(i), rows))
            for i, column in enumerate(table.columns)
            if column in READ_COLUMNS
        }
    else:
        count = len(table.entries)
        columns = {column: cells[column] for column in table.columns if column in READ_COLUMNS}
    columns["api_origin_name"] = [*table.entries[:count], *[None] * (count - len(table.entries))]
    p2p = getattr(table, "p2p", {})
    for k, column in enumerate(_P2P if p2p else ()):
        made: list[Any] = [None] * count
        for row, pair in p2p.items():
            made[row] = pair[k]
        columns[column] = made
    return RowColumns.of_columns(count, columns)


_P2P = (NPU_P2P_OP, NPU_P2P_PEER)


def from_tables(labelled: Iterable[tuple[str, Any]], tol: Tolerance | None = None) -> Divergence:
    """The divergence of compare results: (label, ``CompareTable``) pairs, as ``compare`` returns them
    (``[(r.label, r.table) for r in compare(...)]``)."""
    tol = tol or DEFAULT_TOLERANCE
    groups: dict[str, dict[int, list[Node]]] = {}
    for label, table in labelled:
        step, rank = step_and_rank(label)
        groups.setdefault(step, {})[rank] = column_nodes(table_columns(table), rank, tol.atol)
    return analyse_nodes(groups, tol)
