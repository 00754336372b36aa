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

import json
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from itertools import compress, repeat
from operator import not_, sub
from pathlib import Path
from typing import Any, NamedTuple

from msprobe_dask.dump.confine import check_dump_file
from msprobe_dask.dump.dumpjson import read_json
from msprobe_dask.dump.fastjson import has_long_integer, loads
from msprobe_dask.errors import DumpError

FIRST_KEY = re.compile(rb'\{\n( +)"')


class DumpEntries(Mapping[str, Any]):
    """dump.json's ``data``: entry names in file order, each entry parsed from its text on access.

    Behaves as the dict ``json.load`` would give (nothing is cached but the values of one-line entries,
    which the scan parses to check them). Pickles without its bytes while its file is as it was read
    (``stamp``): the process that loads it reads the file again (a graph sent to a dask worker, which
    can read the dump, as the task that built the graph did); else with them.
    """

    __slots__ = ("_path", "_text", "_spans", "_small", "_full", "_mentioned", "_short", "_stamp")

    def __init__(
        self,
        path: Path,
        text: bytes,
        spans: dict[str, tuple[int, int]],
        small: dict[str, Any],
        mentioned: dict[bytes, bool] | None = None,
        stamp: FileStamp | None = None,
    ) -> None:
        self._path = path
        self._text = text
        self._spans = spans  # entry name -> [start, end) of its value in text
        self._small = small  # values of one-line entries (parsed by the scan to check them)
        self._full: dict[str, Any] | None = None  # the full parse, once a span failed to parse
        self._mentioned = mentioned if mentioned is not None else {}  # token -> whether the text has it
        self._short: bool | None = None  # the text holds no long integer (fastjson), once looked for
        self._stamp = stamp  # the file's stamp when ``text`` was read from it (None: not read so)

    def __reduce__(self) -> tuple[Any, ...]:
        known = (self._spans, self._small, self._mentioned)
        if self._stamp is not None and file_stamp(self._path) == self._stamp:
            return (_read_again, (self._path, self._stamp, *known))
        return (DumpEntries, (self._path, self._text, *known))

    def __sizeof__(self) -> int:
        """About its size pickled: the text, and a guess for each entry's span."""
        return len(self._text) + 64 * len(self._spans)

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
        start, end = self._spans[key]
        short = self._short
        if short is None:  # (looked for once in the whole text, not in each entry's)
            short = self._short = not has_long_integer(self._text)
        try:
            return loads(self._text[start:end], short)
        except ValueError:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
            return self._fall_back()[key]

    def __repr__(self) -> str:
        return f"DumpEntries({str(self._path)!r}, {len(self)} entries)"

    def one_line_names(self) -> list[str]:
        """The entries written on one line (which the scan has parsed), or all once parsed whole."""
        return list(self._full if self._full is not None else self._small)

    def mentions(self, token: bytes) -> bool:
        """Whether the file's text holds ``token`` (a quick test that can spare a walk of the entries)."""
        found = self._mentioned.get(token)
        if found is None:
            found = self._mentioned[token] = token in self._text
        return found

    def note_mentions(self, found: Iterable[tuple[bytes, bool]]) -> None:
        """Take (token, whether the text holds it) found by a faster search than ``mentions``' own."""
        self._mentioned.update(found)

    def spans(self) -> tuple[dict[str, tuple[int, int]], dict[str, Any], bytes] | None:
        """(spans, one-line entries, text) while the entries are read by spans, else None."""
        return (self._spans, self._small, self._text) if self._full is None else None

    def _fall_back(self) -> dict[str, Any]:
        """Parse the whole file: raises its DumpError, or (the scan misread a valid file) gives data.

        No lock: two threads may both parse, harmlessly."""
        if self._full is None:
            data = read_json(self._path).get("data")
            if not isinstance(data, dict):
                raise DumpError(self._path, "has no 'data' mapping")
            self._full = data
        return self._full


FileStamp = tuple[int, int]
"""A file's size and modification time (ns): the file is taken to be unchanged while its stamp is (the
same on every machine that mounts a shared folder, unlike the device and inode numbers)."""


def file_stamp(path: Path) -> FileStamp | None:
    try:
        return _stamp(os.stat(path))
    except OSError:
        return None


def _stamp(st: os.stat_result) -> FileStamp:
    return (st.st_size, st.st_mtime_ns)


