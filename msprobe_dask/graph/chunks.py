"""The rows of one (step, rank) cut into chunks: the chunk tasks of graph_visualize's Dask graph.

After matching, the work on a node's rows does not depend on other nodes, except that a collection's
precision index is the worst of its children's: a chunk is therefore a run of ``sorted_nodes()``
(post-order) that never splits a collection's subtree. ``prepare_build`` and ``prepare_compare`` cut
a graph (or a compared pair) into at most ``n`` chunks, each described by node positions only
(``Chunk``); ``chunk_task(prepared, k)`` makes chunk k's rows, packed into one bytes object
(writers/packed_rows.py), in whatever process the scheduler runs it; ``join`` puts a graph's chunks
together. The rows, their order and the stack ids are those of the serial graph_rows, whatever order
the chunks are made in and wherever.

A Prepared pickles its graphs flat (model.Graph.__reduce__; dump.json's bytes read again where it is
loaded, dump/entries.py): a worker that runs chunks of a graph built elsewhere receives it once. The
chunk tasks of one Prepared in one process share its graphs and take turns (its lock): a task gives its
nodes and their Bench partners their items, compares them, makes their rows and drops the items again,
and two chunks' nodes may share a Bench partner.
"""

from __future__ import annotations

import sys
import threading
from array import array
from collections.abc import Sequence
from itertools import count
from typing import Any, NamedTuple

from msprobe_dask.analysis.tolerance import Tolerance
from msprobe_dask.columns import VISDB_NODE_COLUMNS
from msprobe_dask.dump.entries import SpanTexts
from msprobe_dask.errors import DumpError
from msprobe_dask.graph.compare import MD5, compare_subtrees
from msprobe_dask.graph.divergence_rows import dump_places, node_rows
from msprobe_dask.graph.gcpause import rare_collections_from_now
from msprobe_dask.graph.model import COLLECTION, NO_ITEMS, Graph, Node
from msprobe_dask.graph.node_items import export_texts, parse_items, texts_of
from msprobe_dask.graph.overflow import overflow_levels
from msprobe_dask.graph.rows import (
    COL,
    GraphHead,
    GraphRows,
    RowsChunk,
    StackIds,
    chunk_rows,
    join_rows,
    number_stacks,
)
from msprobe_dask.writers.packed_rows import pack_rows

CHUNK_BYTES = 1 << 20  # dump.json bytes per chunk task (about 1,000 nodes of a statistics dump)
MAX_CHUNKS = 32  # chunk tasks per graph at most, up to MAX_CHUNK_BYTES a chunk
MAX_CHUNK_BYTES = 16 << 20
"""A bigger dump is cut into chunks of at most this many bytes of dump.json (about 16,000 nodes): what
a chunk task holds at once (its nodes' items and rows) is bounded whatever the rank's size. One rank of
1,001,000 entries a side (1.76 GB of dump.json: 105 chunks, where MAX_CHUNKS alone makes 32),
graph_visualize in this process under workflows/measure.py: peak RSS 2,734 MiB against 3,148 MiB."""
ORDER, DISTRIBUTED = COL["node_order"], COL["is_distributed"]
NODE_BYTES = 400  # about the size of a node of a Prepared's graph pickled flat (model.Graph.__reduce__)


