"""The summary's first divergence from the cross-rank analysis (``analysis.divergence``).

Each (step, rank) group's ``first_divergence`` becomes its first divergent node by that analysis (an
origin, or where it received the divergence from another rank; None when nothing there diverges), and
the run gets the job's answer: the earliest origin and the path along which it spread. Tables without
dump entries (static-graph kernel dumps) keep the summary's own rule.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from msprobe_dask.analysis.divergence import (
    RECEIVED,
    Divergence,
    Finding,
    Tolerance,
    analyse_nodes,
    from_tables,
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
    ranks: Iterable[tuple[str, Sequence[Node]]], tol: Tolerance | None = None
) -> Divergence | None:
    """The analysis of ``(label, the rank's nodes)`` pairs (``rank_table_nodes`` of its table, or of
    its parts one after the other); None when there is none."""
    groups: dict[str, dict[int, Sequence[Node]]] = {}
    for label, nodes in ranks:
        step, rank = step_and_rank(label)
        groups.setdefault(step, {})[rank] = nodes
    return analyse_nodes(groups, tol or Tolerance()) if groups else None


def rank_table_nodes(label: str, table: Any, tol: Tolerance | None = None) -> list[Node]:
    """The analysis's nodes of a compare table (or of a part of one: index counted from its start)."""
    return rank_nodes(table_rows(table), step_and_rank(label)[1], (tol or Tolerance()).atol)


def joined_nodes(parts: Iterable[Sequence[Node]]) -> list[Node]:
    """The nodes of a table from its parts' nodes, in order (each part's indexed from 0)."""
    return [replace(node, index=i) for i, node in enumerate(n for part in parts for n in part)]


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
