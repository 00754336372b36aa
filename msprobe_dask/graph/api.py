"""Python API of graph_visualize: a lazy Dask graph from input folders to vis.db rows and file.

::

    result = build_graphs("run/npu", "run/bench", overflow_check=True)   # rows, no I/O
    path = graph_visualize("run/npu", "run/bench", output_path="out")     # writes compare_{ts}.vis.db

Task graph (one task per box)::

    build(step, rank, NPU) --+                 +--> rows(step, rank, 0) --+
                             +--> prepare  ----+--> ...                   +--> finish(step, rank) --+
    build(step, rank, Bench)-+    (match)      +--> rows(step, rank, n-1)-+                         |
    ...                                                                            link (cross-rank) <--+
    place(0, 0) --> insert(0, 0, 0) --> ... --> insert(s, r, n-1) --> place(...) --> ...  --> write vis.db

graph/rank_plan.py lays out the (step, rank)s' tasks (the merge plan, graph/merge/plan.py, lays out a
merge's), graph/write_chain.py the vis.db's write chain, graph/run_setup.py chooses where the run
computes; this module puts them together and runs them.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from msprobe_dask.analysis.tolerance import DEFAULT_TOLERANCE, Tolerance
from msprobe_dask.errors import OutputError
from msprobe_dask.graph.held import Spool
from msprobe_dask.graph.model import Graph
from msprobe_dask.graph.rank_plan import rank_plan, rows_made_whole
from msprobe_dask.graph.rows import read_back
from msprobe_dask.graph.run_setup import (
    big_here,
    builds_apart,
    computed,
    graph_run,
    in_this_process,
    one_task_a_rank,
    rank_window,
    spool_for,
    spooling,
)
from msprobe_dask.graph.tasks import Options, VisResult
from msprobe_dask.graph.write_chain import Visualized, chained_write, write_task
from msprobe_dask.pipeline.scheduler import RunOptions
from msprobe_dask.writers.atomic import output_dir, withdrawn_if_failed
from msprobe_dask.writers.result_files import name_stamp
from msprobe_dask.writers.visdb import VisdbWriter

if TYPE_CHECKING:  # (the merge modules are imported only for a merge)
    from msprobe_dask.graph.merge.plan import Merge
    from msprobe_dask.graph.merge.strategy import ParallelParams


def _json_task(steps: list[list[Graph]], out: str) -> Visualized:
    """A merge's graphs written as dump folders (no vis.db, no summary)."""
    from msprobe_dask.graph.merge.export_json import write_merged_json

    return Visualized(write_merged_json(steps, out))


def _read_back(result: VisResult) -> VisResult:
    for g in result.graphs:
        read_back(g)
    return result


def _any_plan(
    target: str | os.PathLike[str],
    golden: str | os.PathLike[str] | None,
    opts: Options,
    parallel: Sequence[ParallelParams] | None,
    json_output: bool = False,
    spool: Spool | None = None,
):
    """The merge plan when ``parallel`` is given and the input has rank folders, else ``rows_made_whole``."""
    merged = _merged(target, golden, opts, parallel, json_output, spool)
    return merged or rows_made_whole(target, golden, opts, spool)


def _merged(
    target: str | os.PathLike[str],
    golden: str | os.PathLike[str] | None,
    opts: Options,
    parallel: Sequence[ParallelParams] | None,
    json_output: bool,
    spool: Spool | None,
    then: Callable[[Any], Any] | None = None,
    then_key: str = "",
):
    """(lazy VisResult, compare?) of the merge plan when ``parallel`` is given and the input has rank
    folders, else None; ``then``: what its last task (``then_key``) makes of its result (merge_plan)."""
    if not parallel:
        return None
    from msprobe_dask.graph.merge.plan import merge_plan

    result, compare = merge_plan(target, golden, opts, list(parallel), json_output, spool, then, then_key)
    return (result, compare) if result is not None else None


def _merge(
    target: str | os.PathLike[str],
    golden: str | os.PathLike[str] | None,
    opts: Options,
    parallel: Sequence[ParallelParams],
    spool: Spool | None,
) -> Merge | None:
    """The merge's replica tasks, if the input has rank folders (graph/merge/plan.py)."""
    from msprobe_dask.graph.merge.plan import merge_parts

    return merge_parts(target, golden, opts, list(parallel), spool)


