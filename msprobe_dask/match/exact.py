"""Default matching: exact compare keys with backward call-count renumbering (compare.md §3.1)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from operator import itemgetter
from typing import Any

from msprobe_dask.dump.markers import PARAMETERS_GRAD
from msprobe_dask.dump.rows import ENTRY, NAME, LeafRow, RowKey

_DIRECTIONS = ("forward", "backward")


def entry_key(entry: str) -> tuple[str, str, str] | None:
    """Split an entry name into (op without number, number, direction layout); None if it has neither."""
    return _key_of(entry.rsplit(".", 2))


def _key_of(parts: list[str]) -> tuple[str, str, str] | None:
    """``entry_key`` of an entry name's ``rsplit(".", 2)``: (what comes before its last two parts, then
    those two)."""
    if len(parts) < 3 or PARAMETERS_GRAD in parts[1:]:
        return None
    op, second, last = parts
    if last in _DIRECTIONS:  # Functional.linear.4.backward
        return op, second, "api"
    if second in _DIRECTIONS:  # Module.fc.Linear.backward.0
        return op, last, "module"
    return None


def is_comparable_entry(entry: str) -> bool:
    """Entries whose names match neither pattern are dropped by the reference (``entry_key``'s
    patterns, or a name of parameter gradients; read from the name's last three parts)."""
    parts = entry.rsplit(".", 2)
    if PARAMETERS_GRAD in parts[-2:]:
        return True
    return len(parts) == 3 and (parts[2] in _DIRECTIONS or parts[1] in _DIRECTIONS)


def _backward_op(entry: str) -> tuple[str, str] | None:
    """(op without number, layout) of an entry the renumbering renames (a backward one); else None."""
    if "backward" not in entry:  # (a forward entry, half of them, told without splitting its name)
        return None
    parts = entry.rsplit(".", 2)
    split = _key_of(parts)
    if split is None or "backward" not in parts[1:]:
        return None
    return split[0], split[2]


def renumbered_entries(entries: Sequence[str], first: Mapping[str, int] | None = None) -> dict[str, str]:
    """Backward entries renamed by their occurrence order per op (counted from ``first[op]``: the op's
    backward entries before these); every other entry keeps its name."""
    seen: dict[str, int] = defaultdict(int, first or {})
    renamed: dict[str, str] = {}
    for entry in entries:
        split = _backward_op(entry)
        if split is None:
            renamed[entry] = entry
            continue
        op, layout = split
        index = seen[op]
        seen[op] += 1
        renamed[entry] = f"{op}.{index}.backward" if layout == "api" else f"{op}.backward.{index}"
    return renamed


def backward_counts(rows: Sequence[RowKey] | Sequence[LeafRow]) -> dict[str, int]:
    """The rows' backward entries per op: where the renumbering of the rows after these starts."""
    counts: dict[str, int] = defaultdict(int)
    for entry in dict.fromkeys(map(itemgetter(ENTRY), rows)):
        split = _backward_op(entry)
        if split is not None:
            counts[split[0]] += 1
    return dict(counts)


def compare_keys(
    rows: Sequence[RowKey] | Sequence[LeafRow] | Sequence[tuple[Any, ...]],
    renumber: bool = True,
    first: Mapping[str, int] | None = None,
) -> list[str]:
    """The key each row is joined on: its name with the entry part renumbered (each op's backward entries
    counted from ``first[op]``, as ``backward_counts`` of the rows before these gives it). ``rows``:
    RowKeys, LeafRows or plain tuples of their fields."""
    return column_keys([row[NAME] for row in rows], [row[ENTRY] for row in rows], renumber, first)


def column_keys(
    names: Sequence[str],
    entries: Sequence[str],
    renumber: bool = True,
    first: Mapping[str, int] | None = None,
) -> list[str]:
    """``compare_keys`` of the rows whose names and entries these are (each a column of them)."""
    if not renumber:
        return list(names)
    changed = {e: r for e, r in renumbered_entries(list(dict.fromkeys(entries)), first).items() if r != e}
    if not changed:  # (a part of forward entries only)
        return list(names)
    return [
        changed[entry] + name[len(entry) :] if entry in changed and name.startswith(entry) else name
        for name, entry in zip(names, entries)
    ]


def join_left(npu_keys: Sequence[str], bench_keys: Sequence[str]) -> list[tuple[int, int | None]]:
    """Pairs (npu index, bench index or None) in NPU order; duplicate keys pair every combination."""
    first = dict(zip(reversed(bench_keys), range(len(bench_keys) - 1, -1, -1)))  # a key's first index
    if len(first) == len(bench_keys):  # no golden key twice (as in most dumps): one partner at most
        get = first.get
        return [(i, get(key)) for i, key in enumerate(npu_keys)]
    by_key: dict[str, list[int]] = defaultdict(list)
    for j, key in enumerate(bench_keys):
        by_key[key].append(j)
    pairs: list[tuple[int, int | None]] = []
    for i, key in enumerate(npu_keys):
        matches = by_key.get(key)
        if matches:
            pairs.extend((i, j) for j in matches)
        else:
            pairs.append((i, None))
    return pairs