def chunk_count(dump_bytes: int) -> int:
    """How many chunk tasks the rows of ``dump_bytes`` bytes of dump.json are cut into."""
    return max(1, min(MAX_CHUNKS, dump_bytes // CHUNK_BYTES), -(-dump_bytes // MAX_CHUNK_BYTES))


class Chunk(NamedTuple):
    """A chunk's nodes by their positions, in arrays (a rank of 1,001,000 entries a side would hold 85 MB more
    as tuples of ints)."""

    lo: int  # the chunk's run [lo, hi) of the (NPU) graph's sorted_nodes()
    hi: int
    # (run position, Bench node's position in bench.nodes) of each matched node, one after the other
    partners: Sequence[int] = ()
    bench: Sequence[int] = ()  # positions in the Bench sorted_nodes() of the rows it makes


class Prepared:
    """A graph, or a compared pair (NPU, Bench), ready for its chunk tasks; or, with ``done``, its rows
    already made (tensor mode and merged graphs are compared whole)."""

    __slots__ = ("graphs", "sources", "mode", "overflow", "chunks", "done", "tolerance", "_lock", "_orders")

    def __init__(
        self,
        graphs: tuple[Graph, ...],
        sources: tuple[str, ...],
        mode: str,
        overflow: bool,
        chunks: list[Chunk],
        done: list[GraphRows] | None = None,
        tolerance: Tolerance | None = None,
    ) -> None:
        self.graphs, self.sources, self.mode, self.overflow = graphs, sources, mode, overflow
        self.chunks, self.done = chunks, done
        # the first divergence's (a compare's chunks make their rows for it; None: no first divergence)
        self.tolerance = tolerance
        self._lock = threading.Lock()
        self._orders: list[tuple[list[Node], StackIds, list[Node]]] | None = None

    def __reduce__(self) -> tuple[Any, ...]:
        return Prepared, (
            self.graphs, self.sources, self.mode, self.overflow, self.chunks, self.done, self.tolerance
        )  # fmt: skip

    def __sizeof__(self) -> int:
        """About its size pickled (what dask weighs before sending it to another worker, rather than run
        its chunk tasks where it is): each graph's dump.json ``data``, and a guess for each node."""
        return sum(sys.getsizeof(g.data) + NODE_BYTES * len(g.nodes) for g in self.graphs)

    def heads(self) -> list[GraphHead]:
        return [GraphHead(s, g.step, g.rank, g.micro_steps) for g, s in zip(self.graphs, self.sources)]

    def release(self) -> None:
        """Let the graphs go once every chunk task is done (let_go)."""
        with self._lock:
            let_go(self.graphs)
            self.graphs, self._orders = (), None

    def row_counts(self) -> list[tuple[int, int]]:
        """Each graph's tb_nodes and tb_stack rows (one per node; one per stack number)."""
        if self.done is not None:
            return [(g.n_rows, len(g.stacks)) for g in self.done]
        return [(len(nodes), len(ids.first)) for nodes, ids, _ in self.orders()]

    def orders(self) -> list[tuple[list[Node], StackIds, list[Node]]]:
        """For each graph: its sorted_nodes(), their stack numbers, and its nodes (made once per
        process: they are the same in every process)."""
        if self._orders is None:
            self._orders = [_order(g) for g in self.graphs]
        return self._orders


def let_go(graphs: Sequence[Graph]) -> None:
    """The graphs' nodes freed as soon as nothing else refers to them: the links between them (parent
    and children) cut, for the collector seldom runs or has frozen them (graph/gcpause.py)."""
    for g in graphs:
        for node in g.nodes.values():
            node.parent, node.children = None, []


def _order(g: Graph) -> tuple[list[Node], StackIds, list[Node]]:
    nodes = g.sorted_nodes()
    return nodes, number_stacks(nodes), list(g.nodes.values())


def _in_collection(node: Node, root: Node) -> bool:
    p = node.parent
    while p is not None and p is not root:
        if p.type == COLLECTION:
            return True
        p = p.parent
    return False


def subtree_runs(nodes: list[Node], root: Node, target: int) -> list[tuple[int, int]]:
    """``[lo, hi)`` runs of ``nodes`` (post-order) of about ``target`` nodes, none ending inside a
    collection's subtree: at most ceil(len(nodes) / target) of them."""
    runs = []
    lo = 0
    while lo < len(nodes):
        i = lo + max(target, 1) - 1  # (its last node: the first from here not inside a collection)
        while i < len(nodes) and _in_collection(nodes[i], root):
            i += 1
        runs.append((lo, min(i, len(nodes) - 1) + 1))
        lo = i + 1
    return runs


def _runs(g: Graph, nodes: list[Node], n: int) -> list[tuple[int, int]]:
    return subtree_runs(nodes, g.root, max(1, -(-len(nodes) // max(1, n))))


def prepare_build(g: Graph, source: str, overflow: bool = False, n: int = 1) -> Prepared:
    """``g`` (built without items, its micro steps set) cut into at most ``n`` chunks. ``overflow``:
    the chunks set the nodes' overflow levels (-oc; check_overflow need not run first)."""
    p = Prepared((g,), (source,), "", overflow, [])
    nodes = p.orders()[0][0]
    p.chunks = [Chunk(lo, hi) for lo, hi in _runs(g, nodes, n)]
    return p


def prepare_compare(
    npu: Graph,
    bench: Graph,
    pairs: list[tuple[Node, Node]],
    mode: str,
    sources: tuple[str, str],
    overflow: bool = False,
    n: int = 1,
    tolerance: Tolerance | None = None,
) -> Prepared:
    """compare_graphs' work after matching (``pairs``), then graph_rows of both sides, cut into at
    most ``n`` chunks (``tolerance``: the first divergence's, None: none).

    A chunk compares a run of NPU nodes and also makes the rows of their Bench partners, whose items
    it has just parsed (another chunk would parse them again); the Bench nodes nobody is matched to
    are shared out among the chunks. Micro steps must be set before: the rows are made in the chunks.
    Not for tensor mode (tensors would be measured out of the reference's order) nor for merged
    graphs (nodes that share items must all be compared before any row is made)."""
    p = Prepared((npu, bench), sources, mode, overflow, [], None, tolerance)
    (npu_nodes, _, _), (bench_nodes, _, bench_all) = p.orders()
    # (nodes are keys by identity: Node is a dataclass without eq)
    # the Bench nodes whose rows no chunk makes yet, at their positions (in order): the first chunk to meet
    # one takes it
    unowned = dict(zip(bench_nodes, count()))
    anywhere = dict(zip(bench_all, count()))
    partner_of = dict(pairs)
    runs = _runs(npu, npu_nodes, n)
    made: list[tuple[array[int], list[int]]] = []
    for lo, hi in runs:
        partners, mine = array("q"), []
        for i, node in enumerate(npu_nodes[lo:hi], lo):
            b = partner_of.get(node)
            if b is None:
                continue
            at = anywhere.get(b)
            if at is None:
                raise RuntimeError(f"{node.id} is matched to a node its graph does not hold")
            partners.extend((i, at))
            position = unowned.pop(b, None)
            if position is not None:
                mine.append(position)
        made.append((partners, mine))
    rest = list(unowned.values())
    share = -(-len(rest) // len(runs))
    p.chunks = [
        Chunk(lo, hi, partners, array("q", mine + rest[k * share : (k + 1) * share]))
        for k, ((lo, hi), (partners, mine)) in enumerate(zip(runs, made))
    ]
    return p


def chunk_task(p: Prepared, k: int) -> tuple[RowsChunk | None, ...]:
    """Chunk ``k``'s rows of each of the graphs (None for a graph it has none of), packed: only the
    communication rows stay as lists (linking across ranks updates them). Past the last chunk (the
    graph had fewer nodes than chunk tasks), none. The chunk's nodes are worked through a few at a time
    (``SUB_RUN_NODES``: ``_sub_runs``)."""
    if k >= len(p.chunks):
        return (None,) * len(p.graphs)
    rare_collections_from_now()
    c = p.chunks[k]
    md5 = p.mode == MD5
    with p._lock:
        orders = p.orders()
        if len(p.graphs) == 1:
            (g,), (nodes, ids, _) = p.graphs, orders[0]
            found = texts_of(g, nodes[c.lo : c.hi])
            made = [
                _rows(g, p.sources[0], md5, p.overflow, nodes[lo:hi], lo, ids, found)
                for lo, hi in _sub_runs(c.lo, c.hi)
            ]
            return (_pack(g.folder, _joined(made)),)
        (npu, bench), ((npu_nodes, npu_ids, _), (bench_nodes, bench_ids, bench_all)) = p.graphs, orders
        pairs = iter(c.partners)
        partners = {npu_nodes[i]: bench_all[j] for i, j in zip(pairs, pairs)}
        # the Bench nodes whose rows the chunk makes (their positions), until made
        unmade = {bench_nodes[i]: i for i in c.bench}
        # (the texts of the chunk's entries read at once, each side's, while its rows are made)
        npu_found, bench_found = (
            texts_of(npu, npu_nodes[c.lo : c.hi]),
            texts_of(bench, [*partners.values(), *unmade]),
        )
        npu_rows, bench_rows = [], []
        places = dump_places(npu)
        for lo, hi in _sub_runs(c.lo, c.hi):
            run = npu_nodes[lo:hi]
            theirs = {n: b for n in run if (b := partners.get(n)) is not None}
            parse_items(npu, run, npu_found)
            parse_items(bench, list(theirs.values()), bench_found)
            answered = compare_subtrees(run, theirs, npu.root, p.mode, p.tolerance)
            if p.overflow:
                overflow_levels(npu, run)
            rows = chunk_rows(npu, p.sources[0], run, lo, npu_ids, md5)
            if rows.summary is not None and p.tolerance is not None:  # (while both sides' items are here)
                rows.summary.divergence = node_rows(run, theirs, p.mode, places, p.tolerance, answered)
            npu_rows.append(rows)
            _drop_items(npu, run)
            # the rows of the chunk's Bench partners met here, made while their items are at hand
            met = [unmade.pop(b) for b in theirs.values() if b in unmade]
            if met:
                bench_rows.append(_bench_rows(bench, p, md5, bench_nodes, bench_ids, met, bench_found))
        rest = list(unmade.values())  # (the chunk's share of the Bench nodes nobody is matched to)
        for lo, hi in _sub_runs(0, len(rest)):
            bench_rows.append(_bench_rows(bench, p, md5, bench_nodes, bench_ids, rest[lo:hi], bench_found))
        return _pack(npu.folder, _joined(npu_rows)), _pack(bench.folder, _joined(bench_rows))


SUB_RUN_NODES = 64
"""The nodes a chunk task works through at once: their items made, compared, exported and dropped while
they are still in the CPU's caches (a chunk's items, some 10 MB for T's ~640 nodes, are not)."""


def _sub_runs(lo: int, hi: int) -> list[tuple[int, int]]:
    """``[lo, hi)`` cut into runs of at most SUB_RUN_NODES, in order. A chunk's run never splits a
    collection's subtree, but a sub-run may: its nodes come in post-order, so a collection's children
    are compared (compare_subtrees) in its sub-run or one before it."""
    return [(a, min(a + SUB_RUN_NODES, hi)) for a in range(lo, hi, SUB_RUN_NODES)]


def _bench_rows(
    bench: Graph,
    p: Prepared,
    md5: bool,
    nodes: list[Node],
    ids: StackIds,
    positions: list[int],
    found: SpanTexts | None,
) -> RowsChunk:
    """The rows of the Bench nodes at ``positions`` of its sorted_nodes(), each row's node_order set
    (join puts them in order; ``found``: texts_of nodes that include them)."""
    rows = _rows(bench, p.sources[1], md5, p.overflow, [nodes[i] for i in positions], 0, ids, found, False)
    for row, pos in zip(rows.nodes, positions):
        row[ORDER] = pos
    return rows


def _joined(parts: list[RowsChunk]) -> RowsChunk:
    """The rows of ``parts`` (not packed), one part after the other, as one."""
    out = RowsChunk([], [], {})
    for part in parts:
        out.add(part)
    return out


def join(heads: list[GraphHead], results: list[tuple[RowsChunk | None, ...]]) -> list[GraphRows]:
    """Each graph's rows from the chunk tasks' results (in chunk order; a compare's Bench rows, made
    out of node order, are put in it)."""
    return [
        join_rows(head, [c for r in results if (c := r[i]) is not None], made_out_of_order=i > 0)
        for i, head in enumerate(heads)
    ]


def rows_here(p: Prepared) -> list[GraphRows]:
    """The rows of ``p``'s graphs, its chunks made one after the other in this task."""
    if p.done is not None:
        return p.done
    return join(p.heads(), [chunk_task(p, k) for k in range(len(p.chunks))])


def _pack(folder: str, chunk: RowsChunk) -> RowsChunk:
    """The chunk with its rows packed: only the communication rows stay as lists. ``folder``: the
    dump the rows come from."""
    kept = [row for row in chunk.nodes if row[DISTRIBUTED] == 1]
    try:
        packed = pack_rows(chunk.nodes, len(VISDB_NODE_COLUMNS))
    except UnicodeEncodeError as exc:  # a lone surrogate escape (\ud800) in the dump's JSON
        bad = exc.object[exc.start : exc.end] if isinstance(exc.object, str) else ""
        raise DumpError(folder, f"holds a name or value that is not valid Unicode ({bad!r})") from None
    return RowsChunk(kept, chunk.stacks, chunk.p2p, packed, True, len(chunk.nodes), chunk.summary)


def _rows(
    g: Graph,
    source: str,
    md5: bool,
    overflow: bool,
    nodes: list[Node],
    start: int,
    ids: StackIds,
    found: SpanTexts | None = None,
    summarised: bool = True,
) -> RowsChunk:
    """The rows of ``nodes``: their exported items' texts made straight from dump.json where the C
    code can (node_items.export_texts), else from the items parsed here (``summarised``: chunk_rows;
    ``found``: texts_of nodes that include them)."""
    texts = None if md5 or overflow else export_texts(g, nodes, found)
    parse_items(g, nodes if texts is None else [n for n, t in zip(nodes, texts) if t is None], found)
    if overflow:
        overflow_levels(g, nodes)
    rows = chunk_rows(g, source, nodes, start, ids, md5, texts, summarised)
    _drop_items(g, nodes)
    return rows


def _drop_items(g: Graph, nodes: list[Node]) -> None:
    """A lazily built graph's items are dropped once their rows are made (parse_items would give them
    again)."""
    if g.items_pending:
        for node in nodes:
            node.input_data = node.output_data = NO_ITEMS
