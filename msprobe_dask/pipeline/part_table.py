"""A rank's table part: one part's rows paired by its plan, judged, and made into the bytes of the
rank's csv or xlsx (``part_forms.py``; with the summary and the first-divergence analysis's nodes when
asked for)."""

from __future__ import annotations

import io
import marshal
import threading
from collections.abc import Iterable
from contextlib import ExitStack
from dataclasses import dataclass
from functools import cache
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from msprobe_dask.dump.dumpjson import load_stack
from msprobe_dask.dump.entry_index import EntryIndex, read_names
from msprobe_dask.dump.rows import LeafRow
from msprobe_dask.dump.stack_pieces import read_in_pieces, read_stack, read_stack_whole
from msprobe_dask.errors import DumpError
from msprobe_dask.graph.gcpause import rare_collections_from_now
from msprobe_dask.pipeline.part_forms import CsvForm, Sections
from msprobe_dask.pipeline.part_match import PlanHead
from msprobe_dask.pipeline.part_scan import RowPart, SideScan
from msprobe_dask.summary.kinds import KindCounter
from msprobe_dask.summary.model import GroupSummary
from msprobe_dask.summary.table import SUMMARY_COLUMNS, summarise_columns, summarise_table
from msprobe_dask.table import ColumnTable, CompareTable, Sides, build_table
from msprobe_dask.writers.stat_lines import statistics_cells

if TYPE_CHECKING:  # the first-divergence analysis: imported where a summary is asked for (not with -q)
    from msprobe_dask.analysis.tolerance import Tolerance
    from msprobe_dask.summary.divergence import NodePart

_AST_LOCK = threading.Lock()
"""Held while a table part's summary reads its stack cells with ast.literal_eval: CPython 3.11.7's
ast is not thread-safe (gh-106905: "AST constructor recursion depth mismatch" when table parts run
in threads side by side)."""


@cache
def read_columns() -> frozenset[str]:
    """The columns the summary and the divergence analysis's nodes read."""
    from msprobe_dask.analysis.row_errors import READ_COLUMNS  # (imported where a summary is asked for)

    return frozenset((*READ_COLUMNS, *SUMMARY_COLUMNS))


def split_stacks(scan: SideScan, folder: Path | None, *parts: EntryIndex) -> tuple[Path | bytes | None, ...]:
    """Each npu part's entries' stacks from stack.json for its table part (``part_stacks``): marshal
    dicts, left in file ``stacks-{k}`` of ``folder``, or (``folder`` None) as bytes; None: no stack.json,
    no NPU_Stack_Info column. A dump parsed whole has all its entries in part 0. A big stack.json
    (``read_in_pieces``) is read a chunk of entries at a time, each chunk's stacks added to their parts'
    outputs: the task holds one chunk's stacks and every entry's part, not the rank's stacks (a rank of
    1M entries a side: 0.55 GB); a smaller one is parsed whole. Either way each distinct stack is one
    object, written once in a part's file (its table part prints it once: ``table.stack_cells``).
    Where the value would wait in the process that schedules until the last table part has read it
    (dask's processes scheduler), it is the files' names, not the stacks (90 MB)."""
    path = scan.source.stack_json
    if not scan.source.has_stack():
        return (None,) * len(parts)
    if scan.whole:
        return _split_pieces(folder, len(parts), [load_stack(path)], None)
    owner: dict[str, int] = {}
    for k, part in enumerate(parts):
        owner.update(dict.fromkeys(read_names(scan.source.dump_json, part), k))
    try:
        pieces = read_stack(path, owner) if read_in_pieces(path) else [read_stack_whole(path)]
        return _split_pieces(folder, len(parts), pieces or [load_stack(path)], owner)
    except DumpError:  # (not valid JSON: parsed whole, for its error)
        return _split_pieces(folder, len(parts), [load_stack(path)], owner)


def _split_pieces(
    folder: Path | None, parts: int, pieces: Iterable[dict[str, Any]], owner: dict[str, int] | None
) -> tuple[Path | bytes, ...]:
    """Each piece's stacks added to the outputs of their entries' parts (``owner``; None: all part 0's),
    as a marshal dict a piece (the stacks of a piece shared by several entries written once): files of
    ``folder``, each opened once (a part with no stack: an empty file), or bytes."""
    with ExitStack() as opened:
        buffers = [io.BytesIO() for _ in range(parts)]
        out: list[BinaryIO] = list(buffers)
        files = None
        if folder is not None:
            folder.mkdir(exist_ok=True)
            files = [folder / f"stacks-{k}" for k in range(parts)]
            out = [opened.enter_context(open(file, "wb")) for file in files]
        for piece in pieces:
            by_part: dict[int, dict[str, Any]] = {}
            for name, lines in piece.items():
                k = 0 if owner is None else owner.get(name)
                if k is not None:
                    by_part.setdefault(k, {})[name] = lines
            for k, stacks in by_part.items():
                marshal.dump(stacks, out[k])
    return tuple(files) if files is not None else tuple(b.getvalue() for b in buffers)


