"""The C scan of dump.json's data body (graph/csrc/entry_scan.c, ``native.entry_lines``) finds the
entries that dump/entries.py's ``entry_lines`` finds, and refuses the layouts it refuses: on every
dump.json of tests/data, on random edits of them and of drawn documents near the lines the scan reads,
and on the layouts test_entries.py pins. Without the C code graph_visualize reads the entries by the
Python function (``dump_files.find_entries``)."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from msprobe_dask.dump.entries import SPAN_SHIFT, DumpEntries
from msprobe_dask.dump.entries_scan import FIRST_KEY, EntryLines, entry_lines, entry_spans, escaped_name
from msprobe_dask.dump.entry_index import read_dump_doc
from msprobe_dask.graph import dump_files, speedups

NATIVE = speedups.native
needs_native = pytest.mark.skipif(NATIVE is None, reason="the C extension is not built")
DATA = Path(__file__).resolve().parents[1] / "data"
DUMPS = sorted(DATA.rglob("dump.json"))
PIECES = [b"{", b"}", b"[", b"]", b",", b'"', b"\\", b"\n", b" ", b"\t", b": ", b"\x01", b"\x1f", b"\xc3\xa9"]


def _body(text: bytes) -> tuple[int, int, int] | None:
    """(lo, hi, indent) of data's body as dump/entry_index.py's scan reads it, or None."""
    m = FIRST_KEY.match(text)
    if m is None:
        return None
    unit = len(m.group(1))
    at = text.find(b"\n" + b" " * unit + b'"data": ')
    if at < 0:
        return None
    start = at + unit + 9
    stop = text.rfind(b"\n" + b" " * unit + b"}", start)
    if stop <= start + 1:
        return None
    return start + 1, stop, 2 * unit


def _both(text: bytes, lo: int, hi: int, indent: int) -> tuple[EntryLines | None, Any]:
    found = NATIVE.entry_lines(text, lo, hi, indent)  # type: ignore[union-attr]
    python = entry_lines(text, lo, hi, indent)
    _spans_alike(text, lo, hi, indent)
    return python, None if found is None else EntryLines(*found)


def _spans_alike(text: bytes, lo: int, hi: int, indent: int) -> None:
    """The C entry_spans adds what the Python one adds and gives the same one-line entries, packed or
    not, moved or not, into an empty map and into one that already holds some of the names (None for
    both: what they added then is left to no one); a name not UTF-8 refused by both alike."""
    try:
        entry_spans(text, lo, hi, indent, 0, -1, {})
    except UnicodeDecodeError:
        with pytest.raises(UnicodeDecodeError):
            NATIVE.entry_spans(text, lo, hi, indent, 0, -1, {}, escaped_name)  # type: ignore[union-attr]
        return
    for base, shift in ((0, -1), (7, -1), (0, SPAN_SHIFT), (3 << 33, SPAN_SHIFT), (5, 2)):
        held: dict[str, Any] = {}
        entry_spans(text, lo, hi, indent, base, shift, held)
        for before in ({}, dict(list(held.items())[1::2])):
            python, c = dict(before), dict(before)
            args = (text, lo, hi, indent, base, shift)
            one_line = NATIVE.entry_spans(*args, c, escaped_name)  # type: ignore[union-attr]
            assert one_line == entry_spans(*args, python)
            assert one_line is None or (c == python and list(c) == list(python))


def _edited(base: bytes, rng: random.Random, near: list[int]) -> bytes:
    text = bytearray(base)
    for _ in range(rng.randint(1, 3)):
        at = (
            rng.choice(near) + rng.randint(-3, 6) if near and rng.random() < 0.7 else rng.randrange(len(base))
        )
        at = max(0, min(at, len(text)))
        if rng.random() < 0.5:
            text[at : at + rng.randint(1, 2)] = b""
        else:
            text[at:at] = rng.choice(PIECES)
    return bytes(text)


def _check_edits(base: bytes, rng: random.Random, n: int) -> int:
    """C and Python alike on ``n`` edits of ``base`` near its shallow lines; how many were taken."""
    near = [m.start() for m in re.finditer(rb"\n {0,5}[^ ]", base)]
    taken = 0
    for _ in range(n):
        text = _edited(base, rng, near)
        body = _body(text)
        if body is None:
            continue
        python, c = _both(text, *body)
        assert c == python, text
        taken += python is not None
        # other bounds and indents than the body's
        lo, hi, indent = body
        for args in ((lo, rng.randint(lo + 1, len(text)), indent), (lo, hi, indent + rng.choice((-1, 1)))):
            if args[2] >= 0:
                assert _both(text, *args)[1] == _both(text, *args)[0]
    return taken


@needs_native
@pytest.mark.parametrize("path", DUMPS, ids=[str(p.relative_to(DATA)) for p in DUMPS])
def test_every_dump_of_tests_data_is_read_alike(path: Path) -> None:
    text = path.read_bytes()
    body = _body(text)
    if body is None:
        pytest.skip("not an indented dump.json")
    python, c = _both(text, *body)
    assert c == python
    _check_edits(text[:200_000] if len(text) > 200_000 else text, random.Random(str(path)), 40)


@needs_native
def test_edited_layouts_are_refused_alike() -> None:
    """Random edits (a bracket, a comma, a quote, an escape, a newline or a space put in or taken out)
    of dumps in indents 1, 2 and 4: both take the same ones, with the same entries."""
    doc = {
        "task": "statistics",
        "data": {
            "a.0.forward": {"input_args": [{"type": "int", "value": 1}, None], "output": [{"x": [1, {}]}]},
            "one.line": 3,
            'esc"aped\\name': [1],
            "nested": {"a": {"b": [1, {"c": "{[}"}]}},
            "empty": {},
            "list": [[], [{}]],
        },
    }
    rng = random.Random(16)
    taken = sum(_check_edits(json.dumps(doc, indent=i).encode(), rng, 1500) for i in (1, 2, 4))
    assert taken > 300  # (most edits far from the entries' lines keep the layout)


@needs_native
def test_the_layouts_test_entries_pins_are_refused_alike() -> None:
    for text in (
        b'{\n "data": {\n  "k": {\n   "p": {\n  },\n  "x": {\n   "q": 1}\n  }\n }\n}',  # braces unbalanced
        b'{\n "data": {\n  "k": {\n "a": 1\n  }\n }\n}',  # a line indented less
        b'{\n "data": {\n  "a": {\n  "x": 1\n  },\n  "b": 2\n }\n}',  # a key line without a ","
        b'{\n "data": {\n  "a": 1,\n  "b": 2,\n  "a": {\n   "x": 3\n  }\n }\n}',  # a name twice
        b'{\n "data": {\n  "a\\u00e9": [\n   1\n  ],\n  "b": "x"\n }\n}',
        b'{\n "data": {\n  "a": [\n   1\n  }\n }\n}',  # closed by the other bracket
        b'{\n "data": {\n  "a\xa9": [\n   1\n  ],\n  "b": "x"\n }\n}',  # a name not UTF-8
        b'{\n "data": {\n  "\\ud800\xa9": [\n   1\n  ],\n  "b": "x"\n }\n}',  # and with an escape
    ):
        body = _body(text)
        assert body is not None
        python, c = _both(text, *body)
        assert c == python, text


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)


@needs_native
@settings(max_examples=150, deadline=None)
@given(
    st.dictionaries(st.text(min_size=1, max_size=8), json_values, min_size=1, max_size=6),
    st.sampled_from([1, 2, 3]),
    st.integers(0, 2**32),
)
def test_drawn_documents_and_their_edits_are_read_alike(data: dict[str, Any], indent: int, seed: int) -> None:
    base = json.dumps({"task": "statistics", "data": data}, indent=indent).encode()
    body = _body(base)
    assert body is not None
    python, c = _both(base, *body)
    assert c == python
    _check_edits(base, random.Random(seed), 20)


def test_graph_visualize_reads_the_entries_alike_without_the_c_code(monkeypatch: pytest.MonkeyPatch) -> None:
    path = DATA / "transformer_big" / "target" / "dump.json"
    header, data = read_dump_doc(path, dump_files.find_entries)
    monkeypatch.setattr(speedups, "native", None)
    header_py, data_py = read_dump_doc(path, dump_files.find_entries)
    assert isinstance(data, DumpEntries) and isinstance(data_py, DumpEntries)
    assert header == header_py and data.span_texts(data) == data_py.span_texts(data_py)


@needs_native
@given(st.binary(max_size=200), st.lists(st.binary(max_size=6), max_size=5))
@settings(max_examples=300, deadline=None)
def test_the_tokens_a_text_holds_are_found_as_bytes_find_them(text: bytes, tokens: list[bytes]) -> None:
    tokens += [text[i : i + 4] for i in range(0, len(text), 50)]  # some that it holds
    assert NATIVE.mentions(text, tuple(tokens)) == tuple(token in text for token in tokens)
    quoted = b'"'.join((text, *tokens))  # tokens that all begin with one byte: one pass
    keys = tuple(b'"' + token for token in tokens)
    assert NATIVE.mentions(quoted, keys) == tuple(key in quoted for key in keys)


@needs_native
def test_a_lazily_read_dump_json_knows_the_tokens_a_build_asks_for() -> None:
    path = DATA / "transformer_big" / "target" / "dump.json"
    data = dump_files.load_dump_doc(path, lazy=True)[1]
    assert isinstance(data, DumpEntries)
    text = path.read_bytes()
    for token in dump_files.TOKENS:
        assert data._mentioned[token] == (token in text)
