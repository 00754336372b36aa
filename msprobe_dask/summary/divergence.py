"""The summary's first divergence from the cross-rank analysis (``analysis.divergence``).

Each (step, rank) group's ``first_divergence`` becomes its first divergent node by that analysis (an
origin, or where it received the divergence from another rank; None when nothing there diverges), and
the run gets the job's answer: the earliest origin and the path along which it spread. Tables without
dump entries (static-graph kernel dumps) keep the summary's own rule.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from msprobe_dask.analysis.divergence import (
    RECEIVED,
    Divergence,
    Finding,
    Tolerance,
    from_tables,
    step_and_rank,
)
from msprobe_dask.summary.model import NodeRef, RunSummary


def node_ref(finding: Finding, label: str) -> NodeRef:
    result = f"received from rank {finding.received_from}" if finding.kind == RECEIVED else finding.kind
    return NodeRef(finding.node, "error", finding.error, finding.stack, result, label)


def analyse_tables(tables: Iterable[tuple[str, Any]], tol: Tolerance | None = None) -> Divergence | None:
    """The analysis of ``(label, CompareTable)`` pairs; None when no table has dump entries."""
    labelled = [(label, table) for label, table in tables if getattr(table, "entries", None)]
    return from_tables(labelled, tol) if labelled else None


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
