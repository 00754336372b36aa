"""One rank's statistics compare to csv, cut into chunk tasks whose results travel as csv bytes.

scan(npu) ───> parse npu part 0..K-1 ───┐
                                        ├─> match ─> table part k (npu part k, bench parts near k)
scan(bench) ─> parse bench part 0..J-1 ─┘                  │
                     head ─> append part 0 ─> ... ─> append part k ─> ... ─> append part K-1 ─> rename

A part is a run of consecutive dump.json entries (``PART_BYTES`` of text), parsed from its byte span
(``dump/entries.py``'s scan). The match task sees every row of both sides (the matching rules need
them all) and sends each table task only where its rows' partners are: the bench parts around its own
(aligned dumps keep them there) and the few partners outside them. A table part is whole dump entries,
the unit the judging rules work on, so its rows are the reference's rows; its csv text is appended to
the rank's temporary file in the reference's order, and the file is renamed when the last part is in.
"""

from __future__ import annotations

import contextlib
import marshal
import math
import os
import re
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Any

from msprobe_dask.analysis.divergence import Tolerance
from msprobe_dask.analysis.flow import Node
from msprobe_dask.dump.confine import check_dump_file
from msprobe_dask.dump.dumpjson import dump_facts, has_key, load_dump, load_stack
from msprobe_dask.dump.entries import read_whole_dump_doc, scan_dump_doc
from msprobe_dask.dump.fastjson import loads
from msprobe_dask.dump.rows import LeafRow
from msprobe_dask.dump.source import DumpSource
from msprobe_dask.errors import DumpError, OutputError
from msprobe_dask.pipeline.pairing import MatchOptions, pair_indices
from msprobe_dask.pipeline.sides import Side, compare_mode, is_cross_framework, rows_of
from msprobe_dask.summary.divergence import joined_nodes, rank_table_nodes
from msprobe_dask.summary.kinds import KindCounter
from msprobe_dask.summary.model import GroupSummary
from msprobe_dask.summary.table import merge_summaries, summarise_table
from msprobe_dask.table import RowPair, build_table, columns_for, float_stat_columns
from msprobe_dask.writers.atomic import publish, set_result_mode
from msprobe_dask.writers.csv_writer import csv_lines, header_line

PART_BYTES = 16 << 20
"""dump.json bytes per part: 4 parts of a 50,000-entry dump, enough for a few workers; a part's rows,
table and csv text stay a few tens of MB."""

_AST_LOCK = threading.Lock()
"""Held while a table part's summary reads its stack cells with ast.literal_eval: CPython 3.11.7's
ast is not thread-safe (gh-106905: "AST constructor recursion depth mismatch" when table parts run
in threads side by side)."""

_STATISTICS_HEAD = re.compile(rb'\{\r?\n( +)"task": "statistics",')


def is_statistics_dump(source: DumpSource) -> bool:
    """Whether dump.json says ``"task": "statistics"`` first, as msProbe writes it (read from its head)."""
    check_dump_file(source.dump_json)  # a FIFO would block the read
    try:
        with open(source.dump_json, "rb") as f:
            head = f.read(256)
    except OSError:
        return False
    return _STATISTICS_HEAD.match(head) is not None


def part_count(source: DumpSource) -> int:
    try:
        size = os.path.getsize(source.dump_json)
    except OSError:
        size = 0
    return max(1, math.ceil(size / PART_BYTES))


@dataclass(frozen=True, slots=True)
class SideScan:
    """One dump.json's header facts and its entries' byte spans, cut into parts (``whole``: the file
    is not laid out for spans, and part 0 parses it whole)."""

    source: DumpSource
    task: str
    framework: str
    md5_in_text: bool
    parts: tuple[tuple[tuple[str, ...], tuple[int, ...], tuple[int, ...]], ...]
    small: dict[str, Any]  # the values of one-line entries, parsed by the scan
    whole: bool


