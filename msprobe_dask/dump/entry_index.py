"""dump.json's entries as an index of byte offsets, found by a scan that reads the file block by block:
what a statistics compare cuts into parts (``pipeline/part_scan.py``), without holding the file's text
or a Python object per entry (a rank of 1M entries: 880 MB of text and 1.5 GB of names and spans held
by the whole-text scan; its index here takes 25 bytes an entry).

The layout and its checks are ``entries.py``'s: the data object's body is cut into blocks at entry lines
(the ``,`` that ends an entry's value and the next entry's line), and each block is checked as that
scan checks the whole body, which its checks allow (each is about one entry, or a count summed over
the body); names given twice across blocks are found by their hashes. A file the scan refuses gives
None: the caller parses it whole, as before.
"""

from __future__ import annotations

import json
import os
import re
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from itertools import repeat
from operator import add, itemgetter
from pathlib import Path
from typing import Any, BinaryIO

from msprobe_dask.dump.confine import check_dump_file
from msprobe_dask.dump.entries import DumpEntries, SpanMap, file_stamp, read_whole_dump_doc
from msprobe_dask.dump.entries_scan import (
    FIRST_KEY,
    NAME,
    AddSpans,
    FindEntries,
    entry_names,
    header_of,
    is_utf8,
    scan_entries,
)
from msprobe_dask.dump.fastjson import has_long_integer, loads

BLOCK_BYTES = 16 << 20
"""dump.json bytes read and scanned at once (a block ends at an entry's end)."""
_EDGE_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class EntryIndex:
    """Where dump.json's entries are, in file order: ``heads`` the opening quote of each entry's name,
    ``starts``/``ends`` its value's span, ``one_line`` 1 where the value is written on one line (int64
    and int8 arrays)."""

    heads: array[int]
    starts: array[int]
    ends: array[int]
    one_line: array[int]

    def __len__(self) -> int:
        return len(self.heads)

    def cut(self, lo: int, hi: int) -> EntryIndex:
        """Entries ``lo`` to ``hi`` (excluded)."""
        return EntryIndex(self.heads[lo:hi], self.starts[lo:hi], self.ends[lo:hi], self.one_line[lo:hi])


def empty_index() -> EntryIndex:
    return EntryIndex(array("q"), array("q"), array("q"), array("b"))


def index_dump(path: Path, find: FindEntries | None = None) -> tuple[dict[str, Any], EntryIndex, bool] | None:
    """(header, the entries' index, whether the file's text holds ``"md5"``) of an indented dump.json,
    or None if it is laid out otherwise (the caller parses it whole, for its errors too). The entries
    are found by ``find`` (see ``scan_entries``)."""
    check_dump_file(path)
    index = empty_index()
    hashes: set[int] = set()
    try:
        with open(path, "rb") as f:
            take = partial(_add_block, index, hashes, find=find)
            walked = _walk(f, os.fstat(f.fileno()).st_size, take, (MD5_TOKEN,))
    except OSError:
        return None
    if walked is None:
        return None
    header, (md5,) = walked
    return header, index, md5


MD5_TOKEN = b'"md5"'  # in the text of a dump.json whose entries may have an md5
HOLD_BYTES = 16 << 20
"""A dump.json of at most this many bytes is held whole by its DumpEntries (its chunk tasks read their
entries in place: reading a chunk's spans from the file cost 3% of a 96-block transformer's
graph_visualize); a bigger one is read span by span, its text never held whole."""
Search = Callable[[bytes, tuple[bytes, ...]], Iterable[bool]]
"""Whether a text holds each of some tokens (``_search``, or a faster one: graph/csrc/entry_scan.c)."""


def read_dump_doc(
    path: Path,
    find: FindEntries | None = None,
    tokens: tuple[bytes, ...] = (),
    search: Search | None = None,
    add_spans: AddSpans | None = None,
) -> tuple[dict[str, Any], Mapping[str, Any]]:
    """(header, data) of a dump.json: the header holds every top-level field but ``data``.

    ``data`` is a DumpEntries if the file has the indented layout (its entries found by ``find``, or
    found and added by ``add_spans``: see ``scan_entries``; the file read block by block: its text held
    only up to HOLD_BYTES), and it
    knows whether the file holds each of ``tokens`` (looked for by ``search``); else the dict of the
    full parse. Either way a DumpError names the file if it is not a JSON object with a ``data`` object."""
    check_dump_file(path)
    spans: SpanMap = {}
    small: dict[str, Any] = {}
    held = None
    try:
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            held = f.read() if st.st_size <= HOLD_BYTES else None
            walked = _walk(
                f,
                st.st_size,
                partial(_add_spans, spans, small, find, add_spans, held is None),
                tokens,
                search,
                held,
            )
    except OSError:
        walked = None  # read_whole_dump_doc raises the usual error
    if walked is None:
        return read_whole_dump_doc(path)
    header, found = walked
    return header, DumpEntries(path, file_stamp(st), spans, small, dict(zip(tokens, found)), held)


