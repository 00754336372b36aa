"""The compare workflow as a Dask graph, and its Python API (returns tables; writes nothing).

parse(target) ─┐
               ├─ pair ─> measure tensor batches (tensor mode) ─> assemble + judge ─> CompareTable
parse(golden) ─┘                                                  (in this process)
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from msprobe_dask.dump.layouts import pair_dumps
from msprobe_dask.dump.source import DumpSource
from msprobe_dask.pipeline.pairing import MatchOptions, pair_rows, tensor_jobs
from msprobe_dask.pipeline.scheduler import Compute, RunOptions, computing, in_this_process
from msprobe_dask.pipeline.sides import Side, compare_mode, is_cross_framework, parse_side
from msprobe_dask.table import (
    UNMEASURED,
    CompareTable,
    Matched,
    TensorJob,
    build_table,
    float_stat_columns,
    pair_sides,
)

if TYPE_CHECKING:
    from msprobe_dask.analysis.tolerance import Tolerance
    from msprobe_dask.pipeline.part_file import WrittenRank

BATCH_PAIRS = 128
BATCH_BYTES = 128 << 20
"""A batch task of small pairs reads up to BATCH_PAIRS pairs or BATCH_BYTES of their files (both sides):
each task costs dask's processes scheduler a few ms (its result back, the next task sent and set up),
whatever its size. On the 1,763-pair .npy dump of 2 GB per side, 31 tasks of 128 MB against 64 of
64 MB: 2.90 s of CPU against 3.12 s (--workers 1), 2.75 s against 2.94 s (--workers 2), medians of 5 at
load 5.6-7.4; the same peak RSS (a batch holds one pair at a time)."""


@dataclass
class RankResult:
    """The compare of one (step, rank) pair: its table and the messages of unreadable tensors."""

    label: str
    table: CompareTable
    tensor_messages: list[str] = field(default_factory=list)


def match_sides(npu: Side, bench: Side, options: MatchOptions) -> Matched:
    mode = compare_mode(npu, bench)
    pairs = pair_rows(npu, bench, is_cross_framework(npu, bench), options)
    jobs = tensor_jobs(pairs, npu, bench) if mode == "tensor" else []
    float_stats = float_stat_columns(npu.rows, bench.rows, any(p.bench is None for p in pairs))
    return Matched(mode=mode, pairs=pairs, stacks=npu.stacks, jobs=jobs, float_stats=float_stats)


def _batches(jobs: Sequence[TensorJob]) -> tuple[list[list[int]], list[int]]:
    """Group the indices of small jobs so that each batch task reads a bounded number of files and bytes;
    the jobs holding a file too big for one task are returned apart, one by one (see ``_measure_big``)."""
    from msprobe_dask.dump.tensor_file import stored_nbytes
    from msprobe_dask.metrics.tensor import BIG_TENSOR_ELEMS

    batches: list[list[int]] = []
    big: list[int] = []
    current: list[int] = []
    size = 0
    for i, job in enumerate(jobs):
        if job is None:
            continue
        sizes = [stored_nbytes(p) for p in job[:2]]
        if max(sizes) > BIG_TENSOR_ELEMS:  # may hold more than BIG_TENSOR_ELEMS elements
            big.append(i)
            continue
        if current and (len(current) >= BATCH_PAIRS or size + sum(sizes) > BATCH_BYTES):
            batches.append(current)
            current, size = [], 0
        current.append(i)
        size += sum(sizes)
    if current:
        batches.append(current)
    return batches, big


class JobBatch:
    """The jobs of one batch task, handed to it as one argument that dask carries as it is: a list of job
    tuples (or a dataclass holding them) is walked element by element as the graph is made and run (on
    tensor_mix's 631 jobs, 4.5 ms of CPU for (file, file) tuples and 12.4 ms with their claims; 1.4 ms as
    batches)."""

    __slots__ = ("jobs",)

    def __init__(self, jobs: tuple[tuple[Path, Path, Any], ...]) -> None:
        self.jobs = jobs  # (no None: a batch holds jobs to measure)


def _measure_batch(batch: JobBatch) -> list[Any]:
    from msprobe_dask.metrics.tensor import measure_pairs

    return list(measure_pairs(batch.jobs))


def _as_batch(metrics: Any) -> list[Any]:
    return [metrics]


def _measure_big(job: tuple[Path, Path, Any]) -> Any:
    """One pair as a dask.array reduction whose blocks of chunks are tasks of their own (a batch of one
    result)."""
    import dask

    from msprobe_dask.metrics.tensor import measure_pair_delayed

    return dask.delayed(_as_batch)(measure_pair_delayed(*job))


def _assemble(matched: Matched, batch_indices: list[list[int]], *batch_results: list[Any]) -> RankResult:
    cells: list[Sequence[Any]] = [UNMEASURED] * len(matched.pairs)
    unreadable: dict[int, str] = {}
    for indices, results in zip(batch_indices, batch_results):
        for i, result in zip(indices, results):
            cells[i] = result.cells
            if result.unreadable:
                unreadable[i] = result.message
    table = build_table(
        pair_sides(matched.pairs),
        matched.mode,
        matched.stacks,
        cells if matched.mode == "tensor" else None,
        matched.float_stats,
        unreadable=unreadable,
    )
    return RankResult(label="", table=table, tensor_messages=list(unreadable.values()))


def _input_bytes(sources: Sequence[tuple[str, DumpSource, DumpSource]]) -> int:
    """The bytes of every dump file the compare parses and of the tensor files it may read (what the
    scheduler choice goes by)."""
    return sum(
        (os.path.getsize(src.dump_json) if src.dump_json.is_file() else 0) + _tensor_file_bytes(src)
        for _, *sides in sources
        for src in sides
    )


def _tensor_file_bytes(source: DumpSource) -> int:
    """The bytes of the tensors in the dump's ``dump_tensor_data`` folder (0 for none): its files' sizes,
    and a converted store's arrays' tensor bytes (folders, sized by their metadata)."""
    try:
        with os.scandir(source.tensor_dir) as entries:
            return sum(_entry_bytes(e) for e in entries)
    except OSError:
        return 0


def _entry_bytes(entry: os.DirEntry[str]) -> int:
    if entry.is_file(follow_symlinks=False):
        return entry.stat().st_size
    if not entry.is_dir(follow_symlinks=False):
        return 0
    from msprobe_dask.dump.tensor_file import stored_nbytes  # (numpy: only for a store)

    return stored_nbytes(Path(entry.path))


def _sized(run: RunOptions | None, sources: Sequence[tuple[str, DumpSource, DumpSource]]) -> RunOptions:
    run = run or RunOptions()
    if run.input_bytes or not run.sized_by_input:
        return run
    return replace(run, input_bytes=_input_bytes(sources))


def compare(
    target: str | Path,
    golden: str | Path,
    *,
    match: MatchOptions | None = None,
    run: RunOptions | None = None,
    skip_missing_ranks: bool = False,
) -> list[RankResult]:
    """Compare a target dump with a golden one; one RankResult per compared (step, rank) pair."""
    sources = pair_dumps(target, golden, skip_missing_ranks)
    run = _sized(run, sources)
    with computing(run) as compute:
        return _tables(sources, match or MatchOptions(), compute, run)


def compare_to_files(
    target: str | Path,
    golden: str | Path,
    result_path: Callable[[str], Path],
    *,
    match: MatchOptions | None = None,
    run: RunOptions | None = None,
    skip_missing_ranks: bool = False,
    summary_tolerance: Tolerance | None = None,
    xlsx: bool = False,
) -> list[WrittenRank | RankResult]:
    """Like ``compare``, but each statistics-mode rank is written to ``result_path(label)`` (an xlsx if
    ``xlsx``, else a csv) by its own tasks, part by part (``pipeline/chunked.py``), and comes back as a
    WrittenRank (with its summary and the first-divergence analysis's nodes, by ``summary_tolerance``,
    if given); the other ranks (tensor mode, dumps not laid out as msProbe writes them) come back as
    RankResults to write.
    If the run fails, no file of it is left behind."""
    from msprobe_dask.graph.gcpause import rare_full_collections
    from msprobe_dask.pipeline.chunked import rank_file
    from msprobe_dask.pipeline.part_file import remove_temporaries_of
    from msprobe_dask.pipeline.part_forms import CSV, XLSX
    from msprobe_dask.pipeline.part_scan import is_statistics_dump
    from msprobe_dask.writers.atomic import withdrawn_if_failed

    match = match or MatchOptions()
    sources = pair_dumps(target, golden, skip_missing_ranks)
    streamed = [i for i, (_, a, b) in enumerate(sources) if is_statistics_dump(a) and is_statistics_dump(b)]
    paths = {i: result_path(sources[i][0]) for i in streamed}
    results: list[WrittenRank | RankResult] = []
    run = _sized(run, sources)
    if summary_tolerance is not None and streamed and run.local_processes:
        _import_analysis_for_workers()
    with withdrawn_if_failed(*paths.values()), computing(run) as compute, rare_full_collections():
        try:
            graphs = [
                rank_file(
                    sources[i][0],
                    *sources[i][1:],
                    match,
                    paths[i],
                    summary_tolerance,
                    XLSX if xlsx else CSV,
                    run.shares_results,
                    len(sources) > 1,  # (a job of one rank: no communication node linked)
                )
                for i in streamed
            ]
            values = iter(compute([output for graph in graphs for output in graph.outputs]))
            written = [graph.result(list(itertools.islice(values, len(graph.outputs)))) for graph in graphs]
        except BaseException:
            for path in paths.values():
                remove_temporaries_of(path)
            raise
        others = [source for i, source in enumerate(sources) if i not in paths]
        tables = iter(_tables(others, match, compute, run) if others else [])
        by_index = dict(zip(streamed, written))
        results = [by_index[i] if i in by_index else next(tables) for i in range(len(sources))]
    return results


def _tables(
    sources: Sequence[tuple[str, DumpSource, DumpSource]],
    match: MatchOptions,
    compute: Compute,
    run: RunOptions,
) -> list[RankResult]:
    import dask

    if run.local_processes:
        _import_for_workers(sources)
    # one rank: its parse and match in this process, which needs its Matched (the measuring tasks' worker
    # processes are started after it; on a cluster, the cluster's workers read the dumps)
    first = (in_this_process(run) if len(sources) == 1 and not run.address else compute)(
        [
            dask.delayed(_match_and_finish, pure=True)(npu_src, bench_src, match)
            for _, npu_src, bench_src in sources
        ]
    )
    pending = [i for i, item in enumerate(first) if isinstance(item, Matched)]
    measured = _measure_and_assemble([first[i] for i in pending], compute, run) if pending else []
    for i, result in zip(pending, measured):
        first[i] = result
    results: list[RankResult] = first
    for (label, _, _), result in zip(sources, results):
        result.label = label
    return results


def _import_for_workers(sources: Sequence[tuple[str, DumpSource, DumpSource]]) -> None:
    """Where a dump has tensor files, import the tensor metrics (numpy with them) before the worker
    processes are forked, so that they start with them: else the match task and each measuring worker
    import them again, 0.1-0.15 s of CPU each."""
    if any(src.tensor_dir.is_dir() for _, *sides in sources for src in sides):
        import msprobe_dask.metrics.tensor  # noqa: F401


def _import_analysis_for_workers() -> None:
    """Import the first-divergence analysis before the worker processes are forked, so that they start
    with it: each worker imported it again with its first table part, and this process with the first
    part's nodes it took in, while both workers ran (67e6 instructions each; the same work on one
    worker or two, but this process's beside them took a share of their two CPUs)."""
    import msprobe_dask.summary.divergence  # noqa: F401


