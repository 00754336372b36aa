"""Parse one side of a compare into rows (a Dask task) and decide the compare mode of a pair."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from msprobe_dask.dump.dumpjson import load_dump, load_stack
from msprobe_dask.dump.entry_index import EntryIndex, parse_spans, read_spans
from msprobe_dask.dump.entry_shape import check_entry
from msprobe_dask.dump.markers import NO_DATA_NAME
from msprobe_dask.dump.rows import LEAF_RULES, LeafRow, RowKey, entry_rows, row_key
from msprobe_dask.dump.source import DumpSource
from msprobe_dask.errors import DumpError
from msprobe_dask.graph import speedups
from msprobe_dask.match.exact import is_comparable_entry


@dataclass(frozen=True, slots=True)
class Side:
    """One parsed dump: header facts and its rows in dump order (the stack is loaded for the NPU only)."""

    source: DumpSource
    task: str
    framework: str
    has_md5: bool
    rows: tuple[LeafRow, ...]
    stacks: dict[str, list[str]] | None
    # a tensor dump's files by data_name, each checked to stay inside dump_tensor_data (else empty)
    tensor_files: dict[str, Path] = field(default_factory=dict)

    def keyed(self) -> MatchSide:
        return MatchSide(
            self.source, self.task, self.framework, self.has_md5, [row_key(r) for r in self.rows]
        )


@dataclass(frozen=True, slots=True)
class MatchSide:
    """A side as the matching rules read it: header facts and each row's key fields, in dump order."""

    source: DumpSource
    task: str
    framework: str
    has_md5: bool
    rows: Sequence[RowKey]


def rows_of(entries: Iterable[tuple[str, Any]], debug: bool, path: Path) -> tuple[LeafRow, ...]:
    """The compare rows of (entry name, value) pairs of ``path`` in dump order (entries the reference
    drops skipped; an entry of the wrong shape is a DumpError naming it)."""
    rows: list[LeafRow] = []
    for entry, body in entries:
        rows.extend(_checked_rows(entry, body, debug, path))
    return tuple(rows)


def _checked_rows(entry: str, body: Any, debug: bool, path: Path) -> list[LeafRow]:
    if not debug:
        check_entry(path, entry, body)
    return entry_rows(entry, body, debug=debug) if debug or is_comparable_entry(entry) else []


if speedups.native is not None:
    speedups.native.configure_leaf_rows(LEAF_RULES)


def rows_of_text(path: Path, index: EntryIndex) -> tuple[LeafRow, ...] | None:
    """``rows_of(read_entries(path, index), False, path)``, each entry's rows made straight from its
    text by graph/csrc/leaf_rows.c where it takes the entry, the others parsed and made here (all of
    them parsed first, so that errors come in the same order); None without the C kernel."""
    native = speedups.native
    if native is None:
        return None
    text, spans = read_spans(path, index)
    made = [
        native.leaf_rows(text, start, end, entry) if is_comparable_entry(entry) else None
        for entry, start, end, _ in spans
    ]
    parsed = iter(parse_spans(path, text, [span for span, rows in zip(spans, made) if rows is None]))
    rows: list[LeafRow] = []
    for entry_made in made:
        if entry_made is None:
            entry, body = next(parsed)
            entry_made = _checked_rows(entry, body, False, path)
        rows.extend(entry_made)
    return tuple(rows)


def _tensor_files(source: DumpSource, rows: tuple[LeafRow, ...]) -> dict[str, Path]:
    """Each row's tensor file by its data_name; the dump is refused if any data_name escapes its
    dump_tensor_data folder, before any file is read."""
    from msprobe_dask.dump.tensor_file import resolve_data_file

    tensor_dir = source.tensor_dir
    files: dict[str, Path] = {}
    for row in rows:
        name = row.data_name
        if name != NO_DATA_NAME and name not in files:
            files[name] = resolve_data_file(tensor_dir, name)
    return files


def parse_side(source: DumpSource, with_stack: bool) -> Side:
    dump = load_dump(source)
    rows = rows_of(dump.entries.items(), source.is_debug, source.dump_json)
    files = _tensor_files(source, rows) if dump.task == "tensor" else {}
    stacks = None
    if with_stack and source.has_stack():
        stacks = load_stack(source.stack_json)
    return Side(
        source=source,
        task=dump.task,
        framework=dump.framework,
        has_md5=dump.has_md5,
        rows=rows,
        stacks=stacks,
        tensor_files=files,
    )


def compare_mode(npu: Side | MatchSide, bench: Side | MatchSide) -> str:
    """statistics, tensor or md5, as the reference decides from the two headers (compare.md §2.1)."""
    if npu.task != bench.task:
        raise DumpError(
            npu.source.dump_json,
            f"task {npu.task!r} differs from the golden dump's {bench.task!r}; dump both alike",
        )
    if npu.task == "tensor":
        return "tensor"
    if npu.has_md5 != bench.has_md5:
        raise DumpError(npu.source.dump_json, "one side has md5 summaries and the other has not")
    return "md5" if npu.has_md5 else "statistics"


def is_cross_framework(npu: Side | MatchSide, bench: Side | MatchSide) -> bool:
    """MindSpore (or mindtorch) target against a PyTorch golden dump."""
    if npu.framework == "pytorch" and bench.framework != "pytorch":
        raise DumpError(
            bench.source.dump_json, f"cannot compare a pytorch target with a {bench.framework} golden dump"
        )
    return npu.framework != "pytorch" and bench.framework == "pytorch"