def _read_again(
    path: Path,
    stamp: FileStamp,
    spans: dict[str, tuple[int, int]],
    small: dict[str, Any],
    mentioned: dict[bytes, bool],
) -> DumpEntries:
    """Pickled DumpEntries loaded: their text read from their file again, which must be as it was."""
    try:
        with open(path, "rb") as f:
            text = f.read()
            now = _stamp(os.fstat(f.fileno()))
    except OSError as exc:
        raise DumpError(path, f"cannot be read again: {exc.strerror or exc}") from None
    if now != stamp or len(text) != stamp[0]:
        raise DumpError(path, "changed while the run was reading it")
    return DumpEntries(path, text, spans, small, mentioned, stamp)


def read_dump_doc(path: Path, find: FindEntries | None = None) -> tuple[dict[str, Any], Mapping[str, Any]]:
    """(header, data) of a dump.json: the header holds every top-level field but ``data``.

    ``data`` is a DumpEntries if the file has the indented layout, else the dict of the full parse;
    either way a DumpError names the file if it is not a JSON object with a ``data`` object.
    """
    check_dump_file(path)
    stamp = None
    try:
        with open(path, "rb") as f:
            text = f.read()
            stamp = _stamp(os.fstat(f.fileno()))
    except OSError:
        text = b""  # read_json below raises the usual error
    lazy = _scan(path, text, find, stamp) if text else None
    if lazy is not None:
        return lazy
    del text  # the full parse reads the file as text, for the usual errors
    return read_whole_dump_doc(path)


