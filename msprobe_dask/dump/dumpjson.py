"""Parse one dump.json (and its stack.json / construct.json) into a ``Dump``.

Python's json accepts the ``NaN``/``Infinity`` tokens that the dumper writes; faster parsers refuse them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from msprobe_dask.dump.confine import check_dump_file
from msprobe_dask.dump.fastjson import loads
from msprobe_dask.dump.json_limits import entry_at, limit_problem
from msprobe_dask.dump.source import DumpSource
from msprobe_dask.errors import DumpError

TASKS = ("statistics", "tensor")
FRAMEWORKS = ("pytorch", "mindspore", "mindtorch")
MEGATRON_KEY = "megatron_micro_step_number"


@dataclass(frozen=True, slots=True)
class Dump:
    """A parsed dump.json: its header and its entries in dump (call) order."""

    source: DumpSource
    task: str
    level: str
    framework: str
    entries: dict[str, Any] = field(repr=False)
    md5_in_text: bool = True  # False: the file's text has no "md5" key, so no entry can have one

    @property
    def has_md5(self) -> bool:
        return self.md5_in_text and any(has_key(body, "md5") for body in self.entries.values())


def has_key(node: Any, key: str) -> bool:
    """Whether ``key`` names a field anywhere in the JSON value ``node``."""
    if isinstance(node, dict):
        return key in node or any(has_key(v, key) for v in node.values())
    if isinstance(node, list):
        return any(has_key(v, key) for v in node)
    return False


def read_json(path: Path) -> Any:
    """Read a JSON file; any failure is a DumpError naming the file and the problem. Parsed by
    fastjson.loads (what json gives, faster); a file it refuses is read again as text for the error."""
    check_dump_file(path)
    try:
        with open(path, "rb") as f:
            data = f.read()
        return loads(data)
    except (OSError, ValueError):
        return parse_json(path, read_text(path))


def read_text(path: Path) -> str:
    check_dump_file(path)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        raise DumpError(path, "does not exist") from None
    except IsADirectoryError:
        raise DumpError(path, "is a folder, expected a JSON file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DumpError(path, f"cannot be read: {exc}") from None
    return text


def parse_json(path: Path, text: str) -> Any:
    if not text.strip():
        raise DumpError(path, "is empty")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DumpError(
            path, f"is not valid JSON (truncated?): {exc.msg}: line {exc.lineno} column {exc.colno}"
        ) from None
    except (RecursionError, ValueError) as exc:
        problem = limit_problem(exc)
        if problem is None:
            raise
        entry = entry_at(text, problem)
        raise DumpError(path, f"entry {entry!r} {problem}" if entry else problem) from None


def load_dump(source: DumpSource) -> Dump:
    """Parse and validate the header of ``source``'s dump.json."""
    path = source.dump_json
    text = read_text(path)
    doc = parse_json(path, text)
    if not isinstance(doc, dict):
        raise DumpError(path, f"top level must be a JSON object, found {type(doc).__name__}")
    if "data" not in doc:
        raise DumpError(path, "has no 'data' key")
    data = doc["data"]
    if not isinstance(data, dict):
        raise DumpError(path, f"'data' must be a mapping of entry names, found {type(data).__name__}")
    task, level, framework = dump_facts(path, doc)
    return Dump(
        source=source,
        task=task,
        level=level,
        framework=framework,
        entries=data,
        md5_in_text='"md5"' in text,
    )


def dump_facts(path: Path, header: dict[str, Any]) -> tuple[str, str, str]:
    """(task, level, framework) of a dump.json's top-level fields, checked."""
    task = header.get("task")
    if task not in TASKS:
        raise DumpError(path, f"task {task!r} cannot be compared (expected statistics or tensor)")
    framework = header.get("framework") or "pytorch"
    if framework not in FRAMEWORKS:
        raise DumpError(path, f"unknown framework {framework!r}")
    return task, str(header.get("level", "")), framework


def load_stack(path: Path) -> dict[str, Any]:
    """stack.json, for compare and graph_visualize alike: entry name -> its stack lines.

    New format (the key "0" present and not empty): ``{"0": [[names], [lines]], ...}``, each name of a
    group gets the group's lines; a group of another shape, or a name that is not a text, is skipped,
    as both references skip it; lines that are a string are kept as they are, as the reference's
    graph_visualize keeps them (its compare stops on them, README D33). Old format:
    ``{name: [lines]}``, taken as it is. The lines are kept as the file has them (the references check
    them no further)."""
    doc = read_json(path)
    if not isinstance(doc, dict):
        raise DumpError(path, "must be a JSON object")
    if not doc.get("0"):
        return doc
    return dict(group_stacks(doc.values()))


def group_stacks(groups: Iterable[Any]) -> Iterator[tuple[str, Any]]:
    """(name, lines) of each name of stack.json's new-format groups, in order (a later group's lines
    win): a group of another shape, or a name that is not a text, is skipped."""
    for group in groups:
        if isinstance(group, list) and len(group) == 2 and isinstance(group[0], list):
            for name in group[0]:
                if isinstance(name, str):
                    yield name, group[1]


def load_construct(path: Path) -> tuple[dict[str, str | None], dict[str, int], int | None]:
    """construct.json: (parents, micro step ids, K), K the Megatron micro step number or None.

    Each node maps to its parent's name or null, or, in the Megatron form (the key MEGATRON_KEY
    present), to ``[parent, micro step]``. No file: nothing ({}, {}, None)."""
    if not path.is_file():
        return {}, {}, None
    doc = read_json(path)
    if not isinstance(doc, dict):
        raise DumpError(path, "must be a JSON object mapping node names to parents")
    if MEGATRON_KEY not in doc:
        _check_parents(path, doc)
        return doc, {}, None
    doc = dict(doc)
    k = doc.pop(MEGATRON_KEY)
    parents: dict[str, str | None] = {}
    micro: dict[str, int] = {}
    for sub, up in doc.items():
        if isinstance(up, list):
            if len(up) != 2:
                raise DumpError(path, f"cannot be parsed: {sub!r} must map to [parent, micro_step]")
            parents[sub], micro[sub] = up[0], up[1]
        else:
            parents[sub], micro[sub] = up, 0
    _check_parents(path, parents)
    return parents, micro, int(k)


def _check_parents(path: Path, parents: Mapping[str, Any]) -> None:
    """Each node's parent is a name or null (the reference crashes on anything else)."""
    for sub, up in parents.items():
        if up is not None and up.__class__ is not str:
            raise DumpError(
                path, f"cannot be parsed: {sub!r} must map to its parent's name or null, not {up!r}"
            )
