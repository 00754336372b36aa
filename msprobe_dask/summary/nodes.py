"""The summary of a graph compare from its NPU nodes (a vis.db's tb_nodes rows, or the API's graphs).

Per (step, rank): nodes by precision_index (0 pass, 0.5 warning, 1 error, NULL not judged: unmatched
or without data); message kinds, counted once per node, from the Err_message of the items of the
nodes judged warning or error; the first divergence: the first API node in node order (the order of
execution) judged warning or error for a reason that is not only structural; the worst API nodes
among those judged, by their items' main metric (NormRelativeErr, highest first, or Cosine, lowest).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from msprobe_dask.dump.stack_frames import stack_frames, user_frame
from msprobe_dask.judge.rules import ERROR, PASS, WARNING
from msprobe_dask.summary.cells import as_float, is_number
from msprobe_dask.summary.kinds import KindCounter, messages
from msprobe_dask.summary.model import OTHER, GroupSummary, NodeRef, RunSummary
from msprobe_dask.summary.table import KINDS_SHOWN, METRIC_OF_COLUMN, RANK_METRICS, WORST_SHOWN, diverges

API_NODE = "1"
# step, rank, node_name, node_type, precision_index, stack_id, input_data, output_data (the last two
# may be None for nodes judged pass or not judged)
NodeFacts = tuple[int, int, str, Any, Any, str, "str | None", "str | None"]


def precision_result(precision: Any) -> str:
    if precision is None:
        return OTHER
    return {0: PASS, 0.5: WARNING, 1: ERROR}.get(precision, OTHER)


def _items(*texts: str | None) -> Iterator[dict[str, Any]]:
    for text in texts:
        if text:
            for item in json.loads(text).values():
                if isinstance(item, dict):
                    yield item


def _metric(items: list[dict[str, Any]]) -> tuple[str, float]:
    for metric in RANK_METRICS:
        values = [v for v in (as_float(item.get(metric.column)) for item in items) if is_number(v)]
        if values:
            return metric.column, max(values, key=metric.badness)
    return "", float("nan")


class _Group:
    def __init__(self, label: str) -> None:
        self.summary = GroupSummary(label=label, unit="nodes")
        self.kinds = KindCounter()
        self.judged: list[tuple[NodeRef, str]] = []  # judged API nodes and their stack ids

    def add(
        self, name: str, node_type: str, precision: Any, stack_id: str, inputs: Any, outputs: Any
    ) -> None:
        result = precision_result(precision)
        self.summary.count(result)
        if result in (PASS, OTHER):
            return
        items = list(_items(inputs, outputs))
        node_messages = [m for item in items for m in messages(item.get("Err_message"))]
        self.kinds.add(node_messages)
        if node_type != API_NODE:
            return
        metric, value = _metric(items)
        ref = NodeRef(name, metric, value, "", result, self.summary.label)
        self.judged.append((ref, stack_id))
        if self.summary.first_divergence is None and diverges(result, node_messages):
            self.summary.first_divergence = ref

    def finish(self, stack_line: Callable[[str], str]) -> GroupSummary:
        s = self.summary
        s.kinds = self.kinds.most_common(KINDS_SHOWN)
        with_stack = {id(ref): _with_stack(ref, stack_line(stack_id)) for ref, stack_id in self.judged}
        if s.first_divergence is not None:
            s.first_divergence = with_stack[id(s.first_divergence)]
        ranked = [
            ref for ref, _ in self.judged if ref.metric and METRIC_OF_COLUMN[ref.metric].ranks(ref.value)
        ]
        ranked.sort(key=lambda r: -METRIC_OF_COLUMN[r.metric].badness(r.value))
        s.worst = [with_stack[id(ref)] for ref in ranked[:WORST_SHOWN]]
        return s


def _with_stack(ref: NodeRef, stack: str) -> NodeRef:
    return dataclasses.replace(ref, stack=stack)


def summarise_nodes(command: str, nodes: Iterable[NodeFacts], stack_text: Callable[[str], Any]) -> RunSummary:
    """``nodes`` in (step, rank, node order) order; ``stack_text(stack_id)``: the stack's JSON text."""
    groups: dict[tuple[int, int], _Group] = {}
    for step, rank, name, node_type, precision, stack_id, inputs, outputs in nodes:
        group = groups.get((step, rank))
        if group is None:
            group = groups[(step, rank)] = _Group(f"step{step}/rank{rank}")
        group.add(name, str(node_type), precision, stack_id, inputs, outputs)

    def stack_line(stack_id: str) -> str:
        return user_frame(stack_frames(stack_text(stack_id)))

    return RunSummary(command, [group.finish(stack_line) for group in groups.values()])
