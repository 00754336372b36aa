"""A rank's table part: one part's rows paired by its plan, judged, and made into the bytes of the
rank's csv or xlsx (``part_forms.py``; with the summary and the first-divergence analysis's nodes when
asked for)."""

from __future__ import annotations

import marshal
import threading
from dataclasses import dataclass
from functools import cache
from itertools import chain
from typing import TYPE_CHECKING

from msprobe_dask.dump.dumpjson import load_stack
from msprobe_dask.dump.entry_index import EntryIndex, read_names, read_stack
from msprobe_dask.dump.rows import LeafRow
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
    from msprobe_dask.analysis.flow import READ_COLUMNS  # (imported where a summary is asked for)

    return frozenset((*READ_COLUMNS, *SUMMARY_COLUMNS))


def split_stacks(scan: SideScan, *parts: EntryIndex) -> tuple[bytes | None, ...]:
    """Each npu part's entries' stacks from stack.json (marshal bytes; None: no stack.json, no
    NPU_Stack_Info column). A dump parsed whole has all its entries in part 0."""
    path = scan.source.stack_json
    if not path.is_file():
        return (None,) * len(parts)
    if scan.whole:
        return (marshal.dumps(load_stack(path)), *(marshal.dumps({}) for _ in parts[1:]))
    names = [read_names(scan.source.dump_json, part) for part in parts]
    stacks = read_stack(path, set(chain.from_iterable(names)))
    stacks = load_stack(path) if stacks is None else stacks
    return tuple(marshal.dumps({e: stacks[e] for e in own if e in stacks}) for own in names)


@dataclass(frozen=True, slots=True)
class TablePart:
    sections: Sections  # the part's bytes in the rank's file
    rows: int
    summary: tuple[GroupSummary, KindCounter] | None  # when the run's summary is asked for
    nodes: NodePart | None  # the first-divergence analysis's, with the summary


def table_part(
    label: str,
    tolerance: Tolerance | None,
    form: CsvForm,
    first: int,
    head: PlanHead,
    plan: bytes,
    stacks: bytes | None,
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
    sides, stack_map = Sides(npus, benches), None if stacks is None else marshal.loads(stacks)
    if tolerance is None:  # the file's bytes only: made straight from the rows where the form can
        sections = form.render_sides(sides, head.mode, stack_map, head.float_stats)
        if sections is not None:
            return TablePart(sections, len(npus), None, None)
    else:  # the bytes, the summary and the nodes made from the cells, without the table's rows
        made = form.render_cells(sides, head.mode, stack_map, head.float_stats, read_columns())
        if made is not None:
            sections, columns = made
            return TablePart(sections, len(npus), *_summary_and_nodes(label, columns, tolerance))
    judged = statistics_cells(sides, head.float_stats) if head.mode == "statistics" else None
    table = build_table(
        sides, head.mode, stack_map, None, head.float_stats, highlight=form.highlight, judged=judged
    )
    sections = form.render(table, first)
    if tolerance is None:
        return TablePart(sections, len(table.rows), None, None)
    return TablePart(sections, len(table.rows), *_summary_and_nodes(label, table, tolerance))


def _summary_and_nodes(
    label: str, table: CompareTable | ColumnTable, tolerance: Tolerance
) -> tuple[tuple[GroupSummary, KindCounter], NodePart]:
    """A table part's summary (with its kinds' counter) and the divergence analysis's nodes."""
    from msprobe_dask.summary.divergence import node_part

    kinds = KindCounter()
    with _AST_LOCK:
        if isinstance(table, ColumnTable):
            count = len(table.entries)
            summary = summarise_columns(label, table.columns, table.cells, count, table.entries, kinds)
        else:
            summary = summarise_table(label, table.columns, table.rows, table.entries, kinds)
    return (summary, kinds), node_part(label, table, tolerance)
