"""Python API of graph_visualize: a lazy Dask graph from input folders to vis.db rows and file.

::

    result = build_graphs("run/npu", "run/bench", overflow_check=True)   # rows, no I/O
    path = graph_visualize("run/npu", "run/bench", output_path="out")     # writes compare_{ts}.vis.db

Task graph (one task per box)::

    build(step, rank, NPU) --+                 +--> rows(step, rank, 0) --+
                             +--> prepare  ----+--> ...                   +--> finish(step, rank) --+
    build(step, rank, Bench)-+    (match)      +--> rows(step, rank, n-1)-+                         |
    ...                                                                            link (cross-rank) <--+
                                                                                     --> write vis.db

A rows task makes one chunk of the (step, rank)'s rows (graph/chunks.py) and returns them packed; the
one write task inserts them in order. The build, prepare and finish tasks live in graph/tasks.py (the
merge plan, graph/merge/plan.py, lays them out too); this module lays out the graph and runs it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from msprobe_dask.dump import graph_layouts as layout
from msprobe_dask.dump.location import dump_path
from msprobe_dask.errors import DumpError, OutputError
from msprobe_dask.graph.chunks import Prepared, chunk_count, chunk_task, join
from msprobe_dask.graph.dump_files import GraphSource
from msprobe_dask.graph.gcpause import rare_full_collections
from msprobe_dask.graph.rows import GraphHead, GraphRows, read_back
from msprobe_dask.graph.tasks import (
    Options,
    Part,
    VisResult,
    build_task,
    prepare_build_task,
    prepare_compare_task,
    vis_result,
)
from msprobe_dask.pipeline.scheduler import RunOptions, computing
from msprobe_dask.writers.atomic import output_dir, withdrawn_if_failed
from msprobe_dask.writers.visdb import GraphTables, write_visdb

if TYPE_CHECKING:  # (the merge modules are imported only for a merge)
    from msprobe_dask.graph.merge.strategy import ParallelParams

# ------------------------------------------------------------------------------------ tasks


def _summary(p: Prepared) -> tuple[list[GraphHead], list[GraphRows] | None, str]:
    """What joining the chunks needs of a Prepared (small: runs where the Prepared is)."""
    return p.heads(), p.done, p.mode


def _joined(summary: tuple[list[GraphHead], list[GraphRows] | None, str], results: list[Any]) -> Part:
    heads, done, mode = summary
    return (done if done is not None else join(heads, results)), mode, heads[0].micro_steps


def _rows_tasks(prepared: Any, n: int, name: str) -> Any:
    """The lazy Part of a Prepared cut into ``n`` chunk tasks."""
    import dask

    chunks = [dask.delayed(chunk_task)(prepared, k, dask_key_name=f"rows-{name}-{k}") for k in range(n)]
    summary = dask.delayed(_summary)(prepared, dask_key_name=f"summary-{name}")
    return dask.delayed(_joined)(summary, chunks, dask_key_name=f"finish-{name}")


def _chunks_for(*folders: str) -> int:
    return chunk_count(sum(_size(GraphSource(f).dump_json) for f in folders))


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0  # the build task gives the error


def _link_task(parts: list[Part], distributed: bool, overflow: bool) -> list[Part]:
    if distributed:
        from msprobe_dask.graph.distributed import link_distributed

        link_distributed([g for rows, _, _ in parts for g in rows], overflow)
    return parts


def _write_task(result: VisResult, path: str) -> str:
    """Write the vis.db: the graphs' chunks inserted in write order, in one transaction, indexes last
    (writers/visdb.py)."""
    graphs = [GraphTables(g.graph_id, g.n_rows, g.nodes, g.stacks, g.packed, g.apart) for g in result.graphs]
    return write_visdb(path, graphs, result.config)


def _read_back(result: VisResult) -> VisResult:
    for g in result.graphs:
        read_back(g)
    return result


# ------------------------------------------------------------------------------------ graph


def _plan(
    target: str | os.PathLike[str], golden: str | os.PathLike[str] | None, opts: Options, split: bool = True
):
    """(lazy VisResult, compare?) for the inputs. ``split``: cut each
    graph's rows into chunk tasks (else one task each: where the tasks reading a result would each get
    it pickled, see RunOptions.shares_results)."""
    import dask

    tp = dump_path(target)
    if golden is None:
        kind, sources = layout.build_sources(tp)
        parts = []
        for step, rank, folder in sources:
            g = dask.delayed(build_task, pure=True)(
                folder, step, rank, False, dask_key_name=f"build-{step}-{rank}-NPU"
            )
            n = _chunks_for(folder) if split else 1
            prepared = dask.delayed(prepare_build_task)(g, opts, n, dask_key_name=f"prepare-{step}-{rank}")
            parts.append(_rows_tasks(prepared, n, f"{step}-{rank}"))
        steps = sorted({s for s, _, _ in sources}) if kind == "steps" else [0]
        ranks = sorted({r for _, r, _ in sources}, key=[r for _, r, _ in sources].index)
        compare = False
    else:
        gp = dump_path(golden)
        kind, pairs = layout.compare_sources(tp, gp)
        parts = []
        for step, rank, a, b in pairs:
            ga = dask.delayed(build_task)(a, step, rank, False, dask_key_name=f"build-{step}-{rank}-NPU")
            gb = dask.delayed(build_task)(b, step, rank, False, dask_key_name=f"build-{step}-{rank}-Bench")
            n = _chunks_for(a, b) if split else 1
            prepared = dask.delayed(prepare_compare_task)(
                ga, gb, opts, a, n, dask_key_name=f"prepare-{step}-{rank}"
            )
            parts.append(_rows_tasks(prepared, n, f"{step}-{rank}"))
        steps = sorted({s for s, _, _, _ in pairs}) if kind == "steps" else [0]
        ranks = list(dict.fromkeys(r for _, r, _, _ in pairs))
        compare = True
    if not parts:
        raise DumpError(target, "holds no dump to visualize")
    ranks = ranks if kind != "files" else [0]
    linked = dask.delayed(_link_task)(parts, kind != "files", opts.overflow_check, dask_key_name="link-ranks")
    result = dask.delayed(vis_result)(linked, compare, opts, ranks, steps, dask_key_name="vis-result")
    return result, compare


def _any_plan(
    target: str | os.PathLike[str],
    golden: str | os.PathLike[str] | None,
    opts: Options,
    parallel: Sequence[ParallelParams] | None,
    json_output: bool = False,
    split: bool = True,
):
    """The merge plan when ``parallel`` is given and the input has rank folders, else ``_plan``."""
    if parallel:
        from msprobe_dask.graph.merge.plan import merge_plan

        result, compare = merge_plan(target, golden, opts, list(parallel), json_output)
        if result is not None:
            return result, compare
    return _plan(target, golden, opts, split)


def _splits(client: Any, run: RunOptions | None) -> bool:
    """Whether the graphs' rows are cut into chunk tasks where the graph runs (see _plan)."""
    return client is not None or (run or RunOptions()).shares_results


def _compute(obj: Any, client: Any = None, run: RunOptions | None = None) -> Any:
    """On ``client`` if given, else where ``run`` says (see pipeline.scheduler)."""
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
    result, _ = _any_plan(target, golden, opts, parallel, split=_splits(client, run))
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
    opts = Options(overflow_check, fuzzy_match, layer_mapping, tensor_log)
    result, compare = _any_plan(target, golden, opts, parallel, json_output, _splits(client, run))
    path = out / output_name(compare, ts)
    if json_files:
        from msprobe_dask.graph.merge.export_json import write_merged_json

        written = dask.delayed(write_merged_json)(result, str(out), dask_key_name="write-json")
    else:
        written = dask.delayed(_write_task)(result, str(path), dask_key_name="write-visdb")
    # a bad input leaves nothing behind, not even the folders we made; a stopped run no vis.db
    with output_dir(out), withdrawn_if_failed(path):
        return _compute(written, client, run)
