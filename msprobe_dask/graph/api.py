"""Python API of graph_visualize: a lazy Dask graph from input folders to vis.db rows and file.

::

    result = build_graphs("run/npu", "run/bench", overflow_check=True)   # rows, no I/O
    path = graph_visualize("run/npu", "run/bench", output_path="out")     # writes compare_{ts}.vis.db

Task graph (one task per box)::

    build(step, rank, NPU) --+
                             +--> finish(step, rank) --+
    build(step, rank, Bench)-+                         +--> link (cross-rank) --> write vis.db
    ...                                  ...-----------+
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from msprobe_dask.dump.entries import DumpEntries, scan_dump_doc
from msprobe_dask.errors import ConfigError, DumpError, OutputError
from msprobe_dask.graph import layout
from msprobe_dask.graph.build import (
    MD5_TOKEN,
    GraphSource,
    assign_micro_steps,
    build_graph,
    load_dump_doc,
    parse_all_items,
)
from msprobe_dask.graph.chunks import build_rows, compare_rows
from msprobe_dask.graph.codec import decode, encode
from msprobe_dask.graph.compare import (
    CONFIG_TASK,
    compare_graphs,
    compare_mode,
    match_pairs,
    node_colors,
    tool_tip,
)
from msprobe_dask.graph.forked import call_in_child, start_in_child
from msprobe_dask.graph.gcpause import rare_full_collections
from msprobe_dask.graph.model import Graph
from msprobe_dask.graph.overflow import check_overflow
from msprobe_dask.graph.rows import GraphRows, config_row, graph_rows, read_back
from msprobe_dask.graph.texts_ahead import TextsAhead, texts_ahead
from msprobe_dask.pipeline.scheduler import RunOptions, computing
from msprobe_dask.writers.atomic import output_dir
from msprobe_dask.writers.visdb import GraphTables, RowSink, VisdbWriter

if TYPE_CHECKING:  # (the merge modules are imported only for a merge)
    from msprobe_dask.graph.merge.strategy import ParallelParams

NPU, BENCH = "NPU", "Bench"


@dataclass(frozen=True, slots=True)
class Options:
    overflow_check: bool = False
    fuzzy_match: bool = False
    layer_mapping: str | bool | None = None
    tensor_log: bool = False
    merge: bool = False  # parallel-merged graphs: merge checkers in the compare (§3.4)
    sink: RowSink | None = None  # takes the tb_nodes rows as they are made (writers/visdb.py)


@dataclass(slots=True)
class VisResult:
    """Everything a vis.db holds: graphs in write order (NPU then Bench per (step, rank)) and tb_config."""

    compare: bool
    graphs: list[GraphRows] = field(default_factory=list)
    config: tuple[Any, ...] = ()


# ------------------------------------------------------------------------------------ tasks


def _build_task(
    folder: str, step: int, rank: int, items: bool = True, alone: bool = False, ahead: bool = False
) -> Graph:
    """``items=False``: the finish task parses the nodes' items (build.parse_items). ``alone``: no
    other build task will run beside this one. ``ahead``: the rows' item texts will be made from
    dump.json's entries (a build without -oc).

    A build is pure Python: two threads building at once (the two sides of a compare, two ranks)
    would share one CPU. So while another build runs in this process, a big lazy build is done by a
    forked child and sent back flat (graph/codec.py). A big lazy build alone leaves a CPU free: a
    child then reads the layout of dump.json's entries (half the build) while the tree is built, and
    with ``ahead`` goes on to make the texts (graph/texts_ahead.py)."""
    global _builds
    src = GraphSource(folder, step, rank)
    with _builds_lock:
        others = _builds
        _builds += 1
    try:
        if (others or alone) and not items and _size(src.dump_json) >= FORK_BUILD_BYTES:
            text = _read_bytes(src.dump_json)  # the child's too: its results come back without them
            if text is None:
                return build_graph(src, items)  # which gives the error
            if not others:
                return _build_with_child(src, text, texts_ahead(len(text)) if ahead else None)
            flat = call_in_child(partial(_flat_build, src, text))
            if flat is not None:
                return decode(flat, text)
        return build_graph(src, items)
    finally:
        with _builds_lock:
            _builds -= 1


FORK_BUILD_BYTES = 1 << 20  # a dump.json smaller than this builds faster than a fork pays back
_builds = 0  # build tasks running in this process
_builds_lock = threading.Lock()


def _build_with_child(src: GraphSource, text: bytes, ahead: TextsAhead | None) -> Graph:
    """The lazy build of ``src`` (whose dump.json holds ``text``), a child reading dump.json's layout
    meanwhile, then making the rows' texts into ``ahead`` if given."""
    try:
        g = build_graph(src, False, _dump_doc_in_child(src.dump_json, text, ahead))
    except BaseException:
        if ahead is not None:
            ahead.close()  # (the child would end by itself, but hold its CPU until then)
        raise
    g.texts_ahead = ahead if ahead is not None and ahead.region is not None else None
    return g


