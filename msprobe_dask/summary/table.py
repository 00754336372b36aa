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

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from itertools import compress, repeat
from operator import ne
from typing import Any, NamedTuple

from msprobe_dask.columns import (
    COSINE,
    ERR_MESSAGE,
    KERNEL_VERDICT,
    NORM_RELATIVE_ERR,
    NOT_REACHED,
    NPU_NAME,
    REACHED,
    RESULT,
    STACK_COLUMN,
)
from msprobe_dask.dump.stack_frames import stack_frames, user_frame
from msprobe_dask.judge.rules import ERROR, PASS
from msprobe_dask.summary.cells import as_floats, is_number
from msprobe_dask.summary.kinds import KindCounter, is_structural, messages
from msprobe_dask.summary.model import OTHER, GroupSummary, NodeRef

KINDS_SHOWN = 5
WORST_SHOWN = 3
_KERNEL_RESULTS = {REACHED: PASS, NOT_REACHED: ERROR}


class RankMetric(NamedTuple):
    """The metric the worst rows are ranked by; a row at its ideal value is never among them."""

    column: str
    higher_is_worse: bool
    ideal: float

    def badness(self, value: float) -> float:
        return value if self.higher_is_worse else -value

    def worst(self, values: list[float]) -> float:
        """``max(values, key=self.badness)``: the first of the worst."""
        return max(values) if self.higher_is_worse else min(values)

    def ranks(self, value: float) -> bool:
        return is_number(value) and value != self.ideal


RANK_METRICS = (RankMetric(NORM_RELATIVE_ERR, True, 0.0), RankMetric(COSINE, False, 1.0))
METRIC_OF_COLUMN = {m.column: m for m in RANK_METRICS}


def _results(columns: Sequence[str], cells: Mapping[str, Sequence[Any]], count: int) -> list[str]:
    """``row_result`` of every row of a table given column by column."""
    if RESULT in columns:
        return list(map(str, cells[RESULT]))
    if KERNEL_VERDICT in columns:
        return [_KERNEL_RESULTS.get(str(cell), OTHER) for cell in cells[KERNEL_VERDICT]]
    return [OTHER] * count


def diverges(result: str, row_messages: Sequence[str]) -> bool:
    """The simple first-divergence rule: judged not pass, for a reason that is not only structural."""
    if result in (PASS, OTHER):
        return False
    return not row_messages or not all(is_structural(m) for m in row_messages)


def _rank_metric(columns: Sequence[str]) -> RankMetric | None:
    return next((m for m in RANK_METRICS if m.column in columns), None)


SUMMARY_COLUMNS = {NPU_NAME, ERR_MESSAGE, STACK_COLUMN, RESULT, KERNEL_VERDICT, *METRIC_OF_COLUMN}
"""The columns the summary reads."""


def summarise_table(
    label: str,
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    entries: Sequence[str] = (),
    kinds: KindCounter | None = None,
) -> GroupSummary:
    """``entries``: the dump entry of each row (rows of one entry share a stack and a worst-row slot);
    ``kinds``: the counter the rows' message kinds are added to (for ``merge_summaries``)."""
    cells = {c: [row[i] for row in rows] for i, c in enumerate(columns) if c in SUMMARY_COLUMNS}
    return summarise_columns(label, columns, cells, len(rows), entries, kinds)


def summarise_columns(
    label: str,
    columns: Sequence[str],
    cells: Mapping[str, Sequence[Any]],
    count: int,
    entries: Sequence[str] = (),
    kinds: KindCounter | None = None,
) -> GroupSummary:
    """``summarise_table`` of the ``count`` rows of a table given column by column (``cells``: at least
    the cells of its columns that the summary reads)."""
    group = GroupSummary(label=label, unit="rows")
    kinds = kinds if kinds is not None else KindCounter()
    names = cells[NPU_NAME]
    stacks = cells[STACK_COLUMN] if STACK_COLUMN in columns else None
    metric = _rank_metric(columns)
    row_entries = [*entries[:count], *map(str, range(len(entries), count))]
    results = _results(columns, cells, count)
    counted = Counter(results)
    for result, n in counted.items():
        group.count(result, n)
    if ERR_MESSAGE in columns:
        texts = cells[ERR_MESSAGE]
        for text, n in Counter(texts).items():  # (in the rows' order of first sight: as row by row)
            kinds.add(messages(text), n)
        row_messages: Callable[[int], list[str]] = lambda i: messages(texts[i])  # noqa: E731
    else:
        row_messages = lambda i: []  # noqa: E731
    # (a row judged pass or not judged never diverges: its messages are not read, nor its result where
    # every row is such a row)
    judged = counted.keys() - {PASS, OTHER}
    rows = enumerate(results) if judged else iter(())
    first = next((i for i, r in rows if r not in (PASS, OTHER) and diverges(r, row_messages(i))), None)
    values = as_floats(cells[metric.column]) if metric else [float("nan")] * count
    worst: dict[str, tuple[str, float, str]] = {}  # entry -> its worst row's (name, value, result)
    if metric is None:
        for i, result in enumerate(results):
            if len(worst) >= WORST_SHOWN:
                break
            if result not in (PASS, OTHER) and row_entries[i] not in worst:
                worst[row_entries[i]] = (str(names[i]), values[i], result)
    else:
        badness, ranks = metric.badness, metric.ranks
        # (a value at the ideal never ranks: most rows' are, passed over without a call)
        for i in compress(range(count), map(ne, values, repeat(metric.ideal))):
            value, entry = values[i], row_entries[i]
            if ranks(value) and (entry not in worst or badness(value) > badness(worst[entry][1])):
                worst[entry] = (str(names[i]), value, results[i])

    def ref(entry: str, name: str, value: float, result: str) -> NodeRef:
        # (the stack of the entry's first row: a few entries are shown, each found by one search)
        stack = user_frame(stack_frames(stacks[row_entries.index(entry)])) if stacks is not None else ""
        return NodeRef(name, metric.column if metric else "", value, stack, result, label)

    if first is not None:
        group.first_divergence = ref(row_entries[first], str(names[first]), values[first], results[first])
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
