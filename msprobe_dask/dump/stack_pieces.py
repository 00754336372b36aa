"""stack.json's map of stacks (``dumpjson.load_stack``'s), parsed whole, or, where the file is big and
laid out for it, read block by block and parsed a chunk of entries at a time (``entry_index.index_object``
indexes its entries), each distinct stack kept once."""

from __future__ import annotations

import marshal
import os
from collections.abc import Collection, Iterable, Iterator
from itertools import islice
from pathlib import Path
from typing import Any

from msprobe_dask.dump import entry_index
from msprobe_dask.dump.dumpjson import group_stacks, load_stack
from msprobe_dask.dump.entries_scan import FindEntries
from msprobe_dask.dump.entry_index import (
    EntryIndex,
    index_object,
    read_entries,
    read_names,
    read_object,
    read_object_blocks,
)
from msprobe_dask.errors import DumpError

STACK_CHUNK = 50_000
"""stack.json entries parsed at once by ``read_stack``."""


def read_stack(
    path: Path,
    wanted: Collection[str] | None,
    shared: dict[Any, Any] | None = None,
    find: FindEntries | None = None,
) -> Iterator[dict[str, Any]] | None:
    """``dumpjson.load_stack``'s map for the ``wanted`` names (None: all), in pieces (one a chunk of
    entries: a later piece's name wins, as a later entry's does), stack.json read block by block and its
    entries parsed a chunk at a time, each distinct stack kept once (in a piece, or in all if ``shared``
    is given: its map of stacks by _stack_key); a stack.json of 1M groups parsed whole took
    1.1 GB, and its map whole 0.55 GB. None if the file is not laid out for it. A DumpError raised
    while the pieces are read: the file does not parse (the caller parses it whole, for its errors
    too). ``find`` finds its entries' lines (entry_index.index_object)."""
    index = index_object(path, find)
    if index is None:
        return None
    return _stack_pieces(path, index, wanted, shared)


def read_in_pieces(path: Path) -> bool:
    """Whether stack.json is big enough to be read in pieces (``read_stack``: more than a block,
    BLOCK_BYTES) rather than parsed whole, which is faster: a rank's stack.json of 35,751 groups
    (10 MB) split into its parts' stacks in 0.17 s parsed whole, 0.31 s in pieces."""
    try:
        return os.stat(path).st_size > entry_index.BLOCK_BYTES
    except OSError:
        return False  # (load_stack raises the usual error)


def read_stack_whole(path: Path) -> dict[str, Any]:
    """``dumpjson.load_stack``'s map, each distinct stack one object, as ``read_stack``'s pieces hold
    them (a reader prints each once: ``table.stack_cells``)."""
    return _shared(load_stack(path).items(), None)


def read_stack_map(path: Path, find: FindEntries | None = None) -> dict[str, Any]:
    """``dumpjson.load_stack``'s map. A stack.json of more than a block (BLOCK_BYTES) is read in pieces
    (``read_grouped``, else ``read_stack``) where it is laid out for it, each distinct stack kept once (a
    rank's stacks repeat: a graph's nodes hold them); a smaller one, or one laid out otherwise, is parsed
    whole (faster)."""
    if not read_in_pieces(path):
        return load_stack(path)
    grouped = read_grouped(path)
    if grouped is not None:
        return grouped
    pieces = read_stack(path, None, {}, find)
    stacks: dict[str, Any] = {}
    try:
        for piece in pieces or ():
            stacks.update(piece)
    except DumpError:  # (not valid JSON: parsed whole, for its error)
        pieces = None
    return stacks if pieces is not None else load_stack(path)


def read_grouped(path: Path) -> dict[str, Any] | None:
    """``read_stack_map``'s map of a stack.json in the new format whose first block holds the group
    "0" (as msProbe writes it), its blocks parsed one at a time (``read_object_blocks``) without the
    index ``read_stack`` makes of its entries (a third of its time), nor a look for long integers (a
    tenth: the stacks kept are lists of strings, else the file is read otherwise); None if the file is
    not so, or a block does not parse, or a name is given twice, or a stack is not a list of strings
    (``read_stack`` then reads it, or it is parsed whole)."""
    blocks = read_object_blocks(path, numbers=False)
    if blocks is None:
        return None
    stacks: dict[str, Any] = {}
    shared: dict[Any, Any] = {}
    hashes: set[int] = set()
    for block in blocks:
        if block is None or (not hashes and not block.get("0")):
            return None
        before = len(hashes)
        hashes.update(map(hash, block))
        if len(hashes) - before != len(block):  # (or, rarely, two names of one hash: read_stack reads it)
            return None
        kept = len(shared)
        stacks.update(_shared(group_stacks(block.values()), shared))
        if any(key.__class__ is not tuple for key in islice(shared, kept, None)):  # (see _stack_key)
            return None
    return stacks


def _stack_pieces(
    path: Path, index: EntryIndex, wanted: Collection[str] | None, shared: dict[Any, Any] | None
) -> Iterator[dict[str, Any]]:
    first = _value(path, index, "0")
    for lo in range(0, len(index), STACK_CHUNK):
        cut = index.cut(lo, lo + STACK_CHUNK)
        parsed = read_object(path, cut)
        entries = parsed.items() if parsed is not None else read_entries(path, cut)
        named = group_stacks(v for _, v in entries) if first else entries
        yield _shared(named if wanted is None else (e for e in named if e[0] in wanted), shared)


def _shared(named: Iterable[tuple[str, Any]], shared: dict[Any, Any] | None) -> dict[str, Any]:
    """{name: stack} of ``named``, equal stacks one object: the first of ``shared`` (a new map if None)."""
    one = shared if shared is not None else {}
    return {name: one.setdefault(_stack_key(lines), lines) for name, lines in named}


def _stack_key(lines: Any) -> Any:
    """A key equal for two stacks exactly when they are equal, types included: the tuple of a list of
    strings (its lines themselves, not a copy: the read of a stack.json of 143,000 distinct stacks
    peaked 7.6 MiB higher with their marshalled bytes; strings known by a join without a TypeError,
    not a generator over the lines: S200k's groups made a map 0.18 -> 0.12 s), else the marshalled bytes."""
    if lines.__class__ is list:
        try:
            "".join(lines)
        except TypeError:
            return marshal.dumps(lines)
        return tuple(lines)
    return marshal.dumps(lines)


def _value(path: Path, index: EntryIndex, name: str) -> Any:
    """The value of entry ``name`` (None if there is none)."""
    for lo in range(0, len(index), STACK_CHUNK):
        names = read_names(path, index.cut(lo, lo + STACK_CHUNK))
        if name in names:
            at = lo + names.index(name)
            return read_entries(path, index.cut(at, at + 1))[0][1]
    return None
