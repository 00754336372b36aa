"""Fuzzy matching ``-fm`` (compare.md §3.2, D1): entries that differ only in their call count.

The documented rule: an entry pairs with the golden entry of the same name (call count removed), at
the same level of the network, in the same order. "Level" is the parent module from construct.json;
a parent is identified by its own fuzzy identity, so an extra call of a module shifts nothing below
it. Each entry gets a canonical key ``(key of parent, name without count, ordinal among its siblings
with that name)``; both sides share one table of keys, so pairing is a hash join: linear in the
number of entries.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

from msprobe_dask.dump.markers import PARAMETERS_GRAD
from msprobe_dask.match.exact import entry_key

ROOT = 0


def uncounted_name(entry: str) -> str:
    """The entry name without its call count.

    ``Functional.linear.3.forward`` -> ``Functional.linear.forward``,
    ``Module.fc.Linear.backward.1`` -> ``Module.fc.Linear.backward``,
    ``X.parameters_grad.0`` -> ``X.parameters_grad``.
    """
    parts = entry.split(".")
    if parts[-1] != PARAMETERS_GRAD and PARAMETERS_GRAD in parts[-2:]:
        return ".".join(parts[:-1])
    split = entry_key(entry)
    if split is None:
        return entry
    op, _, layout = split
    return f"{op}.{parts[-1] if layout == 'api' else parts[-2]}"


class KeyTable:
    """Canonical entry keys shared by both sides of one compare (an interning table)."""

    def __init__(self) -> None:
        self._ids: dict[tuple[int, str, int], int] = {}

    def intern(self, parent: int, name: str, ordinal: int) -> int:
        return self._ids.setdefault((parent, name, ordinal), len(self._ids) + 1)

    def entry_keys(self, entries: Sequence[str], parents: Mapping[str, str | None]) -> dict[str, int]:
        """Key of every entry of one side (and of the modules above them that construct.json names)."""
        ordered = list(dict.fromkeys([*entries, *parents]))
        ordinal: dict[str, int] = {}
        seen: dict[tuple[str | None, str], int] = defaultdict(int)
        for entry in ordered:
            sibling = (parents.get(entry), uncounted_name(entry))
            ordinal[entry] = seen[sibling]
            seen[sibling] += 1
        keys: dict[str, int] = {}
        for entry in entries:
            self._resolve(entry, parents, ordinal, keys)
        return {entry: keys[entry] for entry in entries}

    def _resolve(
        self, entry: str, parents: Mapping[str, str | None], ordinal: Mapping[str, int], keys: dict[str, int]
    ) -> None:
        chain: list[str] = []
        node: str | None = entry
        on_chain: set[str] = set()
        while node is not None and node not in keys and node not in on_chain:
            chain.append(node)
            on_chain.add(node)
            node = parents.get(node)
        parent_key = keys.get(node, ROOT) if node is not None else ROOT
        for name in reversed(chain):  # from the topmost unresolved ancestor down to the entry
            parent_key = self.intern(parent_key, uncounted_name(name), ordinal.get(name, 0))
            keys[name] = parent_key


def fuzzy_row_keys(rows: Iterable[tuple[str, str]], keys: Mapping[str, int]) -> list[str]:
    """Join key of each (row name, entry name): the entry's canonical key and the row's suffix."""
    out = []
    for name, entry in rows:
        if entry in keys and name.startswith(entry):
            out.append(f"#{keys[entry]}{name[len(entry) :]}")
        else:
            out.append(name)
    return out
