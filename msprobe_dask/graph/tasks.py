"""The tasks of graph_visualize's Dask graph, from a dump folder to the rows of its graphs.

    build_task(step, rank, side) --> prepare_*_task (match, micro steps, cut into chunks)
        --> [chunk tasks: graph/chunks.py] --> joined Part --> vis_result (rows + tb_config)

graph/rank_plan.py lays these tasks out for plain folders, graph/merge/plan.py for a parallel merge (with a
merge task per side before the finish); both import them from here, below both.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from msprobe_dask.analysis.tolerance import DEFAULT_TOLERANCE, Tolerance
from msprobe_dask.errors import ConfigError
from msprobe_dask.graph.build import build_graph
from msprobe_dask.graph.cells import MD5, TENSOR
from msprobe_dask.graph.chunks import Prepared, join, prepare_build, prepare_compare, rows_here
from msprobe_dask.graph.compare import (
    CONFIG_TASK,
    compare_graphs,
    compare_mode,
    match_pairs,
    node_colors,
    tool_tip,
)
from msprobe_dask.graph.divergence_rows import dump_places, node_rows
from msprobe_dask.graph.dump_files import GraphSource
from msprobe_dask.graph.gcpause import rare_collections_from_now
from msprobe_dask.graph.micro_steps import assign_micro_steps
from msprobe_dask.graph.model import Graph
from msprobe_dask.graph.node_items import parse_all_items
from msprobe_dask.graph.overflow import check_overflow
from msprobe_dask.graph.rows import GraphHead, GraphRows, config_row, graph_rows
from msprobe_dask.summary.model import RunSummary
from msprobe_dask.summary.nodes import stack_line

if TYPE_CHECKING:
    from msprobe_dask.analysis.findings import Divergence
    from msprobe_dask.analysis.rank_rows import RankRows

NPU, BENCH = "NPU", "Bench"


@dataclass(frozen=True, slots=True)
class Options:
    overflow_check: bool = False
    fuzzy_match: bool = False
    layer_mapping: str | bool | None = None
    tensor_log: bool = False
    merge: bool = False  # parallel-merged graphs: merge checkers in the compare (§3.4)
    tolerance: Tolerance | None = DEFAULT_TOLERANCE  # the first divergence's (None: none)


@dataclass(slots=True)
class VisResult:
    """Everything a vis.db holds: graphs in write order (NPU then Bench per (step, rank)) and tb_config."""

    compare: bool
    graphs: list[GraphRows] = field(default_factory=list)
    config: tuple[Any, ...] = ()


def build_task(folder: str, step: int, rank: int, items: bool = True) -> Graph:
    """``items=False``: the chunk tasks parse the nodes' items (node_items.parse_items)."""
    rare_collections_from_now()
    return build_graph(GraphSource(folder, step, rank), items)


def pickled_build_task(folder: str, step: int, rank: int) -> bytes:
    """build_task's graph without items, pickled (flat: Graph.__reduce__) by the worker process that
    built it: dask's processes scheduler sends bytes back as they are, so that the graph is unpickled
    once that process is gone (graph/rank_plan.py's BenchBuilds; unpickled by the scheduler's loop, the
    graph beside the worker's: the 1M rank's peak 2,002 MiB)."""
    return pickle.dumps(build_task(folder, step, rank, False), protocol=pickle.HIGHEST_PROTOCOL)


def prepare_build_task(g: Graph, opts: Options, n: int = 1) -> Prepared:
    rare_collections_from_now()
    assign_micro_steps(g)
    return prepare_build(g, NPU, opts.overflow_check, n)


def prepare_compare_task(
    npu: Graph,
    bench: Graph,
    opts: Options,
    where: str,
    n: int = 1,
    whole: bool = True,
) -> Prepared:
    """``whole=False``: another task makes the rows of a pair compared whole (tensor mode, merged
    graphs): this one then has no rows to make (the pair prepared again in another worker process for
    its chunk tasks, graph/held.py)."""
    rare_collections_from_now()
    mode = compare_mode(npu, bench, where)
    if npu.framework != bench.framework and not opts.layer_mapping:
        raise ConfigError(where, "the two dumps come from different frameworks: pass -lm/--layer_mapping")
    measure = None
    if mode == TENSOR:
        from msprobe_dask.graph.tensors import make_measure

        measure = make_measure(npu.data_path, bench.data_path, opts.tensor_log)
    mapping = None
    if opts.layer_mapping:
        from msprobe_dask.graph.mapping import layer_mapping

        mapping = layer_mapping(npu, bench, opts.layer_mapping)
    sources = (NPU, BENCH)
    # the compare is done with the rows, in chunk tasks (graph/chunks.py), except in tensor mode
    # (tensors are measured and logged in the reference's order) and for merged graphs (their nodes
    # share items)
    if measure is None and not opts.merge:
        pairs = match_pairs(npu, bench, opts.fuzzy_match, mapping)
        assign_micro_steps(npu, bench)
        return prepare_compare(npu, bench, pairs, mode, sources, opts.overflow_check, n, opts.tolerance)
    if not whole:
        return Prepared((), sources, mode, opts.overflow_check, [], [])
    parse_all_items(npu)
    parse_all_items(bench)
    pairs = compare_graphs(
        npu, bench, mode, fuzzy=opts.fuzzy_match, mapping=mapping, measure=measure, merge=opts.merge
    )
    assign_micro_steps(npu, bench)
    if opts.overflow_check:
        check_overflow(npu)
        check_overflow(bench)
    md5 = mode == MD5
    done = [graph_rows(npu, NPU, md5), graph_rows(bench, BENCH, md5)]
    if done[0].summary is not None and opts.tolerance is not None:  # (the first divergence's rows)
        rows = node_rows(list(npu.nodes.values()), dict(pairs), mode, dump_places(npu), opts.tolerance)
        done[0].summary.divergence = rows
    return Prepared((npu, bench), sources, mode, opts.overflow_check, [], done)


