"""The answer of the first-divergence analysis (analysis/divergence.py): the nodes it finds, the job's
answer, and how a compare result's label names its step and rank. Apart from the analysis, so that a run
none of whose rows exceeds rtol (nothing walked) answers without importing it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from msprobe_dask.analysis.tolerance import Tolerance

ORIGIN, RECEIVED = "origin", "received"
_NUMBER = re.compile(r"(\d+)")


@dataclass(frozen=True, slots=True)
class Finding:
    """A node that diverges: where, how much, and why."""

    step: str  # "step0", "" for a single step
    rank: int
    node: str  # the dump entry
    index: int  # its position in the rank's execution order
    time: int  # happens-before time within the step
    kind: str  # ORIGIN or RECEIVED
    tensor: str  # the row that diverges most
    error: float
    input_error: float
    received_from: int | None = None
    via: str = ""  # the peer's communication node it came through
    reason: str = ""
    stack: str = ""

    @property
    def where(self) -> str:
        return "/".join(p for p in (self.step, f"rank{self.rank}") if p)


@dataclass(frozen=True)
class Divergence:
    """The answer for a whole job. ``origin`` is None when nothing diverges."""

    tolerance: Tolerance
    origin: Finding | None
    origins: tuple[Finding, ...] = ()  # every origin, earliest first
    firsts: tuple[Finding, ...] = ()  # the first divergent node of each (step, rank), in job order
    path: tuple[Finding, ...] = ()  # the origin, then where it reached each other rank, in time order
    nodes: dict[tuple[str, int], int] = field(default_factory=dict)  # nodes analysed per (step, rank)

    def first(self, step: str, rank: int) -> Finding | None:
        return next((f for f in self.firsts if (f.step, f.rank) == (step, rank)), None)

    def lines(self) -> list[str]:
        """The answer in a few lines of text."""
        if self.origin is None:
            return ["First divergence: none (every node within tolerance)"]
        o = self.origin
        lines = [
            f"First divergence: {o.where} {o.node}",
            f"    {o.reason}",
        ]
        if o.stack:
            lines.append(f"    code: {o.stack}")
        for hop in self.path[1:]:
            lines.append(f"    spread: {hop.where} {hop.node} (received from rank {hop.received_from})")
        return lines


def step_key(step: str) -> tuple[Any, ...]:
    return tuple(int(p) if p.isdigit() else p for p in _NUMBER.split(step))


def step_and_rank(label: str) -> tuple[str, int]:
    """A compare result's label (``step0/rank2``, ``rank1``, ``graph/step0/proc3``, ``""``) as
    (step, rank); a folder without a rank number is rank 0."""
    parts = [p for p in label.split("/") if p]
    rank_part = parts[-1] if parts and parts[-1].startswith(("rank", "proc")) else ""
    digits = rank_part[4:]
    step = "/".join(parts[:-1] if rank_part else parts)
    return step, int(digits) if rank_part.startswith("rank") and digits.isdigit() else 0