def part_stacks(stacks: Path | bytes) -> dict[str, Any]:
    """A part's stacks (``split_stacks``): its pieces in order, a later piece's name winning."""
    merged: dict[str, Any] = {}
    with io.BytesIO(stacks) if isinstance(stacks, bytes) else open(stacks, "rb") as f:
        while True:
            try:
                merged.update(marshal.load(f))
            except EOFError:
                return merged


@dataclass(frozen=True, slots=True)
class TablePart:
    sections: Sections  # the part's bytes in the rank's file
    rows: int
    summary: tuple[GroupSummary, KindCounter] | None  # when the run's summary is asked for
    nodes: NodePart | None  # the first-divergence analysis's, with the summary


def table_part(
    label: str,
    tolerance: Tolerance | None,
    linked: bool,
    form: CsvForm,
    first: int,
    head: PlanHead,
    plan: bytes,
    stacks: Path | bytes | None,
    foreign: bytes,
    window_start: int,
    after: object,
    npu_part: RowPart,
    *window: RowPart,
) -> TablePart:
    """Table part ``k`` from its runs: its rows judged (whole entries, as the reference judges them),
    as the bytes of the rank's file (by ``form``), and (given the divergence analysis's ``tolerance``)
    their summary and that analysis's nodes. ``after`` is what the part waits for and does not read:
    the append of an earlier part (``chunked.py:TABLES_AHEAD``), or None."""
    rare_collections_from_now()
    base = head.bench_offsets[window_start]
    near = list(chain.from_iterable(p.rows for p in window))
    far = {j: LeafRow._make(row) for j, row in marshal.loads(foreign).items()}
    npu_rows = npu_part.rows
    npus: list[LeafRow] = []
    benches: list[LeafRow | None] = []
    for i, j, n in marshal.loads(plan):  # (runs: see part_match.Runs)
        npus.extend(npu_rows[i : i + n])
        if j < 0:
            benches.extend([None] * n)
        elif base <= j and j + n <= base + len(near):  # the run's partners all in the window
            benches.extend(near[j - base : j - base + n])
        else:
            benches.extend(far[b] if b in far else near[b - base] for b in range(j, j + n))
    sides, stack_map = Sides(npus, benches), None if stacks is None else part_stacks(stacks)
    if tolerance is None:  # the file's bytes only: made straight from the rows where the form can
        sections = form.render_sides(sides, head.mode, stack_map, head.float_stats)
        if sections is not None:
            return TablePart(sections, len(npus), None, None)
    else:  # the bytes, the summary and the nodes made from the cells, without the table's rows
        made = form.render_cells(sides, head.mode, stack_map, head.float_stats, read_columns())
        if made is not None:
            sections, columns = made
            return TablePart(sections, len(npus), *_summary_and_nodes(label, columns, tolerance, linked))
    judged = statistics_cells(sides, head.float_stats) if head.mode == "statistics" else None
    table = build_table(
        sides, head.mode, stack_map, None, head.float_stats, highlight=form.highlight, judged=judged
    )
    sections = form.render(table, first)
    if tolerance is None:
        return TablePart(sections, len(table.rows), None, None)
    return TablePart(sections, len(table.rows), *_summary_and_nodes(label, table, tolerance, linked))


def _summary_and_nodes(
    label: str, table: CompareTable | ColumnTable, tolerance: Tolerance, linked: bool = True
) -> tuple[tuple[GroupSummary, KindCounter], NodePart]:
    """A table part's summary (with its kinds' counter) and the divergence analysis's nodes (its
    communication nodes where ``linked``: summary.divergence.node_part)."""
    from msprobe_dask.summary.divergence import node_part

    kinds = KindCounter()
    with _AST_LOCK:
        if isinstance(table, ColumnTable):
            count = len(table.entries)
            summary = summarise_columns(label, table.columns, table.cells, count, table.entries, kinds)
        else:
            summary = summarise_table(label, table.columns, table.rows, table.entries, kinds)
    return (summary, kinds), node_part(label, table, tolerance, linked)
