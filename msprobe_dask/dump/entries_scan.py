"""Where each entry of an indented dump.json lies: the scan of its bytes that ``DumpEntries`` reads its
entries by (see dump/entries.py's module text for the layout it relies on and what it gives up on),
the file's header and entry names read without a full parse."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from itertools import compress, repeat
from operator import add, lshift, not_, or_, sub
from sys import intern
from typing import Any, NamedTuple

from msprobe_dask.dump.entries import SPAN_SHIFT, SpanMap

FIRST_KEY = re.compile(rb'\{\n( +)"')


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
OneLine = list[tuple[str, int, int]]
"""The entries whose value is on one line: (name, where its value starts and ends in the text)."""
AddSpans = Callable[
    [bytes, int, int, int, int, int, SpanMap, Callable[[bytes], "str | None"]], "OneLine | None"
]
"""``entry_spans`` without ``find`` and ``heads``, or a function doing what it does
(graph/csrc/entry_scan.c), given ``escaped_name`` for the names it does not decode itself."""


def scan_entries(
    text: bytes,
    lo: int,
    hi: int,
    indent: int,
    spans: SpanMap,
    small: dict[str, Any],
    heads: list[int] | None = None,
    find: FindEntries | None = None,
    base: int = 0,
    compact: bool = False,
    add_spans: AddSpans | None = None,
) -> bool:
    """Add to ``spans`` (and ``small``) the entries of ``text[lo:hi]``, data's body
    (``\n<indent spaces>"name": value,`` ...), each span moved by ``base`` (where ``text`` is in the
    file), and to ``heads`` (if given) where each one's name begins (its quote), in order; False if the
    body is not laid out so, or a name is one ``spans`` holds. The entries are found by ``find``
    (``entry_lines`` if not given) and added by ``entry_spans``, or, without ``heads``, by ``add_spans`` if
    given; the one-line values parsed here. ``compact`` (a
    file too big to be held): the names are interned (sys.intern), so that the names of a rank's other
    side and its graphs' node ids can be these strings rather than copies (one rank of 200,200 entries
    a side: 30 MiB less), and each span is one int, its start shifted left by SPAN_SHIFT bits and its
    length (a tuple of two ints costs 84 bytes more: 32 MiB at 200,200 entries a side)."""
    if lo == hi:
        return True
    shift = SPAN_SHIFT if compact else -1
    if add_spans is not None and heads is None:
        one_line = add_spans(text, lo, hi, indent, base, shift, spans, escaped_name)
    else:
        one_line = entry_spans(text, lo, hi, indent, base, shift, spans, find, heads)
    return one_line is not None and _parse_one_line(text, one_line, small)


def entry_spans(
    text: bytes,
    lo: int,
    hi: int,
    indent: int,
    base: int,
    shift: int,
    spans: SpanMap,
    find: FindEntries | None = None,
    heads: list[int] | None = None,
) -> OneLine | None:
    """Add to ``spans`` the entries of ``text[lo:hi]`` (found by ``find``, ``entry_lines`` if not given),
    each span moved by ``base``: a (start, end) tuple, or (``shift`` >= 0) the name interned and the span
    one int, ``start << shift | length``; to ``heads`` (if given) where each one's name begins. The
    one-line entries (their spans in ``text``), or None if the body is not laid out so, a name does not
    decode, or a name is one ``spans`` holds (some entries may have been added)."""
    found = (find or entry_lines)(text, lo, hi, indent)
    if found is None:
        return None
    names = entry_names(found.names)
    if names is None:
        return None
    starts = list(map(add, found.starts, repeat(base)))
    if shift >= 0:
        names = list(map(intern, names))
        values: Iterable[Any] = map(
            or_, map(lshift, starts, repeat(shift)), map(sub, found.ends, found.starts)
        )
    else:
        values = zip(starts, map(add, found.ends, repeat(base)))
    before = len(spans)
    spans.update(zip(names, values))
    if len(spans) - before != len(names):  # a name given twice: json keeps the last value, the scan the first
        return None
    if heads is not None:
        heads.extend(found.heads)
    return list(compress(zip(names, found.starts, found.ends), map(not_, found.opens)))


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


def _parse_one_line(text: bytes, one_line: OneLine, small: dict[str, Any]) -> bool:
    """Parse the one-line values into ``small``, to check them: False if one is not JSON."""
    for name, start, end in one_line:
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
        decoded = [escaped_name(r) if b"\\" in r else n for r, n in zip(raw, names)]
        if None in decoded:
            return None
        names = decoded  # type: ignore[assignment]
    return names


def escaped_name(raw: bytes) -> str | None:
    """The name whose JSON text (between the quotes) is ``raw``, which holds an escape; None if invalid.
    Not UTF-8: UnicodeDecodeError, as for a name without an escape (entry_names)."""
    try:
        return json.loads(b'"' + raw + b'"')  # type: ignore[no-any-return]
    except UnicodeDecodeError:
        raise
    except ValueError:
        return None


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
