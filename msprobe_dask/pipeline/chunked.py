"""One rank's statistics compare to csv or xlsx, cut into chunk tasks whose results travel as the
file's bytes.

scan(npu) ───> parse npu part 0..K-1 ───┐
                                        ├─> match ─> table part k (npu part k, bench parts near k)
scan(bench) ─> parse bench part 0..J-1 ─┘                  │
                     head ─> append part 0 ─> ... ─> append part k ─> ... ─> append part K-1 ─> rename

A part is a run of consecutive dump.json entries (``PART_BYTES`` of text), parsed from its byte span
(``dump/entries.py``'s scan). The default match (exact compare keys) is cut into hash partitions of
the row keys (``part_keys.py``), so no task holds every key of a rank; a matching option reads every
row of both sides (its rules need them all) in one task. The match sends each table task only where
its rows' partners are: the bench parts around its own (aligned dumps keep them there) and the few
partners outside them. A table part is whole dump entries, the unit the judging rules work on, so its
rows are the reference's rows; its csv text (or sheet XML) is appended to the rank's temporary file in
the reference's order, and the file is renamed when the last part is in (an xlsx's sheets are then
stored in its zip).

The tasks live by job: ``part_scan.py`` (the scan and each part's parse), ``part_match.py`` (the match
in one task, the plan, the exports of partners outside a window), ``part_keys.py`` (the match cut
into hash partitions), ``part_table.py`` (a part's table and its
bytes), ``part_file.py`` (the chain that writes the file), ``part_forms.py`` (csv or xlsx); this module
lays out their graph.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from msprobe_dask.analysis.tolerance import Tolerance
from msprobe_dask.dump.source import DumpSource
from msprobe_dask.pipeline.pairing import MatchOptions
from msprobe_dask.pipeline.part_file import (
    WrittenRank,
    append_part,
    begin_file,
    finish_file,
    spooled_part,
    walk_ahead,
    with_nodes,
)
from msprobe_dask.pipeline.part_forms import CSV, CsvForm
from msprobe_dask.pipeline.part_keys import partition_count, side_facts
from msprobe_dask.pipeline.part_match import (
    bench_window,
    export_rows,
    gather_foreign,
    match_parts,
    plan_head,
    row_starts,
    wanted_rows,
)
from msprobe_dask.pipeline.part_scan import part_count, rows_zlib
from msprobe_dask.pipeline.part_spool import (
    spooled_found,
    spooled_keys,
    spooled_pairs,
    spooled_parse,
    spooled_scan,
    spooled_stacks,
)
from msprobe_dask.pipeline.task_graph import TaskGraph

_ROWS = {"inline": (0,), "apart": (1,)}
"""A part's parse under the default match: its rows are nearly all of it, its keys are read with every
other part's by the match (TaskGraph.call_many). Under a matching option its keys hold every row's key
fields (half the rows' bytes): the rows are then taken as any item is (``_ROWS_BESIDE_KEYS``: their own
task where it runs beside the value, on threads and on a cluster, so that only the rows reach each
reader)."""
_ROWS_BESIDE_KEYS = {"apart": (1,)}
_SPOOLED_ROWS = {"inline": (0, 1)}
"""A part's parse under the default match whose rows go through a spool file (``spooled_parse``): its
value is small, and its keys are taken from it too, without a task of their own (one task fewer a part:
each task costs dask's processes scheduler a round trip through the process that schedules)."""

TABLES_AHEAD = 5
"""A table part runs once the append ``TABLES_AHEAD`` parts before it is done (a dependency of the graph,
so on every scheduler): at most this many table parts' bytes (in their spool files, part_file.spooled_part)
wait for their append. Without it dask's ordering ran nearly every table part before the appends, and
their bytes waited in the process that schedules (2.2 GB for a rank of 1M entries, before the spools).
Two workers' parts and the next three: with 3, a rank's last part waited for the append of the part four
before it, which waited for a worker busy with the part before the last, and started after it, while the
other worker had only appends left (S50k: 43 ms of the second worker idle at the end); with 4 the same
less often (workflows/replay_compare.py, S50k on 2 workers, 200 runs: the idle before the last appends
0.044 -> 0.031 s a run, the tasks' end 6 ms sooner; 6 or 8 no sooner than 5; on 1 worker the same)."""


@dataclass(frozen=True, slots=True)
class RankGraph:
    """The Delayeds of one rank's compare, of one graph (computed together, ``outputs``): the rank's file
    written, and each table part, whose first-divergence nodes reach the process that runs the graph
    from the part's task (not through the chain that writes the file, which would send them to its tasks
    and back, and all at once to its last: a rank of 50,050 entries a side, 12 MB of nodes 4 times)."""

    written: Any
    parts: tuple[Any, ...]
    ahead: Any = None  # its first parts' walk (a rank alone: part_file.walk_ahead), or None: no such task

    @property
    def outputs(self) -> list[Any]:
        return [self.written, *self.parts, *([] if self.ahead is None else [self.ahead])]

    def result(self, values: Sequence[Any]) -> WrittenRank:
        """The WrittenRank of the ``outputs``' values."""
        ahead = None if self.ahead is None else values[-1]
        return with_nodes(values[0], values[1 : 1 + len(self.parts)], ahead)


def rank_file(
    label: str,
    npu_src: DumpSource,
    bench_src: DumpSource,
    match: MatchOptions,
    path: Path,
    tolerance: Tolerance | None,
    form: CsvForm = CSV,
    shared: bool = True,
    linked: bool = True,
) -> RankGraph:
    """The graph that compares one rank into ``path``, a csv or xlsx by ``form``; ``shared``: where it
    runs, tasks' values reach their readers without passing through the process that schedules (see
    TaskGraph.call_many); ``linked``: the rank's communication nodes are linked to other ranks' by the
    first-divergence analysis (not in a job of one rank: its table parts then make none)."""
    graph = TaskGraph(shared)
    npu_n, bench_n = part_count(npu_src), part_count(bench_src)
    hashed = match == MatchOptions()  # the default match, cut into hash partitions (part_keys.py)
    spooled = not graph.shared  # (the rows go through files, not the process that schedules: spooled_parse)
    npu_scan, *npu_spans = _scan(graph, path, spooled, "npu", npu_src, npu_n)
    bench_scan, *bench_spans = _scan(graph, path, spooled, "bench", bench_src, bench_n)
    scans = npu_scan, bench_scan
    zlib_packed = not spooled and rows_zlib(npu_src, bench_src)  # (a file is held by no process)
    rows_items = (_SPOOLED_ROWS if spooled else _ROWS) if hashed else _ROWS_BESIDE_KEYS
    (npu_rows, npu_keys), (bench_rows, bench_keys) = (
        zip(
            *(
                graph.call_many(
                    spooled_parse,
                    2,
                    path,
                    f"rows-{side}-{k}" if spooled else None,
                    scan,
                    spans[k],
                    k,
                    not hashed,
                    zlib_packed,
                    **rows_items,
                )
                for k in range(len(spans))
            )
        )
        for side, scan, spans in (("npu", scans[0], npu_spans), ("bench", scans[1], bench_spans))
    )
    windows = tuple(bench_window(k, npu_n, bench_n) for k in range(npu_n))
    if hashed:
        renumber = not npu_src.is_debug
        head, plans, wanted, after = _hashed_match(
            graph,
            path,
            scans,
            windows,
            renumber,
            partition_count(npu_src, bench_src),
            npu_rows + bench_rows,
            npu_keys + bench_keys,
        )
    else:
        head, *cut = graph.call_many(
            match_parts, 1 + npu_n + bench_n, *scans, match, windows, *npu_keys, *bench_keys
        )
        plans, wanted = cut[:npu_n], cut[npu_n:]
        after = None  # (the match task is ready as soon as the parts are parsed: nothing to wait for)
    exports = [graph.call(export_rows, wanted[j], bench_rows[j]) for j in range(bench_n)]
    # (the partners found outside the windows: in dumps far apart, nearly every row of the side)
    foreign = graph.call_many(gather_foreign, npu_n, npu_n, *exports, apart=range(npu_n))
    # (split once the parts are parsed (``after``): beside the match's one join task, which the table parts
    # wait for too, not beside the parses, which the join waits for)
    stacks = graph.call_many(spooled_stacks, npu_n, path, graph.shared, after, scans[0], *npu_spans)
    # (where each part's rows go in the xlsx sheets: a number each, taken from the whole)
    firsts = graph.call_many(row_starts, npu_n, *plans, inline=range(npu_n))
    written = begun = graph.call(begin_file, form, path, head)
    appended: list[Any] = []
    chunks: list[Any] = []
    for k, window in enumerate(windows):
        chunk = graph.call(
            spooled_part,
            path,
            k,
            not graph.shared,  # (its nodes through a file: part_file.spooled_part)
            label,
            tolerance,
            linked,
            form,
            firsts[k],
            head,
            plans[k],
            stacks[k],
            foreign[k],
            window.start,
            appended[k - TABLES_AHEAD] if k >= TABLES_AHEAD else None,
            npu_rows[k],
            *(bench_rows[j] for j in window),
        )
        written = graph.call(append_part, form, written, chunk)  # in the reference's order
        appended.append(written)
        chunks.append(chunk)
    finish = graph.call(finish_file, form, label, begun, *appended)
    if tolerance is None:  # (no summary, so no nodes: the rank's one value, as on a cluster one future)
        return RankGraph(graph.delayed(finish), ())
    if linked or len(chunks) < 2:
        finished, *parts = graph.delayeds(finish, *chunks)
        return RankGraph(finished, tuple(parts))
    # (a rank alone: its analysis's walk beside its last table part, as far as the parts before it go)
    ahead = graph.call(walk_ahead, label, tolerance, *chunks[:-1])
    finished, *parts, found = graph.delayeds(finish, *chunks, ahead)
    return RankGraph(finished, tuple(parts), found)


def _scan(
    graph: TaskGraph, path: Path, spooled: bool, side: str, source: DumpSource, parts: int
) -> list[Any]:
    """A side's scan in a task of its own (so that on a cluster the two sides' parts start on two workers):
    its SideScan, an item apart (every part's parse reads it: where the spans are taken from groups of
    them (TaskGraph._groups), each parse was sent the first group with it, a tenth of the side's spans),
    then each part's spans; where they are ``spooled`` (through a file, not the process that schedules:
    part_spool.spooled_scan), each parse takes where its spans are from the whole value (a few bytes each)."""
    return graph.call_many(
        spooled_scan,
        1 + parts,
        path,
        f"spans-{side}" if spooled else None,
        source,
        parts,
        apart=(0,),
        inline=range(1, 1 + parts) if spooled else (),
    )


def _hashed_match(
    graph: TaskGraph,
    path: Path,
    scans: tuple[Any, Any],
    windows: tuple[range, ...],
    renumber: bool,
    partitions: int,
    rows: tuple[Any, ...],
    keys: tuple[Any, ...],
) -> tuple[Any, list[Any], list[Any], Any]:
    """The match of ``part_keys.py``: the plan head, each table part's runs, each bench part's wanted rows
    and the rank's facts (ready once every part is parsed; references to ``graph``'s tasks), from each
    part's rows and keys (the npu parts', then the bench's). A part's key task runs once the parts before
    it on its side are parsed (beside the other parses, not after the last); where the graph is not
    ``shared``, its keys reach the match through a file of the rank of ``path``'s spool folder."""
    npu_n, parts = len(windows), len(rows)
    facts = graph.call(side_facts, *scans, npu_n, *keys)
    # (a part's keys by partition: bytes, each read apart by its partition's task; or the names of their
    # files, read from the whole by every partition's task: a task an item would cost more than the
    # names, a rank of 1M entries a side 3,780 tasks, each a round trip through the process that schedules)
    items = {"apart": range(partitions)} if graph.shared else {"inline": range(partitions)}
    buckets = [
        graph.call_many(
            spooled_keys,
            partitions,
            path,
            None if graph.shared else f"keys-{i}",
            rows[i],
            renumber,
            partitions,
            keys[i],
            *keys[0 if i < npu_n else npu_n : i],  # (the parts before it on its side)
            **items,
        )
        for i in range(parts)
    ]
    # (each partition's pairs found: where the graph is not ``shared``, left in a file and each part's
    # taken from the whole value, where they are there; see spooled_found)
    found = [
        graph.call_many(
            spooled_found,
            npu_n + 1,
            path,
            None if graph.shared else f"found-{p}",
            facts,
            npu_n,
            *(b[p] for b in buckets),
            inline=() if graph.shared else range(npu_n + 1),
        )
        for p in range(partitions)
    ]
    head = graph.call(plan_head, facts, *(f[npu_n] for f in found))
    cuts = [  # (a part's runs are most of its cut: its table part takes them from the whole)
        graph.call_many(spooled_pairs, 2, facts, window, *(f[k] for f in found), inline=(0,))
        for k, window in enumerate(windows)
    ]
    wanted = graph.call_many(
        wanted_rows, parts - npu_n, graph.attr(facts, "bench_offsets"), *(far for _, far in cuts)
    )
    return head, [runs for runs, _ in cuts], wanted, facts
