"""The summary records: one ``GroupSummary`` per (step, rank) compared, inside a ``RunSummary``.

``first_divergence`` is filled by one rule (``summary.table.first_divergent_row`` or, for a graph,
``graph.row_summary.summarise_rows``); for compare tables, ``summary.divergence`` replaces it with the
cross-rank analysis's answer and adds the job's origin.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from msprobe_dask.judge.rules import ERROR, PASS, WARNING

OTHER = "other"  # the Result of a row no rule judged (the judge's texts: judge/rules.py)


@dataclass(frozen=True, slots=True)
class MessageKind:
    """One kind of Err_message (its text with values abstracted) and how many rows hold it."""

    text: str
    count: int
    structural: bool  # a dtype / shape / requires_grad / scalar mismatch, not a numeric difference


class NodeRef(NamedTuple):
    """A row (compare) or node (graph) worth looking at: its name, one metric and one stack line."""

    name: str
    metric: str = ""
    value: float = float("nan")
    stack: str = ""
    result: str = ""
    label: str = ""  # the (step, rank) it belongs to, as GroupSummary.label


@dataclass(slots=True)
class GroupSummary:
    """One (step, rank) compared: rows (or nodes) by result, message kinds, first divergence, worst few."""

    label: str  # "step0/rank2", "" for a single dump
    unit: str  # "rows" (compare) or "nodes" (graph_visualize)
    total: int = 0
    passed: int = 0
    warnings: int = 0
    errors: int = 0
    others: int = 0  # not judged: unmatched graph nodes, kernel rows without a verdict
    kinds: list[MessageKind] = field(default_factory=list)  # most frequent first
    first_divergence: NodeRef | None = None
    worst: list[NodeRef] = field(default_factory=list)

    @property
    def counts(self) -> dict[str, int]:
        return {PASS: self.passed, WARNING: self.warnings, ERROR: self.errors, OTHER: self.others}

    def count(self, result: str, rows: int = 1) -> None:
        """Add ``rows`` rows (nodes) whose result is ``result`` (pass / warning / error / anything else)."""
        self.total += rows
        if result == PASS:
            self.passed += rows
        elif result == WARNING:
            self.warnings += rows
        elif result == ERROR:
            self.errors += rows
        else:
            self.others += rows


@dataclass(slots=True)
class RunSummary:
    """The whole run: its groups in the order they were compared, and the files written."""

    command: str  # "compare" or "graph_visualize"
    groups: list[GroupSummary] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    origin: NodeRef | None = None  # the job's first divergence, by summary.divergence
    origin_lines: list[str] = field(default_factory=list)  # it, the reason, and how it spread

    @property
    def first_divergence(self) -> NodeRef | None:
        """The job's first divergence (``summary.divergence``) when it was analysed, else the first
        divergence of the first group, in compare order, that has one."""
        if self.origin_lines:
            return self.origin
        return next((g.first_divergence for g in self.groups if g.first_divergence is not None), None)
