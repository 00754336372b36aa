"""A graph build or compare, node by node: ``GraphResult`` holds one ``GraphView`` per (side, step, rank).

Each ``GraphNode`` has its name, type (module / api / collection), precision (0 pass, 0.5 warning,
1 error, None not judged) and result, parent and children, the nodes it is matched to, and its
input and output items (dicts, as the vis.db holds them).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from msprobe_dask.results.display import summary_html
from msprobe_dask.results.frames import data_frame
from msprobe_dask.summary.first_divergence import apply_divergence
from msprobe_dask.summary.model import NodeRef, RunSummary
from msprobe_dask.summary.nodes import precision_result, summarise_nodes
from msprobe_dask.summary.text import summary_lines

if TYPE_CHECKING:
    from msprobe_dask.analysis.findings import Divergence

NODE_TYPES = {"0": "module", "1": "api", "9": "collection"}
NPU, BENCH = "NPU", "Bench"


@dataclass(frozen=True, slots=True)
class GraphNode:
    name: str
    type: str  # "module", "api" or "collection"
    precision: float | None
    result: str  # "pass", "warning", "error", or "other" (not judged)
    parent: str | None
    children: tuple[str, ...]
    matched: tuple[str, ...]  # the other side's node it is matched to ([] unmatched)
    inputs: dict[str, Any] = field(repr=False)
    outputs: dict[str, Any] = field(repr=False)


def _node(row: dict[str, Any]) -> GraphNode:
    precision = row["precision_index"]
    return GraphNode(
        name=row["node_name"],
        type=NODE_TYPES.get(str(row["node_type"]), str(row["node_type"])),
        precision=None if precision is None else float(precision),
        result=precision_result(precision),
        parent=row["up_node"] or None,
        children=tuple(json.loads(row["sub_nodes"])) if row["sub_nodes"] else (),
        matched=tuple(json.loads(row["matched_node_link"] or "[]")),
        inputs=json.loads(row["input_data"] or "{}"),
        outputs=json.loads(row["output_data"] or "{}"),
    )


@dataclass(frozen=True)
class GraphView:
    """One side's graph of one (step, rank); nodes in node order (children before their parent)."""

    source: str  # "NPU" (target) or "Bench" (golden)
    step: int
    rank: int
    nodes: dict[str, GraphNode]
    stacks: dict[str, str] = field(repr=False)  # stack id -> its JSON text
    stack_ids: dict[str, str] = field(repr=False)  # node name -> stack id

    @property
    def root(self) -> GraphNode:
        return next(node for node in self.nodes.values() if node.parent is None)

    def __getitem__(self, name: str) -> GraphNode:
        return self.nodes[name]

    def __iter__(self) -> Iterator[GraphNode]:
        return iter(self.nodes.values())

    def __len__(self) -> int:
        return len(self.nodes)

    def stack(self, name: str) -> list[str]:
        return json.loads(self.stacks.get(self.stack_ids.get(name, ""), "[]"))


def graph_views(graphs: Sequence[Any], columns: Sequence[str]) -> list[GraphView]:
    """GraphViews of the graph API's rows (``graph.rows.GraphRows``, columns ``NODE_COLUMNS``)."""
    views = []
    for g in graphs:
        rows = [dict(zip(columns, row)) for row in g.nodes]
        nodes = {row["node_name"]: _node(row) for row in rows}
        stack_ids = {row["node_name"]: row["stack_id"] for row in rows}
        views.append(GraphView(g.source, g.step, g.rank, nodes, dict(g.stacks), stack_ids))
    return views


@dataclass(frozen=True)
class GraphResult:
    compare: bool
    graphs: tuple[GraphView, ...]
    # the job's first divergence by compare's rule, from the rows of the compared nodes (None: a build)
    found: Divergence | None = field(default=None, repr=False)

    def graph(self, step: int = 0, rank: int = 0, source: str = NPU) -> GraphView:
        for view in self.graphs:
            if (view.step, view.rank, view.source) == (step, rank, source):
                return view
        raise KeyError(f"no {source} graph of step {step}, rank {rank}")

    def __iter__(self) -> Iterator[GraphView]:
        return iter(self.graphs)

    def summary(self) -> RunSummary:
        """As graph_visualize prints it: the NPU nodes of each (step, rank)."""
        npu = [v for v in self.graphs if v.source == NPU]
        facts = (
            (v.step, v.rank, n.name, _type_code(n.type), n.precision, v.stack_ids.get(n.name, ""),
             json.dumps(n.inputs), json.dumps(n.outputs))
            for v in sorted(npu, key=lambda v: (v.step, v.rank))
            for n in v
        )  # fmt: skip
        stacks = {k: text for v in npu for k, text in v.stacks.items()}
        summary = summarise_nodes("graph_visualize", facts, stacks.get)
        apply_divergence(summary, self.found)
        return summary

    def divergence(self) -> Divergence | None:
        """The job's first divergence and how it spread (``analysis.divergence``), as compare finds it
        from the same rows, across ranks and steps (a merge: its replicas); None for a build."""
        return self.found

    def first_divergence(self) -> NodeRef | None:
        """Where the job first diverges: the earliest origin over every rank and step (``divergence``);
        a build: None."""
        return self.summary().first_divergence if self.found is not None else None

    def to_pandas(self) -> Any:
        """One row per node of every graph: source, step, rank, name, type, precision, result, parent,
        number of children."""
        columns: dict[str, list[Any]] = {
            k: []
            for k in ("source", "step", "rank", "name", "type", "precision", "result", "parent", "children")
        }
        for view in self.graphs:
            for node in view:
                values = (view.source, view.step, view.rank, node.name, node.type,
                          float("nan") if node.precision is None else node.precision,
                          node.result, node.parent, len(node.children))  # fmt: skip
                for column, value in zip(columns.values(), values):
                    column.append(value)
        return data_frame(columns)

    def __repr__(self) -> str:
        kind = "compare" if self.compare else "build"
        head = f"<GraphResult ({kind}): {len(self.graphs)} graph(s)>"
        return "\n".join([head, *summary_lines(self.summary())[1:]]) if self.compare else head

    def _repr_html_(self) -> str:
        return summary_html(f"GraphResult: {len(self.graphs)} graph(s)", self.summary())


def _type_code(node_type: str) -> str:
    return next((code for code, name in NODE_TYPES.items() if name == node_type), node_type)
