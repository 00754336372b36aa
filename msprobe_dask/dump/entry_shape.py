"""The shape every dump.json entry has (an object whose ``input_args`` is a list and ``input_kwargs``
an object): an entry of another shape is a mistake named with its key, never silently skipped."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from msprobe_dask.dump.entries import DumpEntries
from msprobe_dask.errors import DumpError

ENTRY_SHAPES = (("input_args", list), ("input_kwargs", dict))
# in msProbe's indented text, the only way an entry of the wrong shape can hide in a multi-line span
WRONG_SHAPE_IN_TEXT = (b'"input_args": {', b'"input_kwargs": [')


def json_kind(value: Any) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    return "null" if value is None else f"a {type(value).__name__}"


def entry_problem(body: Any) -> str | None:
    """What is wrong with one entry's shape, or None."""
    if not isinstance(body, dict):
        return f"is {json_kind(body)}, not an object of inputs and outputs"
    for key, kind in ENTRY_SHAPES:
        value = body.get(key)
        if value is not None and not isinstance(value, kind):
            return f"has {key!r} that is {json_kind(value)}, not {json_kind(kind())}"
    return None


def check_entry(path: Path, name: str, body: Any) -> None:
    problem = entry_problem(body)
    if problem is not None:
        raise DumpError(path, f"entry {name!r} {problem}")


def check_entries(path: Path, data: Mapping[str, Any]) -> None:
    """Every entry of ``data`` has the shape (a lazily parsed one is looked at only where its text
    could hold another shape: its one-line entries, or all if the text has a suspect key)."""
    names: Any = data
    if isinstance(data, DumpEntries) and not any(map(data.mentions, WRONG_SHAPE_IN_TEXT)):
        names = data.one_line_names()
    for name in names:
        check_entry(path, name, data[name])
