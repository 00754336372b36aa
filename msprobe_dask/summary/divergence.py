"""The summary's first divergence from the cross-rank analysis (``analysis.divergence``).

Each (step, rank) group's ``first_divergence`` becomes its first divergent node by that analysis (an
origin, or where it received the divergence from another rank; None when nothing there diverges), and
the run gets the job's answer: the earliest origin and the path along which it spread. Tables without
dump entries (static-graph kernel dumps) keep the summary's own rule.
"""

from __future__ import annotations

import pickle
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from itertools import accumulate
from typing import Any

from msprobe_dask.analysis.divergence import (
    RECEIVED,
    Divergence,
    Finding,
    LightNode,
    RankNodes,
    Tolerance,
    analyse_firsts,
    from_tables,
    light_node,
    step_and_rank,
    table_rows,
)
from msprobe_dask.analysis.flow import Node, rank_nodes
from msprobe_dask.summary.model import NodeRef, RunSummary


def node_ref(finding: Finding, label: str) -> NodeRef:
    result = f"received from rank {finding.received_from}" if finding.kind == RECEIVED else finding.kind
    return NodeRef(finding.node, "error", finding.error, finding.stack, result, label)


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
    return analyse_firsts(groups, tol or Tolerance()) if groups else None


def rank_table_nodes(label: str, table: Any, tol: Tolerance | None = None) -> list[Node]:
    """The analysis's nodes of a compare table (or of a part of one: index counted from its start)."""
    return rank_nodes(table_rows(table), step_and_rank(label)[1], (tol or Tolerance()).atol)


@dataclass(frozen=True, slots=True)
class NodePart:
    """A table part's nodes for the divergence analysis: how many, its communication nodes (the links
    across ranks are made from them before any rank is walked), and all of them in order, pickled and
    compressed (zlib level 1), each node that cannot diverge as its ``LightNode`` (plain tuples: no
    stack or tensor names, which only a finding shows). Index counted from the part's start."""

    count: int
    packed_comms: bytes  # (packed too: the parts wait in this process and go to the rank's last task)
    packed: bytes

    def comms(self) -> list[Node]:
        return pickle.loads(zlib.decompress(self.packed_comms))  # type: ignore[no-any-return]

    def nodes(self) -> list[Node | LightNode]:
        return pickle.loads(zlib.decompress(self.packed))  # type: ignore[no-any-return]


def node_part(nodes: Sequence[Node], tol: Tolerance) -> NodePart:
    """A table part's NodePart from its nodes (``rank_table_nodes`` of the part's table)."""
    walked = [light_node(node, tol) or node for node in nodes]
    comms = [node for node in nodes if node.comm is not None]
    return NodePart(len(nodes), _packed(comms), _packed(walked))


def _packed(nodes: Sequence[Node | LightNode]) -> bytes:
    return zlib.compress(pickle.dumps(nodes, pickle.HIGHEST_PROTOCOL), 1)


def rank_of_parts(parts: Sequence[NodePart]) -> RankNodes:
    """A rank's nodes from its parts' (in order), for ``analyse_rank_nodes``: each part decoded when the
    walk reaches it (a LightNode has no index to shift)."""
    starts = list(accumulate((part.count for part in parts), initial=0))
    comms = [
        replace(node, index=start + node.index) for part, start in zip(parts, starts) for node in part.comms()
    ]

    def read() -> Iterator[Node | LightNode]:
        for part, start in zip(parts, starts):
            for node in part.nodes():
                yield replace(node, index=start + node.index) if start and node.__class__ is Node else node

    return RankNodes(starts[-1], comms, read)


def apply_divergence(summary: RunSummary, found: Divergence | None) -> None:
    """Fill ``summary``'s groups and origin from ``found`` (nothing to do when it is None)."""
    if found is None:
        return
    for group in summary.groups:
        key = step_and_rank(group.label)
        if key in found.nodes:
            first = found.first(*key)
            group.first_divergence = node_ref(first, group.label) if first else None
    origin = found.origin
    if origin is not None:
        label = next(
            (g.label for g in summary.groups if step_and_rank(g.label) == (origin.step, origin.rank)), ""
        )
        summary.origin = node_ref(origin, label)
    summary.origin_lines = found.lines()
