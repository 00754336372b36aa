"""The summary of a graph compare from its NPU nodes (a vis.db's tb_nodes rows, or the API's graphs).

Per (step, rank): nodes by precision_index (0 pass, 0.5 warning, 1 error, NULL not judged: unmatched
or without data); message kinds, counted once per node, from the Err_message of the items of the
nodes judged warning or error; the first divergence: the first API node in node order (the order of
execution) judged warning or error for a reason that is not only structural; the worst API nodes
among those judged, by their items' main metric (NormRelativeErr, highest first, or Cosine, lowest).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable
from copy import copy
from functools import lru_cache, partial
from typing import Any, Protocol

from msprobe_dask.columns import ERR_MESSAGE
from msprobe_dask.dump.stack_frames import stack_frames, user_frame
from msprobe_dask.judge.rules import ERROR, PASS, UNREADABLE, WARNING
from msprobe_dask.summary.cells import NAN, as_float
from msprobe_dask.summary.kinds import KindCounter, messages
from msprobe_dask.summary.model import OTHER, GroupSummary, NodeRef, RunSummary
from msprobe_dask.summary.table import KINDS_SHOWN, METRIC_OF_COLUMN, RANK_METRICS, WORST_SHOWN, diverges

API_NODE = "1"
SUMMARY_KEYS = (ERR_MESSAGE, *(m.column for m in RANK_METRICS))  # what the summary reads of an item
# step, rank, node_name, node_type, precision_index, stack_id, input_data, output_data (the last two
# may be None for nodes judged pass or not judged)
NodeFacts = tuple[int, int, str, Any, Any, str, "str | None", "str | None"]


PRECISION_INDEX: dict[str, int | float] = {PASS: 0, WARNING: 0.5, ERROR: 1}
"""A judged node's precision_index (graph_visualize.md §3.5) by its worst item's Result."""
_RESULT_OF_PRECISION = {index: result for result, index in PRECISION_INDEX.items()}
JUDGED_PRECISIONS = frozenset(p for p, result in _RESULT_OF_PRECISION.items() if result not in (PASS, OTHER))
"""The precision_index of the nodes whose items ``NodeGroup.add`` reads."""


def precision_result(precision: Any) -> str:
    if precision is None:
        return OTHER
    return _RESULT_OF_PRECISION.get(precision, OTHER)


def items_of_texts(*texts: str | None) -> list[dict[str, Any]]:
    """The items of a node's input_data and output_data texts (JSON objects of items)."""
    return [item for text in texts if text for item in json.loads(text).values() if isinstance(item, dict)]


def _metric(items: list[dict[str, Any]]) -> tuple[str, float]:
    for metric in RANK_METRICS:
        column = metric.column
        values = []
        for item in items:
            cell = item.get(column)
            if cell is None:  # (as_float(None) is NaN: an item without the cell is passed over at once)
                continue
            # as_float(cell), a text's (a relative error's percentage: a dump's repeat) remembered; the
            # calls inline (T: 3,496 judged API nodes, 12,736 cells)
            value = (
                cell
                if cell.__class__ is float
                else _text_float(cell)
                if cell.__class__ is str
                else as_float(cell)
            )
            if value == value:  # (is_number: not NaN)
                values.append(value)
        if values:
            return column, metric.worst(values)
    return "", NAN


@lru_cache(maxsize=4096)
def _text_float(cell: str) -> float:
    return as_float(cell)


NodeMessages = tuple[tuple[tuple[str, str], ...], tuple[str, ...], bool]
"""What a judged node's Err_message cells say: the kinds of their messages (KindCounter.kinds_of), why
tensor files could not be read (unreadable_problems), and whether a node judged so diverges."""


def _read_messages(cells: tuple[Any, ...]) -> NodeMessages:
    found = [m for cell in cells for m in messages(cell)]
    problems = tuple(unreadable_problems([{ERR_MESSAGE: cell} for cell in cells]))
    return KindCounter.kinds_of(found), problems, diverges(ERROR, found)


_cell_messages = lru_cache(maxsize=4096)(_read_messages)  # (judged nodes' cells repeat: each set read once)


def _node_messages(items: list[dict[str, Any]]) -> NodeMessages:
    cells = tuple([item.get(ERR_MESSAGE) for item in items])
    try:
        return _cell_messages(cells)
    except TypeError:  # a cell that is not hashable
        return _read_messages(cells)


class RowPiece(Protocol):
    """What a NodeGroup does with the rows the first-divergence walk reads of its nodes
    (analysis.rank_rows.RankRows): keep its own copy, and add a later group's."""

    def copy(self) -> RowPiece: ...

    def add(self, later: Any) -> None: ...


Shown = tuple[str, str, float, str, str]
"""A node the summary may show, until it is shown (``NodeGroup.finish`` makes its NodeRef): its name,
metric, the metric's value, its result and its group's label."""


