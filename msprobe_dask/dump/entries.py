"""dump.json read lazily: the header parsed, the entries of ``data`` parsed one by one when looked up.

msProbe writes dump.json with ``json.dump(..., indent=1)`` (merge exports use ``indent=2``). In indented
JSON a raw newline is always whitespace between tokens (strings escape theirs), so inside the ``data``
object a line of exactly two indent units followed by ``"name": `` starts an entry, and the entry's value
runs to the ``,`` before the next such line. A scan of the bytes finds those lines and the byte span of
each value without parsing it; ``json.loads`` of one span gives what the full parse gives for that entry
(fastjson.loads gives the same, faster).

The scan checks the layout where it relies on it (see ``scan_entries``) and gives up on anything else:
compact files, tabs, CRLF, duplicate entry names, a truncated file, lines indented less than an entry.
The caller then parses the whole file as before, errors included. An entry whose text does not parse
when looked up makes the whole file be parsed too, which raises the usual error naming dump.json. Only
a file not written by json.dump, with nested keys indented exactly like entries and with brackets in its
strings that happen to balance the misplaced ones, could be misread; its values would not parse, and the
full parse would take over at the first lookup.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import accumulate, chain, compress, count, repeat
from operator import add, and_, gt, itemgetter, rshift, sub
from pathlib import Path
from typing import Any

from msprobe_dask.dump.dumpjson import read_json
from msprobe_dask.dump.fastjson import loads
from msprobe_dask.errors import DumpError, cannot


class DumpEntries(Mapping[str, Any]):
    """dump.json's ``data``: entry names in file order, each entry's value read from its span of the
    file and parsed on access (dump/entry_index.py: read_dump_doc).

    Behaves as the dict ``json.load`` would give (nothing is cached but the values of one-line entries,
    which the scan parses to check them). Holds the file's text only if it is small (``text``, see
    entry_index.HOLD_BYTES); else the file is read where values are wanted, and only while it is as it
    was scanned (``stamp``; else a DumpError names it). Pickles without the text (a graph sent to a dask
    worker, which reads the dump as the task that built the graph did).
    """

    __slots__ = ("_path", "_stamp", "_spans", "_small", "_full", "_mentioned", "_text")

    def __init__(
        self,
        path: Path,
        stamp: FileStamp,
        spans: SpanMap,
        small: dict[str, Any],
        mentioned: dict[bytes, bool] | None = None,
        text: bytes | None = None,
    ) -> None:
        self._path = path
        self._text = text  # the file's text, held (a small file), or None
        self._stamp = stamp  # the file's stamp when it was scanned
        self._spans = spans  # entry name -> [start, end) of its value in the file
        self._small = small  # values of one-line entries (parsed by the scan to check them)
        self._full: dict[str, Any] | None = None  # the full parse, once a span failed to parse
        self._mentioned = mentioned if mentioned is not None else {}  # token -> whether the file has it

    def __reduce__(self) -> tuple[Any, ...]:
        return (_unpickled, (self._path, self._stamp, self._spans, self._small, self._mentioned))

    def __sizeof__(self) -> int:
        """About its size pickled: a guess for each entry's span."""
        return 64 * len(self._spans)

    def __len__(self) -> int:
        full = self._full
        return len(full) if full is not None else len(self._spans)

    def __iter__(self) -> Iterator[str]:
        full = self._full
        return iter(full) if full is not None else iter(self._spans)

    def __contains__(self, key: object) -> bool:
        full = self._full
        return key in full if full is not None else key in self._spans

    def __getitem__(self, key: str) -> Any:
        full = self._full
        if full is not None:
            return full[key]
        if key in self._small:
            return self._small[key]
        span = self._spans[key]
        start, end = span if span.__class__ is tuple else span_bounds(span)
        held = self._text
        (text,) = self._read([(start, end)]) if held is None else (held[start:end],)
        try:
            return loads(text)
        except ValueError:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
            return self._fall_back()[key]

    def __repr__(self) -> str:
        return f"DumpEntries({str(self._path)!r}, {len(self)} entries)"

    @property
    def held(self) -> bool:
        """Whether the file's text is held (a small file: see entry_index.HOLD_BYTES)."""
        return self._text is not None

    def span(self, name: str) -> tuple[int, int]:
        """The [start, end) of entry ``name``'s value in the file."""
        return span_bounds(self._spans[name])

    def starts(self, names: Iterable[str]) -> list[int | None]:
        """Where each of ``names``' value starts in the file (its place in dump.json); None: not an entry."""
        spans, full = self._spans, self._full
        return [
            (span[0] if span.__class__ is tuple else span >> SPAN_SHIFT)
            if (span := spans.get(name)) is not None and (full is None or name in full)
            else None
            for name in names
        ]

    def one_line_names(self) -> list[str]:
        """The entries written on one line (which the scan has parsed), or all once parsed whole."""
        return list(self._full if self._full is not None else self._small)

    def mentions(self, token: bytes) -> bool:
        """Whether the file's text holds ``token`` (a quick test that can spare a walk of the entries)."""
        found = self._mentioned.get(token)
        if found is None:
            found = self._mentioned[token] = self._holds(token)
        return found

    def span_texts(self, names: Iterable[str]) -> SpanTexts | None:
        """(spans, one-line entries, text) of (at least) those of ``names`` that are entries, while the
        entries are read by spans (else None): the text held, or their values read from the file into
        one text (runs of spans less than READ_GAP bytes apart read at once), each one's span in it."""
        if self._full is not None:
            return None
        if self._text is not None:  # (every entry's span in the file's text)
            return self._spans, self._small, self._text
        spans = self._spans
        wanted = list(filter(spans.__contains__, dict.fromkeys(names)))
        if not wanted:
            return {}, {}, b""
        # (maps and zips over the names, no Python loop: a chunk task reads thousands of spans)
        at: list[Any] = list(map(spans.__getitem__, wanted))
        if at[0].__class__ is int:  # (packed: see scan_entries)
            begins = list(map(rshift, at, repeat(SPAN_SHIFT)))
            at = list(zip(begins, map(add, begins, map(and_, at, repeat(SPAN_LENGTH)))))
        order = sorted(range(len(at)), key=list(map(_START, at)).__getitem__)
        at, wanted = list(map(at.__getitem__, order)), list(map(wanted.__getitem__, order))
        starts, ends = list(map(_START, at)), list(map(_END, at))  # (spans do not overlap: ends sorted too)
        cuts = compress(count(1), map(gt, map(sub, starts[1:], ends), repeat(READ_GAP)))
        bounds = [0, *cuts, len(at)]
        counts = list(map(sub, bounds[1:], bounds))
        runs = list(
            zip(map(starts.__getitem__, bounds[:-1]), map(ends.__getitem__, map(sub, bounds[1:], repeat(1))))
        )
        texts = self._read(runs)
        # each span moved by its run's start less the length of the runs before it in the text
        before = accumulate(map(len, texts), initial=0)
        shift = list(chain.from_iterable(map(repeat, map(sub, map(_START, runs), before), counts)))
        moved = dict(zip(wanted, zip(map(sub, starts, shift), map(sub, ends, shift))))
        small = self._small
        return moved, {name: small[name] for name in small.keys() & moved.keys()}, b"".join(texts)

    def get_in(self, found: SpanTexts, name: str) -> Any:
        """``self.get(name)``, its value parsed from ``found`` (span_texts of names that include it)
        rather than read from the file on its own (an open, a read and a close an entry: a third of
        a build of one rank of 50,050 entries a side, whose 14,300 entries no node holds are parsed,
        node_items.parse_unused)."""
        spans, small, text = found
        if name in small:
            return small[name]
        span = spans.get(name)
        if span is not None:
            start, end = span_bounds(span)
            try:
                return loads(text[start:end])
            except ValueError:  # (the full parse's error, or value: self.get)
                pass
        return self.get(name)

    def parse_each(self, names: Sequence[str], doubtful: Doubtful | None = None) -> None:
        """Parse the entries ``names`` and let their values go (a malformed one raises what
        ``self[name]`` raises), PARSE_BATCH at a time read from the file at once (span_texts).
        ``doubtful(names, spans, small, text)``: those of the names read whose texts must be parsed to
        know whether they are JSON that json.loads reads (the others are known to be)."""
        for lo in range(0, len(names), PARSE_BATCH):
            batch = names[lo : lo + PARSE_BATCH]
            found = self.span_texts(batch)
            if found is None:
                for name in batch:
                    self[name]
                continue
            for name in batch if doubtful is None else doubtful(list(batch), *found):
                self.get_in(found, name)

    def _read(self, runs: Iterable[Sequence[int]]) -> list[bytes]:
        """The file's bytes of each [start, end) of ``runs``, read while it is as it was scanned."""
        try:
            with open(self._path, "rb") as f:
                fd = f.fileno()
                if file_stamp(os.fstat(fd)) != self._stamp:
                    raise DumpError(self._path, CHANGED)
                return [os.pread(fd, end - start, start) for start, end in runs]
        except OSError as exc:
            raise DumpError(self._path, cannot("be read again", exc)) from None

    def _holds(self, token: bytes) -> bool:
        """Whether the file (as it was scanned) holds ``token``."""
        try:
            with open(self._path, "rb") as f:
                if file_stamp(os.fstat(f.fileno())) != self._stamp:
                    raise DumpError(self._path, CHANGED)
                with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
                    return m.find(token) != -1
        except (OSError, ValueError) as exc:  # (mmap refuses an empty file: ValueError)
            raise DumpError(self._path, f"cannot be read again: {exc}") from None

    def _fall_back(self) -> dict[str, Any]:
        """Parse the whole file: raises its DumpError, or (the scan misread a valid file) gives data.

        No lock: two threads may both parse, harmlessly."""
        if self._full is None:
            data = read_json(self._path).get("data")
            if not isinstance(data, dict):
                raise DumpError(self._path, "has no 'data' mapping")
            self._full = data
        return self._full


