"""Compare and export one (step, rank) in chunks spread over processes (graph/forked.py).

After matching, the work on a node's rows does not depend on other nodes, except that a collection's
precision index is the worst of its children's: a chunk is therefore a run of ``sorted_nodes()``
(post-order) that never splits a collection's subtree. Chunks are joined in order, so the rows, their
order and the stack ids are those of the serial graph_rows.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from msprobe_dask.errors import DumpError
from msprobe_dask.graph.build import export_texts, parse_items
from msprobe_dask.graph.compare import MD5, compare_subtrees
from msprobe_dask.graph.forked import run_jobs, usable_cpus
from msprobe_dask.graph.model import COLLECTION, Graph, Node
from msprobe_dask.graph.overflow import overflow_levels
from msprobe_dask.graph.rows import (
    COL,
    GraphRows,
    RowsChunk,
    StackIds,
    chunk_rows,
    join_rows,
    number_stacks,
    stack_rows,
)
from msprobe_dask.writers.packed_rows import pack_rows
from msprobe_dask.writers.visdb import N_NODE_COLUMNS, RowSink

CHUNKS = 16  # chunk jobs per graph, so that the processes' shares even out
CHUNK_NODES = (250, 2_000)  # bounds of a chunk's size in nodes
PROCESS_NODES = 2_000  # below this much work (in Bench-node units) per extra process, forking does not pay
COMPARE_WEIGHT = 3  # an NPU node (compare + rows) costs about 3 Bench nodes (rows)
ORDER, DISTRIBUTED = COL["node_order"], COL["is_distributed"]


def _in_collection(node: Node, root: Node) -> bool:
    p = node.parent
    while p is not None and p is not root:
        if p.type == COLLECTION:
            return True
        p = p.parent
    return False


def subtree_runs(nodes: list[Node], root: Node, target: int) -> list[tuple[int, int]]:
    """``[lo, hi)`` runs of ``nodes`` (post-order) of about ``target`` nodes, none ending inside a
    collection's subtree."""
    runs = []
    lo = 0
    for i, node in enumerate(nodes):
        if i + 1 - lo >= target and not _in_collection(node, root):
            runs.append((lo, i + 1))
            lo = i + 1
    if lo < len(nodes):
        runs.append((lo, len(nodes)))
    return runs


