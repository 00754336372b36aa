"""dump/entries.py: a dump.json read lazily gives what json.load gives, or falls back to it."""

from __future__ import annotations

import json
import pickle
import random
import re
import threading
from pathlib import Path
from typing import Any

import pytest

from msprobe_dask.dump import entry_index
from msprobe_dask.dump.entries import DumpEntries
from msprobe_dask.dump.entry_index import read_dump_doc
from msprobe_dask.errors import DumpError
from msprobe_dask.graph import speedups  # (node_items: the C reader configured)
from msprobe_dask.graph.dump_files import find_entries

DATA = Path(__file__).resolve().parents[1] / "data"
CORPUS = sorted(DATA.glob("**/dump.json"))


@pytest.fixture(autouse=True)
def _read_by_spans(monkeypatch: pytest.MonkeyPatch) -> None:
    """The entries of these (small) files are read span by span from the file, as a big dump's are
    (``_check`` compares the text held with them)."""
    monkeypatch.setattr(entry_index, "HOLD_BYTES", 0)


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON texts (NaN equals NaN, key order counts)."""
    return json.dumps(a) == json.dumps(b)


def _check(path: Path, lazy: bool) -> None:
    header, data = read_dump_doc(path)
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert isinstance(data, DumpEntries) is lazy
    assert _same(header, {k: v for k, v in doc.items() if k != "data"})
    want = doc["data"]
    assert list(data) == list(want) and len(data) == len(want)
    assert _same(dict(data.items()), want)
    assert _same(list(data.values()), list(want.values()))
    for name in want:
        assert name in data and _same(data[name], want[name]) and _same(data.get(name), want[name])
    assert "no such entry" not in data and data.get("no such entry") is None
    with pytest.raises(KeyError):
        data["no such entry"]
    text = path.read_bytes()
    # (a big file's spans are packed into ints: DumpEntries.span gives them as a held file's are)
    spans = ({n: data.span(n) for n in data}, data._small) if isinstance(data, DumpEntries) else None
    if isinstance(data, DumpEntries):  # the entries' texts read by span: every other one, or all
        for names in (list(want)[::2], list(want)):
            found = data.span_texts(names)
            assert found is not None and list(found[0]) == sorted(names, key=data.span)
            assert all(found[2][s:e] == text[slice(*data.span(n))] for n, (s, e) in found[0].items())
            assert found[1] == {n: v for n, v in data._small.items() if n in names}
            # each entry (and a name that is none) parsed from the texts read: what get gives
            for name in [*want, "no such entry"]:
                assert _same(data.get_in(found, name), want.get(name))
        data.parse_each(list(want))
        with pytest.MonkeyPatch.context() as patch:  # a small file's text held: the same entries
            patch.setattr(entry_index, "HOLD_BYTES", len(text))
            held = read_dump_doc(path)[1]
        assert isinstance(held, DumpEntries) and spans is not None
        assert held.span_texts([]) == (spans[0], data._small, text)
        copy = pickle.loads(pickle.dumps(data))  # (a big file's DumpEntries sent to a worker)
        assert {n: copy.span(n) for n in copy} == spans[0] and _same(dict(copy.items()), want)
        assert _same(dict(held.items()), want) and pickle.loads(pickle.dumps(held))._text is None
    # the index read block by block (about 50 blocks) takes what the whole-text scan takes
    saved, entry_index.BLOCK_BYTES = entry_index.BLOCK_BYTES, len(text) // 50 + 1
    try:
        indexed = entry_index.index_dump(path)
        # compare's scan finds the entries in C (graph/csrc/entry_scan.c): the same index, or the same refusal
        in_c = entry_index.index_dump(path, find_entries)
    finally:
        entry_index.BLOCK_BYTES = saved
    assert (indexed is None) == (spans is None)
    assert _index_of(in_c) == _index_of(indexed)
    if indexed is not None and spans is not None:
        index = indexed[1]
        assert _same(indexed[0], header) and indexed[2] == (b'"md5"' in text)
        assert list(zip(index.starts, index.ends)) == list(spans[0].values())
        assert list(index.one_line) == [name in spans[1] for name in spans[0]]
        assert entry_index.read_names(path, index) == list(spans[0])


def _index_of(indexed: Any) -> Any:
    if indexed is None:
        return None
    header, index, md5 = indexed
    fields = (index.starts, index.ends, index.one_line, index.heads)
    return json.dumps(header), md5, [list(f) for f in fields]


def _indexed(path: Path, block: int) -> Any:
    """The header and entries (as JSON texts) of the index scan of ``path`` (blocks of ``block``
    bytes), or None where it refuses the layout."""
    saved, entry_index.BLOCK_BYTES = entry_index.BLOCK_BYTES, block
    try:
        found = entry_index.index_dump(path)
    finally:
        entry_index.BLOCK_BYTES = saved
    if found is None:
        return None
    header, index, _ = found
    lo = len(index) // 2
    read = entry_index.read_entries
    halves = read(path, index.cut(0, lo)) + read(path, index.cut(lo, len(index)))
    return json.dumps(header), json.dumps(halves)


def _write(tmp_path: Path, doc: Any, **kw: Any) -> Path:
    path = tmp_path / "dump.json"
    path.write_text(json.dumps(doc, **kw), encoding="utf-8")
    return path


def _entry(x: float) -> dict[str, Any]:
    tensor = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2, 3], "Max": x, "Min": -x}
    return {"input_args": [tensor, {"type": "int", "value": 3}], "input_kwargs": {}, "output": [tensor]}


DOC = {
    "task": "statistics",
    "level": "mix",
    "framework": "pytorch",
    "dump_data_dir": None,
    "data": {f"Module.layer.{i}.Linear.forward.0": _entry(i + 0.5) for i in range(5)},
}


@pytest.mark.parametrize("path", CORPUS, ids=[str(p.relative_to(DATA)) for p in CORPUS])
def test_corpus_files_are_read_lazily_and_equal_json_load(path: Path) -> None:
    _check(path, lazy=True)


@pytest.mark.parametrize("indent", [1, 2, 4])
def test_any_indent_of_spaces(tmp_path: Path, indent: int) -> None:
    _check(_write(tmp_path, DOC, indent=indent), lazy=True)


@pytest.mark.parametrize(
    "kw",
    [{}, {"indent": None, "separators": (",", ":")}, {"indent": "\t"}, {"indent": 0}],
    ids=["compact", "compact-tight", "tabs", "indent0"],
)
def test_other_layouts_fall_back_to_the_full_parse(tmp_path: Path, kw: dict[str, Any]) -> None:
    _check(_write(tmp_path, DOC, **kw), lazy=False)


def test_names_with_escapes_and_unicode(tmp_path: Path) -> None:
    names = ['a"b', "tab\there", "back\\slash", "x/y", "caf\u00e9", "snow\u2603", "smile\U0001f600", 'k": 1,']
    doc = {"task": "statistics", "data": {n: _entry(1.0) for n in names}}
    _check(_write(tmp_path, doc, indent=1), lazy=True)
    _check(_write(tmp_path, doc, indent=1, ensure_ascii=False), lazy=True)


def test_nan_and_infinity(tmp_path: Path) -> None:
    doc = {
        "task": "statistics",
        "data": {"a": _entry(float("nan")), "b": _entry(float("inf")), "c": _entry(0)},
    }
    path = _write(tmp_path, doc, indent=1)
    _check(path, lazy=True)
    assert read_dump_doc(path)[1]["b"]["output"][0]["Min"] == float("-inf")


def test_empty_data(tmp_path: Path) -> None:
    _check(_write(tmp_path, {"task": "statistics", "data": {}, "level": "L1"}, indent=1), lazy=True)
    path = tmp_path / "dump.json"
    path.write_text('{\n "task": "tensor",\n "data": {\n }\n}')
    _check(path, lazy=True)


def test_one_line_values_and_fields_after_data(tmp_path: Path) -> None:
    doc = {
        "task": "statistics",
        "meta": {"nested": {"a": [1, 2]}, "b": "x"},
        "data": {"a": {}, "b": [], "c": None, "d": "text", "e": 1.5, "f": _entry(2.0), "g": [1, [2, {}]]},
        "after": 3,
    }
    _check(_write(tmp_path, doc, indent=1), lazy=True)
    doc["after"] = {"x": {"y": 1}}  # a multi-line field after data: its last line ends the scan's data
    _check(_write(tmp_path, doc, indent=1), lazy=False)


def test_strings_that_look_like_entry_lines(tmp_path: Path) -> None:
    tricky = '\n  "Fake.entry": {\n  },\n  "x": '
    entry = _entry(1.0) | {"input_kwargs": {"s": {"type": "str", "value": tricky}, "b": {"value": "}{]["}}}
    doc = {"task": "statistics", "data": {"a": entry, tricky: entry, "b": {"value": tricky}}}
    _check(_write(tmp_path, doc, indent=1), lazy=True)


def test_nested_values(tmp_path: Path) -> None:
    deep: Any = {"leaf": [1, 2.5, None, True, "s"]}
    for i in range(12):
        deep = {f"level{i}": [deep, {"k": {}}, []]}
    doc = {"task": "statistics", "data": {"a": deep, "b": _entry(1.0), "c": [deep, deep]}}
    _check(_write(tmp_path, doc, indent=1), lazy=True)


def test_duplicate_names_fall_back(tmp_path: Path) -> None:
    path = tmp_path / "dump.json"
    path.write_text(
        '{\n "task": "statistics",\n "data": {\n  "a": 1,\n  "b": 2,\n  "a": {\n   "x": 3\n  }\n }\n}'
    )
    header, data = read_dump_doc(path)
    assert not isinstance(data, DumpEntries) and list(data) == ["a", "b"] and data["a"] == {"x": 3}
    assert _indexed(path, 1) is None  # the two "a" in two blocks of the index scan
    path.write_text('{\n "data": {\n  "a": 1\n },\n "data": {}\n}')  # json keeps the last data
    assert read_dump_doc(path)[1] == {}


def test_misleading_indentation_falls_back(tmp_path: Path) -> None:
    """A nested key indented like an entry: the brackets of the entries' texts do not balance."""
    path = tmp_path / "dump.json"
    path.write_text('{\n "data": {\n  "k": {\n   "p": {\n  },\n  "x": {\n   "q": 1}\n  }\n }\n}')
    header, data = read_dump_doc(path)
    assert not isinstance(data, DumpEntries) and data == {"k": {"p": {}, "x": {"q": 1}}}
    path.write_text('{\n "data": {\n  "k": {\n "a": 1\n  }\n }\n}')  # a line indented less
    assert not isinstance(read_dump_doc(path)[1], DumpEntries)


