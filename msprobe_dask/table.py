"""The compare table model: columns of each mode, the matched row pairs of one rank, and their assembly
into judged rows.

A ``CompareTable`` holds cells as the reference's table holds them just before it is written
(numbers stay numbers, markers are strings); writers only format. It sits between judge/ and the
writers, so that writers, analysis/ and the compare drivers (pipeline/) all import it from below.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from operator import attrgetter, eq, ne
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TypeAlias

from msprobe_dask.columns import (
    BASE_COLUMNS,
    BENCH_REQUIRES_GRAD,
    DATA_NAME_COLUMN,
    DIFF_COLUMNS,
    ERR_MESSAGE,
    MD5_COLUMNS,
    NA,
    NPU_REQUIRES_GRAD,
    REQUIRES_GRAD_CONSISTENT,
    RESULT,
    STACK_COLUMN,
    STAT_COLUMNS,
    TAIL_COLUMNS,
    TENSOR_COLUMNS,
)
from msprobe_dask.dump.rows import LeafRow
from msprobe_dask.judge.highlight import highlight_group
from msprobe_dask.judge.rules import judge_columns, mark_unreadable
from msprobe_dask.metrics.stats import stat_diffs

if TYPE_CHECKING:
    from msprobe_dask.metrics.claims import Claim  # (no numpy at the import of a statistics compare)

UNMEASURED = ("unsupported",) * len(TENSOR_COLUMNS)
"""The metric cells of a tensor-mode row whose tensors are not measured (no file on a side)."""


def columns_for(mode: str, with_stack: bool) -> list[str]:
    middle = {
        "statistics": DIFF_COLUMNS + STAT_COLUMNS,
        "tensor": TENSOR_COLUMNS + STAT_COLUMNS,
        "md5": MD5_COLUMNS,
    }[mode]
    columns = BASE_COLUMNS + middle + TAIL_COLUMNS + ([STACK_COLUMN] if with_stack else [])
    return columns + ([DATA_NAME_COLUMN] if mode == "tensor" else [])


@dataclass
class CompareTable:
    """One compare result: header, rows of cells, and per-row highlight (D6: 'red', 'yellow' or None)."""

    mode: str
    columns: list[str]
    rows: list[list[Any]]
    highlights: list[str | None] = field(default_factory=list)
    highlight_reasons: list[list[str]] = field(default_factory=list)
    entries: list[str] = field(default_factory=list)  # the dump entry of each row (api_origin_name)
    p2p: dict[int, tuple[str, str]] = field(default_factory=dict)  # row -> a P2POp's (op, peer) texts

    def column(self, name: str) -> list[Any]:
        index = self.columns.index(name)
        return [row[index] for row in self.rows]

    def records(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, row)) for row in self.rows]


@dataclass(frozen=True, slots=True)
class RowPair:
    npu: LeafRow
    bench: LeafRow | None


TensorJob: TypeAlias = "tuple[Path, Path, tuple[Claim, Claim]] | None"
"""The two tensor files of a pair and what dump.json says of each (dtype, shape); None where nothing is
measured."""


INT_COLUMNS = (False,) * 12
"""``float_stat_columns`` of a table whose numeric columns the reference holds as int64 (the default)."""


@dataclass
class Matched:
    """The output of the match stage for one (target, golden) pair of dumps."""

    mode: str
    pairs: list[RowPair]
    stacks: dict[str, list[str]] | None
    jobs: list[TensorJob] = field(default_factory=list)
    float_stats: tuple[bool, ...] = INT_COLUMNS


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


StatKinds = tuple[int, tuple[bool, ...], tuple[bool, ...]]
"""Of some rows of one side: how many, and per statistics column whether every one holds a number
there, none NaN, and whether one holds a float (what ``float_stat_columns`` decides from, gathered
part by part)."""


def stat_kinds(rows: Sequence[LeafRow]) -> StatKinds:
    kinds = [_column_kinds(values) for values in zip(*map(attrgetter("stats"), rows))] or [(True, False)] * 4
    return len(rows), tuple(numeric for numeric, _ in kinds), tuple(floats for _, floats in kinds)


def _column_kinds(values: Sequence[Any]) -> tuple[bool, bool]:
    """(whether every one of ``values`` is a number, none NaN; whether one is a float)"""
    classes = set(map(type, values))
    if classes <= {float, int}:  # (the usual case, tested by maps: a NaN is the value unequal to itself)
        return not any(map(ne, values, values)), float in classes
    return all(_is_number(v) and v == v for v in values), any(isinstance(v, float) for v in values)


def float_stat_columns(
    npu_rows: Sequence[LeafRow], bench_rows: Sequence[LeafRow], any_unmatched: bool
) -> tuple[bool, ...]:
    """Which statistics columns (NPU max .. l2norm, then Bench max .. l2norm) the reference holds as
    float64, so that ints print as ``3.0``; then which of the four diff columns (Max diff .. L2norm
    diff) it computes in float64, so that the diff of two ints prints as ``9.0``.

    A side's column is numeric when every row of that side holds a number there, NaN excepted (the
    reference has turned a NaN into the text ``Nan`` by then); it is float when one of them is a float
    (the ``N/A`` of a target row left unmatched keeps the golden ints ints). A diff column is int64
    only when both sides' columns are numeric and neither float, with no unmatched target row (the
    reference reads each side's column as numbers, where a text, ``Nan`` or that ``N/A`` makes it
    float64), else float64.
    """
    return float_columns([stat_kinds(npu_rows)], [stat_kinds(bench_rows)], any_unmatched)


def float_columns(
    npu_kinds: Sequence[StatKinds], bench_kinds: Sequence[StatKinds], any_unmatched: bool
) -> tuple[bool, ...]:
    """``float_stat_columns`` of the rows whose ``stat_kinds`` (of parts of each side) are these."""
    flags: list[bool] = []
    integral: list[list[bool]] = []
    for kinds, filled in ((npu_kinds, False), (bench_kinds, any_unmatched)):
        held = [k for k in kinds if k[0]]
        numeric = [bool(held) and all(k[1][i] for k in held) for i in range(4)]
        floats = [any(k[2][i] for k in held) for i in range(4)]
        flags.extend(n and f for n, f in zip(numeric, floats))
        integral.append([n and not f and not filled for n, f in zip(numeric, floats)])
    flags.extend(not (npu and bench) for npu, bench in zip(*integral))
    return tuple(flags)


def _stat_columns(
    npus: Sequence[LeafRow], benches: Sequence[LeafRow | None], float_stats: Sequence[bool]
) -> list[list[Any]]:
    """The eight statistics columns, NPU then Bench, typed as the reference types them (N/A on the
    golden side of an unmatched row)."""
    columns: list[list[Any]] = []
    for side, flags in ((npus, float_stats[:4]), (benches, float_stats[4:8])):
        stats = [_MISSING.stats if row is None else row.stats for row in side]
        unmatched = len(stats) and any(row is None for row in side)
        for i, (values, as_float) in enumerate(zip(zip(*stats) if stats else [()] * 4, flags)):
            if not as_float:
                columns.append(list(values))
            elif unmatched:
                columns.append([NA if row is None else float(row.stats[i]) for row in side])
            else:
                columns.append(list(map(float, values)))
    return columns


_MISSING = LeafRow(NA, NA, NA, NA, NA, NA, (NA, NA, NA, NA), NA, NA)
"""The golden side of an unmatched row: N/A in every cell."""
_BASE_FIELDS = ("name", "dtype", "shape", "requires_grad")  # of BASE_COLUMNS, NPU then Bench


def _cell_columns(
    npus: Sequence[LeafRow],
    benches: Sequence[LeafRow | None],
    mode: str,
    tensor_cells: Sequence[Sequence[Any]] | None,
    float_stats: Sequence[bool],
    judged: Mapping[str, Sequence[Any]] | None = None,
) -> dict[str, Sequence[Any]]:
    """The cells of each column the judges read, column by column (Result and after excepted, but
    where ``judged`` gives them with the statistics and diffs)."""
    filled = [_MISSING if row is None else row for row in benches]
    cells: dict[str, Sequence[Any]] = {}
    for attribute, npu_column, bench_column in zip(_BASE_FIELDS, BASE_COLUMNS[::2], BASE_COLUMNS[1::2]):
        get = attrgetter(attribute)
        cells[npu_column], cells[bench_column] = list(map(get, npus)), list(map(get, filled))
    if judged is not None:
        cells.update(judged)
        return cells
    if mode == "md5":
        get = attrgetter("md5")
        cells[MD5_COLUMNS[0]], cells[MD5_COLUMNS[1]] = list(map(get, npus)), list(map(get, filled))
    else:
        stat_cols = _stat_columns(npus, benches, float_stats)
        cells.update(zip(STAT_COLUMNS, stat_cols))
    if mode == "statistics":
        for k in range(4):
            diffs = stat_diffs(stat_cols[k], stat_cols[k + 4], float_stats[8 + k])
            cells[DIFF_COLUMNS[k]], cells[DIFF_COLUMNS[k + 4]] = diffs
    elif mode == "tensor":
        measured = tensor_cells if tensor_cells is not None else [UNMEASURED] * len(npus)
        # (strict: a row with a metric more or less than the columns fails here, not as a missing column)
        by_column = zip(*measured, strict=True) if npus else repeat((), len(TENSOR_COLUMNS))
        cells.update(zip(TENSOR_COLUMNS, by_column, strict=True))
        cells[DATA_NAME_COLUMN] = [
            str([npu.data_name, bench.data_name if bench else NA]) for npu, bench in zip(npus, benches)
        ]
    cells[REQUIRES_GRAD_CONSISTENT] = list(map(eq, cells[NPU_REQUIRES_GRAD], cells[BENCH_REQUIRES_GRAD]))
    return cells


class Sides(NamedTuple):
    """Matched rows as two sides: row i pairs ``npus[i]`` with ``benches[i]`` (None: unmatched)."""

    npus: Sequence[LeafRow]
    benches: Sequence[LeafRow | None]


def pair_sides(pairs: Sequence[RowPair]) -> Sides:
    return Sides([p.npu for p in pairs], [p.bench for p in pairs])


@dataclass(frozen=True, slots=True)
class ColumnTable:
    """A compare table's cells column by column, as ``build_table`` makes its rows of them: for readers
    of a few columns of every row (the summary, the divergence analysis's nodes), which need no rows."""

    mode: str
    columns: list[str]
    cells: dict[str, Sequence[Any]]  # the columns' cells (of those the ``judged`` given to it holds)
    entries: list[str]  # the dump entry of each row
    p2p: dict[int, tuple[str, str]]  # row -> a P2POp's (op, peer) texts


def column_table(
    sides: Sides,
    mode: str,
    stacks: Mapping[str, list[str]] | None,
    tensor_cells: Sequence[Sequence[Any]] | None = None,
    float_stats: Sequence[bool] = INT_COLUMNS,
    unreadable: Mapping[int, str] | None = None,
    judged: Mapping[str, Sequence[Any]] | None = None,
) -> ColumnTable:
    """The cells of ``build_table``'s table (its arguments, without the highlights), column by column.
    A ``judged`` may hold some of the judged columns only (Result and Err_message at least: the table
    then holds no others), and the NPU_Stack_Info cells (``stack_cells``)."""
    npus, benches = sides
    cells = _cell_columns(npus, benches, mode, tensor_cells, float_stats, judged)
    entries = list(map(attrgetter("entry"), npus))
    if judged is None:
        results, messages = judge_columns(cells, _entry_ends(entries), mode)
    else:
        results, messages = list(judged[RESULT]), list(judged[ERR_MESSAGE])
    for i, problem in (unreadable or {}).items():
        marked: dict[str, Any] = {}
        mark_unreadable(marked, problem)
        results[i], messages[i] = marked[RESULT], marked[ERR_MESSAGE]
    cells[RESULT], cells[ERR_MESSAGE] = results, messages
    if stacks is not None and STACK_COLUMN not in cells:
        cells[STACK_COLUMN] = stack_cells(entries, stacks)
    p2p = {i: (row.p2p_op, row.p2p_peer) for i, row in enumerate(npus) if row.p2p_op != NA}
    return ColumnTable(mode, columns_for(mode, stacks is not None), cells, entries, p2p)


def build_table(
    sides: Sides,
    mode: str,
    stacks: dict[str, list[str]] | None,
    tensor_cells: Sequence[Sequence[Any]] | None = None,
    float_stats: Sequence[bool] = INT_COLUMNS,
    highlight: bool = True,
    unreadable: Mapping[int, str] | None = None,
    judged: Mapping[str, Sequence[Any]] | None = None,
) -> CompareTable:
    """Assemble, judge and order the rows of one compare (``stacks`` None: no NPU_Stack_Info column;
    ``highlight`` False: no D6 highlights, which only the xlsx writer shows). ``unreadable``: row
    index -> why its tensor files could not be read; such a row is an ``error`` whatever its cells
    say, its Err_message says why. ``judged``: a statistics table's diff, statistics and tail columns
    made already, judged (``writers/stat_lines.py:statistics_cells``, the same cells)."""
    made = column_table(sides, mode, stacks, tensor_cells, float_stats, unreadable, judged)
    cells = made.cells
    marks: list[tuple[str | None, list[str]]] = []
    if highlight:
        # the highlight rules read a row as a dict of its cells: made in C, from the columns
        records = list(map(dict, map(zip, repeat(list(cells)), zip(*cells.values()))))
        start = 0
        for end in _entry_ends(made.entries):
            marks.extend(highlight_group(records[start:end], mode))
            start = end
    return CompareTable(
        mode=mode,
        columns=made.columns,
        rows=list(map(list, zip(*map(cells.__getitem__, made.columns)))),
        highlights=[color for color, _ in marks],
        highlight_reasons=[reasons for _, reasons in marks],
        entries=made.entries,
        p2p=made.p2p,
    )


def _entry_ends(entries: Sequence[str]) -> list[int]:
    """Where each run of consecutive rows of one dump entry ends: the unit the reference judges together."""
    return [i for i in range(1, len(entries) + 1) if i == len(entries) or entries[i] != entries[i - 1]]


def stack_cells(entries: Sequence[str], stacks: Mapping[str, list[str]]) -> list[str]:
    """The NPU_Stack_Info cells: an entry's stack on its first row, N/A elsewhere (a stack shared by
    entries, as stack.json's readers share equal stacks, printed once)."""
    cells = []
    texts: dict[int, str] = {}  # id of a stack (held by ``stacks``) -> its text
    previous = None
    for entry in entries:
        if entry != previous and entry in stacks:
            stack = stacks[entry]
            text = texts.get(id(stack))
            if text is None:
                text = texts[id(stack)] = str(stack)
            cells.append(text)
        else:
            cells.append(NA)
        previous = entry
    return cells
