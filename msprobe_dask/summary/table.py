"""The summary of one compare result table, from the cells written to its csv.

- counts: the ``Result`` column (a kernel table's ``Accuracy Reached or Not``: Yes is pass, No is error,
  anything else is not judged);
- message kinds: the ``Err_message`` column, per ``summary.kinds``;
- first divergence (a simple rule, to be replaced by a cross-rank analysis): the first row, in the
  table's order (execution order), that is not pass and holds a message that is not structural (or
  no message at all): a row whose only problems are dtype / shape / requires_grad kinds is skipped;
- worst rows: one per dump entry, by the mode's main metric (statistics: NormRelativeErr, highest
  first; tensor: Cosine, lowest first; md5: the first rows whose checksum differs).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from msprobe_dask.dump.stack_frames import stack_frames, user_frame
from msprobe_dask.judge.rules import ERROR, PASS
from msprobe_dask.summary.cells import as_float, is_number
from msprobe_dask.summary.kinds import KindCounter, is_structural, messages
from msprobe_dask.summary.model import OTHER, GroupSummary, NodeRef

KINDS_SHOWN = 5
WORST_SHOWN = 3
KERNEL_VERDICT = "Accuracy Reached or Not"
_KERNEL_RESULTS = {"Yes": PASS, "No": ERROR}


@dataclass(frozen=True, slots=True)
class RankMetric:
    """The metric the worst rows are ranked by; a row at its ideal value is never among them."""

    column: str
    higher_is_worse: bool
    ideal: float

    def badness(self, value: float) -> float:
        return value if self.higher_is_worse else -value

    def ranks(self, value: float) -> bool:
        return is_number(value) and value != self.ideal


RANK_METRICS = (RankMetric("NormRelativeErr", True, 0.0), RankMetric("Cosine", False, 1.0))
METRIC_OF_COLUMN = {m.column: m for m in RANK_METRICS}


def row_result(columns: Sequence[str]) -> Callable[[Sequence[Any]], str]:
    """How a row of a table with these columns gives its result."""
    if "Result" in columns:
        at = columns.index("Result")
        return lambda row: str(row[at])
    if KERNEL_VERDICT in columns:
        at = columns.index(KERNEL_VERDICT)
        return lambda row: _KERNEL_RESULTS.get(str(row[at]), OTHER)
    return lambda row: OTHER


def diverges(result: str, row_messages: Sequence[str]) -> bool:
    """The simple first-divergence rule: judged not pass, for a reason that is not only structural."""
    if result in (PASS, OTHER):
        return False
    return not row_messages or not all(is_structural(m) for m in row_messages)


def _rank_metric(columns: Sequence[str]) -> RankMetric | None:
    return next((m for m in RANK_METRICS if m.column in columns), None)


def summarise_table(
    label: str,
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    entries: Sequence[str] = (),
    kinds: KindCounter | None = None,
) -> GroupSummary:
    """``entries``: the dump entry of each row (rows of one entry share a stack and a worst-row slot);
    ``kinds``: the counter the rows' message kinds are added to (for ``merge_summaries``)."""
    group = GroupSummary(label=label, unit="rows")
    kinds = kinds if kinds is not None else KindCounter()
    name_at = columns.index("NPU Name")
    message_at = columns.index("Err_message") if "Err_message" in columns else None
    stack_at = columns.index("NPU_Stack_Info") if "NPU_Stack_Info" in columns else None
    metric = _rank_metric(columns)
    metric_at = columns.index(metric.column) if metric else None
    stack_cells: dict[str, Any] = {}  # each entry's first row's stack cell, read only for a ref shown
    worst: dict[str, tuple[str, float, str]] = {}  # entry -> its worst row's (name, value, result)

    def ref(entry: str, name: str, value: float, result: str) -> NodeRef:
        stack = user_frame(stack_frames(stack_cells[entry])) if entry in stack_cells else ""
        return NodeRef(name, metric.column if metric else "", value, stack, result, label)

    result_of = row_result(columns)
    for i, row in enumerate(rows):
        entry = entries[i] if i < len(entries) else str(i)
        if stack_at is not None and entry not in stack_cells:
            stack_cells[entry] = row[stack_at]
        result = result_of(row)
        group.count(result)
        row_messages = messages(row[message_at]) if message_at is not None else []
        kinds.add(row_messages)
        value = as_float(row[metric_at]) if metric_at is not None else float("nan")
        if group.first_divergence is None and diverges(result, row_messages):
            group.first_divergence = ref(entry, str(row[name_at]), value, result)
        if metric is None:
            if result not in (PASS, OTHER) and entry not in worst and len(worst) < WORST_SHOWN:
                worst[entry] = (str(row[name_at]), value, result)
        elif metric.ranks(value) and (
            entry not in worst or metric.badness(value) > metric.badness(worst[entry][1])
        ):
            worst[entry] = (str(row[name_at]), value, result)
    group.kinds = kinds.most_common(KINDS_SHOWN)
    shown = list(worst.items())
    if metric is not None:
        shown = sorted(shown, key=lambda item: -metric.badness(item[1][1]))[:WORST_SHOWN]
    group.worst = [ref(entry, *row) for entry, row in shown]
    return group


def merge_summaries(
    label: str, columns: Sequence[str], parts: Sequence[tuple[GroupSummary, KindCounter]]
) -> GroupSummary:
    """What summarise_table gives for a table from its parts' summaries and kind counters, in the
    table's order (each part holding whole dump entries)."""
    group = GroupSummary(label=label, unit="rows")
    kinds = KindCounter()
    worst: list[NodeRef] = []
    for part, part_kinds in parts:
        group.total += part.total
        group.passed += part.passed
        group.warnings += part.warnings
        group.errors += part.errors
        group.others += part.others
        kinds.merge(part_kinds)
        if group.first_divergence is None:
            group.first_divergence = part.first_divergence
        worst.extend(part.worst)  # each part's worst entries: the table's are among them
    group.kinds = kinds.most_common(KINDS_SHOWN)
    metric = _rank_metric(columns)
    if metric is not None:
        worst.sort(key=lambda r: -metric.badness(r.value))  # stable: ties stay in the table's order
    group.worst = worst[:WORST_SHOWN]
    return group
