"""A rank's dump.json cut into parts (runs of consecutive entries, found by a scan of the file's byte
spans) and each part parsed into rows: the first tasks of a rank's statistics compare (``chunked.py``)."""

from __future__ import annotations

import marshal
import math
import os
import re
import sys
import zlib
from dataclasses import dataclass
from typing import Any

from msprobe_dask.dump.confine import check_dump_file
from msprobe_dask.dump.dumpjson import dump_facts, has_key, load_dump
from msprobe_dask.dump.entries import read_whole_dump_doc, scan_dump_doc
from msprobe_dask.dump.fastjson import loads
from msprobe_dask.dump.rows import LeafRow, RowKey
from msprobe_dask.dump.source import DumpSource
from msprobe_dask.graph.gcpause import rare_collections_from_now
from msprobe_dask.match.exact import backward_counts
from msprobe_dask.pipeline.sides import rows_of
from msprobe_dask.table import StatKinds, stat_kinds

PART_BYTES = 8 << 20
"""dump.json bytes per part at most: a table part's task (its rows, its window's, the table, csv text,
summary and nodes) then holds about 350 MB at its peak."""
MIN_PARTS = 8
"""A dump of at least ``MIN_PARTS`` x ``MIN_PART_BYTES`` is cut into at least this many parts, so that
two to four workers share one rank's parts evenly."""
MIN_PART_BYTES = 1 << 20

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
    """One dump.json's header facts (``whole``: the file is not laid out for spans, and part 0 parses
    it whole)."""

    source: DumpSource
    task: str
    framework: str
    md5_in_text: bool
    whole: bool


@dataclass(frozen=True, slots=True)
class PartSpans:
    """A part's entries: their names and byte spans in dump.json, and the values of its one-line
    entries (parsed by the scan). Each part's travel to its own tasks: a rank of 1M entries has 1M
    names, too many to send to every part's task."""

    names: tuple[str, ...]
    starts: tuple[int, ...]
    ends: tuple[int, ...]
    small: dict[str, Any]


def scan_side(source: DumpSource, parts: int) -> tuple[Any, ...]:
    """The side's SideScan and its parts' PartSpans; a file not laid out for spans is parsed whole here
    (for its errors and header) and again by part 0."""
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
        none = PartSpans((), (), (), {})
        return (SideScan(source, dump.task, dump.framework, True, whole=True), *(none,) * parts)
    header, entries = scanned
    named, small, _ = spans
    md5_in_text = entries.mentions(b'"md5"')
    del text, spans, entries, scanned  # the text (a scan holds the whole file) goes first
    task, _, framework = dump_facts(path, header)
    names = list(named)
    bounds = [len(names) * k // parts for k in range(parts + 1)]
    cut = []
    for lo, hi in zip(bounds, bounds[1:]):
        own = tuple(names[lo:hi])
        starts, ends = tuple(named[n][0] for n in own), tuple(named[n][1] for n in own)
        cut.append(PartSpans(own, starts, ends, {n: small[n] for n in own if n in small}))
    return (SideScan(source, task, framework, md5_in_text, whole=False), *cut)


class RowPart:
    """A part's rows. They travel between tasks as zlib-compressed marshal bytes (marshal: 2x cheaper to
    make than a pickle; zlib at level 1: 4-5x smaller for 5% of the parse's time, and the process that
    schedules the tasks holds every part until its table part has run), passed on undecoded by that
    process; decoded once where used."""

    __slots__ = ("packed", "_rows")

    def __init__(self, packed: bytes, rows: tuple[LeafRow, ...] | None = None) -> None:
        self.packed = packed
        self._rows = rows

    @classmethod
    def of(cls, rows: tuple[LeafRow, ...]) -> RowPart:
        """(Decoded again where used: a part waiting for its table task holds only its bytes.)"""
        return cls(zlib.compress(marshal.dumps([tuple(row) for row in rows]), 1))

    @property
    def rows(self) -> tuple[LeafRow, ...]:
        if self._rows is None:
            self._rows = tuple(map(LeafRow._make, marshal.loads(zlib.decompress(self.packed))))
        return self._rows

    def __reduce__(self) -> tuple[Any, ...]:
        return (RowPart, (self.packed,))


@dataclass(frozen=True, slots=True)
class PartKeys:
    """What the match reads of a part: its row count, whether it holds md5 summaries, its statistics'
    kinds, its backward entries per op (where the renumbering of the next part starts), and for a
    match of the whole side in one task each row's key fields (marshal bytes, the same strings sent
    once)."""

    packed: bytes | None
    count: int
    has_md5: bool
    stat_kinds: StatKinds
    backward: dict[str, int]

    @classmethod
    def of(cls, rows: tuple[LeafRow, ...], has_md5: bool, with_keys: bool) -> PartKeys:
        keys = None
        if with_keys:
            intern = sys.intern
            keys = marshal.dumps([(row.name, row.entry, row.state, intern(row.dtype)) for row in rows])
        return cls(keys, len(rows), has_md5, stat_kinds(rows), backward_counts(rows))

    def rows(self) -> list[RowKey]:
        assert self.packed is not None, "the part was parsed for a match cut into partitions"
        return list(map(RowKey._make, marshal.loads(self.packed)))


def parse_part(scan: SideScan, spans: PartSpans, k: int, with_keys: bool) -> tuple[RowPart, PartKeys]:
    """The rows of part ``k``, and what the match reads of them (``with_keys``: their key fields too)
    (a DumpError names dump.json if an entry is not valid JSON)."""
    rare_collections_from_now()
    rows, has_md5 = _part_rows(scan, spans, k)
    return RowPart.of(rows), PartKeys.of(rows, has_md5, with_keys)


def _part_rows(scan: SideScan, spans: PartSpans, k: int) -> tuple[tuple[LeafRow, ...], bool]:
    debug = scan.source.is_debug
    if scan.whole:
        if k:
            return (), False
        dump = load_dump(scan.source)
        return rows_of(dump.entries.items(), debug, scan.source.dump_json), dump.has_md5
    names, starts, ends = spans.names, spans.starts, spans.ends
    if not names:
        return (), False
    lo = starts[0]
    with open(scan.source.dump_json, "rb") as f:
        f.seek(lo)
        text = f.read(ends[-1] - lo)
    bodies = []
    whole: dict[str, Any] | None = None
    for name, start, end in zip(names, starts, ends):
        if name in spans.small:
            body = spans.small[name]
        else:
            try:
                body = loads(text[start - lo : end - lo])
            except ValueError:  # raises the file's own DumpError, or (the scan misread it) gives the entry
                whole = whole if whole is not None else read_whole_dump_doc(scan.source.dump_json)[1]
                body = whole[name]
        bodies.append((name, body))
    has_md5 = scan.md5_in_text and any(has_key(body, "md5") for _, body in bodies)
    return rows_of(bodies, debug, scan.source.dump_json), has_md5