def prepare_task(
    opts: Options, where: str, n: int, whole: bool, npu: Graph, bench: Graph | None = None
) -> Prepared:
    """The graph (a build) or the pair (a compare) prepared for ``n`` chunk tasks (``whole``: see
    prepare_compare_task)."""
    if bench is None:
        return prepare_build_task(npu, opts, n)
    return prepare_compare_task(npu, bench, opts, where, n, whole)


class Summary(NamedTuple):
    """What joining a (step, rank)'s chunks and placing its rows in the vis.db need of its Prepared
    (small: made where the Prepared is)."""

    heads: list[GraphHead]
    done: list[GraphRows] | None
    mode: str
    counts: list[tuple[int, int]]  # each graph's tb_nodes and tb_stack rows


def summary_of(p: Prepared) -> Summary:
    return Summary(p.heads(), p.done, p.mode, p.row_counts())


Part = tuple[list[GraphRows], str, int]  # a (step, rank)'s rows of each graph, compare mode, micro steps


def joined(summary: Summary, *results: Any) -> Part:
    """The (step, rank)'s Part from its chunk tasks' results (in chunk order)."""
    heads, done, mode, _ = summary
    return (done if done is not None else join(heads, list(results))), mode, heads[0].micro_steps


def _finish(p: Prepared) -> Part:
    """A Prepared's rows made in this task (merged graphs: graph/merge/plan.py)."""
    return rows_here(p), p.mode, p.heads()[0].micro_steps


def finish_build(g: Graph, opts: Options) -> Part:
    return _finish(prepare_build_task(g, opts))


def finish_compare(npu: Graph, bench: Graph, opts: Options, where: str) -> Part:
    return _finish(prepare_compare_task(npu, bench, opts, where))


def vis_result(
    parts: list[Part],
    compare: bool,
    opts: Options,
    ranks: list[int],
    steps: list[int],
) -> VisResult:
    graphs = [g for rows, _, _ in parts for g in rows]
    mode = parts[0][1] if parts else ""
    micro = parts[0][2] if parts else 1
    if compare:
        config = config_row(
            True,
            CONFIG_TASK[mode],
            tool_tip(mode),
            micro,
            opts.overflow_check,
            node_colors(mode),
            ranks,
            steps,
        )
    else:
        config = config_row(False, "", None, micro, opts.overflow_check, "null", ranks, steps)
    return VisResult(compare, graphs, config)


def run_summary(graphs: list[GraphRows]) -> tuple[RunSummary, tuple[str, ...]]:
    """The summary of the NPU graphs' nodes by (step, rank), and why rows' tensor files could not be
    read, in node order, as they are read from the vis.db of ``graphs``
    (tests/graph/visdb_summary.py)."""
    npu = sorted((g for g in graphs if g.source == NPU), key=lambda g: (g.step, g.rank))
    groups = [g.summary for g in npu if g.summary is not None]
    summary = RunSummary("graph_visualize", [group.finish(stack_line) for group in groups])
    return summary, tuple(problem for group in groups for problem in group.unreadable)


def job_divergence(graphs: list[GraphRows]) -> Divergence | None:
    """The job's first divergence by compare's rule (analysis/), from the rows the chunk tasks made of
    the NPU graphs' nodes (graph/divergence_rows.py); None: nothing compared (a build)."""
    from msprobe_dask.analysis.rank_rows import analyse_rank_rows

    found = sorted(_rank_rows(graphs), key=lambda found: (found[0].step, found[0].rank))
    ranks = [(label, rows) for (_, label, rows) in found]
    return analyse_rank_rows(ranks) if ranks else None


def link_ahead(part: Part) -> None:
    """The (step, rank)'s communication nodes made now, in its rank task (graph/held.py: held_rank),
    for job_divergence's links across ranks (RankRows.link_ahead)."""
    from msprobe_dask.analysis.findings import step_and_rank

    for _, label, rows in _rank_rows(part[0]):
        rows.link_ahead(step_and_rank(label)[1])


def _rank_rows(graphs: list[GraphRows]) -> list[tuple[GraphRows, str, RankRows]]:
    """The NPU graphs of ``graphs`` that hold compare rows for the first divergence, their (step,
    rank)'s label and those rows."""
    from msprobe_dask.analysis.rank_rows import RankRows

    return [
        (g, g.summary.summary.label, g.summary.divergence)
        for g in graphs
        if g.source == NPU and g.summary is not None and isinstance(g.summary.divergence, RankRows)
    ]
