"""Err_message cells -> message kinds: the same message with other values in it is one kind.

A compare row's Err_message is the JSON list the reference writes (``["error: ...", ...]``); a kernel
row's is its messages one per line. A kind is a message with its numbers and side names abstracted
(the reference puts values only there: ``... All the data is Zero in npu dump data.``); it is shown
as the first message seen of that kind.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from msprobe_dask.summary.model import MessageKind

_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?%?")
_SIDE = re.compile(r"\b(?:npu|bench)\b", re.IGNORECASE)
# what a message names when the two sides differ in structure rather than in numbers
STRUCTURAL_WORDS = (
    "dtype",
    "shape",
    "required_grad",
    "requires_grad",
    "scalar",
    "not ndarray",
    "empty tensor",
)


def messages(cell: Any) -> list[str]:
    """The messages of one Err_message cell (JSON list, or one message per line), in order."""
    if cell is None or cell != cell:  # None or NaN: no message
        return []
    return list(_text_messages(str(cell)))


@lru_cache(maxsize=4096)
def _text_messages(cell: str) -> tuple[str, ...]:
    """(Most rows' cells are one of a few texts: read once per text.)"""
    text = cell.strip()
    if text.startswith("["):
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
        if isinstance(parsed, list):
            return tuple(str(m) for m in parsed if str(m).strip())
    return tuple(line.strip() for line in text.splitlines() if line.strip() and line.strip() != "None")


@lru_cache(maxsize=4096)
def kind_key(message: str) -> str:
    return _SIDE.sub("<side>", _NUMBER.sub("<n>", message))


def is_structural(message: str) -> bool:
    lowered = message.lower()
    return any(word in lowered for word in STRUCTURAL_WORDS)


class KindCounter:
    """Counts rows per message kind; a row holding one message twice counts once. The kinds of the rows
    added are counted as they are read (``_counted``): rows added one by one hold the same few kinds
    (a summary's judged nodes: one kinds tuple of a cache each), counted once a distinct tuple."""

    def __init__(self) -> None:
        self._counts: Counter[str] = Counter()
        self._shown: dict[str, str] = {}
        self._added: dict[tuple[tuple[str, str], ...], int] = {}  # rows by their kinds, not counted yet

    def add(self, row_messages: Iterable[str], rows: int = 1) -> None:
        """Count ``rows`` rows holding ``row_messages``."""
        self.add_kinds(self.kinds_of(row_messages), rows)

    @staticmethod
    def kinds_of(row_messages: Iterable[str]) -> tuple[tuple[str, str], ...]:
        """The kinds of a row's messages, each with its first message, in order."""
        keys: dict[str, str] = {}
        for message in row_messages:
            keys.setdefault(kind_key(message), message)
        return tuple(keys.items())

    def add_kinds(self, kinds: tuple[tuple[str, str], ...], rows: int = 1) -> None:
        """Count ``rows`` rows holding ``kinds`` (kinds_of their messages)."""
        added = self._added
        added[kinds] = added.get(kinds, 0) + rows

    def _counted(self) -> Counter[str]:
        """The rows of each kind, the rows added counted (in the order they came: a kind shows the first
        message of it added, and ties keep the order the kinds were first seen)."""
        for kinds, rows in self._added.items():
            for key, message in kinds:
                self._shown.setdefault(key, message)
                self._counts[key] += rows
        self._added.clear()
        return self._counts

    def merge(self, later: KindCounter) -> None:
        """Add the counts of ``later``, a counter of the rows that follow this one's."""
        self._counted()
        for key, count in later._counted().items():
            self._shown.setdefault(key, later._shown[key])
            self._counts[key] += count

    def most_common(self, n: int | None = None) -> list[MessageKind]:
        return [
            MessageKind(self._shown[key], count, is_structural(key))
            for key, count in self._counted().most_common(n)
        ]