def test_an_entry_line_without_a_comma_before_it_falls_back(tmp_path: Path) -> None:
    """A nested key indented like an entry right after its object's "{": the scan finds entries after
    a ",", so the line is one more shallow line than entries and closes, and the file is parsed whole."""
    path = tmp_path / "dump.json"
    path.write_text('{\n "data": {\n  "a": {\n  "x": 1\n  },\n  "b": 2\n }\n}')
    header, data = read_dump_doc(path)
    assert not isinstance(data, DumpEntries) and data == {"a": {"x": 1}, "b": 2}


def test_crlf_falls_back(tmp_path: Path) -> None:
    path = tmp_path / "dump.json"
    path.write_bytes(json.dumps(DOC, indent=1).replace("\n", "\r\n").encode())
    _check(path, lazy=False)


def test_truncated_file_is_the_usual_error(tmp_path: Path) -> None:
    text = json.dumps(DOC, indent=1)
    path = tmp_path / "dump.json"
    for cut in (len(text) // 2, len(text) - 1, len(text) - 3):
        path.write_text(text[:cut])
        with pytest.raises(DumpError, match="dump.json: is not valid JSON"):
            read_dump_doc(path)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "is empty"),
        ("[1]", "top level must be a JSON object"),
        ('{\n "data": [\n  1\n ]\n}', "has no 'data' mapping"),
        ('{\n "task": "statistics"\n}', "has no 'data' mapping"),
        ('{\n "data": {\n  "a": 1\n  "b": 2\n }\n}', "dump.json: is not valid JSON"),  # no comma
        ('{\n "data": {\n  "a\\\\m": 1,\n  "b\\m": 2\n }\n}', "dump.json: is not valid JSON"),  # "\m"
    ],
)
def test_not_a_dump(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "dump.json"
    path.write_text(text)
    with pytest.raises(DumpError, match=problem):
        read_dump_doc(path)


def test_missing_file_and_bad_utf8(tmp_path: Path) -> None:
    with pytest.raises(DumpError, match="does not exist"):
        read_dump_doc(tmp_path / "dump.json")
    path = _write(tmp_path, DOC, indent=1)
    path.write_bytes(path.read_bytes().replace(b"torch.float32", b"torch.\xfeloat32"))
    with pytest.raises(DumpError, match="cannot be read"):
        read_dump_doc(path)


def test_an_entry_that_does_not_parse_raises_when_looked_up(tmp_path: Path) -> None:
    path = _write(tmp_path, DOC, indent=1)
    name = list(DOC["data"])[2]
    path.write_text(path.read_text().replace('"Max": 2.5', '"Max": 2.5.1'))
    _, data = read_dump_doc(path)  # the scan does not parse the entries
    assert isinstance(data, DumpEntries) and list(data) == list(DOC["data"])
    assert data[list(DOC["data"])[1]] == DOC["data"][list(DOC["data"])[1]]
    with pytest.raises(DumpError, match=r"dump.json: is not valid JSON .*: line \d+ column \d+"):
        data[name]
    with pytest.raises(DumpError):
        data.get(name)
    found = data.span_texts(list(DOC["data"]))  # (read in one run, parsed one by one: the same error)
    assert found is not None and _same(
        data.get_in(found, list(DOC["data"])[1]), DOC["data"][list(DOC["data"])[1]]
    )
    doubtful = speedups.native.entries_to_parse if speedups.native is not None else None
    for parse in (
        lambda: data.get_in(found, name),
        lambda: data.parse_each(list(DOC["data"])),
        lambda: data.parse_each(list(DOC["data"]), doubtful),  # (the C reader's doubt: parsed)
    ):
        with pytest.raises(DumpError, match=r"dump.json: is not valid JSON .*: line \d+ column \d+"):
            parse()
    path.write_text(path.read_text().replace('"Max": 2.5.1', '"Max": 2.5'))
    with pytest.raises(DumpError, match="changed while the run was reading it"):
        data[name]  # the file mended is not the one scanned


def test_an_invalid_one_line_entry_is_refused_by_the_scan(tmp_path: Path) -> None:
    path = tmp_path / "dump.json"
    path.write_text('{\n "data": {\n  "a": {\n   "x": 1\n  },\n  "b": 1.2.3\n }\n}')
    with pytest.raises(DumpError, match="not valid JSON"):
        read_dump_doc(path)


def test_pickles_and_threads(tmp_path: Path) -> None:
    _, data = read_dump_doc(_write(tmp_path, DOC, indent=1))
    copy = pickle.loads(pickle.dumps(data))
    assert isinstance(copy, DumpEntries) and _same(dict(copy.items()), DOC["data"])
    results: list[bool] = []

    def look() -> None:
        results.append(all(_same(data[n], v) for n, v in DOC["data"].items() for _ in range(50)))

    threads = [threading.Thread(target=look) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [True] * 4


def test_pickled_entries_keep_their_text_and_what_they_know(tmp_path: Path) -> None:
    """Entries sent to another process (a graph pickled for a dask worker) read the same values and
    find any token in their text."""
    path = _write(tmp_path, DOC, indent=1)
    header, entries = read_dump_doc(path)
    assert isinstance(entries, DumpEntries) and not entries.mentions(b'"md5"')
    copy = pickle.loads(pickle.dumps(entries))
    assert dict(copy) == dict(entries)
    assert copy.mentions(b'"Min"') and not copy.mentions(b'"md5"')


def _lazy(path: Path, text: bytes) -> DumpEntries | None:
    """The entries of ``text`` (written to ``path``) read by the scan, or None where it refuses the
    layout (the full parse then gives a dict, or refuses the text)."""
    path.write_bytes(text)
    try:
        data = read_dump_doc(path)[1]
    except DumpError:
        return None
    return data if isinstance(data, DumpEntries) else None


def _scanned(path: Path, text: bytes) -> Any:
    """The entries the scan of ``text`` takes, as a dict, or None where it refuses the layout (or an
    entry it took does not parse)."""
    lazy = _lazy(path, text)
    if lazy is None:
        return None
    try:
        return dict(lazy)
    except DumpError:
        return None


def test_the_scan_takes_only_what_json_reads_alike_on_edited_layouts(tmp_path: Path) -> None:
    """Random edits of indented dumps (a bracket, a comma, a quote, an escape, a newline or a space put
    in or taken out, near the lines the scan reads): where the scan takes the layout, its entries are
    the ones json reads from the whole text."""
    rng = random.Random(7)
    doc = {**DOC, "data": {**DOC["data"], "one.line": 3, "nested": {"a": {"b": [1, {}]}}}}
    escaped = {**doc, "data": {**doc["data"], 'esc"aped': [1]}}
    indents = (1, 2, 4, 1)
    bases = [json.dumps(d, indent=i).encode() for d, i in zip((doc, doc, doc, escaped), indents)]
    # where the edits go: around the lines of entries and the lines that close them (indented twice
    # at most), and anywhere
    near = {
        base: [m.start() for m in re.finditer(rb"\n {0,%d}[^ ]" % (2 * i + 1), base)]
        for base, i in zip(bases, indents)
    }
    for base in bases:
        assert _scanned(tmp_path / "dump.json", base) == json.loads(base)["data"]
    pieces = [b"{", b"}", b"[", b"]", b",", b'"', b"\\", b"\n", b" ", b"\t", b": ", b"\x01", b"\xc3\xa9"]
    taken = 0
    path = tmp_path / "dump.json"
    for _ in range(4000):
        base = rng.choice(bases)
        text = bytearray(base)
        for _ in range(rng.randint(1, 2)):
            at = (
                rng.choice(near[base]) + rng.randint(-3, 6)
                if rng.random() < 0.5
                else rng.randrange(len(base))
            )
            at = min(at, len(text))
            if rng.random() < 0.5:
                text[at : at + rng.randint(1, 2)] = b""
            else:
                text[at:at] = rng.choice(pieces)
        found = _scanned(path, bytes(text))
        if found is not None:
            assert found == json.loads(bytes(text))["data"]
            taken += 1
        if rng.random() > 0.1:
            continue
        # the index scan, in blocks of a few bytes, takes the layouts the scan in one block takes, and
        # their entries
        path.write_bytes(text)
        try:
            indexed = _indexed(path, rng.choice((1, 7, 1 << 20)))
        except DumpError:  # an entry that does not parse
            indexed = "taken"
        assert (indexed is None) == (_lazy(path, bytes(text)) is None)
        if found is not None:
            assert indexed[1] == json.dumps(list(found.items()))
    assert taken > 100  # (many edits keep the layout: inside values, or as json.dump would write)


def test_a_long_integer_anywhere_in_the_file_is_read_as_json_reads_it(tmp_path: Path) -> None:
    """The text is searched once for an integer of 19 digits or more (orjson would read it as a float):
    with one in a single entry, every entry is still json's, before and after pickling."""
    data = {
        "a.0.forward": {"input_args": [{"type": "int", "value": 12345678901234567890}]},
        "b.0.forward": {"input_args": [{"type": "float", "value": 0.1234567890123456789}]},
        "c.0.forward": {"input_args": [{"type": "int", "value": 7}]},
    }
    for doc in (data, {k: v for k, v in data.items() if k != "a.0.forward"}):
        path = tmp_path / "dump.json"
        path.write_text(json.dumps({"task": "statistics", "data": doc}, indent=1))
        _, lazy = read_dump_doc(path)
        assert isinstance(lazy, DumpEntries)
        for entries in (lazy, pickle.loads(pickle.dumps(lazy))):
            assert {k: entries[k] for k in doc} == doc
            assert all(
                type(entries[k]["input_args"][0]["value"]) is type(v["input_args"][0]["value"])
                for k, v in doc.items()
            )


def test_pickled_entries_carry_no_text(tmp_path: Path) -> None:
    """Entries pickle without the file's text (a graph sent to a dask worker: the worker reads the dump
    itself), and read the same values where they are loaded."""
    path = _write(tmp_path, DOC, indent=1)
    _, entries = read_dump_doc(path)
    pickled = pickle.dumps(entries)
    assert len(pickled) < path.stat().st_size / 2
    copy = pickle.loads(pickled)
    assert isinstance(copy, DumpEntries) and _same(dict(copy.items()), DOC["data"])


def test_entries_of_a_file_changed_since_it_was_scanned_fail(tmp_path: Path) -> None:
    """Nothing is read from a file that is not the one the entries were scanned from: a lookup, the
    entries' texts or a pickle loaded after the file changed (or went) name the file."""
    path = _write(tmp_path, DOC, indent=1)
    _, entries = read_dump_doc(path)
    assert isinstance(entries, DumpEntries)
    pickled = pickle.dumps(entries)
    _write(tmp_path, {**DOC, "data": {}}, indent=1)
    name = next(iter(DOC["data"]))
    for read in (lambda: pickle.loads(pickled), lambda: entries[name], lambda: entries.span_texts([name])):
        with pytest.raises(DumpError, match="changed while the run was reading it"):
            read()
    path.unlink()
    for read in (lambda: pickle.loads(pickled), lambda: entries[name]):
        with pytest.raises(DumpError, match="cannot be read again"):
            read()
