"""A finished graph -> the rows of ``tb_nodes`` and ``tb_stack`` (§7.5-§7.7), and ``tb_config``."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from operator import attrgetter, itemgetter
from typing import Any, NamedTuple

from msprobe_dask.columns import UNLINKED, UNMODIFIED, VISDB_NODE_COLUMNS
from msprobe_dask.dump.markers import BATCH_P2P
from msprobe_dask.graph import speedups
from msprobe_dask.graph.item_text import items_json_for, python_items_json_for, skipped_keys
from msprobe_dask.graph.jsontext import ASCII_ESCAPES, dumps
from msprobe_dask.graph.model import Graph, Node
from msprobe_dask.graph.p2p import P2POp, batch_p2p_ops
from msprobe_dask.graph.row_summary import merged_summary, summarise_rows
from msprobe_dask.summary.nodes import (
    JUDGED_PRECISIONS,
    SUMMARY_KEYS,
    NodeGroup,
)
from msprobe_dask.writers.packed_rows import pack_rows, unpack_rows

NODE_COLUMNS = VISDB_NODE_COLUMNS  # chunk_rows makes each row in this order
# the cells of the columns chunk_rows (and the C row maker) does not make itself, from the node: a new
# column of VISDB_NODE_TABLE gets its cell here
EXTRA_CELLS: dict[str, Callable[[Node], Any]] = {}
# the columns whose cells chunk_rows makes itself, in columns.VISDB_NODE_TABLE's order (the C row maker
# numbers its cells in this order, and takes their names from here)
MADE_COLUMNS = tuple(name for name in NODE_COLUMNS if name not in EXTRA_CELLS)
DISTRIBUTED = "Distributed"  # the id of a communication node starts with this (is_distributed)
NO_MICRO = 0  # the micro_step_id of a node without a micro step
COL = {name: i for i, name in enumerate(NODE_COLUMNS)}


@dataclass(slots=True)
class GraphRows:
    """The exported form of one graph: tb_nodes rows (as lists, in node order) and tb_stack rows.

    With ``apart``, the ``n_rows`` tb_nodes rows are packed (writers/packed_rows.py) in ``packed``, or
    were handed to the vis.db writer as they were made, and ``nodes`` holds only the communication
    rows (``is_distributed``), which linking across ranks still updates."""

    source: str
    step: int
    rank: int
    nodes: list[list[Any]] = field(default_factory=list)
    stacks: list[tuple[str, str]] = field(default_factory=list)
    micro_steps: int = 1
    p2p: dict[str, list[P2POp]] = field(default_factory=dict)  # batch_isend_irecv node -> its ops
    packed: list[bytes] = field(default_factory=list)
    apart: bool = False
    n_rows: int = 0  # tb_nodes rows
    summary: NodeGroup | None = None  # the summary of its nodes (summarise_rows), None without nodes

    @property
    def graph_id(self) -> str:
        return graph_id_of(self.source, self.step, self.rank)


@dataclass(slots=True)
class RowsChunk:
    """The rows of some nodes of one graph (see chunk_rows): ``stacks`` holds (number, text) of the
    stack ids whose first use is among them. With ``apart``, the ``n_rows`` rows are packed in
    ``packed`` (None once handed to the vis.db writer), and only the communication rows stay in
    ``nodes``."""

    nodes: list[list[Any]]
    stacks: list[tuple[int, str]]
    p2p: dict[str, list[P2POp]]
    packed: bytes | None = None
    apart: bool = False
    n_rows: int = 0
    summary: NodeGroup | None = None  # the summary of its rows (summarise_rows)

    def __sizeof__(self) -> int:
        """About its size pickled (what dask weighs before sending a result to another worker): the
        packed rows, and a guess for the rest."""
        return len(self.packed or b"") + 200 * (len(self.nodes) + len(self.stacks) + len(self.p2p))

    def add(self, later: RowsChunk) -> None:
        """The rows of ``later``, of the nodes after its own (neither packed), after its own."""
        self.nodes += later.nodes
        self.stacks += later.stacks
        self.p2p.update(later.p2p)
        self.summary = merged_summary(self.summary, later.summary)


class StackIds(NamedTuple):
    """A graph's tb_stack ids, numbered by first use in node order as the reference numbers them, and
    fixed before any row is made, so that chunks made in any order and any process agree."""

    of_list: dict[int, int]  # id(node.stack) -> its number (equal stacks share one)
    first: dict[int, int]  # id(node) -> number, for the node that uses a number first


def number_stacks(nodes: list[Node]) -> StackIds:
    """``nodes``: the graph's sorted_nodes()."""
    numbers: dict[Any, int] = {}
    of_list: dict[int, int] = {}
    first: dict[int, int] = {}
    for node in nodes:
        key = id(node.stack)
        if key in of_list:
            continue
        content = _stack_key(node.stack)
        n = numbers.get(content)
        if n is None:
            n = numbers[content] = len(numbers)
            first[id(node)] = n
        of_list[key] = n
    return StackIds(of_list, first)