def _flat_build(src: GraphSource, text: bytes) -> tuple[Any, ...]:
    return encode(build_graph(src, False), text)


def _dump_doc_in_child(
    path: Path, text: bytes, ahead: TextsAhead | None = None
) -> Callable[[], tuple[dict[str, Any], Mapping[str, Any]]]:
    """load_dump_doc(path, lazy=True) for a dump.json holding ``text``, started now by a forked child
    (a thread waits for it); the call returns it. Without a free CPU, or for a file that is not laid
    out for the lazy read, the caller's thread reads the file itself (and gives its errors). The
    child then goes on making the rows' texts into ``ahead`` if given; else, or if there is no such
    child, ``ahead`` is closed."""
    started: list[Any] = []
    then = partial(ahead.make, text) if ahead is not None else None
    waiter = threading.Thread(
        target=lambda: started.append(start_in_child(partial(scan_dump_doc, path, text, (MD5_TOKEN,)), then)),
        daemon=True,
    )
    waiter.start()

    def dump_doc() -> tuple[dict[str, Any], Mapping[str, Any]]:
        waiter.join()
        scanned, child = started[0] if started and started[0] is not None else (None, None)
        if child is not None and ahead is not None and scanned is not None:
            ahead.going_on(child)
        else:
            if child is not None:
                child.wait()
            if ahead is not None:
                ahead.close()
        if scanned is None:
            return load_dump_doc(path, lazy=True)
        header, state = scanned
        return header, DumpEntries.with_text(state, text)

    return dump_doc


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0  # build_graph gives the error


def _read_bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None  # build_graph gives the error


def _finish_build(g: Graph, opts: Options) -> tuple[list[GraphRows], str, int]:
    assign_micro_steps(g)
    return [build_rows(g, NPU, opts.overflow_check, opts.sink)], "", g.micro_steps


def _finish_compare(npu: Graph, bench: Graph, opts: Options, where: str) -> tuple[list[GraphRows], str, int]:
    mode = compare_mode(npu, bench, where)
    if npu.framework != bench.framework and not opts.layer_mapping:
        raise ConfigError(where, "the two dumps come from different frameworks: pass -lm/--layer_mapping")
    measure = None
    if mode == "tensor":
        from msprobe_dask.graph.tensors import make_measure

        measure = make_measure(npu.data_path, bench.data_path, opts.tensor_log)
    mapping = None
    if opts.layer_mapping:
        from msprobe_dask.graph.mapping import layer_mapping

        mapping = layer_mapping(npu, bench, opts.layer_mapping)
    # the compare is done with the rows, in chunks (graph/chunks.py), except in tensor mode (tensors are
    # measured and logged in the reference's order) and for merged graphs (their nodes share items)
    chunked = measure is None and not opts.merge
    if chunked:
        pairs = match_pairs(npu, bench, opts.fuzzy_match, mapping)
    else:
        parse_all_items(npu)
        parse_all_items(bench)
        compare_graphs(
            npu, bench, mode, fuzzy=opts.fuzzy_match, mapping=mapping, measure=measure, merge=opts.merge
        )
    assign_micro_steps(npu, bench)
    if chunked:  # overflow levels set in the chunk jobs
        rows = compare_rows(npu, bench, pairs, mode, (NPU, BENCH), opts.overflow_check, opts.sink)
    else:
        if opts.overflow_check:
            check_overflow(npu)
            check_overflow(bench)
        md5 = mode == "md5"
        rows = (graph_rows(npu, NPU, md5), graph_rows(bench, BENCH, md5))
    return list(rows), mode, npu.micro_steps


