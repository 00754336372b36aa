"""The bounds on what a dump's JSON may hold: nesting depth and integer size.

Python's json parser stops at its recursion limit (about 1,000 levels) and at integers of more than
4,300 digits (``sys.get_int_max_str_digits``); no dumper writes either. A text past one of them is a
user mistake: ``limit_problem`` tells it from a parser bug, ``entry_at`` finds the dump.json entry it
is in, so that the message names the file and the entry.
"""

from __future__ import annotations

import re
import sys

INT_DIGITS = getattr(sys, "get_int_max_str_digits", lambda: 4300)() or 4300
# a dump entry's values nested deeper than this are refused (compare rows, graph items; the C walks hand
# values nested deeper than their own smaller limit back to the Python path)
MAX_DEPTH = 400
DEEP = 512  # where a text nested too deeply is located: deeper than any dump, shallower than the parser

_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"(\s*:)?|[\[\]{}]')
_LONG_INTEGER = re.compile(r"(?<![\w.\"])-?\d{" + str(INT_DIGITS + 1) + ",}")


class JsonLimitError(ValueError):
    """A JSON text past a bound (a ValueError, as the parser's own errors are)."""


def limit_problem(exc: BaseException) -> str | None:
    """What bound the parser's exception says the text is past, or None (another error)."""
    if isinstance(exc, JsonLimitError):
        return str(exc)
    if isinstance(exc, RecursionError):
        return "is nested too deeply (more levels than the JSON parser reads)"
    if isinstance(exc, ValueError) and "integer string conversion" in str(exc):
        return f"holds an integer of more than {INT_DIGITS} digits"
    return None


def entry_at(text: str, problem: str) -> str | None:
    """The key of the dump.json ``data`` entry that holds the first value past ``problem``'s bound."""
    if "digits" in problem:
        found = _LONG_INTEGER.search(text)
        where = found.start() if found else -1
    else:
        where = _deep_position(text)
    return _entry_before(text, where) if where >= 0 else None


def _deep_position(text: str) -> int:
    depth = 0
    for token in _TOKENS.finditer(text):
        char = token.group()[0]
        if char in "[{":
            depth += 1
            if depth > DEEP:
                return token.start()
        elif char in "]}":
            depth -= 1
    return -1


def _entry_before(text: str, where: int) -> str | None:
    """The last key at depth 2 under the top-level ``data`` before ``where``."""
    import json

    depth, top_key, entry = 0, None, None
    for token in _TOKENS.finditer(text, 0, where):
        char = token.group()[0]
        if char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
        elif token.group(1):  # a key
            key = token.group()[: token.start(1) - token.start()]
            if depth == 1:
                top_key = json.loads(key)
            elif depth == 2 and top_key == "data":
                entry = json.loads(key)
    return entry