def _add_spans(
    spans: SpanMap,
    small: dict[str, Any],
    find: FindEntries | None,
    add_spans: AddSpans | None,
    compact: bool,
    base: int,
    text: bytes,
    indent: int,
    lo: int = 0,
    hi: int | None = None,
) -> bool:
    """Add the spans of a block's entries (``text[lo:hi]``, ``text`` at ``base`` in the file) to
    ``spans``, its one-line values to ``small`` (False: the block is not laid out as ``scan_entries``
    wants, or a name was seen before), ``compact`` or not (a file too big to be held: see
    scan_entries)."""
    end = len(text) if hi is None else hi
    return scan_entries(text, lo, end, indent, spans, small, None, find, base, compact, add_spans)


def _search(text: bytes, tokens: tuple[bytes, ...]) -> list[bool]:
    return [token in text for token in tokens]


def _walk(
    f: BinaryIO,
    size: int,
    take: Callable[[int, bytes, int, int, int], bool],
    tokens: tuple[bytes, ...],
    search: Search | None = None,
    held: bytes | None = None,
) -> tuple[dict[str, Any], list[bool]] | None:
    """(header, whether the file holds each of ``tokens``) of an indented dump.json, each block of data's
    body handed to ``take(offset, text, indent, lo, hi)`` (the block: ``text[lo:hi]``, ``text`` at
    ``offset`` in the file); None if the file, or a block (``take`` gives False), is laid out otherwise.
    ``held``: the file's text, read already: scanned in place, as one block."""
    look = search or _search
    found = [False] * len(tokens)
    head = held if held is not None else f.read(min(size, _EDGE_BYTES))
    m = FIRST_KEY.match(head)
    if m is None:
        return None
    unit = len(m.group(1))
    data_key = b"\n" + b" " * unit + b'"data": '
    at = head.find(data_key)
    while at < 0 and len(head) < size:  # (the fields before data are rarely this long)
        head += f.read(_EDGE_BYTES)
        at = head.find(data_key)
    if at < 0:
        return None
    start = at + len(data_key)  # data's "{"
    if len(head) < start + 2:
        head += f.read(2)
    if head.startswith(b"{}", start):
        end = start + 2
    else:
        close = b"\n" + b" " * unit + b"}"
        stop = held.rfind(close, start) if held is not None else _last(f, size, close, start)
        if stop < 0 or not head.startswith(b"{\n", start):
            return None
        end = stop + len(close)
        blocks = (
            [(0, held, start + 1, stop)]
            if held is not None
            else (
                (at, b, 0, len(b)) for at, b in _blocks(f, start + 1, stop, b",\n" + b" " * (2 * unit) + b'"')
            )
        )
        for base, block, lo, hi in blocks:
            if not is_utf8(block):
                return None
            _look_for(tokens, found, block, look)
            if not take(base, block, 2 * unit, lo, hi):
                return None
    if held is not None:
        text = held[:start] + b"{}" + held[end:]
    else:
        f.seek(end)
        text = head[:start] + b"{}" + f.read()
    if not is_utf8(text):
        return None
    header = header_of(text)
    if header is None:
        return None
    _look_for(tokens, found, text, look)
    return header, found


def _look_for(tokens: tuple[bytes, ...], found: list[bool], text: bytes, search: Search) -> None:
    """Mark in ``found`` the tokens not found before that ``text`` holds."""
    pending = [i for i, seen in enumerate(found) if not seen]
    if pending:
        for i, holds in zip(pending, search(text, tuple(tokens[i] for i in pending))):
            found[i] = found[i] or holds


