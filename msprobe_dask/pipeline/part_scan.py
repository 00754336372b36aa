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
from itertools import repeat
from operator import itemgetter
from pathlib import Path
from typing import Any

from msprobe_dask.dump.confine import check_dump_file
from msprobe_dask.dump.dumpjson import dump_facts, has_key, load_dump
from msprobe_dask.dump.entry_index import EntryIndex, empty_index, index_dump, read_entries
from msprobe_dask.dump.rows import DTYPE, ENTRY, NAME, LeafRow, RowKey
from msprobe_dask.dump.source import DumpSource
from msprobe_dask.errors import DumpError, cannot
from msprobe_dask.graph.dump_files import find_entries
from msprobe_dask.graph.gcpause import collections_paused, rare_collections_from_now
from msprobe_dask.match.exact import backward_counts
from msprobe_dask.pipeline.sides import rows_of, rows_of_text
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
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):  # a kernel dump's folder...
        return False
    except OSError as exc:  # permission denied...: refused now, not after the other ranks' parts
        raise DumpError(source.dump_json, cannot("be read", exc)) from None
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


def scan_side(source: DumpSource, parts: int) -> tuple[Any, ...]:
    """The side's SideScan and each part's EntryIndex (its entries' offsets: a part's tasks get only
    its own); a file not laid out for spans is parsed whole here (for its errors and header) and again
    by part 0."""
    scanned = index_dump(source.dump_json, find_entries)  # the entries found in C where it is built
    if scanned is None:
        dump = load_dump(source)
        return (SideScan(source, dump.task, dump.framework, True, whole=True), *(empty_index(),) * parts)
    header, index, md5_in_text = scanned
    task, _, framework = dump_facts(source.dump_json, header)
    bounds = [len(index) * k // parts for k in range(parts + 1)]
    cut = (index.cut(lo, hi) for lo, hi in zip(bounds, bounds[1:]))
    return (SideScan(source, task, framework, md5_in_text, whole=False), *cut)


ROWS_ZLIB_FROM_BYTES = 256 << 20
"""A rank whose dump.json files (both sides) hold at least this many bytes sends its parts' rows
zlib-compressed (level 1: 3.7x smaller) where they are held by a process while they wait for their
table part (a cluster's workers), smaller ranks send them as they are: 0.56 bytes per dump.json byte
uncompressed, 0.15 compressed (a rank of 1M entries a side, 1.8 GB of dump.json: 1.0 GB against
0.28 GB). Below it, compression is not worth its CPU: it cost a rank of 50,400 entries a side (67 MB)
0.9 s of its 9 s (packing 0.78 s compressed against 0.32 s, reading back 0.93 s against 0.46 s), to
hold 10 MB rather than 37. Rows that wait in the rank's spool files (dask's processes scheduler,
part_spool.spooled_parse) are never compressed: no process holds them, and compressing and reading
them back cost 8.8% of the instructions of a rank's compare (a rank of 20,020 entries a side with
the threshold at 0, under callgrind: 17.09 G against 15.60 G over the process tree)."""


def rank_bytes(npu_src: DumpSource, bench_src: DumpSource) -> int:
    """The size of a rank's two dump.json files (what sizes its parts' packing and its match's
    partitions)."""
    return sum(os.path.getsize(src.dump_json) for src in (npu_src, bench_src) if src.dump_json.is_file())


def rows_zlib(npu_src: DumpSource, bench_src: DumpSource) -> bool:
    """Whether a rank's parts send their rows zlib-compressed (``ROWS_ZLIB_FROM_BYTES``)."""
    return rank_bytes(npu_src, bench_src) >= ROWS_ZLIB_FROM_BYTES


class RowPart:
    """A part's rows. They travel between processes as marshal bytes (2x cheaper to make than a
    pickle), zlib-compressed for a big rank (``ROWS_ZLIB_FROM_BYTES``), passed on undecoded by the
    process that schedules the tasks; decoded once where used. Packed only when pickled: in threads of
    one process the rows are handed on as they are (packing and decoding them again cost 8% of a rank's
    compare). A part ``spooled`` to a file travels as the file's name, its bytes read where used."""

    __slots__ = ("_file", "_packed", "_rows", "_zlib")

    def __init__(
        self,
        packed: bytes | None,
        rows: tuple[LeafRow, ...] | None = None,
        zlib_packed: bool = False,
        file: Path | None = None,
    ) -> None:
        assert packed is not None or rows is not None or file is not None
        self._packed = packed
        self._rows = rows
        self._zlib = zlib_packed
        self._file = file

    @classmethod
    def of(cls, rows: tuple[LeafRow, ...], zlib_packed: bool) -> RowPart:
        return cls(None, rows, zlib_packed)

    def spooled(self, file: Path) -> RowPart:
        """The part with its bytes left in ``file``, and its ``key_fields`` in a file beside it (the key
        task reads them alone: a part of 21,273 rows, 1.2 ms to decode where its rows take 12.5 ms)."""
        file.write_bytes(self.packed)
        _key_file(file).write_bytes(marshal.dumps(self.key_fields))
        return RowPart(None, None, self._zlib, file)

    @property
    def packed(self) -> bytes:
        if self._packed is None and self._file is not None:
            return self._file.read_bytes()  # (not kept: the rows decoded from it are)
        if self._packed is None:
            assert self._rows is not None
            packed = marshal.dumps(list(map(tuple, self._rows)))
            self._packed = zlib.compress(packed, 1) if self._zlib else packed
        return self._packed

    @property
    def key_fields(self) -> tuple[list[str], list[str], list[str]]:
        """Each row's name, entry and dtype, as three columns: what the key task reads of the part (from
        the file beside the rows' where the part is ``spooled``; else of rows decoded here as plain
        tuples, not kept)."""
        if self._rows is None and self._file is not None:
            fields: tuple[list[str], list[str], list[str]] = marshal.loads(_key_file(self._file).read_bytes())
            return fields
        rows = self._rows
        if rows is None:
            rows = marshal.loads(zlib.decompress(self.packed) if self._zlib else self.packed)
        names, entries, dtypes = (list(map(itemgetter(field), rows)) for field in (NAME, ENTRY, DTYPE))
        return names, entries, dtypes

    @property
    def rows(self) -> tuple[LeafRow, ...]:
        if self._rows is None:
            packed = zlib.decompress(self.packed) if self._zlib else self.packed
            # (tuple.__new__ as LeafRow._make does it, without its Python frame and length check: the rows
            # are the parse's own; a part of 32,400 rows 12.6 -> 10.7 ms)
            self._rows = tuple(map(tuple.__new__, repeat(LeafRow), marshal.loads(packed)))
        return self._rows

    def __reduce__(self) -> tuple[Any, ...]:
        """(Only the bytes, or the file's name: a part received from another process holds only them
        until used.)"""
        if self._file is not None:
            return (RowPart, (None, None, self._zlib, self._file))
        return (RowPart, (self.packed, None, self._zlib))


def _key_file(rows_file: Path) -> Path:
    """Where a spooled part's ``key_fields`` wait, beside its rows' file."""
    return rows_file.with_name(f"{rows_file.name}.keys")


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


def parse_part(
    scan: SideScan, spans: EntryIndex, k: int, with_keys: bool, zlib_packed: bool
) -> tuple[RowPart, PartKeys]:
    """The rows of part ``k`` (``zlib_packed``: compressed if they travel), and what the match reads of
    them (``with_keys``: their key fields too) (a DumpError names dump.json if an entry is not valid
    JSON). The rows, which all live on to their table part, are made with the cyclic collector paused
    (its passes walked them for nothing: 1.9% of T's compare's instructions)."""
    rare_collections_from_now()
    with collections_paused():
        rows, has_md5 = _part_rows(scan, spans, k)
    return RowPart.of(rows, zlib_packed), PartKeys.of(rows, has_md5, with_keys)


def _part_rows(scan: SideScan, spans: EntryIndex, k: int) -> tuple[tuple[LeafRow, ...], bool]:
    debug = scan.source.is_debug
    if scan.whole:
        if k:
            return (), False
        dump = load_dump(scan.source)
        return rows_of(dump.entries.items(), debug, scan.source.dump_json), dump.has_md5
    if not debug and not scan.md5_in_text:  # (no md5 in the text: none in the rows)
        rows = rows_of_text(scan.source.dump_json, spans)
        if rows is not None:
            return rows, False
    bodies = read_entries(scan.source.dump_json, spans)
    has_md5 = scan.md5_in_text and any(has_key(body, "md5") for _, body in bodies)
    return rows_of(bodies, debug, scan.source.dump_json), has_md5