def _link_task(
    parts: list[tuple[list[GraphRows], str, int]], distributed: bool, overflow: bool
) -> list[tuple[list[GraphRows], str, int]]:
    if distributed:
        from msprobe_dask.graph.distributed import link_distributed

        link_distributed([g for rows, _, _ in parts for g in rows], overflow)
    return parts


def _result(
    parts: list[tuple[list[GraphRows], str, int]],
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


def _write_task(result: VisResult, path: str, sink: RowSink | None) -> str:
    """Write the vis.db: the rest of it, if ``sink`` took rows as they were made."""
    writer = sink.close() if sink is not None else VisdbWriter(path)
    graphs = [GraphTables(g.graph_id, g.n_rows, g.nodes, g.stacks, g.packed, g.apart) for g in result.graphs]
    return writer.finish(graphs, result.config)


def _read_back(result: VisResult) -> VisResult:
    for g in result.graphs:
        read_back(g)
    return result


# ------------------------------------------------------------------------------------ graph


def _plan(target: str | os.PathLike[str], golden: str | os.PathLike[str] | None, opts: Options):
    """(lazy VisResult, compare?, the graph ids in write order) for the inputs."""
    import dask

    tp = Path(target)
    if golden is None:
        kind, sources = layout.build_sources(tp)
        parts = []
        for step, rank, folder in sources:
            g = dask.delayed(_build_task, pure=True)(
                folder,
                step,
                rank,
                False,
                len(sources) == 1,
                not opts.overflow_check,
                dask_key_name=f"build-{step}-{rank}-NPU",
            )
            parts.append(dask.delayed(_finish_build)(g, opts, dask_key_name=f"finish-{step}-{rank}"))
        steps = sorted({s for s, _, _ in sources}) if kind == "steps" else [0]
        ranks = sorted({r for _, r, _ in sources}, key=[r for _, r, _ in sources].index)
        order = [f"{NPU}_{step}_{rank}" for step, rank, _ in sources]
        compare = False
    else:
        gp = Path(golden)
        kind, pairs = layout.compare_sources(tp, gp)
        parts = []
        for step, rank, a, b in pairs:
            ga = dask.delayed(_build_task)(a, step, rank, False, dask_key_name=f"build-{step}-{rank}-NPU")
            gb = dask.delayed(_build_task)(b, step, rank, False, dask_key_name=f"build-{step}-{rank}-Bench")
            parts.append(
                dask.delayed(_finish_compare)(ga, gb, opts, a, dask_key_name=f"finish-{step}-{rank}")
            )
        steps = sorted({s for s, _, _, _ in pairs}) if kind == "steps" else [0]
        ranks = list(dict.fromkeys(r for _, r, _, _ in pairs))
        order = [f"{side}_{step}_{rank}" for step, rank, _, _ in pairs for side in (NPU, BENCH)]
        compare = True
    if not parts:
        raise DumpError(target, "holds no dump to visualize")
    ranks = ranks if kind != "files" else [0]
    linked = dask.delayed(_link_task)(parts, kind != "files", opts.overflow_check, dask_key_name="link-ranks")
    result = dask.delayed(_result)(linked, compare, opts, ranks, steps, dask_key_name="vis-result")
    return result, compare, order


def _any_plan(
    target: str | os.PathLike[str],
    golden: str | os.PathLike[str] | None,
    opts: Options,
    parallel: Sequence[ParallelParams] | None,
    json_output: bool = False,
):
    """The merge plan when ``parallel`` is given and the input has rank folders, else ``_plan``; with
    the graph ids in write order (none for a merge: its graphs are made in the plan)."""
    if parallel:
        from msprobe_dask.graph.merge.plan import merge_plan

        result, compare = merge_plan(target, golden, opts, list(parallel), json_output)
        if result is not None:
            return result, compare, []
    return _plan(target, golden, opts)


def _compute(obj: Any, client: Any = None, run: RunOptions | None = None) -> Any:
    """On ``client`` if given, else where ``run`` says (default: local threads, see pipeline.scheduler).

    Threads, whatever the CPU count: the CPU-bound part forks its own processes (graph/forked.py),
    while dask.multiprocessing would pickle every Graph between tasks (2.7x slower on a 20,000-node
    compare)."""
    if client is not None:
        return client.compute(obj).result()
    with rare_full_collections(), computing(run or RunOptions()) as compute:
        (value,) = compute([obj])
        return value


def build_graphs(
    target: str | os.PathLike[str],
    golden: str | os.PathLike[str] | None = None,
    *,
    overflow_check: bool = False,
    fuzzy_match: bool = False,
    layer_mapping: str | bool | None = None,
    client: Any = None,
    parallel: Sequence[ParallelParams] | None = None,
    run: RunOptions | None = None,
) -> VisResult:
    """Build (and compare) the graphs; return the rows a vis.db would hold, without writing anything.
    ``parallel``: merge each side's rank graphs first (see graph_visualize). ``client``: a dask Client
    to compute on; otherwise ``run`` chooses the scheduler, workers and progress reporting."""
    opts = Options(overflow_check, fuzzy_match, layer_mapping)
    result, _, _ = _any_plan(target, golden, opts, parallel)
    return _read_back(_compute(result, client, run))


def output_name(compare: bool, ts: str | None = None) -> str:
    ts = ts or time.strftime("%Y%m%d%H%M%S", time.localtime())
    return f"{'compare' if compare else 'build'}_{ts}.vis.db"


def graph_visualize(
    target: str | os.PathLike[str],
    golden: str | os.PathLike[str] | None = None,
    *,
    output_path: str | os.PathLike[str],
    overflow_check: bool = False,
    fuzzy_match: bool = False,
    layer_mapping: str | bool | None = None,
    tensor_log: bool = False,
    client: Any = None,
    parallel: Sequence[ParallelParams] | None = None,
    json_output: bool = False,
    run: RunOptions | None = None,
) -> str:
    """Build the graphs and write ``build_{ts}.vis.db`` / ``compare_{ts}.vis.db`` into ``output_path``.

    ``parallel`` (one ParallelParams per side) merges the rank graphs of each side first (§6); with
    ``json_output`` a merge build writes ``step{s}/rank{r}/{construct,dump,stack}.json`` instead."""
    import dask

    ts = time.strftime("%Y%m%d%H%M%S", time.localtime())
    out = Path(output_path)
    if out.exists() and not out.is_dir():
        raise OutputError(out, "is not a folder")
    json_files = bool(parallel and json_output)
    # tasks in this process: the rows go into the vis.db while the jobs that make them go on
    in_this_process = client is None and (run is None or run.in_this_process)
    sink = RowSink() if in_this_process and not json_files else None
    opts = Options(overflow_check, fuzzy_match, layer_mapping, tensor_log, sink=sink)
    result, compare, order = _any_plan(target, golden, opts, parallel, json_output)
    path = out / output_name(compare, ts)
    if json_files:
        from msprobe_dask.graph.merge.export_json import write_merged_json

        written = dask.delayed(write_merged_json)(result, str(out), dask_key_name="write-json")
    else:
        written = dask.delayed(_write_task)(result, str(path), sink, dask_key_name="write-visdb")
    with output_dir(out):  # a bad input leaves nothing behind, not even the folders we made
        if sink is not None:  # the plan has checked the inputs: the file may be begun
            sink.open(VisdbWriter(path), order)
        try:
            return _compute(written, client, run)
        finally:
            if sink is not None:
                sink.abort()  # nothing left to do once written