def read_whole_dump_doc(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(header, data) of a dump.json parsed whole."""
    doc = read_json(path)
    if not isinstance(doc, dict):
        raise DumpError(path, "top level must be a JSON object")
    data = doc.get("data")
    if not isinstance(data, dict):
        raise DumpError(path, "has no 'data' mapping")
    return {k: v for k, v in doc.items() if k != "data"}, data


def _scan(
    path: Path, text: bytes, find: FindEntries | None = None, stamp: FileStamp | None = None
) -> tuple[dict[str, Any], DumpEntries] | None:
    """The header and lazy entries of an indented dump.json, or None if ``text`` is laid out otherwise
    (or is not what the layout promises: the caller then parses it all). ``stamp``: the file's when
    ``text`` was read from it."""
    m = FIRST_KEY.match(text)
    if m is None or not is_utf8(text):
        return None
    unit = len(m.group(1))
    data_key = b"\n" + b" " * unit + b'"data": '  # a second one fails the checks below
    at = text.find(data_key)
    if at < 0:
        return None
    start = at + len(data_key)  # data's "{"
    spans: dict[str, tuple[int, int]] = {}
    small: dict[str, Any] = {}
    if text.startswith(b"{}", start):
        end = start + 2
    else:
        # data's last line: the file's last line of one unit starting with "}" (if a later field's is,
        # data's body holds lines of one unit and is refused)
        close = b"\n" + b" " * unit + b"}"
        stop = text.rfind(close, start)
        if stop < 0 or not text.startswith(b"{\n", start):
            return None
        end = stop + len(close)
        if not scan_entries(text, start + 1, stop, 2 * unit, spans, small, find=find):
            return None
    header = header_of(text[:start] + b"{}" + text[end:])
    if header is None:
        return None
    return header, DumpEntries(path, text, spans, small, stamp=stamp)


NAME = rb'"([^"\\\x00-\x1f]*(?:\\.[^"\\\x00-\x1f]*)*)": (?=([{\[])\n|)'  # a name without raw control
# characters, and the bracket the value opens if it opens one at the end of the line


class EntryLines(NamedTuple):
    """The entries found in data's body by ``entry_lines``, in order."""

    names: list[bytes]  # each name as written, between its quotes
    starts: list[int]  # where each value begins
    ends: list[int]  # where each ends: the "," before the next entry, or the body's end
    opens: list[bytes | None]  # b"{" or b"[" where the value opens one at the end of its first line
    heads: list[int]  # where each name begins (its quote)


FindEntries = Callable[[bytes, int, int, int], "EntryLines | None"]
"""``entry_lines``, or a function giving what it gives (graph/csrc/entry_scan.c)."""


def scan_entries(
    text: bytes,
    lo: int,
    hi: int,
    indent: int,
    spans: dict[str, tuple[int, int]],
    small: dict[str, Any],
    heads: list[int] | None = None,
    find: FindEntries | None = None,
) -> bool:
    """Fill ``spans`` (and ``small``) with the entries of ``text[lo:hi]``, data's body
    (``\n<indent spaces>"name": value,`` ...), and ``heads`` (if given) with where each one's name
    begins (its quote), in order; False if the body is not laid out so. The entries are found by
    ``find`` (``entry_lines`` if not given), the names read and the one-line values parsed here."""
    if lo == hi:
        return True
    found = (find or entry_lines)(text, lo, hi, indent)
    if found is None:
        return False
    names = entry_names(found.names)
    if names is None:
        return False
    spans.update(zip(names, zip(found.starts, found.ends)))
    if len(spans) != len(names):  # a name given twice: json keeps the last value, the scan the first
        return False
    if heads is not None:
        heads.extend(found.heads)
    return _parse_one_line(text, compress(names, map(not_, found.opens)), spans, small)


def entry_lines(text: bytes, lo: int, hi: int, indent: int) -> EntryLines | None:
    """The entries of ``text[lo:hi]``, data's body, or None if the body is not laid out as the scan
    wants (``lo < hi``).

    An entry's first line is indented ``indent`` spaces. A value that opens an object or array at the
    end of that line must close it at the start of its last line, indented alike, with as many "{" as
    "}" in between (in json.dump's output a nested key never starts a line so indented); every other
    line of the value is indented deeper. (A one-line value is parsed by the caller, to check it.)

    The checks are maps over the entries, not a Python loop: the scan costs a fraction of a parse.
    """
    pad = b"\n" + b" " * indent
    line = re.escape(pad) + NAME
    first = re.compile(line).match(text, lo)
    if first is None:
        return None
    # every later entry's line follows the "," that ends the value before it (an entry line without
    # it is not found, and fails the count of shallow lines below)
    firsts = [first, *re.compile(b"," + line).finditer(text, first.end(), hi)]
    starts = list(map(re.Match.end, firsts))
    ends = list(map(re.Match.start, firsts[1:]))  # the "," before the next entry
    ends.append(hi)
    names = list(map(re.Match.group, firsts, repeat(1)))
    opens = list(map(re.Match.group, firsts, repeat(2)))
    heads = list(map(sub, map(re.Match.start, firsts, repeat(1)), repeat(1)))
    del firsts
    m_starts = list(compress(starts, opens))
    m_ends = list(compress(ends, opens))
    closes = map({b"{": pad + b"}", b"[": pad + b"]"}.__getitem__, compress(opens, opens))
    count = text.count
    if not all(map(text.startswith, closes, map(sub, m_ends, repeat(indent + 2)))):
        return None
    if list(map(count, repeat(b"{"), m_starts, m_ends)) != list(map(count, repeat(b"}"), m_starts, m_ends)):
        return None
    # no line indented less than ``indent``, none indented so but the entries' first and last lines
    if count(b"\n", lo, hi) - count(pad + b" ", lo, hi) != len(names) + len(m_starts):
        return None
    return EntryLines(names, starts, ends, opens, heads)


def _parse_one_line(
    text: bytes, names: Iterable[str], spans: dict[str, tuple[int, int]], small: dict[str, Any]
) -> bool:
    """Parse the one-line values of ``names`` into ``small``, to check them: False if one is not JSON."""
    for name in names:
        start, end = spans[name]
        try:
            small[name] = json.loads(text[start:end].decode("utf-8"))
        except (ValueError, RecursionError):  # the whole parse names the problem
            return False
    return True


def entry_names(raw: list[bytes]) -> list[str] | None:
    """Entry names from their JSON text (between the quotes); None if one holds an invalid escape."""
    joined = b"\0".join(raw)  # names hold no raw control character
    names = joined.decode("utf-8").split("\0")
    if b"\\" in joined:
        try:
            names = [json.loads(b'"' + r + b'"') if b"\\" in r else n for r, n in zip(raw, names)]
        except ValueError:
            return None
    return names


def header_of(text: bytes) -> dict[str, Any] | None:
    """The top-level fields but data, parsed as json would, if ``text`` (the file with data's value
    replaced by ``{}``) is a JSON object naming data once."""
    tops: list[list[tuple[str, Any]]] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        tops.append(items)
        return dict(items)

    try:
        doc = json.loads(text.decode("utf-8"), object_pairs_hook=pairs)
    except (ValueError, RecursionError):
        return None
    if not isinstance(doc, dict) or not tops:
        return None
    if [k for k, _ in tops[-1]].count("data") != 1 or doc.get("data") != {}:
        return None
    return {k: v for k, v in doc.items() if k != "data"}


def is_utf8(text: bytes) -> bool:
    if text.isascii():
        return True
    try:
        text.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