def index_object(path: Path, find: FindEntries | None = None) -> EntryIndex | None:
    """The top-level entries of an indented JSON object (stack.json), as ``index_dump`` indexes data's
    (found by ``find``: see ``scan_entries``)."""
    check_dump_file(path)
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            head = f.read(min(size, _EDGE_BYTES))
            if size <= _EDGE_BYTES and head.strip(b" \t\r\n") == b"{}":  # (no entries: json.dumps' "{}")
                return empty_index()
            body = _object_body(f, head, size)
            if body is None:
                return None
            unit, stop = body
            index = empty_index()
            hashes: set[int] = set()
            for block in _blocks(f, 1, stop, b",\n" + b" " * unit + b'"'):
                if not is_utf8(block[1]) or not _add_block(index, hashes, *block, unit, find=find):
                    return None
            return index
    except OSError:
        return None


def read_object_blocks(path: Path, numbers: bool = True) -> Iterator[dict[str, Any] | None] | None:
    """The top-level entries of an indented JSON object (stack.json, as ``index_object`` reads it) parsed
    a block (BLOCK_BYTES) at a time, without an index: {name: value} of each block's entries in file
    order, or None for a block whose text does not parse as an object with one name for each of its
    entry lines (``,`` then a line indented as the first name: a name given twice, or a layout the
    blocks misread); None if the file is not laid out so. The blocks all parse exactly when the file
    does: each is cut at an entry's ``,`` (json.dump writes no raw newline in a string, so a cut not
    between two entries leaves a bracket unclosed). ``numbers`` False: parsed without looking for long
    integers first (fastjson.loads' ``short_integers``: an integer of 19 digits or more may read as a
    float), for a caller that keeps no number of what it reads."""
    check_dump_file(path)
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            body = _object_body(f, f.read(min(size, _EDGE_BYTES)), size)
    except OSError:
        return None
    if body is None:
        return None
    unit, stop = body
    return _object_blocks(path, stop, b",\n" + b" " * unit + b'"', not numbers)


def _object_body(f: BinaryIO, head: bytes, size: int) -> tuple[int, int] | None:
    """(the indent unit, where the closing ``\\n}`` is) of an indented JSON object whose file begins
    with ``head``, nothing but whitespace after that brace; None if it is not laid out so."""
    m = FIRST_KEY.match(head)
    stop = _last(f, size, b"\n}", 1)
    if m is None or stop < 0:
        return None
    f.seek(stop + 2)
    if f.read().strip(b" \t\r\n"):
        return None
    return len(m.group(1)), stop


def _object_blocks(path: Path, stop: int, boundary: bytes, short: bool) -> Iterator[dict[str, Any] | None]:
    try:
        with open(path, "rb") as f:
            for _, block in _blocks(f, 1, stop, boundary):
                try:
                    value = loads(b"{" + block + b"}", short)
                except ValueError:
                    value = None
                yield value if value.__class__ is dict and len(value) == block.count(boundary) + 1 else None
    except OSError:  # (the caller reads the file otherwise, for its error)
        yield None


def _last(f: BinaryIO, size: int, token: bytes, after: int) -> int:
    """Where ``token`` last begins at or after ``after``, or -1."""
    hi = size
    while hi > after:
        lo = max(after, hi - _EDGE_BYTES)
        f.seek(lo)
        at = f.read(min(hi + len(token) - 1, size) - lo).rfind(token)
        if at >= 0:
            return lo + at
        hi = lo
    return -1


def _blocks(f: BinaryIO, lo: int, hi: int, boundary: bytes) -> Iterator[tuple[int, bytes]]:
    """``(offset, text)`` blocks of the file's ``[lo, hi)``, each but the last ending at the ``,`` that
    ends an entry (the ``,`` in no block); a block grows until it holds an entry's end."""
    line = re.compile(re.escape(boundary[1:-1]) + NAME)
    f.seek(lo)
    carry = b""
    while lo < hi:
        grow = max(BLOCK_BYTES, len(carry))  # (doubles the block of an entry longer than it)
        text = carry + f.read(min(grow, hi - lo - len(carry)))
        if lo + len(text) >= hi:
            yield lo, text
            return
        cut = text.rfind(boundary)
        while cut > 0 and line.match(text, cut + 1) is None:  # a name cut by the block's end
            cut = text.rfind(boundary, 0, cut)
        if cut <= 0:  # an entry longer than the block
            carry = text
            continue
        yield lo, text[:cut]
        carry = text[cut + 1 :]
        lo += cut + 1


