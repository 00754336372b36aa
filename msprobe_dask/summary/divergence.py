"""The summary's first divergence from the cross-rank analysis (``analysis.divergence``).

Each (step, rank) group's ``first_divergence`` becomes its first divergent node by that analysis (an
origin, or where it received the divergence from another rank; None when nothing there diverges), and
the run gets the job's answer: the earliest origin and the path along which it spread. Tables without
dump entries (static-graph kernel dumps) keep the summary's own rule.
"""

from __future__ import annotations

import pickle
import zlib
from array import array
from collections.abc import Collection, Container, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Any, Protocol

from msprobe_dask.analysis.divergence import (
    RankNodes,
    Walk,
    analyse_firsts,
    from_tables,
    table_columns,
    walk_rank,
)
from msprobe_dask.analysis.findings import Divergence, Finding, step_and_rank
from msprobe_dask.analysis.flow import (
    LightNode,
    Node,
    column_nodes,
    part_nodes,
    walk_nodes,
)
from msprobe_dask.analysis.links import Links
from msprobe_dask.analysis.quiet_rows import QuietRun
from msprobe_dask.analysis.row_errors import RowColumns
from msprobe_dask.analysis.tolerance import DEFAULT_TOLERANCE, Tolerance
from msprobe_dask.columns import STAT_COLUMNS


def analyse_tables(tables: Iterable[tuple[str, Any]], tol: Tolerance | None = None) -> Divergence | None:
    """The analysis of ``(label, CompareTable)`` pairs; None when no table has dump entries."""
    labelled = [(label, table) for label, table in tables if getattr(table, "entries", None)]
    return from_tables(labelled, tol) if labelled else None


def analyse_rank_nodes(
    ranks: Iterable[tuple[str, RankNodes]], tol: Tolerance | None = None
) -> Divergence | None:
    """The analysis of ``(label, the rank's nodes)`` pairs (``RankNodes.of`` its table's, or
    ``rank_of_parts`` of its parts'); None when there is none."""
    groups: dict[str, dict[int, RankNodes]] = {}
    for label, nodes in ranks:
        step, rank = step_and_rank(label)
        groups.setdefault(step, {})[rank] = nodes
    return analyse_firsts(groups, tol or DEFAULT_TOLERANCE) if groups else None


def rank_table_nodes(label: str, table: Any, tol: Tolerance | None = None) -> list[Node]:
    """The analysis's nodes of a compare table (or of a part of one: index counted from its start)."""
    return column_nodes(table_columns(table), step_and_rank(label)[1], (tol or DEFAULT_TOLERANCE).atol)


@dataclass(frozen=True, slots=True)
class NodePart:
    """A table part's nodes for the divergence analysis: how many, its communication nodes (the links
    across ranks are made from them before any rank is walked) and the part's rows as the analysis
    reads them (``RowColumns``), pickled: made into nodes only when the walk reaches the part (it stops
    at a rank's first origin), each node that cannot diverge as its ``LightNode``. Index counted from
    the part's start. The rows' texts are compressed (zlib level 1, about 10x), their statistics not
    (random digits: zlib takes longer than the rest of the packing and keeps about 70%). A part whose
    nodes the walk reads as one QuietRun when none received something from a peer (``flow.part_nodes``)
    also holds that run: the walk then reads it without its rows."""

    count: int
    rank: int
    tolerance: Tolerance
    exceeds: bool  # a row's error exceeds rtol (RowColumns.exceeds): else no node here can diverge
    packed_comms: bytes  # (packed too: the parts wait in this process and go to the rank's last task)
    packed_texts: bytes
    packed_numbers: bytes
    # the QuietRun's names and tail (packed) and its signatures' NPU max and min (arrays); b"": none
    quiet_run: bytes

    def comms(self, start: int = 0) -> list[Node]:
        """The part's communication nodes (``communication_nodes``), their indexes counted from ``start``."""
        indexes, names, comms, inputs = pickle.loads(zlib.decompress(self.packed_comms))
        rank = self.rank
        return [
            Node(rank, start + index, name, tensors, (), None, comm)
            for index, name, comm, tensors in zip(indexes, names, comms, inputs)
        ]

    def nodes(self, receiving: Container[int] = ()) -> Iterator[Node | LightNode | QuietRun]:
        """The part's nodes, each made when the walk reaches it (``receiving``: the indexes of those that
        received something from a peer, see ``flow.walk_nodes``)."""
        if self.quiet_run and not receiving:
            packed, highs, lows = pickle.loads(self.quiet_run)
            names, tail = pickle.loads(zlib.decompress(packed))
            yield QuietRun(names, tail, zip(highs, lows))
            return
        texts, md5_only = pickle.loads(zlib.decompress(self.packed_texts))
        rows = RowColumns({**texts, **pickle.loads(self.packed_numbers)}, md5_only)
        yield from walk_nodes(rows, self.rank, self.tolerance.atol, self.tolerance.rtol, receiving)