def _match_and_finish(
    npu_src: DumpSource, bench_src: DumpSource, match: MatchOptions
) -> Matched | RankResult:
    """One task per rank: parse, match and, when no tensor files need measuring, the finished table.

    Only ranks with tensor jobs come back as ``Matched``; the others never ship their rows twice.
    """
    matched = match_sides(parse_side(npu_src, True), parse_side(bench_src, False), match)
    return _assemble(matched, []) if not matched.jobs else matched


def _measure_and_assemble(
    matched_list: Sequence[Matched], compute: Compute, run: RunOptions
) -> list[RankResult]:
    """Each rank's tensor jobs measured by tasks, then its table assembled and judged here: the match is
    in this process already, and the tasks' results come back to it (a task that assembled it would be
    sent both again)."""
    import dask

    tasks: list[Any] = []
    plans = []
    for matched in matched_list:
        batches, big = _batches(matched.jobs)
        jobs = matched.jobs
        tasks += [
            dask.delayed(_measure_batch)(JobBatch(tuple(jobs[i] for i in batch)))  # type: ignore[misc]
            for batch in batches  # (_batches leaves the None jobs out)
        ]
        tasks += [_measure_big(matched.jobs[i]) for i in big]  # type: ignore[arg-type]
        plans.append(batches + [[i] for i in big])
    results = iter(compute(tasks) if tasks else [])
    started = time.perf_counter()
    tables = [
        _assemble(matched, batches, *itertools.islice(results, len(batches)))
        for matched, batches in zip(matched_list, plans)
    ]
    run.log_stage("judge", len(tables), "ranks", started)
    return tables