def _stack_key(stack: Any) -> Any:
    """A key equal for two stacks exactly when their JSON texts are equal: the tuple of the lines (a
    stack is a list of strings: joined without a TypeError, which a generator over its lines tested
    at 0.6x the speed: number_stacks of one side of a rank of 50,050 entries 28 -> 19 ms), else the
    text."""
    if stack.__class__ is list:
        try:
            "".join(stack)
        except TypeError:
            return dumps(stack)
        return tuple(stack)
    return dumps(stack)


def read_back(g: GraphRows) -> None:
    """Unpack the rows of a graph held apart into ``nodes``, in node order (keeping the communication
    rows of ``nodes``, which linking across ranks may have updated)."""
    if not g.apart:
        return
    rows = [row for packed in g.packed for row in unpack_rows(packed)]
    if len(rows) != g.n_rows:
        raise RuntimeError(f"graph {g.graph_id}: its rows went to the vis.db writer")
    rows.sort(key=_ORDER)
    updated = {row[_ORDER_COLUMN]: row for row in g.nodes}
    g.nodes = [updated.get(row[_ORDER_COLUMN], row) for row in rows]
    g.packed, g.apart = [], False


def graph_rows(g: Graph, source: str, md5_mode: bool = False) -> GraphRows:
    nodes = g.sorted_nodes()
    chunk = chunk_rows(g, source, nodes, 0, number_stacks(nodes), md5_mode)
    return join_rows(GraphHead(source, g.step, g.rank, g.micro_steps), [chunk])


class GraphHead(NamedTuple):
    """What the rows of a graph say of it besides its nodes (all that joining its chunks needs)."""

    source: str
    step: int
    rank: int
    micro_steps: int

    @property
    def graph_id(self) -> str:
        return graph_id_of(self.source, self.step, self.rank)


def join_rows(head: GraphHead, chunks: list[RowsChunk], made_out_of_order: bool = False) -> GraphRows:
    """The chunks' rows in order (``made_out_of_order``: put in node order), and the stack rows in id
    order."""
    out = GraphRows(head.source, head.step, head.rank, micro_steps=head.micro_steps)
    stacks: list[tuple[int, str]] = []
    out.apart = any(chunk.apart for chunk in chunks)
    for chunk in chunks:
        if chunk.apart != out.apart:
            raise RuntimeError(f"graph {out.graph_id}: some chunks packed, some not")
        out.nodes.extend(chunk.nodes)
        stacks.extend(chunk.stacks)
        out.p2p.update(chunk.p2p)
        out.n_rows += chunk.n_rows if chunk.apart else len(chunk.nodes)
        if chunk.packed is not None:
            out.packed.append(chunk.packed)
        out.summary = merged_summary(out.summary, chunk.summary)
    if made_out_of_order:
        out.nodes.sort(key=_ORDER)
    stacks.sort()
    out.stacks = [(_stack_id(out.graph_id, n), text) for n, text in stacks]
    return out


def stack_rows(graph_id: str, chunk: RowsChunk) -> bytes:
    """The chunk's tb_stack rows packed for the vis.db writer: (number, id, stack_info)."""
    return pack_rows([(n, _stack_id(graph_id, n), text) for n, text in chunk.stacks], 3)


def graph_id_of(source: str, step: int, rank: int) -> str:
    return f"{source}_{step}_{rank}"


def _stack_id(graph_id: str, n: int) -> str:
    return f"{graph_id}_{n}"