def _add_block(
    index: EntryIndex,
    hashes: set[int],
    base: int,
    text: bytes,
    indent: int,
    lo: int = 0,
    hi: int | None = None,
    find: FindEntries | None = None,
) -> bool:
    """Add a block's entries to ``index`` (False: the block is not laid out as ``scan_entries`` wants,
    or a name was seen before)."""
    spans: SpanMap = {}
    small: dict[str, Any] = {}
    heads: list[int] = []
    if not scan_entries(text, lo, len(text) if hi is None else hi, indent, spans, small, heads, find):
        return False
    before = len(hashes)
    hashes.update(map(hash, spans))
    if len(hashes) - before != len(spans):  # a name given twice (or, rarely, two names of one hash)
        return False
    at = spans.values()
    index.starts.extend(map(add, map(itemgetter(0), at), repeat(base)))
    index.ends.extend(map(add, map(itemgetter(1), at), repeat(base)))
    index.one_line.extend(map(small.__contains__, spans))
    index.heads.extend(map(add, heads, repeat(base)))
    return True


def read_entries(path: Path, index: EntryIndex) -> list[tuple[str, Any]]:
    """The (name, value) of the indexed entries, read from their span of dump.json (a DumpError names
    dump.json if an entry is not valid JSON)."""
    text, spans = read_spans(path, index)
    return parse_spans(path, text, spans)


_FEW_SPANS = 64
Span = tuple[str, int, int, int]
"""An entry's name, where its value starts and ends in the text read, and whether it is one line."""


def read_spans(path: Path, index: EntryIndex) -> tuple[bytes, list[Span]]:
    """The text of the indexed entries (from the first one's name) and each one's span in it."""
    lo, text, names = _read(path, index, index.ends)
    starts, ends = (array("q", (x - lo for x in xs)) for xs in (index.starts, index.ends))
    return text, list(zip(names, starts, ends, index.one_line))


def parse_spans(path: Path, text: bytes, spans: list[Span]) -> list[tuple[str, Any]]:
    """The (name, value) of these spans of ``text`` (a DumpError names dump.json if an entry is not
    valid JSON)."""
    entries = []
    whole: dict[str, Any] | None = None
    # (looked for once in the text, not in each entry's; for a few spans of a long text, in each one's)
    short = len(spans) > _FEW_SPANS and not has_long_integer(text)
    for name, start, end, one_line in spans:
        span = text[start:end]
        try:
            entries.append((name, json.loads(span.decode("utf-8")) if one_line else loads(span, short)))
        except ValueError:  # raises the file's own DumpError, or (the scan misread it) gives the entry
            whole = whole if whole is not None else read_whole_dump_doc(path)[1]
            entries.append((name, whole[name]))
    return entries


def read_object(path: Path, index: EntryIndex) -> dict[str, Any] | None:
    """The indexed entries, consecutive in the file and each name once (``index_object``'s), parsed at
    once as one JSON object: {name: value} in file order, as ``read_entries`` gives them; None if that
    text does not parse (``read_entries`` then finds the entry at fault). A chunk of 50,000 stack.json
    entries in one parse rather than one an entry: see stack_pieces.read_stack."""
    if not len(index):
        return {}
    lo, hi = index.heads[0], index.ends[-1]
    with open(path, "rb") as f:
        f.seek(lo)
        text = f.read(hi - lo)
    try:
        value = loads(b"{" + text + b"}")
    except ValueError:
        return None
    return value if value.__class__ is dict and len(value) == len(index) else None


def read_names(path: Path, index: EntryIndex) -> list[str]:
    """The names of the indexed entries."""
    return _read(path, index, index.starts)[2]


def _read(path: Path, index: EntryIndex, until: array[int]) -> tuple[int, bytes, list[str]]:
    """(where the text begins, dump.json's text from the first entry's name to ``until``'s last offset,
    the entries' names)."""
    if not len(index):
        return 0, b"", []
    lo = index.heads[0]
    with open(path, "rb") as f:
        f.seek(lo)
        text = f.read(until[-1] - lo)
    raw = [text[h + 1 - lo : s - 3 - lo] for h, s in zip(index.heads, index.starts)]  # between the quotes
    names = entry_names(raw)
    assert names is not None, "the scan decoded these names"
    return lo, text, names
