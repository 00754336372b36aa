"""Compare and export one (step, rank) in chunks spread over processes (graph/forked.py).

After matching, the work on a node's rows does not depend on other nodes, except that a collection's
precision index is the worst of its children's: a chunk is therefore a run of ``sorted_nodes()``
(post-order) that never splits a collection's subtree. Chunks are joined in order, so the rows, their
order and the stack ids are those of the serial graph_rows.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from msprobe_dask.graph.build import parse_items
from msprobe_dask.graph.compare import MD5, compare_subtrees
from msprobe_dask.graph.forked import run_jobs, usable_cpus
from msprobe_dask.graph.model import COLLECTION, Graph, Node
from msprobe_dask.graph.rows import GraphRows, RowsChunk, chunk_rows, join_rows

CHUNKS = 16  # chunk jobs per graph, so that the processes' shares even out
CHUNK_NODES = (250, 2_000)  # bounds of a chunk's size in nodes
PROCESS_NODES = 2_000  # below this much work (in Bench-node units) per extra process, forking does not pay
COMPARE_WEIGHT = 3  # an NPU node (compare + rows) costs about 3 Bench nodes (rows)


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


class _Plan:
    """The chunk jobs of one or two graphs, each job returning one RowsChunk."""

    def __init__(self) -> None:
        self.jobs: list[Callable[[], RowsChunk]] = []
        self.work = 0
        self.counts: list[int] = []  # jobs per graph, in order

    def add(self, g: Graph, job: Callable[[list[Node], int], RowsChunk], weight: int) -> None:
        nodes = g.sorted_nodes()
        runs = subtree_runs(nodes, g.root, min(max(len(nodes) // CHUNKS, CHUNK_NODES[0]), CHUNK_NODES[1]))
        self.jobs.extend(partial(job, nodes[lo:hi], lo) for lo, hi in runs)
        self.work += weight * len(nodes)
        self.counts.append(len(runs))

    def run(self) -> list[list[RowsChunk]]:
        results = run_jobs(self.jobs, _processes(self.work))
        out, start = [], 0
        for n in self.counts:
            out.append(results[start : start + n])
            start += n
        return out


def build_rows(g: Graph, source: str) -> GraphRows:
    """graph_rows(g, source) in chunks (items parsed on the way if the graph was built without)."""
    plan = _Plan()
    plan.add(g, partial(_rows_job, g, source, False), 1)
    (chunks,) = plan.run()
    return join_rows(g, source, chunks)


def compare_rows(
    npu: Graph,
    bench: Graph,
    pairs: list[tuple[Node, Node]],
    mode: str,
    sources: tuple[str, str],
) -> tuple[GraphRows, GraphRows]:
    """compare_graphs' work after matching (``pairs``), then graph_rows of both sides, in chunks.

    Micro steps and overflow levels must be set before: the nodes' rows are made in the chunk jobs.
    Not for tensor mode (tensors would be measured out of the reference's order) nor for merged
    graphs (nodes that share items must all be compared before any row is made).
    """
    md5 = mode == MD5
    partners = dict(pairs)
    plan = _Plan()
    plan.add(npu, partial(_compare_rows_job, npu, bench, partners, mode, sources[0]), COMPARE_WEIGHT)
    plan.add(bench, partial(_rows_job, bench, sources[1], md5), 1)
    npu_chunks, bench_chunks = plan.run()
    return join_rows(npu, sources[0], npu_chunks), join_rows(bench, sources[1], bench_chunks)


def _rows_job(g: Graph, source: str, md5: bool, nodes: list[Node], start: int) -> RowsChunk:
    parse_items(g, nodes)
    rows = chunk_rows(g, source, nodes, start, md5)
    _drop_items(g, nodes)
    return rows


def _compare_rows_job(
    npu: Graph,
    bench: Graph,
    partners: dict[Node, Node],
    mode: str,
    source: str,
    nodes: list[Node],
    start: int,
) -> RowsChunk:
    parse_items(npu, nodes)
    parse_items(bench, [partners[n] for n in nodes if n in partners])
    compare_subtrees(nodes, partners, npu.root, mode)
    rows = chunk_rows(npu, source, nodes, start, mode == MD5)
    _drop_items(npu, nodes)
    return rows


def _drop_items(g: Graph, nodes: list[Node]) -> None:
    """A lazily built graph's items are dropped once their chunk's rows are made (parse_items would
    give them again). Bench items parsed for the compare stay until their own rows chunk: Bench chunks
    come after all NPU ones in the job queue, so they are not parsed twice in one process."""
    if g.items_pending:
        for node in nodes:
            node.input_data, node.output_data = {}, {}
