"""The Dask graph of a parallel-merge run (§6.1 flow)::

    merge(step, NPU): build and merge the side's ranks --+--> finish(step, 0) ----+--> vis-result --> write
    merge(step, Bench) ----------------------------------+--> finish(step, K-1) --+
                                                      (compare the i-th merged graphs, i = k mod K)

One task builds a side's rank graphs and merges them (a merge needs every rank of the side; its groups
are found in the graphs): no rank graph leaves the process that built it. K finish tasks a step (K: the
data-parallel replicas the sizes give) compare or build the merged replicas k, k + K, ... (fuzzy
matching and the merge checkers, micro steps, rows). No cross-rank distributed linking. With
``--file_type json`` the merged graphs go to the JSON writer instead of rows.

On local worker processes (a ``spool``) the merged graphs and the finished rows are held where they
were made and left in the run's spool folder for the other worker (graph/held.py): only their names pass
through the run's own process. Elsewhere (this process's threads, a cluster) the values travel.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from msprobe_dask.dump import graph_layouts as layout
from msprobe_dask.dump.layouts import STEP_NAME
from msprobe_dask.errors import ConfigError, DumpError
from msprobe_dask.graph.held import RUN, Held, Spool, hold, taken
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


def merge_input_bytes(target: str | os.PathLike[str], golden: str | os.PathLike[str] | None) -> int:
    """The dump.json bytes of a merge's input: every rank folder of every step of both sides, as the
    merge builds them all (graph/rank_plan.input_bytes counts the ranks it pairs). What is not there
    counts nothing: the plan names it."""
    total = 0
    for side in [target] + ([golden] if golden else []):
        for pattern in ("dump.json", "rank*/dump.json", "step*/rank*/dump.json"):
            for path in Path(side).glob(pattern):
                with contextlib.suppress(OSError):
                    total += path.stat().st_size
    return total


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


def _merged_side(
    folders: list[tuple[int, str]], step: int, params: ParallelParams, spool: Spool | None
) -> list[Graph] | list[Held]:
    """The side's rank graphs of ``step`` built and merged: one graph per dp replica, each held (with a
    ``spool``)."""
    merged = merge_side([build_task(f, step, r) for r, f in folders], params)
    if spool is None:
        return merged
    return [hold(spool, RUN, f"{params.side}-{step}-{i}", g) for i, g in enumerate(merged)]


def _side(path: Path, step: int, params: ParallelParams, first: bool, spool: Spool | None):
    """The lazy merged graphs of one side and step (validating the parameters on the first step)."""
    import dask

    folders = _rank_folders(path)
    if first:
        validate(params, len(folders))
    return dask.delayed(_merged_side, pure=True)(
        folders, step, params, spool, dask_key_name=f"merge-{step}-{params.side}"
    )


def _replicas(params: ParallelParams) -> int:
    """The finish tasks of a step: one a data-parallel replica that ``params`` give."""
    return max(1, params.rank_size // (params.tp * params.pp))


Finished = list[tuple[int, Part]]  # (replica, its Part) of a finish task


def _kept(spool: Spool | None, name: str, done: Finished) -> Finished | Held:
    return done if spool is None else hold(spool, RUN, name, done)


def _finish_build(
    merged: list, opts: Options, step: int, k: int, count: int, spool: Spool | None
) -> Finished | Held:
    """The rows of the merged replicas k, k + count, ..."""
    done = [(i, finish_build(taken(merged[i]), opts)) for i in range(k, len(merged), count)]
    return _kept(spool, f"part-{step}-{k}", done)


def _finish_compare(
    npu: list, bench: list, opts: Options, where: str, step: int, k: int, count: int, spool: Spool | None
) -> Finished | Held:
    """The rows of the compared replicas k, k + count, ..."""
    if len(npu) != len(bench):
        raise DumpError(
            where,
            f"parallel merge failed: the NPU side merges into {len(npu)} dp replicas, the Bench side into "
            f"{len(bench)}",
        )
    done = []
    for i in range(k, len(npu), count):
        n, b = taken(npu[i]), taken(bench[i])
        b.rank = n.rank  # a replica is named by its NPU graph's rank, its Bench graph's too
        done.append((i, finish_compare(n, b, opts, where)))
    return _kept(spool, f"part-{step}-{k}", done)


def _vis_result(steps_done: list[list], compare: bool, opts: Options, steps: list[int]) -> VisResult:
    """The steps' Parts in order, each step's by replica."""
    parts = [
        part
        for finished in steps_done
        for _, part in sorted((p for f in finished for p in taken(f)), key=lambda p: p[0])
    ]
    ranks = list(dict.fromkeys(g.rank for rows, _, _ in parts for g in rows if g.source == NPU))
    return vis_result(parts, compare, opts, ranks, steps)


def _last(then: Callable[[Any], Any] | None, result: Any) -> Any:
    return result if then is None else then(result)


def _vis_task(then: Callable[[Any], Any] | None, *args: Any) -> Any:
    """The VisResult, or what ``then`` makes of it in this task (api.py: the vis.db written)."""
    return _last(then, _vis_result(*args))


def _graphs_task(then: Callable[[Any], Any] | None, merged: list[list]) -> Any:
    """The merged graphs of every step (a merge's json files), or what ``then`` makes of them in this
    task (api.py: the json files written)."""
    return _last(then, [[taken(g) for g in step] for step in merged])


def merge_plan(
    target: str | os.PathLike[str],
    golden: str | os.PathLike[str] | None,
    opts: Any,
    params: list[ParallelParams],
    json_out: bool = False,
    spool: Spool | None = None,
    then: Callable[[Any], Any] | None = None,
    then_key: str = "",
):
    """(lazy result, compare?): a VisResult, or with ``json_out`` the merged graphs of every step; or
    what ``then`` makes of it in the last task (key ``then_key``; dask's processes scheduler would send
    a result made by another task through this process: every rank's rows). ``spool``: on local worker
    processes, where the merged graphs and rows wait (graph/held.py)."""
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
        merged = [_side(path, step, params[0], i == 0, spool) for i, (step, path) in enumerate(build_steps)]
        if json_out:
            return dask.delayed(_graphs_task)(then, merged, dask_key_name=then_key or "merged-graphs"), False
        steps, count = [step for step, _ in build_steps], _replicas(params[0])  # (validated)
        parts = [
            [
                dask.delayed(_finish_build)(m, opts, s, k, count, spool, dask_key_name=f"finish-{s}-{k}")
                for k in range(count)
            ]
            for m, s in zip(merged, steps)
        ]
        compare = False
    else:
        if layout.classify(tp) == "files" and layout.classify(Path(golden)) == "files":
            return None, True
        pairs = _compare_steps(tp, Path(golden))
        opts = replace(opts, fuzzy_match=True, merge=True)
        parts = []
        for i, (step, a, b) in enumerate(pairs):
            npu = _side(a, step, params[0], i == 0, spool)
            bench = _side(b, step, params[1], i == 0, spool)
            args, count = (npu, bench, opts, str(a), step), _replicas(params[0])  # (validated)
            parts.append(
                [
                    dask.delayed(_finish_compare)(*args, k, count, spool, dask_key_name=f"finish-{step}-{k}")
                    for k in range(count)
                ]
            )
        steps = [s for s, _, _ in pairs]
        compare = True
    if not parts:
        raise DumpError(target, "holds no dump to visualize")
    step_list = sorted(steps) if layout.classify(tp) == "steps" else [0]
    key = then_key or "vis-result"
    return dask.delayed(_vis_task)(then, parts, compare, opts, step_list, dask_key_name=key), compare