class NodeGroup:
    """The summary of one (step, rank)'s nodes, added in node order; or of a run of them, merged in
    node order with the runs after it (``merge``), keeping only what the summary shows (``trimmed``).
    A judged node's stack is a key until the summary is made: whatever ``finish``'s ``stack_line``
    reads (a stack id, a stack's text)."""

    __slots__ = ("summary", "kinds", "first", "ranked", "unreadable", "divergence")

    def __init__(self, label: str) -> None:
        self.summary = GroupSummary(label=label, unit="nodes")
        self.kinds = KindCounter()
        self.first: tuple[Shown, Any] | None = None  # the first divergence and its stack key
        self.ranked: list[tuple[Shown, Any]] = []  # judged API nodes with a metric to rank, in order
        self.unreadable: list[str] = []  # why rows' tensor files could not be read (unreadable_problems)
        # the compare rows of its nodes as the first-divergence walk reads them (graph/divergence_rows.py;
        # None: none made, a build)
        self.divergence: RowPiece | None = None

    def add(
        self, name: str, node_type: str, precision: Any, stack: Any, items: Callable[[], list[dict[str, Any]]]
    ) -> None:
        """A node; ``items()``: its items as exported (SUMMARY_KEYS of them at least), read only if it
        is judged warning or error."""
        result = _RESULT_OF_PRECISION.get(precision, OTHER)  # (precision_result: None is no key)
        self.summary.count(result)
        if result not in (PASS, OTHER):
            self.add_judged(name, node_type, result, stack, items())

    def count(self, precisions: Iterable[Any]) -> None:
        """Count nodes by their precision_index, as ``add`` counts each, all at once; those judged
        warning or error (JUDGED_PRECISIONS) then go to ``add_judged``."""
        for precision, n in Counter(precisions).items():
            self.summary.count(_RESULT_OF_PRECISION.get(precision, OTHER), n)

    def add_judged(
        self, name: str, node_type: str, result: str, stack: Any, node_items: list[dict[str, Any]]
    ) -> None:
        """A node judged ``result`` (warning or error), counted already, and its items as ``add`` reads
        them."""
        kinds, problems, diverging = _node_messages(node_items)
        if result == ERROR and problems:
            self.unreadable += problems
        self.kinds.add_kinds(kinds)
        if node_type != API_NODE:
            return
        metric, value = _metric(node_items)
        ref = (name, metric, value, result, self.summary.label)  # (a NodeRef for the few shown: finish)
        if metric and METRIC_OF_COLUMN[metric].ranks(value):
            self.ranked.append((ref, stack))
        if self.first is None and diverging:
            self.first = (ref, stack)

    def merge(self, later: NodeGroup) -> None:
        """Add ``later``, the summary of the nodes that follow this one's."""
        s, t = self.summary, later.summary
        s.total, s.passed, s.warnings = s.total + t.total, s.passed + t.passed, s.warnings + t.warnings
        s.errors, s.others = s.errors + t.errors, s.others + t.others
        self.kinds.merge(later.kinds)
        if self.first is None:
            self.first = later.first
        self.ranked += later.ranked
        self.unreadable += later.unreadable
        if later.divergence is not None:
            if self.divergence is None:  # (its own: added to in place)
                self.divergence = later.divergence.copy()
            else:
                self.divergence.add(later.divergence)

    def walked(self) -> NodeGroup:
        """This group without the rows of its nodes for the first-divergence walk (``divergence``), the
        walk done: what the vis.db's last task reads of it."""
        out = copy(self)
        out.divergence = None
        return out

    def trimmed(self, stack_key: Callable[[Any], Any]) -> NodeGroup:
        """Only the nodes the summary may show (the first divergence, the worst few: the worst of the
        merged runs are among the worst of each), their stack keys turned by ``stack_key``."""
        out = NodeGroup(self.summary.label)
        out.summary, out.kinds, out.unreadable = self.summary, self.kinds, self.unreadable
        out.divergence = self.divergence
        if self.first is not None:
            out.first = (self.first[0], stack_key(self.first[1]))
        out.ranked = [(ref, stack_key(stack)) for ref, stack in _worst(self.ranked)]
        return out

    def finish(self, stack_line: Callable[[Any], str]) -> GroupSummary:
        """The group's summary; ``stack_line(stack key)``: the line of a shown node's stack."""
        s = self.summary
        s.kinds = self.kinds.most_common(KINDS_SHOWN)
        if self.first is not None:
            s.first_divergence = _node_ref(self.first[0], stack_line(self.first[1]))
        s.worst = [_node_ref(ref, stack_line(stack)) for ref, stack in _worst(self.ranked)]
        return s


def _worst(ranked: list[tuple[Shown, Any]]) -> list[tuple[Shown, Any]]:
    """The WORST_SHOWN worst of ``ranked`` (in node order), worst first; ties keep node order."""
    return sorted(ranked, key=lambda r: -METRIC_OF_COLUMN[r[0][1]].badness(r[0][2]))[:WORST_SHOWN]


def _node_ref(shown: Shown, stack: str) -> NodeRef:
    name, metric, value, result, label = shown
    return NodeRef(name, metric, value, stack, result, label)


def unreadable_problems(items: list[dict[str, Any]]) -> list[str]:
    """Why an error node's tensor files could not be read (judge.rules.mark_unreadable's lines), from
    its items' Err_message."""
    problems = []
    for item in items:
        message = item.get(ERR_MESSAGE)
        for line in json.loads(message) if isinstance(message, str) and UNREADABLE in message else ():
            if line.startswith(UNREADABLE):
                problems.append(line.removeprefix(UNREADABLE))
    return problems


def stack_line(stack_text: Any) -> str:
    """The line a summary shows of a stack, from its JSON text (None: no stack)."""
    return user_frame(stack_frames(stack_text))


def group_label(step: int, rank: int) -> str:
    return f"step{step}/rank{rank}"


def summarise_nodes(command: str, nodes: Iterable[NodeFacts], stack_text: Callable[[str], Any]) -> RunSummary:
    """``nodes`` in (step, rank, node order) order; ``stack_text(stack_id)``: the stack's JSON text."""
    groups: dict[tuple[int, int], NodeGroup] = {}
    for step, rank, name, node_type, precision, stack_id, inputs, outputs in nodes:
        group = groups.get((step, rank))
        if group is None:
            group = groups[(step, rank)] = NodeGroup(group_label(step, rank))
        group.add(name, str(node_type), precision, stack_id, partial(items_of_texts, inputs, outputs))
    groups_made = [
        group.finish(lambda stack_id: stack_line(stack_text(stack_id))) for group in groups.values()
    ]
    return RunSummary(command, groups_made)
