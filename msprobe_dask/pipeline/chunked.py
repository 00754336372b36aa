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
import pickle
import re
import sys
import threading
from bisect import bisect_right
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
from msprobe_dask.dump.rows import LeafRow, RowKey
from msprobe_dask.dump.source import DumpSource
from msprobe_dask.errors import DumpError, OutputError
from msprobe_dask.graph.gcpause import rare_collections_from_now
from msprobe_dask.pipeline.pairing import MatchOptions, pair_indices
from msprobe_dask.pipeline.sides import MatchSide, compare_mode, is_cross_framework, rows_of
from msprobe_dask.summary.divergence import joined_nodes, rank_table_nodes
from msprobe_dask.summary.kinds import KindCounter
from msprobe_dask.summary.model import GroupSummary
from msprobe_dask.summary.table import merge_summaries, summarise_table
from msprobe_dask.table import RowPair, StatKinds, build_table, columns_for, float_columns, stat_kinds
from msprobe_dask.writers.atomic import publish, set_result_mode
from msprobe_dask.writers.csv_writer import csv_lines, header_line

PART_BYTES = 8 << 20
"""dump.json bytes per part at most: a table part's task (its rows, its window's, the table, csv text,
summary and nodes) then holds about 350 MB at its peak."""
MIN_PARTS = 8
"""A dump of at least ``MIN_PARTS`` x ``MIN_PART_BYTES`` is cut into at least this many parts, so that
two to four workers share one rank's parts evenly."""
MIN_PART_BYTES = 1 << 20

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
    return max(1, math.ceil(size / PART_BYTES), min(MIN_PARTS, size // MIN_PART_BYTES))


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

    __slots__ = ("packed", "_rows")

    def __init__(self, packed: bytes, rows: tuple[LeafRow, ...] | None = None) -> None:
        self.packed = packed
        self._rows = rows

    @classmethod
    def of(cls, rows: tuple[LeafRow, ...]) -> RowPart:
        """(Decoded again where used: a part waiting for its table task holds only its bytes.)"""
        return cls(marshal.dumps([tuple(row) for row in rows]))

    @property
    def rows(self) -> tuple[LeafRow, ...]:
        if self._rows is None:
            self._rows = tuple(map(LeafRow._make, marshal.loads(self.packed)))
        return self._rows

    def __reduce__(self) -> tuple[Any, ...]:
        return (RowPart, (self.packed,))


@dataclass(frozen=True, slots=True)
class PartKeys:
    """What the match reads of a part: each row's key fields (marshal bytes, the same strings sent
    once), whether the part holds md5 summaries, and its golden statistics' kinds."""

    packed: bytes
    count: int
    has_md5: bool
    stat_kinds: StatKinds

    @classmethod
    def of(cls, rows: tuple[LeafRow, ...], has_md5: bool) -> PartKeys:
        intern = sys.intern
        keys = [(row.name, row.entry, row.state, intern(row.dtype)) for row in rows]
        return cls(marshal.dumps(keys), len(rows), has_md5, stat_kinds(rows))

    def rows(self) -> list[RowKey]:
        return list(map(RowKey._make, marshal.loads(self.packed)))


def parse_part(scan: SideScan, k: int) -> tuple[RowPart, PartKeys]:
    """The rows of part ``k``, and their keys (a DumpError names dump.json if an entry is not valid
    JSON)."""
    rare_collections_from_now()
    rows, has_md5 = _part_rows(scan, k)
    return RowPart.of(rows), PartKeys.of(rows, has_md5)


def _part_rows(scan: SideScan, k: int) -> tuple[tuple[LeafRow, ...], bool]:
    debug = scan.source.is_debug
    if scan.whole:
        if k:
            return (), False
        dump = load_dump(scan.source)
        return rows_of(dump.entries.items(), debug, scan.source.dump_json), dump.has_md5
    names, starts, ends = scan.parts[k]
    if not names:
        return (), False
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
    return rows_of(bodies, debug, scan.source.dump_json), has_md5


def bench_window(k: int, npu_parts: int, bench_parts: int) -> range:
    """The bench parts a table part gets whole: those at the same place of their dump (the partners of
    rows of dumps that differ little, or not at all); the others' partners come as foreign rows."""
    return range(k * bench_parts // npu_parts, ((k + 1) * bench_parts - 1) // npu_parts + 1)


@dataclass(frozen=True, slots=True)
class PlanHead:
    """What every table part needs from the match."""

    mode: str
    columns: list[str]
    float_stats: tuple[bool, ...]
    bench_offsets: tuple[int, ...]  # index of each bench part's first row among all bench rows


Runs = list[tuple[int, int, int]]
"""A table part's rows as runs (first npu row in the part, its partner among all bench rows or -1 for
none, length): consecutive npu rows paired with consecutive bench rows, or unpaired, make one run (a
part of two aligned dumps is one run; a row paired twice comes twice)."""


def _runs(pairs: Sequence[tuple[int, int | None]], start: int) -> Runs:
    runs: Runs = []
    i0 = j0 = n = -1
    for i, j in pairs:
        jj = -1 if j is None else j
        if n > 0 and i == i0 + n and (jj == j0 + n if j0 >= 0 else jj < 0):
            n += 1
            continue
        if n > 0:
            runs.append((i0 - start, j0, n))
        i0, j0, n = i, jj, 1
    if n > 0:
        runs.append((i0 - start, j0, n))
    return runs


def _run_pairs(runs: Runs) -> Iterator[tuple[int, int]]:
    for i, j, n in runs:
        for t in range(n):
            yield i + t, (j + t if j >= 0 else -1)


def _match_side(scan: SideScan, keys: Sequence[PartKeys]) -> MatchSide:
    rows = list(chain.from_iterable(part.rows() for part in keys))
    return MatchSide(scan.source, scan.task, scan.framework, any(p.has_md5 for p in keys), rows)


def match_parts(
    npu_scan: SideScan, bench_scan: SideScan, match: MatchOptions, npu_count: int, *keys: PartKeys
) -> tuple[Any, ...]:
    """Pair the rows of both sides (every matching option) from their keys and cut the plan: the
    head, each table part's runs (marshal bytes), and for each bench part the rows wanted by table
    parts outside whose window it lies ({table part: [bench row]})."""
    rare_collections_from_now()
    npu_keys, bench_keys = keys[:npu_count], keys[npu_count:]
    npu, bench = _match_side(npu_scan, npu_keys), _match_side(bench_scan, bench_keys)
    mode = compare_mode(npu, bench)
    if mode == "tensor":
        raise DumpError(npu.source.dump_json, "holds tensors, but its head said statistics")
    indices = pair_indices(npu, bench, is_cross_framework(npu, bench), match)
    float_stats = float_columns(
        [part.stat_kinds for part in npu_keys],
        [part.stat_kinds for part in bench_keys],
        any(j is None for _, j in indices),
    )
    offsets = [0]
    for part in bench_keys:
        offsets.append(offsets[-1] + part.count)
    plans = []
    wanted: list[dict[int, list[int]]] = [{} for _ in bench_keys]  # bench part -> {table part: rows}
    at, start = 0, 0
    for k, part in enumerate(npu_keys):
        end = start + part.count
        begin = at
        while at < len(indices) and indices[at][0] < end:
            at += 1
        own = indices[begin:at]
        window = bench_window(k, len(npu_keys), len(bench_keys))
        lo, hi = offsets[window.start], offsets[window.stop]
        for _, j in own:
            if j is not None and not lo <= j < hi:
                wanted[bisect_right(offsets, j) - 1].setdefault(k, []).append(j)
        plans.append(marshal.dumps(_runs(own, start)))
        start = end
    columns = columns_for(mode, npu_scan.source.stack_json.is_file())
    head = PlanHead(mode, columns, float_stats, tuple(offsets))
    return (head, *plans, *((offsets[j], w) for j, w in enumerate(wanted)))


def export_rows(
    wanted: tuple[int, dict[int, list[int]]], part: RowPart
) -> dict[int, dict[int, tuple[Any, ...]]]:
    """The rows of one bench part (its first row's index, {table part: [bench row]}) that table parts
    outside its window pair with: {table part: {bench row: row}} (nothing decoded when none is wanted,
    as for aligned dumps)."""
    offset, wanted_by = wanted
    rows = part.rows if wanted_by else ()
    return {k: {j: tuple(rows[j - offset]) for j in js} for k, js in wanted_by.items()}


def gather_foreign(parts: int, *exports: dict[int, dict[int, tuple[Any, ...]]]) -> tuple[bytes, ...]:
    """Each table part's foreign rows, as marshal bytes of {bench row: row}."""
    foreign: list[dict[int, tuple[Any, ...]]] = [{} for _ in range(parts)]
    for export in exports:
        for k, rows in export.items():
            foreign[k].update(rows)
    return tuple(marshal.dumps(rows) for rows in foreign)


def split_stacks(scan: SideScan, parts: int) -> tuple[bytes | None, ...]:
    """Each npu part's entries' stacks from stack.json (marshal bytes; None: no stack.json, no
    NPU_Stack_Info column). A dump parsed whole has all its entries in part 0."""
    path = scan.source.stack_json
    if not path.is_file():
        return (None,) * parts
    stacks = load_stack(path)
    if scan.whole:
        return (marshal.dumps(stacks), *(marshal.dumps({}) for _ in range(parts - 1)))
    return tuple(marshal.dumps({e: stacks[e] for e in part[0] if e in stacks}) for part in scan.parts)


@dataclass(frozen=True, slots=True)
class TablePart:
    csv: bytes
    rows: int
    summary: tuple[GroupSummary, KindCounter] | None  # when the run's summary is asked for
    nodes: bytes | None  # the first-divergence analysis's, with the summary (pickled: see WrittenRank)


def table_part(
    label: str,
    tolerance: Tolerance | None,
    head: PlanHead,
    plan: bytes,
    stacks: bytes | None,
    foreign: bytes,
    window_start: int,
    npu_part: RowPart,
    *window: RowPart,
) -> TablePart:
    """Table part ``k`` from its runs: its rows judged (whole entries, as the reference judges them),
    as csv lines, and (given the divergence analysis's ``tolerance``) their summary and that
    analysis's nodes."""
    rare_collections_from_now()
    base = head.bench_offsets[window_start]
    near = list(chain.from_iterable(p.rows for p in window))
    far = {j: LeafRow._make(row) for j, row in marshal.loads(foreign).items()}
    npu_rows = npu_part.rows
    pairs = [
        RowPair(npu_rows[i], None if j < 0 else far[j] if j in far else near[j - base])
        for i, j in _run_pairs(marshal.loads(plan))
    ]
    table = build_table(
        pairs,
        head.mode,
        None if stacks is None else marshal.loads(stacks),
        None,
        head.float_stats,
        highlight=False,
    )
    lines = csv_lines(table.rows)
    if tolerance is None:
        return TablePart(lines, len(table.rows), None, None)
    kinds = KindCounter()
    with _AST_LOCK:
        summary = summarise_table(label, table.columns, table.rows, table.entries, kinds)
        nodes = rank_table_nodes(label, table, tolerance)
    return TablePart(lines, len(table.rows), (summary, kinds), pickle.dumps(nodes, pickle.HIGHEST_PROTOCOL))


@dataclass(frozen=True, slots=True)
class PartWritten:
    """A part once its lines are in the file (the lines are not kept): what the rank's result needs."""

    path: Path
    columns: list[str]
    rows: int = 0
    summary: tuple[GroupSummary, KindCounter] | None = None
    nodes: bytes | None = None


@dataclass(frozen=True, slots=True)
class WrittenRank:
    """One rank compared into its csv file (``path`` None: no row to write, no file)."""

    label: str
    path: Path | None
    summary: GroupSummary | None  # when asked for
    # the divergence analysis's nodes of each part, with the summary: pickled until the analysis reads
    # them (a few objects per row: as Python objects, they took 5x the memory of the rank's packed rows)
    node_parts: tuple[bytes, ...] | None

    @property
    def nodes(self) -> list[Node] | None:
        """The divergence analysis's nodes of the rank (decoded at each call)."""
        if self.node_parts is None:
            return None
        return joined_nodes(pickle.loads(part) for part in self.node_parts)


def part_file(path: Path) -> Path:
    """Where the rank's csv is written before it is renamed to ``path``."""
    return path.with_name(f".{path.name}.part")


def begin_file(path: Path, head: PlanHead) -> PartWritten:
    with _writing(path), open(part_file(path), "wb") as f:
        f.write(header_line(head.columns))
    return PartWritten(path, head.columns)


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
    nodes = tuple(p.nodes for p in parts if p.nodes is not None) if asked else None
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

    def task(func: Any, nout: int | None = None) -> Any:
        return dask.delayed(func, pure=False, nout=nout)

    npu_n, bench_n = part_count(npu_src), part_count(bench_src)
    scans = task(scan_side)(npu_src, npu_n), task(scan_side)(bench_src, bench_n)
    npu_rows, npu_keys = zip(*(task(parse_part, 2)(scans[0], k) for k in range(npu_n)))
    bench_rows, bench_keys = zip(*(task(parse_part, 2)(scans[1], j) for j in range(bench_n)))
    head, *cut = task(match_parts, 1 + npu_n + bench_n)(*scans, match, npu_n, *npu_keys, *bench_keys)
    plans, wanted = cut[:npu_n], cut[npu_n:]
    exports = [task(export_rows)(wanted[j], bench_rows[j]) for j in range(bench_n)]
    foreign = task(gather_foreign, npu_n)(npu_n, *exports)
    stacks = task(split_stacks, npu_n)(scans[0], npu_n)
    written = begun = task(begin_file)(path, head)
    appended = []
    for k in range(npu_n):
        window = bench_window(k, npu_n, bench_n)
        chunk = task(table_part)(
            label,
            tolerance,
            head,
            plans[k],
            stacks[k],
            foreign[k],
            window.start,
            npu_rows[k],
            *(bench_rows[j] for j in window),
        )
        written = task(append_part)(written, chunk)  # in the reference's order
        appended.append(written)
    return task(finish_file)(label, begun, *appended)