def _processes(work: int) -> int:
    return max(1, min(usable_cpus(), work // PROCESS_NODES))


def _run_size(n: int) -> int:
    return min(max(n // CHUNKS, CHUNK_NODES[0]), CHUNK_NODES[1])


def build_rows(g: Graph, source: str, overflow: bool = False, sink: RowSink | None = None) -> GraphRows:
    """graph_rows(g, source) in chunks (items parsed on the way if the graph was built without), its
    tb_nodes rows packed (see GraphRows.apart). ``overflow``: set the nodes' overflow levels in the
    jobs (-oc; check_overflow need not run first). ``sink``: where the packed rows go as they are made,
    if it takes them."""
    nodes = g.sorted_nodes()
    ids = number_stacks(nodes)
    runs = subtree_runs(nodes, g.root, _run_size(len(nodes)))
    jobs = [partial(_rows_job, g, source, False, overflow, nodes[lo:hi], lo, ids) for lo, hi in runs]
    table = f"{source}_{g.step}_{g.rank}"
    arrived = None
    if sink is not None:
        sink.expect(table, len(nodes), len(ids.first))
        arrived = partial(_to_sink, sink, table)
    ahead = g.texts_ahead
    if ahead is not None:
        ahead.stop()  # its CPU is the jobs'; they take the texts it made (build.export_texts)
    try:
        chunks = run_jobs(jobs, _processes(len(nodes)), partial(_pack, g.folder), arrived, sink is not None)
    finally:
        if ahead is not None:
            g.texts_ahead = None
            ahead.close()
    return join_rows(g, source, chunks)


def compare_rows(
    npu: Graph,
    bench: Graph,
    pairs: list[tuple[Node, Node]],
    mode: str,
    sources: tuple[str, str],
    overflow: bool = False,
    sink: RowSink | None = None,
) -> tuple[GraphRows, GraphRows]:
    """compare_graphs' work after matching (``pairs``), then graph_rows of both sides, in chunks.

    A job compares a run of NPU nodes and also makes the rows of their Bench partners, whose items it
    has just parsed (a Bench job in another process would parse them again); the Bench nodes nobody is
    matched to get jobs of their own. Micro steps and overflow levels must be set before: the rows are
    made in the jobs. Not for tensor mode (tensors would be measured out of the reference's order) nor
    for merged graphs (nodes that share items must all be compared before any row is made).
    """
    md5 = mode == MD5
    partners = dict(pairs)
    npu_nodes = npu.sorted_nodes()
    bench_nodes = bench.sorted_nodes()
    ids = (number_stacks(npu_nodes), number_stacks(bench_nodes))
    position = {node: i for i, node in enumerate(bench_nodes)}
    owned: set[Node] = set()  # Bench nodes whose rows an NPU job makes (the first to meet them)
    jobs: list[Callable[[], tuple[RowsChunk | None, RowsChunk]]] = []
    for lo, hi in subtree_runs(npu_nodes, npu.root, _run_size(len(npu_nodes))):
        run = npu_nodes[lo:hi]
        mine = []
        for n in run:
            b = partners.get(n)
            if b is not None and b not in owned and b in position:
                owned.add(b)
                mine.append(position[b])
        job = partial(
            _compare_rows_job, npu, bench, partners, mode, sources, overflow, run, lo, mine, bench_nodes, ids
        )
        jobs.append(job)
    rest = [i for i, b in enumerate(bench_nodes) if b not in owned]
    size = _run_size(len(bench_nodes))
    for k in range(0, len(rest), size):
        part = rest[k : k + size]
        jobs.append(partial(_bench_rows_job, bench, sources[1], md5, overflow, part, bench_nodes, ids[1]))
    arrived = None
    if sink is not None:
        tables = (f"{sources[0]}_{npu.step}_{npu.rank}", f"{sources[1]}_{bench.step}_{bench.rank}")
        sink.expect(tables[0], len(npu_nodes), len(ids[0].first))
        sink.expect(tables[1], len(bench_nodes), len(ids[1].first))
        arrived = partial(_pair_to_sink, sink, tables)
    processes = _processes(COMPARE_WEIGHT * len(npu_nodes) + len(bench_nodes))
    results = run_jobs(
        jobs, processes, partial(_pack_pair, (npu.folder, bench.folder)), arrived, sink is not None
    )
    npu_rows = join_rows(npu, sources[0], [r for r, _ in results if r is not None])
    bench_rows = join_rows(bench, sources[1], [b for _, b in results], made_out_of_order=True)
    return npu_rows, bench_rows


def _pack(folder: str, chunk: RowsChunk) -> RowsChunk:
    """The chunk with its rows packed (in the process that made them): only the communication rows
    stay as lists (linking across ranks updates them). ``folder``: the dump the rows come from."""
    kept = [row for row in chunk.nodes if row[DISTRIBUTED] == 1]
    try:
        packed = pack_rows(chunk.nodes, N_NODE_COLUMNS)
    except UnicodeEncodeError as exc:  # a lone surrogate escape (\ud800) in the dump's JSON
        bad = exc.object[exc.start : exc.end] if isinstance(exc.object, str) else ""
        raise DumpError(folder, f"holds a name or value that is not valid Unicode ({bad!r})") from None
    return RowsChunk(kept, chunk.stacks, chunk.p2p, packed, True, len(chunk.nodes))


def _pack_pair(
    folders: tuple[str, str], pair: tuple[RowsChunk | None, RowsChunk]
) -> tuple[RowsChunk | None, RowsChunk]:
    npu, bench = pair
    return (_pack(folders[0], npu) if npu is not None else None, _pack(folders[1], bench))


def _to_sink(sink: RowSink, table: str, chunk: RowsChunk) -> RowsChunk:
    """The chunk, its packed rows handed to ``sink`` (its stack rows too; they stay in the chunk for
    join_rows) if it takes them."""
    if chunk.packed is not None and sink.put(table, chunk.packed, stack_rows(table, chunk)):
        chunk.packed = None
    return chunk


def _pair_to_sink(
    sink: RowSink, tables: tuple[str, str], pair: tuple[RowsChunk | None, RowsChunk]
) -> tuple[RowsChunk | None, RowsChunk]:
    npu, bench = pair
    return (_to_sink(sink, tables[0], npu) if npu is not None else None, _to_sink(sink, tables[1], bench))


def _compare_rows_job(
    npu: Graph,
    bench: Graph,
    partners: dict[Node, Node],
    mode: str,
    sources: tuple[str, str],
    overflow: bool,
    nodes: list[Node],
    start: int,
    bench_positions: list[int],
    bench_nodes: list[Node],
    ids: tuple[StackIds, StackIds],
) -> tuple[RowsChunk, RowsChunk]:
    """The NPU rows of ``nodes`` (compared), and the Bench rows at ``bench_positions``."""
    parse_items(npu, nodes)
    parse_items(bench, [partners[n] for n in nodes if n in partners])
    compare_subtrees(nodes, partners, npu.root, mode)
    md5 = mode == MD5
    if overflow:
        overflow_levels(npu, nodes)
    rows = chunk_rows(npu, sources[0], nodes, start, ids[0], md5)
    _drop_items(npu, nodes)
    bench_rows = _bench_rows_job(bench, sources[1], md5, overflow, bench_positions, bench_nodes, ids[1])[1]
    return rows, bench_rows


def _bench_rows_job(
    bench: Graph,
    source: str,
    md5: bool,
    overflow: bool,
    positions: list[int],
    bench_nodes: list[Node],
    ids: StackIds,
) -> tuple[None, RowsChunk]:
    """The rows of the Bench nodes at ``positions`` (in sorted_nodes()), each with its node_order."""
    nodes = [bench_nodes[i] for i in positions]
    rows = _rows_job(bench, source, md5, overflow, nodes, 0, ids)
    for row, pos in zip(rows.nodes, positions):
        row[ORDER] = pos
    return None, rows


def _rows_job(
    g: Graph, source: str, md5: bool, overflow: bool, nodes: list[Node], start: int, ids: StackIds
) -> RowsChunk:
    """The rows of ``nodes``: their exported items' texts made straight from dump.json where the C
    code can (build.export_texts), else from the items parsed here."""
    texts = None if md5 or overflow else export_texts(g, nodes)
    parse_items(g, nodes if texts is None else [n for n, t in zip(nodes, texts) if t is None])
    if overflow:
        overflow_levels(g, nodes)
    rows = chunk_rows(g, source, nodes, start, ids, md5, texts)
    _drop_items(g, nodes)
    return rows


def _drop_items(g: Graph, nodes: list[Node]) -> None:
    """A lazily built graph's items are dropped once their rows are made (parse_items would give them
    again)."""
    if g.items_pending:
        for node in nodes:
            node.input_data, node.output_data = {}, {}
