"""The summary of a graph compare, read back from the vis.db it wrote (the NPU side's nodes).

Per (step, rank): nodes by precision_index (0 pass, 0.5 warning, 1 error, NULL not judged: unmatched
or without data); message kinds, counted once per node, from the Err_message of the items of the
nodes judged warning or error; the first divergence: the first API node in node order (the order of
execution) judged warning or error for a reason that is not only structural; the worst API nodes
among those judged, by their items' main metric (NormRelativeErr, highest first, or Cosine, lowest).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from msprobe_dask.summary.cells import as_float, is_number
from msprobe_dask.summary.kinds import KindCounter, messages
from msprobe_dask.summary.model import ERROR, OTHER, PASS, WARNING, GroupSummary, NodeRef, RunSummary
from msprobe_dask.summary.stack import stack_frames, user_frame
from msprobe_dask.summary.table import HIGHER_IS_WORSE, KINDS_SHOWN, RANK_METRICS, WORST_SHOWN, diverges

API_NODE = "1"
NODES = (
    "SELECT step, rank, node_name, node_type, precision_index, stack_id,"
    " CASE WHEN precision_index > 0 THEN input_data END, CASE WHEN precision_index > 0 THEN output_data END"
    " FROM tb_nodes WHERE data_source = 'NPU' ORDER BY step, rank, node_order"
)


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
    for column, higher_is_worse in RANK_METRICS:
        values = [v for v in (as_float(item.get(column)) for item in items) if is_number(v)]
        if values:
            return column, max(values) if higher_is_worse else min(values)
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
        ref = NodeRef(name, metric, value, "", result)
        self.judged.append((ref, stack_id))
        if self.summary.first_divergence is None and diverges(result, node_messages):
            self.summary.first_divergence = ref

    def finish(self, stack_line: Any) -> GroupSummary:
        s = self.summary
        s.kinds = self.kinds.most_common(KINDS_SHOWN)
        with_stack = {id(ref): _with_stack(ref, stack_line(stack_id)) for ref, stack_id in self.judged}
        if s.first_divergence is not None:
            s.first_divergence = with_stack[id(s.first_divergence)]
        ranked = [ref for ref, _ in self.judged if is_number(ref.value)]
        ranked.sort(key=lambda r: -r.value if HIGHER_IS_WORSE[r.metric] else r.value)
        s.worst = [with_stack[id(ref)] for ref in ranked[:WORST_SHOWN]]
        return s


def _with_stack(ref: NodeRef, stack: str) -> NodeRef:
    return NodeRef(ref.name, ref.metric, ref.value, stack, ref.result)


def summarise_visdb(path: str | Path) -> RunSummary:
    """The summary of one vis.db (build or compare) as graph_visualize wrote it."""
    summary = RunSummary("graph_visualize", paths=[str(path)])
    connection = sqlite3.connect(f"file:{Path(path).resolve()}?mode=ro", uri=True)
    try:
        groups: dict[tuple[int, int], _Group] = {}
        for step, rank, name, node_type, precision, stack_id, inputs, outputs in connection.execute(NODES):
            group = groups.get((step, rank))
            if group is None:
                group = groups[(step, rank)] = _Group(f"step{step}/rank{rank}")
            group.add(name, str(node_type), precision, stack_id, inputs, outputs)

        def stack_line(stack_id: str) -> str:
            row = connection.execute("SELECT stack_info FROM tb_stack WHERE id = ?", (stack_id,)).fetchone()
            return user_frame(stack_frames(row[0])) if row else ""

        summary.groups = [group.finish(stack_line) for group in groups.values()]
    finally:
        connection.close()
    return summary
