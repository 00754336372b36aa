"""The Dask graph of a parallel-merge run (§6.1 flow)::

    build(step, rank, side) ... --> merge(step, side) --+--> finish(step) --> vis-result --> write
    build(step, rank, side) ... --> merge(step, side) --+     (compare the i-th merged graphs)

One task per rank graph, one merge task per side and step (a merge needs every rank of the side),
then the usual finish (compare with fuzzy matching and the merge checkers, micro steps, rows). No
cross-rank distributed linking. With ``--file_type json`` the merged graphs go to the JSON writer
instead of rows.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from msprobe_dask.dump import graph_layouts as layout
from msprobe_dask.dump.layouts import STEP_NAME
from msprobe_dask.errors import ConfigError, DumpError
from msprobe_dask.graph.merge.driver import merge_side
from msprobe_dask.graph.merge.strategy import ParallelParams, validate
from msprobe_dask.graph.model import Graph
from msprobe_dask.graph.tasks import (
    NPU,
    Options,
    Part,
    VisResult,
    build_task,
    finish_build,
    finish_compare,
    vis_result,
)


def _rank_folders(path: Path) -> list[tuple[int, str]]:
    """(rank, folder) of a merge input: only ``rank<N>`` folders are allowed (no ``proc<pid>``)."""
    for name in os.listdir(path):
        if not (layout.RANK_DIR.match(name) and (path / name).is_dir()):
            raise DumpError(path / name, "is not a rank<N> folder: a graph merge takes only rank folders")
    return [(r, str(path / n)) for r, n in layout.rank_dirs(path)]


def _build_steps(path: Path) -> list[tuple[int, Path]]:
    kind = layout.classify(path)
    if kind == "steps":
        return [(layout.step_number(s), path / s) for s in sorted(layout.step_dirs(path, strict=True))]
    # a ranks folder named step<N> is that step (merge builds only, §6.1)
    return [(int(path.name[4:]) if STEP_NAME.match(path.name) else 0, path)]


def _compare_steps(npu: Path, bench: Path) -> list[tuple[int, Path, Path]]:
    kind, other = layout.classify(npu), layout.classify(bench)
    if kind != other:
        raise DumpError(bench, f"has a different folder structure from {npu} ({other} vs {kind})")
    if kind != "steps":
        return [(0, npu, bench)]
    a, b = layout.step_dirs(npu, strict=False), layout.step_dirs(bench, strict=False)
    names = a if a == b else sorted(set(a) & set(b), key=lambda s: layout.step_number(s))
    return [(layout.step_number(s), npu / s, bench / s) for s in names]


def _side(path: Path, step: int, params: ParallelParams, first: bool):
    """The lazy merged graphs of one side and step (validating the parameters on the first step)."""
    import dask

    folders = _rank_folders(path)
    if first:
        validate(params, len(folders))
    graphs = [
        dask.delayed(build_task, pure=True)(f, step, r, dask_key_name=f"build-{step}-{r}-{params.side}")
        for r, f in folders
    ]
    return dask.delayed(merge_side)(graphs, params, dask_key_name=f"merge-{step}-{params.side}")


def _finish_build(merged: list[Graph], opts: Options) -> Part:
    parts = [finish_build(g, opts) for g in merged]
    return [rows for p in parts for rows in p[0]], "", parts[0][2]


def _finish_compare(npu: list[Graph], bench: list[Graph], opts: Options, where: str) -> Part:
    if len(npu) != len(bench):
        raise DumpError(
            where,
            f"parallel merge failed: the NPU side merges into {len(npu)} dp replicas, the Bench side into "
            f"{len(bench)}",
        )
    for n, b in zip(npu, bench):  # a replica is named by its NPU graph's rank, its Bench graph's too
        b.rank = n.rank
    parts = [finish_compare(n, b, opts, where) for n, b in zip(npu, bench)]
    return [rows for p in parts for rows in p[0]], parts[0][1], parts[0][2]


def _vis_result(parts: list[Part], compare: bool, opts: Options, steps: list[int]) -> VisResult:
    ranks = list(dict.fromkeys(g.rank for rows, _, _ in parts for g in rows if g.source == NPU))
    return vis_result(parts, compare, opts, ranks, steps)


def merge_plan(
    target: str | os.PathLike[str],
    golden: str | os.PathLike[str] | None,
    opts: Any,
    params: list[ParallelParams],
    json_out: bool = False,
):
    """(lazy result, compare?): a VisResult, or with ``json_out`` the merged graphs of every step."""
    import dask

    tp = Path(target)
    if golden is None:
        if layout.classify(tp) == "files":
            if json_out:
                raise ConfigError(
                    "-tp", f"{tp}: --rank_size merges rank folders, but this holds a single dump"
                )
            return None, False
        build_steps = _build_steps(tp)
        merged = [_side(path, step, params[0], i == 0) for i, (step, path) in enumerate(build_steps)]
        if json_out:
            return dask.delayed(list)(merged, dask_key_name="merged-graphs"), False
        steps = [step for step, _ in build_steps]
        parts = [
            dask.delayed(_finish_build)(m, opts, dask_key_name=f"finish-{s}") for m, s in zip(merged, steps)
        ]
        compare = False
    else:
        if layout.classify(tp) == "files" and layout.classify(Path(golden)) == "files":
            return None, True
        pairs = _compare_steps(tp, Path(golden))
        opts = replace(opts, fuzzy_match=True, merge=True)
        parts = []
        for i, (step, a, b) in enumerate(pairs):
            npu = _side(a, step, params[0], i == 0)
            bench = _side(b, step, params[1], i == 0)
            parts.append(
                dask.delayed(_finish_compare)(npu, bench, opts, str(a), dask_key_name=f"finish-{step}")
            )
        steps = [s for s, _, _ in pairs]
        compare = True
    if not parts:
        raise DumpError(target, "holds no dump to visualize")
    step_list = sorted(steps) if layout.classify(tp) == "steps" else [0]
    return dask.delayed(_vis_result)(parts, compare, opts, step_list, dask_key_name="vis-result"), compare
