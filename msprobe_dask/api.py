"""The Python API: ``msprobe_dask.compare(target, golden)`` and ``msprobe_dask.graph(target, golden)``.

They return typed data (``results.compare.CompareResult``, ``results.graph.GraphResult``) and write
nothing. The lower-level APIs stay: ``pipeline.compare.compare`` (CompareTables), ``graph.api``
(``build_graphs``, ``graph_visualize``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from msprobe_dask.cli_args import graph_dump_folder
from msprobe_dask.pipeline.scheduler import RunOptions
from msprobe_dask.results.compare import CompareResult, ResultTable
from msprobe_dask.results.graph import GraphResult, graph_views

PathLike = str | Path
MERGE_OPTIONS = ("rank_size", "tp", "pp", "vpp", "order")  # graph()'s keywords for a parallel merge


def compare(
    target: PathLike,
    golden: PathLike,
    *,
    fuzzy_match: bool = False,
    api_mapping: str | bool | None = None,
    cell_mapping: str | bool | None = None,
    data_mapping: str | None = None,
    layer_mapping: str | bool | None = None,
    ranks: list[int] | None = None,
    steps: list[int] | None = None,
    skip_missing_ranks: bool = False,
    scheduler: str | None = None,
    workers: int = 0,
) -> CompareResult:
    """Compare a target (NPU) dump with a golden (bench) one, as ``msprobe-dask compare`` does.

    ``target``/``golden``: a dump.json, its folder, a multi-rank / multi-step run folder or a MindSpore
    kernel dump (``ranks``/``steps`` filter those). ``scheduler``: a running dask scheduler's address;
    ``workers``: a local cluster of that many processes."""
    from msprobe_dask.dump.layouts import open_dump

    run = RunOptions(address=scheduler, workers=workers)
    if ranks is not None or steps is not None or open_dump(target).layout == "kernel":
        return _compare_kernels(target, golden, ranks, steps, run)
    from msprobe_dask.pipeline.compare import compare as compare_tables
    from msprobe_dask.pipeline.pairing import MatchOptions

    match = MatchOptions(
        fuzzy=fuzzy_match,
        api_mapping=api_mapping,
        cell_mapping=cell_mapping,
        data_mapping=data_mapping,
        layer_mapping=layer_mapping,
    )
    results = compare_tables(target, golden, match=match, run=run, skip_missing_ranks=skip_missing_ranks)
    tables = tuple(ResultTable.of(r.label, r.table.mode, r.table) for r in results)
    return CompareResult(tables, tuple(m for r in results for m in r.tensor_messages))


def _compare_kernels(
    target: PathLike, golden: PathLike, ranks: list[int] | None, steps: list[int] | None, run: RunOptions
) -> CompareResult:
    from msprobe_dask.pipeline.kernel_compare import compare_kernels
    from msprobe_dask.pipeline.kernel_table import xlsx_view

    warnings: list[str] = []
    results = compare_kernels(target, golden, ranks=ranks, steps=steps, run=run, warn=warnings.append)
    tables = tuple(
        ResultTable.of(f"step{r.step}/rank{r.rank}", f"kernel {r.table.mode}", xlsx_view(r.table))
        for r in results
        if r.table is not None
    )
    return CompareResult(tables, tuple(warnings) + tuple(w for r in results for w in r.warnings))


def graph(
    target: PathLike,
    golden: PathLike | None = None,
    *,
    overflow_check: bool = False,
    fuzzy_match: bool = False,
    layer_mapping: str | bool | None = None,
    scheduler: str | None = None,
    workers: int = 0,
    **merge: Any,
) -> GraphResult:
    """Build (one dump) or compare (two) the model graphs, as ``msprobe-dask graph_visualize`` does,
    node by node. ``merge``: ``MERGE_OPTIONS`` (``rank_size``, ``tp``, ``pp``, ``vpp``, ``order``) as on
    the command line (one value, or one per side), to merge tensor / pipeline parallel ranks first; any
    other keyword is a TypeError."""
    from msprobe_dask.graph.api import build_graphs
    from msprobe_dask.graph.rows import NODE_COLUMNS
    from msprobe_dask.graph.tasks import job_divergence

    parallel = None
    unknown = sorted(set(merge) - set(MERGE_OPTIONS))
    if unknown:
        raise TypeError(f"graph() got an unexpected keyword argument {unknown[0]!r}")
    if merge:
        from msprobe_dask.graph.merge import DEFAULT_ORDER
        from msprobe_dask.graph.merge.strategy import parse_params

        def listed(name: str, default: Any) -> Any:
            value = merge.get(name, default)
            return value if isinstance(value, list) or value is None else [value]

        parallel = parse_params(
            listed("rank_size", None),
            listed("tp", None),
            listed("pp", None),
            listed("vpp", 1),
            listed("order", DEFAULT_ORDER),
            golden is not None,
        )
    result = build_graphs(
        graph_dump_folder(target),
        graph_dump_folder(golden) if golden is not None else None,
        overflow_check=overflow_check,
        fuzzy_match=fuzzy_match,
        layer_mapping=layer_mapping,
        parallel=parallel,
        run=RunOptions(address=scheduler, workers=workers),
    )
    found = job_divergence(result.graphs)
    return GraphResult(result.compare, tuple(graph_views(result.graphs, NODE_COLUMNS)), found)
