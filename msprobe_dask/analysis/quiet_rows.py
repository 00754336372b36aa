"""The divergence walk's skipping of quiet rows: the rows whose error is known to be 0.0 (or none)
without measuring them, and a run of nodes made only of such rows, read by the walk at once
(``QuietRun``) instead of node by node."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Container, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import compress
from typing import Any

from msprobe_dask.analysis.comm_apis import COMM_PREFIXES, is_communication
from msprobe_dask.analysis.row_entries import INPUT_ROLES, Signature, entry_and_state
from msprobe_dask.analysis.row_errors import ZERO_CELLS, RowColumns
from msprobe_dask.analysis.unsettled import is_settled
from msprobe_dask.columns import BENCH_MD5, EUC_DIST, MAX_ABS_ERR, NPU_MD5, NPU_NAME, STAT_COLUMNS


@dataclass(frozen=True, slots=True)
class QuietRun:
    """Consecutive nodes that no rule of the divergence walk can find, none of whose tensors has an error
    but 0.0 (``QuietRows``), as the walk reads them at once: the ``names`` of the first ones, then
    ``tail``: the name and own input error of each of the last ones, from the last that has an input
    (read in turn: what they hand on as the input error of a node without inputs), and the
    ``signatures`` of all their tensors, in any order. Each stands for its LightNode: that of a node of
    ``names`` has an input error of 0.0 or none."""

    names: Sequence[str]
    tail: Sequence[tuple[str, float | None]]
    signatures: Iterable[Signature]


class QuietRows:
    """The rows of ``rows`` whose error is known without measuring it: every statistic a float, the same
    on both sides, no MaxAbsErr or EucDist but zero (an error of 0.0; their NPU max and min a signature),
    and those whose same cells give no error (no tensor, such as a process group's or a text argument's
    rows: each distinct set of cells measured once). The walk reads a run of nodes of such rows only as
    a ``QuietRun``, without a Node or a LightNode each: most of a rank whose divergence is far in."""

    def __init__(self, rows: RowColumns, measured: list[int], tensor: bytearray | None) -> None:
        self.rows = rows
        self.measured = measured  # (the rows with an error to measure: their nodes are read alone)
        self.tensor = tensor  # (whether each row is a tensor: None, every row is)

    @classmethod
    def of(cls, rows: RowColumns, atol: float, whole: bool = False) -> QuietRows | None:
        """The quiet rows of ``rows``; None where most rows have an error to measure (a rank whose values
        differ a little everywhere: its nodes are read one by one; found when more than half are), or
        (``whole``) where a row has one (found at the first). Rows without a tensor (no error: an
        entry whose rows a piece left out, ``rank_rows``) are quiet, however many."""
        cells = rows.cells
        count = len(rows.md5_only)
        most = 1 if whole else count // 2 + 1  # (how many rows with an error to measure make None)
        measured: list[int] = []
        tensor = None
        errors: dict[tuple[Any, ...], float | None] = {}
        float_ = float
        highs, bench_highs = cells[STAT_COLUMNS[0]], cells[STAT_COLUMNS[4]]
        columns = [cells[column] for column in (*STAT_COLUMNS, MAX_ABS_ERR, EUC_DIST, NPU_MD5, BENCH_MD5)]
        for i in _loud_rows(rows):
            if not (rows.md5_only[i] or highs[i].__class__ is float_ is bench_highs[i].__class__):
                # (each cell with its class: False, 0 and 0.0 are equal keys, not equal cells)
                row = [column[i] for column in columns]
                key = (*row, *map(type, row))
                try:
                    error = errors[key] if key in errors else errors.setdefault(key, rows.error(i, atol))
                except TypeError:  # (a cell that is not hashable)
                    error = rows.error(i, atol)
                if error is None:
                    if tensor is None:
                        tensor = bytearray(b"\x01") * count
                    tensor[i] = 0
                    continue
            measured.append(i)  # (an md5's error, or one of its max's: stats_error)
            if len(measured) == most:
                return None
        return cls(rows, measured, tensor)

    def loud(
        self, entries: Sequence[str], spans: Sequence[tuple[int, int]], receiving: Container[int]
    ) -> list[int]:
        """The nodes (of ``spans``, in order) not in a QuietRun: those with a row to measure, and the
        communication nodes that received something from a peer (``receiving``) or may have a row that is
        not settled (``is_unsettled``)."""
        starts = [start for start, _ in spans]
        loud = {bisect_right(starts, i) - 1 for i in self.measured}
        for index, (start, end) in enumerate(spans):
            entry = entries[start]
            if entry.startswith(COMM_PREFIXES) and is_communication(entry):
                if index in receiving or not is_settled(self.rows, entry, start, end):
                    loud.add(index)
        return sorted(loud)

    def run(self, entries: Sequence[str], spans: Sequence[tuple[int, int]], first: int, end: int) -> QuietRun:
        """The QuietRun of nodes ``first`` to ``end`` (of ``spans``)."""
        cells = self.rows.cells
        names, given_states = cells[NPU_NAME], cells["state"]
        tensor = self.tensor
        tail: list[tuple[str, float | None]] = []
        last = end
        while last > first:  # (from the last node, back to the last with an input)
            last -= 1
            start, stop = spans[last]
            has_input = any(
                str(given_states[i] or entry_and_state(str(names[i]))[1]) in INPUT_ROLES
                for i in range(start, stop)
                if tensor is None or tensor[i]
            )
            tail.append((entries[start], 0.0 if has_input else None))
            if has_input:
                break
        tail.reverse()
        return QuietRun(
            [entries[start] for start, _ in spans[first:last]],
            tail,
            zip(*self.extremes(spans[first][0], spans[end - 1][1])),
        )

    def extremes(self, start: int, end: int) -> tuple[Iterable[Any], Iterable[Any]]:
        """The NPU max and the NPU min of the tensors of rows ``start`` to ``end``."""
        cells, tensor = self.rows.cells, self.tensor
        highs, lows = cells[STAT_COLUMNS[0]][start:end], cells[STAT_COLUMNS[1]][start:end]
        if tensor is None:
            return highs, lows
        return compress(highs, tensor[start:end]), compress(lows, tensor[start:end])


def _loud_rows(rows: RowColumns) -> Iterator[int]:
    """The rows of ``rows`` that are not quiet at sight (``QuietRows``): each statistic a float, the same
    on both sides, no MaxAbsErr or EucDist but zero, not an md5 row."""
    cells = rows.cells
    float_ = float
    same = zip(
        *(cells[column] for column in STAT_COLUMNS), cells[MAX_ABS_ERR], cells[EUC_DIST], rows.md5_only
    )
    return (
        i
        for i, (n0, n1, n2, n3, b0, b1, b2, b3, max_abs, euc, md5_only) in enumerate(same)
        if not (
            n0 == b0 and n1 == b1 and n2 == b2 and n3 == b3 and max_abs in ZERO_CELLS and euc in ZERO_CELLS
            and n0.__class__ is float_ and n1.__class__ is float_ and n2.__class__ is float_
            and n3.__class__ is float_ and b0.__class__ is float_ and b1.__class__ is float_
            and b2.__class__ is float_ and b3.__class__ is float_ and not md5_only
        )
    )  # fmt: skip