def node_part(label: str, table: Any, tol: Tolerance, linked: bool = True) -> NodePart:
    """A table part's NodePart (of a ``CompareTable``, or a part of one); without its communication nodes
    unless the rank's are ``linked`` to other ranks' (``flow.part_nodes``)."""
    rows = table_columns(table)
    rank = step_and_rank(label)[1]
    part = part_nodes(rows, rank, tol.atol, linked)
    comms, quiet = part.comms, part.quiet
    # (as columns: a Node pickled is its class and fields, and would be made twice: unpickled, then moved)
    comm_columns = (
        [node.index for node in comms],
        [node.name for node in comms],
        [node.comm for node in comms],
    )
    texts = {column: cells for column, cells in rows.cells.items() if column not in STAT_COLUMNS}
    numbers = {column: rows.cells[column] for column in STAT_COLUMNS}
    quiet_run = b""
    if quiet is not None and tol.rtol >= 0:  # (walk_nodes makes no QuietRun with an rtol below 0)
        highs, lows = (array("d", column) for column in part.extremes)  # (floats: PartNodes.quiet)
        quiet_run = pickle.dumps((_packed((quiet.names, quiet.tail)), highs, lows), pickle.HIGHEST_PROTOCOL)
    return NodePart(
        part.count,
        rank,
        tol,
        quiet is None and rows.exceeds(tol.atol, tol.rtol),  # (no row of a QuietRun has an error)
        _packed((*comm_columns, [node.inputs for node in comms])),
        _packed((texts, rows.md5_only)),
        pickle.dumps(numbers, pickle.HIGHEST_PROTOCOL),
        quiet_run,
    )


def _packed(value: Any) -> bytes:
    return zlib.compress(pickle.dumps(value, pickle.HIGHEST_PROTOCOL), 1)


class PartNodes(Protocol):
    """What ``rank_of_parts`` reads of a part of a rank's nodes (a ``NodePart``)."""

    @property
    def count(self) -> int: ...

    @property
    def exceeds(self) -> bool: ...

    def comms(self, start: int) -> list[Node]: ...

    def nodes(self, receiving: Container[int]) -> Iterable[Node | LightNode | QuietRun]: ...


@dataclass(frozen=True, slots=True)
class WalkedPart:
    """A part of a rank alone in its job that ``walk_ahead`` went through: its number of nodes and whether
    it ``exceeds``; its nodes are not kept (the analysis goes on from the walk's end, and a rank alone
    exchanges nothing: its communication nodes are never read)."""

    count: int
    exceeds: bool


def walk_ahead(label: str, parts: Sequence[PartNodes], tol: Tolerance) -> Finding | Walk | None:
    """A rank alone in its job (no link changes its walk) walked through its first ``parts``' nodes
    (``RankNodes.ahead``): its first origin if it is there, else where the walk got to; None (not walked):
    no error there exceeds rtol (the rank's may not either: then it is not walked at all)."""
    if not any(part.exceeds for part in parts):
        return None
    walk = Walk(count=sum(part.count for part in parts))
    found = walk_rank(step_and_rank(label)[0], rank_of_parts(parts).read(()), Links(), tol, walk)
    return next(found, walk)


def rank_of_parts(parts: Sequence[PartNodes | WalkedPart], ahead: Finding | Walk | None = None) -> RankNodes:
    """A rank's nodes from its parts' (in order), for ``analyse_rank_nodes``: each part decoded when the
    walk reaches it (a LightNode has no index to shift); ``ahead``: what ``walk_ahead`` found of its
    first parts (where it got to: ``read`` then gives the parts after them), which may be given as
    WalkedParts."""
    starts = list(accumulate((part.count for part in parts), initial=0))
    walked = ahead.count if isinstance(ahead, Walk) else 0

    def comms() -> list[Node]:
        return [
            node
            for part, start in zip(parts, starts)
            if not isinstance(part, WalkedPart)
            for node in part.comms(start)
        ]

    def read(receiving: Collection[int]) -> Iterator[Node | LightNode | QuietRun]:
        for part, start in zip(parts, starts):
            if start < walked or isinstance(part, WalkedPart):  # (walked ahead: whole parts)
                continue
            end = start + part.count
            for node in part.nodes({index - start for index in receiving if start <= index < end}):
                yield node.moved(start) if start and node.__class__ is Node else node  # type: ignore[union-attr]

    return RankNodes(starts[-1], comms, read, any(part.exceeds for part in parts), ahead)