def chunk_rows(
    g: Graph,
    source: str,
    nodes: list[Node],
    start: int,
    stack_ids: StackIds,
    md5_mode: bool = False,
    texts: list[tuple[str, str] | None] | None = None,
    summarised: bool = True,
) -> RowsChunk:
    """The rows of ``nodes``, the run of ``g.sorted_nodes()`` that begins at position ``start``.
    ``texts``: for each node, the texts of its exported (input_data, output_data) if already made
    (node_items.export_texts), else None (its items are exported here). ``summarised``: with their
    summary (summarise_rows; a compare's Bench rows go without: the run's summary is the NPU graphs')."""
    graph_id = graph_id_of(source, g.step, g.rank)
    row_id = graph_id + "_"
    data_path, step, rank = g.data_path, g.step, g.rank
    out = RowsChunk([], [], {})
    number_of, first = stack_ids.of_list, stack_ids.first
    native = speedups.native
    if native is not None:
        of = ChunkOf(
            row_id,
            graph_id,
            source,
            data_path,
            step,
            rank,
            number_of,
            first,
            skipped_keys(md5_mode, False),
            skipped_keys(md5_mode, True),
            python_items_json_for(md5_mode, False),  # (node_rows has tried the C path)
            python_items_json_for(md5_mode, True),
            SUMMARY_KEYS,
            JUDGED_PRECISIONS,
        )
        read: dict[int, list[dict[str, str]]] | None = {} if summarised else None
        out.nodes = native.node_rows(nodes, start, of, out.stacks, out.p2p, texts, read)
        if read is not None:
            out.summary = summarise_rows(g, nodes, out.nodes, md5_mode, texts, read)
        return out
    to_json, batch_to_json = items_json_for(md5_mode, False), items_json_for(md5_mode, True)
    append = out.nodes.append
    sid_texts: dict[int, str] = {}
    made = texts if texts is not None else [None] * len(nodes)
    for order, (node, text) in enumerate(zip(nodes, made), start):
        n = number_of[id(node.stack)]
        sid = sid_texts.get(n)
        if sid is None:
            sid = sid_texts[n] = f"{row_id}{n}"
        if id(node) in first:
            out.stacks.append((n, dumps(node.stack)))
        node_id = node.id
        batch_p2p = BATCH_P2P in node_id
        if batch_p2p:
            out.p2p[node_id] = batch_p2p_ops(node)
        parent = node.parent
        children = node.children
        items = batch_to_json if batch_p2p else to_json
        cells = {
            "id": row_id + node_id,
            "graph_id": graph_id,
            "node_order": order,
            "node_name": node_id,
            "node_type": node.type,
            "up_node": parent.id if parent is not None else "",
            "sub_nodes": dumps(list(map(_ID, children))) if children else "",
            "precision_index": node.precision,
            "overflow_level": node.overflow,
            "micro_step_id": node.micro if node.micro is not None else NO_MICRO,
            "matched_node_link": dumps(node.link),
            "stack_id": sid,
            "parallel_merge_info": dumps(node.merge_info) if node.merge_info else "",
            "matched_distributed": UNLINKED,
            "modified": UNMODIFIED,
            "input_data": text[0] if text is not None else items(node.input_data),
            "output_data": text[1] if text is not None else items(node.output_data),
            "data_source": source,
            "dump_data_dir": data_path,
            "step": step,
            "rank": rank,
            "is_distributed": 1 if node_id.startswith(DISTRIBUTED) else 0,
        }
        for name, cell in EXTRA_CELLS.items():
            cells[name] = cell(node)
        append(list(map(cells.__getitem__, NODE_COLUMNS)))
    if summarised:
        out.summary = summarise_rows(g, nodes, out.nodes, md5_mode, texts)
    return out


class ChunkOf(NamedTuple):
    """What the rows of one chunk share (handed to the C row maker, which reads it by name)."""

    row_id: str  # the start of each row's id
    graph_id: str
    source: str  # data_source
    data_path: str | None  # dump_data_dir
    step: int
    rank: int
    stack_numbers: dict[int, int]  # StackIds.of_list
    first_uses: dict[int, int]  # StackIds.first
    skip: frozenset[str]  # the keys an exported item leaves out
    batch_skip: frozenset[str]  # ... and those of a batch_isend_irecv node's items
    to_json: Callable[[dict[str, dict]], str]  # the items' text where the C code does not take them
    batch_to_json: Callable[[dict[str, dict]], str]
    summary_keys: tuple[str, ...]  # SUMMARY_KEYS: the cells summarise_rows reads of an item
    judged: frozenset[Any]  # JUDGED_PRECISIONS: the nodes whose items it reads


class RowRules(NamedTuple):
    """What the C row maker (csrc/rows.c) takes of the rules, by name, handed to it once when this
    module is imported: the columns (names and order) and their cells stay the Python ones."""

    columns: tuple[str, ...]  # NODE_COLUMNS
    made: tuple[str, ...]  # MADE_COLUMNS
    extra_cells: dict[str, Callable[[Node], Any]]  # EXTRA_CELLS
    dumps: Callable[[Any], str]  # the JSON text of lists and dicts (jsontext.dumps) ...
    ascii_escapes: tuple[str, ...]  # ... each ASCII character as it writes it in a string (ASCII_ESCAPES)
    batch_p2p_ops: Callable[[Node], list[P2POp]]
    batch_p2p: str  # BATCH_P2P
    distributed: str  # DISTRIBUTED
    unlinked: str  # UNLINKED: every row's matched_distributed
    no_micro: int  # NO_MICRO: the micro_step_id of a node without a micro step
    unmodified: int  # UNMODIFIED: every row's modified


ROW_RULES = RowRules(
    NODE_COLUMNS,
    MADE_COLUMNS,
    EXTRA_CELLS,
    dumps,
    ASCII_ESCAPES,
    batch_p2p_ops,
    BATCH_P2P,
    DISTRIBUTED,
    UNLINKED,
    NO_MICRO,
    UNMODIFIED,
)
if speedups.native is not None:
    speedups.native.configure_rows(ROW_RULES)


_ID = attrgetter("id")
_ORDER_COLUMN = COL["node_order"]
_ORDER = itemgetter(_ORDER_COLUMN)


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
