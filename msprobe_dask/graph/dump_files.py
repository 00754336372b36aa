"""One graph's dump folder: where its construct.json, dump.json and stack.json are (``GraphSource``),
and how each is read and checked for a build (graph_visualize.md §1.1, §2.1-§2.3)."""

from __future__ import annotations

import mmap
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from msprobe_dask.dump.confine import check_dump_file
from msprobe_dask.dump.entries import read_whole_dump_doc
from msprobe_dask.dump.entries_scan import EntryLines, entry_lines
from msprobe_dask.dump.entry_index import MD5_TOKEN, read_dump_doc
from msprobe_dask.dump.entry_shape import WRONG_SHAPE_IN_TEXT
from msprobe_dask.errors import DumpError
from msprobe_dask.graph import speedups

# what a build asks of a lazily read dump.json's text (build_graph, check_entries): looked for at once
TOKENS = (MD5_TOKEN, *WRONG_SHAPE_IN_TEXT)


class GraphSource(NamedTuple):
    """Where one graph's three JSON files are, and where it goes in the db."""

    folder: str
    step: int = 0
    rank: int = 0

    @property
    def construct_json(self) -> Path:
        return Path(self.folder) / "construct.json"

    @property
    def dump_json(self) -> Path:
        return Path(self.folder) / "dump.json"

    @property
    def stack_json(self) -> Path:
        return Path(self.folder) / "stack.json"


def check_graph_file(path: Path) -> None:
    check_dump_file(path)
    if not path.is_file():
        raise DumpError(
            path, "does not exist (graph_visualize needs construct.json, dump.json and stack.json)"
        )


def load_dump_doc(path: Path, lazy: bool = False) -> tuple[dict[str, Any], Mapping[str, Any]]:
    """(header, data) of dump.json. ``lazy``: data's entries are read from the file and parsed when
    looked up (see dump/entries.py), so that a build without items parses none of them; whether its
    text holds each of ``TOKENS`` is looked for as it is scanned, by the C code where it is built (which
    also adds the entries' names and spans: csrc/entry_scan.c's entry_spans)."""
    if not lazy:
        return read_whole_dump_doc(path)
    native = speedups.native
    if native is None:
        return read_dump_doc(path, find_entries, TOKENS)
    return read_dump_doc(path, find_entries, TOKENS, native.mentions, native.entry_spans)


def find_entries(text: bytes, lo: int, hi: int, indent: int) -> EntryLines | None:
    """dump/entries_scan.py's entry_lines, by the C code (csrc/entry_scan.c) where it is built: the chunk
    tasks then make the entries' items from their spans in C too (node_items.parse_items)."""
    native = speedups.native
    if native is None:
        return entry_lines(text, lo, hi, indent)
    found = native.entry_lines(text, lo, hi, indent)
    return None if found is None else EntryLines(*found)


def mentions(path: Path, token: bytes) -> bool:
    """Whether the file's bytes contain ``token`` (a quick scan that lets callers skip a walk of the
    parsed document)."""
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        return m.find(token) != -1


def graph_data_path(doc: Mapping[str, Any], construct_json: Path) -> str | None:
    d = doc.get("dump_data_dir", "")
    real = os.path.realpath(construct_json)
    if d and os.path.dirname(d) != os.path.dirname(real):
        return os.path.join(os.path.dirname(real), "dump_tensor_data")
    return d
