"""A finished graph -> the rows of ``tb_nodes`` and ``tb_stack`` (§7.5-§7.7), and ``tb_config``."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

from msprobe_dask.graph.items import items_json_for
from msprobe_dask.graph.jsontext import dumps
from msprobe_dask.graph.model import Graph, Node
from msprobe_dask.graph.p2p import P2POp, batch_p2p_ops

NODE_COLUMNS = (
    "id",
    "graph_id",
    "node_order",
    "node_name",
    "node_type",
    "up_node",
    "sub_nodes",
    "precision_index",
    "overflow_level",
    "micro_step_id",
    "matched_node_link",
    "stack_id",
    "parallel_merge_info",
    "matched_distributed",
    "modified",
    "input_data",
    "output_data",
    "data_source",
    "dump_data_dir",
    "step",
    "rank",
    "is_distributed",
)
CONFIG_COLUMNS = (
    "id",
    "graph_type",
    "task",
    "tool_tip",
    "micro_steps",
    "overflow_check",
    "node_colors",
    "rank_list",
    "step_list",
)
COL = {name: i for i, name in enumerate(NODE_COLUMNS)}


@dataclass(slots=True)
class GraphRows:
    """The exported form of one graph: tb_nodes rows (as lists, in node order) and tb_stack rows."""

    source: str
    step: int
    rank: int
    nodes: list[list[Any]] = field(default_factory=list)
    stacks: list[tuple[str, str]] = field(default_factory=list)
    micro_steps: int = 1
    p2p: dict[str, list[P2POp]] = field(default_factory=dict)  # batch_isend_irecv node -> its ops


@dataclass(slots=True)
class RowsChunk:
    """The rows of a run of consecutive nodes (see graph_rows). Until ``join_rows``, a row's stack_id
    cell is an index into ``stacks``, the chunk's distinct stack texts in order of first use."""

    nodes: list[list[Any]]
    stacks: list[str]
    p2p: dict[str, list[P2POp]]


def graph_rows(g: Graph, source: str, md5_mode: bool = False) -> GraphRows:
    return join_rows(g, source, [chunk_rows(g, source, g.sorted_nodes(), 0, md5_mode)])


def join_rows(g: Graph, source: str, chunks: list[RowsChunk]) -> GraphRows:
    """The chunks' rows in order, with stack ids numbered by first use over the whole graph."""
    graph_id = f"{source}_{g.step}_{g.rank}"
    out = GraphRows(source, g.step, g.rank, micro_steps=g.micro_steps)
    stack_ids: dict[str, str] = {}
    sid_col = COL["stack_id"]
    for chunk in chunks:
        sids = []
        for text in chunk.stacks:
            sid = stack_ids.get(text)
            if sid is None:
                sid = stack_ids[text] = f"{graph_id}_{len(stack_ids)}"
                out.stacks.append((sid, text))
            sids.append(sid)
        for row in chunk.nodes:
            row[sid_col] = sids[row[sid_col]]
        out.nodes.extend(chunk.nodes)
        out.p2p.update(chunk.p2p)
    return out


def chunk_rows(g: Graph, source: str, nodes: list[Node], start: int, md5_mode: bool = False) -> RowsChunk:
    """The rows of ``nodes``, the run of ``g.sorted_nodes()`` that begins at position ``start``."""
    graph_id = f"{source}_{g.step}_{g.rank}"
    row_id = graph_id + "_"
    data_path, step, rank = g.data_path, g.step, g.rank
    out = RowsChunk([], [], {})
    append = out.nodes.append
    to_json, batch_to_json = items_json_for(md5_mode, False), items_json_for(md5_mode, True)
    stack_index: dict[str, int] = {}
    stack_texts: dict[int, str] = {}  # id(node.stack) -> its JSON: nodes share stack lists
    for order, node in enumerate(nodes, start):
        stack_text = stack_texts.get(id(node.stack))
        if stack_text is None:
            stack_text = stack_texts[id(node.stack)] = dumps(node.stack)
        sid = stack_index.get(stack_text)
        if sid is None:
            sid = stack_index[stack_text] = len(out.stacks)
            out.stacks.append(stack_text)
        node_id = node.id
        batch_p2p = "batch_isend_irecv" in node_id
        if batch_p2p:
            out.p2p[node_id] = batch_p2p_ops(node)
        parent = node.parent
        children = node.children
        items = batch_to_json if batch_p2p else to_json
        append(
            [
                row_id + node_id,
                graph_id,
                order,
                node_id,
                node.type,
                parent.id if parent is not None else "",
                dumps(list(map(_ID, children))) if children else "",
                node.precision,
                node.overflow,
                node.micro if node.micro is not None else 0,
                dumps(node.link),
                sid,
                dumps(node.merge_info) if node.merge_info else "",
                "{}",
                0,
                items(node.input_data),
                items(node.output_data),
                source,
                data_path,
                step,
                rank,
                1 if node_id.startswith("Distributed") else 0,
            ]
        )
    return out


_ID = attrgetter("id")


def config_row(
    compare: bool,
    task: str,
    tool_tip: str | None,
    micro_steps: int,
    overflow_check: bool,
    node_colors: str,
    ranks: list[int],
    steps: list[int],
) -> tuple[Any, ...]:
    return (
        "1",
        "compare" if compare else "build",
        task,
        tool_tip,
        micro_steps,
        overflow_check,
        node_colors,
        json.dumps(ranks),
        json.dumps(steps),
    )
