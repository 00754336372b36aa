"""The Dask graph of a parallel-merge run (§6.1 flow)::

    marks(step, NPU, j) ----> groups(step, NPU) ----+--> replica(step, 0) ---> write(0) --> ...
    marks(step, Bench, j) --> groups(step, Bench) --+--> replica(step, K-1) -> write(K-1) --> write-visdb
                         (replica k: a run of the replicas of each side built, merged, compared)

The groups of a side (graph/merge/strategy.py) are found in its rank graphs, so each rank's marks are
first read from its construct.json and the few dump.json entries they are in (graph/merge/marks.py); the
groups task makes them the side's replicas (driver.replicas; graph/merge/sides.py lays out a side's
tasks and merges its replicas). In a compare a sides task a step checks
that its sides' replica counts agree, each after the step before's (the first step that disagrees is
named). K replica tasks a step (K: the data-parallel replicas the sizes give) then build, merge and
compare or finish one replica of each side at a time (fuzzy matching and the merge checkers, micro
steps, rows), its graphs let go before the next: a worker holds the rank graphs of one replica, whatever
the number of ranks. A chain of write tasks adds each replica task's rows to the vis.db in order as they
are made (``merge_written``). Where the groups do not split the ranks into replicas (driver.replicas:
None), the first replica task merges each side whole (driver.merge_side) and the others have nothing to
do. No cross-rank distributed linking. With ``--file_type json`` the merged graphs go to the JSON
writer's one task; the Python API (build_graphs) gets every row in one VisResult.

On local worker processes (a ``spool``) the finished rows (the merged graphs with ``--file_type json``)
are left in the run's spool folder for their reader (graph/held.py): only their names pass through the
run's own process. Elsewhere (this process's threads, a cluster) the values travel.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

from msprobe_dask.dump import graph_layouts as layout
from msprobe_dask.dump.layouts import STEP_NAME
from msprobe_dask.errors import ConfigError, DumpError
from msprobe_dask.graph.held import RUN, Held, Spool, hold, taken
from msprobe_dask.graph.merge.sides import (
    SidePlan,
    lazy_side_plan,
    merged_replicas,
    replica_count,
    replica_tasks,
)
from msprobe_dask.graph.merge.strategy import ParallelParams
from msprobe_dask.graph.rows import GraphRows
from msprobe_dask.graph.tasks import NPU, Options, VisResult, finish_build, finish_compare, vis_result
from msprobe_dask.graph.write_chain import Visualized, graph_tables, visualized
from msprobe_dask.writers.visdb import VisdbWriter, linked_cells


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


Finished = list[tuple[int, Any]]  # (replica, its Part or merged graph) of a replica task


def _kept(spool: Spool | None, name: str, done: Finished) -> Finished | Held:
    return done if spool is None else hold(spool, RUN, name, done, one_reader=True)


def _finish_build(plan: SidePlan, step: int, k: int, count: int, spool: Spool | None, opts: Options):
    """The rows of the merged replicas of the task k."""
    done = [(i, finish_build(g, opts)) for i, (g,) in merged_replicas([plan], "", step, k, count)]
    return _kept(spool, f"part-{step}-{k}", done)


def _checked(npu: SidePlan, bench: SidePlan, where: str, before: Any) -> tuple[SidePlan, SidePlan]:
    """A step's two sides, their replica counts checked after the step before's (``before``: a task
    of one step a time in step order, so that a merge whose sides disagree in several steps is refused
    naming the first, whichever replica task would find it first). A side merged whole is counted as
    it is merged."""
    if npu.replicas is not None and bench.replicas is not None:
        replica_count([len(npu.replicas), len(bench.replicas)], where)
    return npu, bench


def _finish_compare(
    sides: tuple[SidePlan, SidePlan],
    opts: Options,
    where: str,
    step: int,
    k: int,
    count: int,
    spool: Spool | None,
) -> Finished | Held:
    """The rows of the compared replicas of the task k."""
    done = []
    for i, (n, b) in merged_replicas(list(sides), where, step, k, count):
        b.rank = n.rank  # a replica is named by its NPU graph's rank, its Bench graph's too
        done.append((i, finish_compare(n, b, opts, where)))
        del n, b  # (before the next replica is built)
    return _kept(spool, f"part-{step}-{k}", done)


def _merged_graphs(plan: SidePlan, step: int, k: int, count: int, spool: Spool | None):
    """The merged graphs of the replicas of the task k (a merge's json files)."""
    return _kept(
        spool,
        f"merged-{step}-{k}",
        [(i, g) for i, (g,) in merged_replicas([plan], "", step, k, count, kept=True)],
    )


def _in_order(finished: list) -> list:
    """What the replica tasks of a step made, in the replicas' order."""
    return [x for _, x in sorted((p for f in finished for p in taken(f)), key=lambda p: p[0])]


def _ranks(graphs: list[GraphRows]) -> list[int]:
    return list(dict.fromkeys(g.rank for g in graphs if g.source == NPU))


def _vis_result(steps_done: list[list], compare: bool, opts: Options, steps: list[int]) -> VisResult:
    """The steps' Parts in order, each step's by replica."""
    parts = [part for finished in steps_done for part in _in_order(finished)]
    return vis_result(parts, compare, opts, _ranks([g for rows, _, _ in parts for g in rows]), steps)


class Chain(NamedTuple):
    """The vis.db's write chain so far: the suspended writer; the graphs written, without their rows
    (their summaries); the compare mode and micro steps of the first Part; the communication rows'
    cells as made (writers/visdb.linked_cells)."""

    writer: VisdbWriter
    graphs: list[GraphRows]
    head: tuple[str, int] | None
    cells: list[tuple[Any, Any]]


def _write_replicas(prev: Chain, finished: Finished | Held) -> Chain:
    """The rows of a replica task's replicas added to the vis.db, in order, and let go."""
    writer, graphs, head, cells = prev.writer.resume(), list(prev.graphs), prev.head, list(prev.cells)
    for rows, mode, micro in _in_order([finished]):
        writer.add_graphs([graph_tables(g) for g in rows])
        cells += linked_cells(row for g in rows for row in g.nodes)
        graphs += [replace(g, nodes=[], stacks=[], packed=[], p2p={}) for g in rows]
        head = head or (mode, micro)
    return Chain(writer.suspend(), graphs, head, cells)


def _end_chain(last: Chain, compare: bool, opts: Options, steps: list[int]) -> Visualized:
    """The vis.db completed (tb_config, indexes) and named."""
    mode, micro = last.head or ("", 1)
    result = vis_result([(last.graphs, mode, micro)], compare, opts, _ranks(last.graphs), steps)
    return visualized(last.writer.resume().complete(last.cells, result.config), result)


def merge_written(merge: Merge, writer: VisdbWriter, key: str):
    """The lazy vis.db of ``merge`` written by a chain of tasks, a replica task's rows at a time in
    write order as they are made (``writer``: suspended), completed by the task ``key``: no task holds
    more rows than a replica task makes."""
    import dask

    chain: Any = Chain(writer, [], None, [])
    for finished in (f for step in merge.parts for f in step):
        chain = dask.delayed(_write_replicas, pure=False)(
            chain, finished, dask_key_name=f"write-{finished.key}"
        )
    return dask.delayed(_end_chain)(chain, merge.compare, merge.opts, merge.steps, dask_key_name=key)


def _last(then: Callable[[Any], Any] | None, result: Any) -> Any:
    return result if then is None else then(result)


def _vis_task(then: Callable[[Any], Any] | None, *args: Any) -> Any:
    """The VisResult, or what ``then`` makes of it in this task (api.py: the vis.db written)."""
    return _last(then, _vis_result(*args))


def _graphs_task(then: Callable[[Any], Any] | None, merged: list[list]) -> Any:
    """The merged graphs of every step (a merge's json files), or what ``then`` makes of them in this
    task (api.py: the json files written)."""
    return _last(then, [_in_order(finished) for finished in merged])


class Merge(NamedTuple):
    """A merge's lazy replica tasks (each step's, in order; each one's result: Finished) and what its
    vis.db's last task needs."""

    parts: list[list[Any]]
    compare: bool
    opts: Options
    steps: list[int]


def _merged_build(tp: Path, opts: Options, params: ParallelParams, spool: Spool | None, json_out: bool):
    """Each step's replica tasks of a merge build: their Finished rows, or merged graphs (``json_out``)."""
    import dask

    build_steps = _build_steps(tp)
    plans = [lazy_side_plan(path, step, params, i == 0) for i, (step, path) in enumerate(build_steps)]
    count = replica_tasks(params)  # (validated)
    task = _merged_graphs if json_out else partial(_finish_build, opts=opts)
    return [
        [dask.delayed(task)(plan, s, k, count, spool, dask_key_name=f"replica-{s}-{k}") for k in range(count)]
        for plan, (s, _) in zip(plans, build_steps)
    ], [s for s, _ in build_steps]


def merge_parts(
    target: str | os.PathLike[str],
    golden: str | os.PathLike[str] | None,
    opts: Options,
    params: list[ParallelParams],
    spool: Spool | None = None,
) -> Merge | None:
    """The Merge of the inputs (None: a single dump a side, no rank folders to merge). ``spool``: on
    local worker processes, where the rows wait (graph/held.py)."""
    import dask

    tp = Path(target)
    if golden is None:
        if layout.classify(tp) == "files":
            return None
        parts, steps = _merged_build(tp, opts, params[0], spool, json_out=False)
        compare = False
    else:
        if layout.classify(tp) == "files" and layout.classify(Path(golden)) == "files":
            return None
        pairs = _compare_steps(tp, Path(golden))
        opts = replace(opts, fuzzy_match=True, merge=True)
        parts = []
        sides: Any = None
        for i, (step, a, b) in enumerate(pairs):
            npu = lazy_side_plan(a, step, params[0], i == 0)
            bench = lazy_side_plan(b, step, params[1], i == 0)
            sides = dask.delayed(_checked)(npu, bench, str(a), sides, dask_key_name=f"sides-{step}")
            args, count = (sides, opts, str(a), step), replica_tasks(params[0])  # (validated)
            parts.append(
                [
                    dask.delayed(_finish_compare)(*args, k, count, spool, dask_key_name=f"replica-{step}-{k}")
                    for k in range(count)
                ]
            )
        steps = [s for s, _, _ in pairs]
        compare = True
    if not parts:
        raise DumpError(target, "holds no dump to visualize")
    return Merge(parts, compare, opts, sorted(steps) if layout.classify(tp) == "steps" else [0])


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

    if json_out:
        tp = Path(target)
        if layout.classify(tp) == "files":
            raise ConfigError("-tp", f"{tp}: --rank_size merges rank folders, but this holds a single dump")
        merged, _ = _merged_build(tp, opts, params[0], spool, json_out=True)
        return dask.delayed(_graphs_task)(then, merged, dask_key_name=then_key or "merged-graphs"), False
    merge = merge_parts(target, golden, opts, params, spool)
    if merge is None:
        return None, golden is not None
    key = then_key or "vis-result"
    args = (merge.parts, merge.compare, merge.opts, merge.steps)
    return dask.delayed(_vis_task)(then, *args, dask_key_name=key), merge.compare
