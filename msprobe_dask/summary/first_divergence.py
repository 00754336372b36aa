"""The summary's first divergence from the analysis's answer (analysis/findings.py): each (step, rank)
group's first divergent node (an origin, or where it received the divergence from another rank; None
when nothing there diverges), and the run's origin and the lines of the job's answer. Apart from the
analysis (summary/divergence.py), so that an answer found without walking a rank imports neither."""

from __future__ import annotations

from msprobe_dask.analysis.findings import RECEIVED, Divergence, Finding, step_and_rank
from msprobe_dask.summary.model import NodeRef, RunSummary


def node_ref(finding: Finding, label: str) -> NodeRef:
    result = f"received from rank {finding.received_from}" if finding.kind == RECEIVED else finding.kind
    return NodeRef(finding.node, "error", finding.error, finding.stack, result, label)


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