def scan_side(source: DumpSource, parts: int) -> SideScan:
    """Find the entries' spans; a file not laid out for them is parsed whole here (for its errors and
    header) and again by part 0."""
    path = source.dump_json
    check_dump_file(path)
    try:
        with open(path, "rb") as f:
            text = f.read()
    except OSError:
        text = b""  # load_dump raises the usual error
    scanned = scan_dump_doc(path, text)
    spans = scanned[1].spans() if scanned is not None else None
    if scanned is None or spans is None:
        del text
        dump = load_dump(source)
        return SideScan(source, dump.task, dump.framework, True, (), {}, whole=True)
    header, entries = scanned
    named, small, _ = spans
    md5_in_text = entries.mentions(b'"md5"')
    del text, spans, entries
    task, _, framework = dump_facts(path, header)
    names = list(named)
    bounds = [len(names) * k // parts for k in range(parts + 1)]
    cut = []
    for lo, hi in zip(bounds, bounds[1:]):
        own = tuple(names[lo:hi])
        cut.append((own, tuple(named[n][0] for n in own), tuple(named[n][1] for n in own)))
    return SideScan(source, task, framework, md5_in_text, tuple(cut), small, whole=False)


class RowPart:
    """A part's rows. They travel between tasks as marshal bytes, 2x cheaper to make than a pickle
    and passed on undecoded by the process that schedules the tasks; decoded once where used."""

    __slots__ = ("packed", "has_md5", "_rows")

    def __init__(self, packed: bytes, has_md5: bool, rows: tuple[LeafRow, ...] | None = None) -> None:
        self.packed = packed
        self.has_md5 = has_md5
        self._rows = rows

    @classmethod
    def of(cls, rows: tuple[LeafRow, ...], has_md5: bool) -> RowPart:
        return cls(marshal.dumps([tuple(row) for row in rows]), has_md5, rows)

    @property
    def rows(self) -> tuple[LeafRow, ...]:
        if self._rows is None:
            self._rows = tuple(map(LeafRow._make, marshal.loads(self.packed)))
        return self._rows

    def __reduce__(self) -> tuple[Any, ...]:
        return (RowPart, (self.packed, self.has_md5))


def parse_part(scan: SideScan, k: int) -> RowPart:
    """The rows of part ``k`` (a DumpError names dump.json if an entry is not valid JSON)."""
    debug = scan.source.is_debug
    if scan.whole:
        if k:
            return RowPart.of((), False)
        dump = load_dump(scan.source)
        return RowPart.of(rows_of(dump.entries.items(), debug, scan.source.dump_json), dump.has_md5)
    names, starts, ends = scan.parts[k]
    if not names:
        return RowPart.of((), False)
    lo = starts[0]
    with open(scan.source.dump_json, "rb") as f:
        f.seek(lo)
        text = f.read(ends[-1] - lo)
    bodies = []
    whole: dict[str, Any] | None = None
    for name, start, end in zip(names, starts, ends):
        if name in scan.small:
            body = scan.small[name]
        else:
            try:
                body = loads(text[start - lo : end - lo])
            except ValueError:  # raises the file's own DumpError, or (the scan misread it) gives the entry
                whole = whole if whole is not None else read_whole_dump_doc(scan.source.dump_json)[1]
                body = whole[name]
        bodies.append((name, body))
    has_md5 = scan.md5_in_text and any(has_key(body, "md5") for _, body in bodies)
    return RowPart.of(rows_of(bodies, debug, scan.source.dump_json), has_md5)


def bench_window(k: int, npu_parts: int, bench_parts: int) -> range:
    """The bench parts a table part gets whole: those at the same place of their dump (the partners of
    rows of dumps that differ little, or not at all); the plan carries the others' partners."""
    return range(k * bench_parts // npu_parts, ((k + 1) * bench_parts - 1) // npu_parts + 1)


@dataclass(frozen=True, slots=True)
class PartPlan:
    npu_rows: tuple[int, ...]  # index in the npu part of each table row (a row paired twice comes twice)
    bench_rows: tuple[int, ...]  # index among all bench rows of its partner, -1 for none
    foreign: dict[int, LeafRow]  # partners outside the part's bench window
    stacks: dict[str, list[str]] | None  # the stacks of the part's entries (None: no NPU_Stack_Info)


@dataclass(frozen=True, slots=True)
class Plan:
    """What every table part needs from the match: each part's own plan packed as marshal bytes
    (every table task gets the whole plan; it decodes its own part only)."""

    mode: str
    columns: list[str]
    float_stats: tuple[bool, ...]
    bench_offsets: tuple[int, ...]  # index of each bench part's first row among all bench rows
    packed_parts: tuple[bytes, ...]

    def part(self, k: int) -> PartPlan:
        npu_rows, bench_rows, foreign, stacks = marshal.loads(self.packed_parts[k])
        return PartPlan(npu_rows, bench_rows, {j: LeafRow._make(r) for j, r in foreign.items()}, stacks)


def _side(scan: SideScan, parts: Sequence[RowPart], with_stack: bool) -> Side:
    stack_json = scan.source.stack_json
    return Side(
        source=scan.source,
        task=scan.task,
        framework=scan.framework,
        has_md5=any(p.has_md5 for p in parts),
        rows=tuple(chain.from_iterable(p.rows for p in parts)),
        stacks=load_stack(stack_json) if with_stack and stack_json.is_file() else None,
    )


def match_parts(
    npu_scan: SideScan, bench_scan: SideScan, match: MatchOptions, npu_count: int, *parts: RowPart
) -> Plan:
    """Pair the rows of both sides (every matching option) and plan each table part."""
    npu_parts, bench_parts = parts[:npu_count], parts[npu_count:]
    npu, bench = _side(npu_scan, npu_parts, True), _side(bench_scan, bench_parts, False)
    mode = compare_mode(npu, bench)
    if mode == "tensor":
        raise DumpError(npu.source.dump_json, "holds tensors, but its head said statistics")
    indices = pair_indices(npu, bench, is_cross_framework(npu, bench), match)
    float_stats = float_stat_columns(npu.rows, bench.rows, any(j is None for _, j in indices))
    offsets = [0]
    for part in bench_parts:
        offsets.append(offsets[-1] + len(part.rows))
    plans = []
    at, start = 0, 0
    for k, part in enumerate(npu_parts):
        end = start + len(part.rows)
        own: list[tuple[int, int | None]] = []
        while at < len(indices) and indices[at][0] < end:
            own.append(indices[at])
            at += 1
        window = bench_window(k, len(npu_parts), len(bench_parts))
        lo, hi = offsets[window.start], offsets[window.stop]
        foreign = {j: tuple(bench.rows[j]) for _, j in own if j is not None and not lo <= j < hi}
        entries = dict.fromkeys(row.entry for row in part.rows)
        stacks = None if npu.stacks is None else {e: npu.stacks[e] for e in entries if e in npu.stacks}
        npu_rows = tuple(i - start for i, _ in own)
        bench_rows = tuple(-1 if j is None else j for _, j in own)
        plans.append(marshal.dumps((npu_rows, bench_rows, foreign, stacks)))
        start = end
    columns = columns_for(mode, npu.stacks is not None)
    return Plan(mode, columns, float_stats, tuple(offsets), tuple(plans))


@dataclass(frozen=True, slots=True)
class TablePart:
    csv: bytes
    rows: int
    summary: tuple[GroupSummary, KindCounter] | None  # when the run's summary is asked for
    nodes: list[Node] | None  # the first-divergence analysis's, with the summary


def table_part(
    label: str,
    tolerance: Tolerance | None,
    plan: Plan,
    k: int,
    window_start: int,
    npu_part: RowPart,
    *window: RowPart,
) -> TablePart:
    """Table part ``k``: its rows judged (whole entries, as the reference judges them), as csv lines,
    and (given the divergence analysis's ``tolerance``) their summary and that analysis's nodes."""
    part = plan.part(k)
    base = plan.bench_offsets[window_start]
    near = list(chain.from_iterable(p.rows for p in window))
    pairs = [
        RowPair(npu_part.rows[i], None if j < 0 else part.foreign[j] if j in part.foreign else near[j - base])
        for i, j in zip(part.npu_rows, part.bench_rows)
    ]
    table = build_table(pairs, plan.mode, part.stacks, None, plan.float_stats, highlight=False)
    lines = csv_lines(table.rows)
    if tolerance is None:
        return TablePart(lines, len(table.rows), None, None)
    kinds = KindCounter()
    with _AST_LOCK:
        summary = summarise_table(label, table.columns, table.rows, table.entries, kinds)
        nodes = rank_table_nodes(label, table, tolerance)
    return TablePart(lines, len(table.rows), (summary, kinds), nodes)


@dataclass(frozen=True, slots=True)
class PartWritten:
    """A part once its lines are in the file (the lines are not kept): what the rank's result needs."""

    path: Path
    columns: list[str]
    rows: int = 0
    summary: tuple[GroupSummary, KindCounter] | None = None
    nodes: list[Node] | None = None


@dataclass(frozen=True, slots=True)
class WrittenRank:
    """One rank compared into its csv file (``path`` None: no row to write, no file)."""

    label: str
    path: Path | None
    summary: GroupSummary | None  # when asked for
    nodes: list[Node] | None  # the divergence analysis's nodes of the rank, with the summary


def part_file(path: Path) -> Path:
    """Where the rank's csv is written before it is renamed to ``path``."""
    return path.with_name(f".{path.name}.part")


def begin_file(path: Path, plan: Plan) -> PartWritten:
    with _writing(path), open(part_file(path), "wb") as f:
        f.write(header_line(plan.columns))
    return PartWritten(path, plan.columns)


def append_part(previous: PartWritten, part: TablePart) -> PartWritten:
    with _writing(previous.path), open(part_file(previous.path), "ab") as f:
        f.write(part.csv)
    return PartWritten(previous.path, previous.columns, part.rows, part.summary, part.nodes)


@contextlib.contextmanager
def _writing(path: Path) -> Iterator[None]:
    """A write to the rank's temporary file that fails (a full disk) removes it and names ``path``."""
    try:
        yield
    except OSError as exc:
        part_file(path).unlink(missing_ok=True)
        raise OutputError(path, f"cannot be written: {exc.strerror or exc}") from None


def finish_file(label: str, head: PartWritten, *parts: PartWritten) -> WrittenRank:
    """Rename the complete file (none when the compare has no row); the rank's summary and nodes."""
    asked = parts[0].summary is not None
    summary = merge_summaries(label, head.columns, [p.summary for p in parts if p.summary]) if asked else None
    nodes = joined_nodes(p.nodes or () for p in parts) if asked else None
    tmp = part_file(head.path)
    if not sum(p.rows for p in parts):
        tmp.unlink()
        return WrittenRank(label, None, summary, nodes)
    try:
        with _writing(head.path):
            set_result_mode(tmp)
            publish(tmp, head.path)
    finally:
        tmp.unlink(missing_ok=True)
    return WrittenRank(label, head.path, summary, nodes)


def rank_csv(
    label: str,
    npu_src: DumpSource,
    bench_src: DumpSource,
    match: MatchOptions,
    path: Path,
    tolerance: Tolerance | None,
) -> Any:
    """The Delayed that compares one rank into ``path`` (its value: a WrittenRank)."""
    import dask

    def task(func: Any) -> Any:
        return dask.delayed(func, pure=False)

    npu_n, bench_n = part_count(npu_src), part_count(bench_src)
    scans = task(scan_side)(npu_src, npu_n), task(scan_side)(bench_src, bench_n)
    npu_parts = [task(parse_part)(scans[0], k) for k in range(npu_n)]
    bench_parts = [task(parse_part)(scans[1], k) for k in range(bench_n)]
    plan = task(match_parts)(*scans, match, npu_n, *npu_parts, *bench_parts)
    head = written = task(begin_file)(path, plan)
    appended = []
    for k, part in enumerate(npu_parts):
        window = bench_window(k, npu_n, bench_n)
        chunk = task(table_part)(
            label, tolerance, plan, k, window.start, part, *(bench_parts[j] for j in window)
        )
        written = task(append_part)(written, chunk)  # in the reference's order
        appended.append(written)
    return task(finish_file)(label, head, *appended)