def _merge_written(
    merge: Merge, path: Path, key: str, spool: Spool | None, client: Any, run: RunOptions | None
) -> Visualized:
    """A merge's vis.db written replica by replica (merge_written), as one task would write it: its
    indexes at the end."""
    from msprobe_dask.graph.merge.plan import merge_written

    with output_dir(path.parent), withdrawn_if_failed(path), spooling(spool):
        writer = VisdbWriter(path, shared=in_this_process(client, run)).suspend()
        try:
            return computed(merge_written(merge, writer, key), client, run)
        finally:  # (named when complete, and closed; a failed run leaves nothing, its file closed)
            writer.abort()


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
    tolerance: Tolerance | None = DEFAULT_TOLERANCE,
) -> VisResult:
    """Build (and compare) the graphs; return the rows a vis.db would hold, without writing anything.
    ``parallel``: merge each side's rank graphs first (see graph_visualize). ``client``: a dask Client
    to compute on; otherwise ``run`` chooses the scheduler, workers and progress reporting.
    ``tolerance``: the first divergence's (a compare's summary; None: no first divergence)."""
    import tempfile

    opts = Options(overflow_check, fuzzy_match, layer_mapping, tolerance=tolerance)
    run = run if client is not None else graph_run(run, target, golden, parallel or ())
    spool = spool_for(Path(tempfile.gettempdir()) / f".graph-spool-{uuid.uuid4().hex}", client, run)
    result, _ = _any_plan(target, golden, opts, parallel, spool=spool)
    with spooling(spool):
        return _read_back(computed(result, client, run))


def output_name(compare: bool, ts: str | None = None) -> str:
    ts = ts or name_stamp()
    return f"{'compare' if compare else 'build'}_{ts}.vis.db"


def visualize(
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
    tolerance: Tolerance | None = DEFAULT_TOLERANCE,
) -> Visualized:
    """Build the graphs and write ``build_{ts}.vis.db`` / ``compare_{ts}.vis.db`` into ``output_path``.

    ``parallel`` (one ParallelParams per side) merges the rank graphs of each side first (§6); with
    ``json_output`` a merge build writes ``step{s}/rank{r}/{construct,dump,stack}.json`` instead.
    ``tolerance``: the first divergence's, in a compare's summary (analysis/tolerance.py); None: none
    (the command's -q: nothing prints it)."""
    import dask

    ts = name_stamp()
    out = Path(output_path)
    if out.exists() and not out.is_dir():
        raise OutputError(out, "is not a folder")
    json_files = bool(parallel and json_output)
    opts = Options(overflow_check, fuzzy_match, layer_mapping, tensor_log, tolerance=tolerance)
    run = run if client is not None else graph_run(run, target, golden, parallel or ())
    path = out / output_name(golden is not None, ts)
    spool = spool_for(path.with_name(f".{path.name}.spool"), client, run)  # (a temporary of its name)
    if json_files:
        write, key = partial(_json_task, out=str(out)), "write-json"
    else:
        write, key = partial(write_task, path=str(path)), "write-visdb"
    merge = _merge(target, golden, opts, parallel, spool) if parallel and not json_files else None
    if merge is not None:
        return _merge_written(merge, path, key, spool, client, run)
    # a merge's json files: its last task writes them (its graphs pass through no other process)
    merged = _merged(target, golden, opts, parallel, json_output, spool, write, key)
    here, big, apart = in_this_process(client, run), big_here(client, run), builds_apart(client, run)
    laid_out = merged is None and not json_files
    plan = rank_plan(target, golden, opts, spool, big and not apart, apart) if laid_out else None
    if plan is not None:
        plan.rank_alone = one_task_a_rank(client, run, len(plan.sources))
        if plan.rank_alone and run is not None:  # (a rank's insert before the next rank task:
            # RunOptions.by_priority)
            run = replace(run, by_priority=True)
    written: Any = merged[0] if merged else None  # with a plan: the rows written chunk by chunk
    if merged is None and plan is None:
        result, _ = rows_made_whole(target, golden, opts, spool)
        written = dask.delayed(write)(result, dask_key_name=key)
    # a bad input leaves nothing behind, not even the folders we made; a stopped run no vis.db
    with output_dir(out), withdrawn_if_failed(path), spooling(spool):
        if plan is None:
            return computed(written, client, run)
        # (a big rank's Bench graphs' worker forked now, before the run's threads start and the vis.db
        # is opened: graph/rank_plan.py, BenchBuilds)
        with plan.bench.forked() if plan.bench is not None else contextlib.nullcontext():
            # the indexes kept up to date by the inserts in every layout, so that the file's bytes are the
            # same whatever the layout (VisdbWriter's ``indexed_early``); in this process its tasks share
            # the writer, all rows in one transaction (``shared``)
            writer = VisdbWriter(path, indexed_early=True, shared=here).suspend()
            try:
                chain = chained_write(
                    plan, writer, rank_window(client, run), released_beside=here and not big
                )
                return computed(chain, client, run)
            finally:  # (named when complete, and closed; a failed run leaves nothing, its file closed)
                writer.abort()


def graph_visualize(
    target: str | os.PathLike[str], golden: str | os.PathLike[str] | None = None, **options: Any
) -> str:
    """``visualize``'s path: the ``build_{ts}.vis.db`` / ``compare_{ts}.vis.db`` written into
    ``output_path`` (or, for a merge's json files, the folder)."""
    return visualize(target, golden, **options).path