SpanMap = dict[str, Any]
"""Entry name -> the [start, end) of its value in the file, or (scan_entries' ``compact``) that span
packed into one int: ``start << SPAN_SHIFT | length`` (an entry of up to 1 TiB)."""
SPAN_SHIFT = 40
SPAN_LENGTH = (1 << SPAN_SHIFT) - 1
SpanTexts = tuple[SpanMap, dict[str, Any], bytes]
"""Some entries' spans in a text, their one-line values, and the text (DumpEntries.span_texts)."""
Doubtful = Callable[[list[str], SpanMap, dict[str, Any], bytes], list[str]]
"""Of some entries read (their names and SpanTexts), those whose texts must be parsed to know whether they
are JSON (DumpEntries.parse_each)."""
READ_GAP = 16 << 10
"""Spans of dump.json at most this many bytes apart are read at once (DumpEntries.span_texts)."""
PARSE_BATCH = 1024
"""Entries parsed at a time by DumpEntries.parse_each (their runs of dump.json, some megabytes, read at
once)."""
CHANGED = "changed while the run was reading it"
_START, _END = itemgetter(0), itemgetter(1)


def span_bounds(span: Any) -> tuple[int, int]:
    """[start, end) of a span, packed or not."""
    if span.__class__ is tuple:
        return span  # type: ignore[no-any-return]
    start = span >> SPAN_SHIFT
    return start, start + (span & SPAN_LENGTH)


FileStamp = tuple[int, int]
"""A file's size and modification time (ns): the file is taken to be unchanged while its stamp is (the
same on every machine that mounts a shared folder, unlike the device and inode numbers)."""


def file_stamp(st: os.stat_result) -> FileStamp:
    return (st.st_size, st.st_mtime_ns)


def _unpickled(
    path: Path,
    stamp: FileStamp,
    spans: SpanMap,
    small: dict[str, Any],
    mentioned: dict[bytes, bool],
) -> DumpEntries:
    """Pickled DumpEntries loaded (in a dask worker): their file must be as it was scanned."""
    try:
        now = file_stamp(os.stat(path))
    except OSError as exc:
        raise DumpError(path, cannot("be read again", exc)) from None
    if now != stamp:
        raise DumpError(path, CHANGED)
    return DumpEntries(path, stamp, spans, small, mentioned)


def read_whole_dump_doc(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(header, data) of a dump.json parsed whole."""
    doc = read_json(path)
    if not isinstance(doc, dict):
        raise DumpError(path, "top level must be a JSON object")
    data = doc.get("data")
    if not isinstance(data, dict):
        raise DumpError(path, "has no 'data' mapping")
    return {k: v for k, v in doc.items() if k != "data"}, data
