"""Compare rows as the divergence analysis reads them, column by column (``RowColumns``), and the rule
of a tensor's error.

The rows are keyed by the compare table's column names: a ``CompareTable``'s cells, or a table read
back from a written csv (``divergence.table_columns``). Values may be numbers or the texts the csv
holds. Optional columns: ``api_origin_name`` (the dump entry), ``state``, ``NPU P2POp op`` and
``NPU P2POp peer``.

A tensor's *error* is dimensionless: the largest difference of its summaries (Max, Min, Mean; Norm;
with tensor dumps also MaxAbsErr and EucDist) beyond an absolute floor ``atol``, relative to the
tensor's magnitude (``max(|Bench max|, |Bench min|)``, the Bench norm for Norm and EucDist). A mean of
0.0 against 3.7e-9 in a tensor whose values reach 2 is an error of 2e-9, not 100%.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from msprobe_dask.columns import (
    BENCH_MD5,
    EUC_DIST,
    MAX_ABS_ERR,
    NPU_DTYPE,
    NPU_MAX,
    NPU_MD5,
    NPU_NAME,
    NPU_P2P_OP,
    NPU_P2P_PEER,
    STACK_COLUMN,
    STAT_COLUMNS,
)


def number(value: Any) -> float | None:
    """A compare cell as a float (numbers and their csv texts, ``inf``, ``nan``); None otherwise."""
    kind = type(value)
    if kind is float:
        return value  # type: ignore[no-any-return]
    if kind is int:
        return float(value)
    if kind is str:
        return _text_number(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


@lru_cache(maxsize=1024)
def _text_number(text: str) -> float | None:
    """``number`` of a text, remembered: a rank's communication nodes read the same few texts that are not
    numbers (a process group's ranks) thousands of times, and each refusal costs an exception."""
    try:
        return float(text)
    except ValueError:
        return None


def _relative(npu: float, bench: float, scale: float, atol: float) -> float:
    if npu == bench or npu != npu and bench != bench:  # (equal, or both NaN)
        return 0.0
    if not (-math.inf < npu < math.inf and -math.inf < bench < math.inf):
        return math.inf
    excess = abs(npu - bench) - atol
    if excess <= 0:
        return 0.0
    return excess / scale if scale > 0 else math.inf


def md5_error(npu_md5: Any, bench_md5: Any) -> float:
    """The error of a row of md5s alone: none where they are the same, else 1 (any rtol below 1 flags it)."""
    return 0.0 if npu_md5 == bench_md5 else 1.0


def _finite(value: float | None) -> bool:
    return value is not None and -_INF < value < _INF


_INF = math.inf


ZERO_CELLS = (None, 0, 0.0, "0", "0.0")

SCALE_STATS = (0, 1)
"""Where in a row's summaries the two statistics are (Max, Min) whose larger finite |Bench| is its scale:
the base of the error of every statistic but NORM_STAT's, and of MaxAbsErr."""
NORM_STAT = 3
"""Where in a row's summaries the statistic is (Norm) measured against its own finite |Bench| (and
EucDist against it): neither is measured where that is not finite."""


def stats_error(
    npu: tuple[float | None, ...], bench: tuple[float | None, ...], max_abs: Any, euc: Any, atol: float
) -> float | None:
    """The error (see the module's doc) of a row whose summaries are these (as numbers: None where a
    cell is none) and whose MaxAbsErr and EucDist cells are these."""
    if npu == bench and None not in npu and max_abs in ZERO_CELLS:
        return 0.0  # the same summaries (NaN aside, which is never equal): no error
    (one, other), at = SCALE_STATS, NORM_STAT
    high, low, norm_value = bench[one], bench[other], bench[at]
    scale = max(abs(high) if _finite(high) else 0.0, abs(low) if _finite(low) else 0.0)  # type: ignore[arg-type]
    norm = abs(norm_value) if _finite(norm_value) else None  # type: ignore[arg-type]
    bases: list[float | None] = [scale] * len(bench)
    bases[at] = norm
    errors = [
        _relative(a, b, base, atol)
        for a, b, base in zip(npu, bench, bases)
        if a is not None and b is not None and base is not None
    ]
    for cell, base in ((max_abs, scale), (euc, norm)):
        value = None if cell is None else number(cell)
        if value is not None and base is not None and value == value:
            errors.append(_relative(value, 0.0, base, atol))
    return max(errors) if errors else None


READ_COLUMNS = (
    NPU_NAME,
    "api_origin_name",
    "state",
    *STAT_COLUMNS,
    MAX_ABS_ERR,
    EUC_DIST,
    NPU_MD5,
    BENCH_MD5,
    NPU_DTYPE,
    NPU_P2P_OP,
    NPU_P2P_PEER,
    STACK_COLUMN,
)
"""The columns of compare rows the analysis reads."""
_DEFAULTS = {NPU_NAME: ""}
"""A cell a row without that column holds, where it is not None."""


@dataclass(frozen=True, slots=True)
class RowColumns:
    """Compare rows column by column, as the analysis reads them: ``cells[column]`` holds every row's
    cell of each of ``READ_COLUMNS`` (None, or ``_DEFAULTS``', where a row has no such column);
    ``md5_only[i]``: row i holds md5s and no statistics."""

    cells: Mapping[str, Sequence[Any]]
    md5_only: Sequence[bool]
    converted: list[list[float | None]] = field(default_factory=list)  # (``numbers``)

    @classmethod
    def of_columns(cls, count: int, columns: Mapping[str, Sequence[Any]]) -> RowColumns:
        """``count`` rows that hold ``columns`` (each one's cells), and no others."""
        cells = {column: columns.get(column) or [_DEFAULTS.get(column)] * count for column in READ_COLUMNS}
        md5_only = NPU_MD5 in columns and BENCH_MD5 in columns and NPU_MAX not in columns
        return cls(cells, [md5_only] * count)

    def error(self, i: int, atol: float, numbers: list[float | None] | None = None) -> float | None:
        """The error of row ``i`` (see the module's doc; None for a row without two comparable summaries;
        ``numbers``: its ``row_numbers``, where the caller has them)."""
        cells = self.cells
        if self.md5_only[i]:
            return md5_error(cells[NPU_MD5][i], cells[BENCH_MD5][i])
        if self.converted and numbers is None:  # (every row is read)
            n0, n1, n2, n3, b0, b1, b2, b3 = self.converted
            npu, bench = (n0[i], n1[i], n2[i], n3[i]), (b0[i], b1[i], b2[i], b3[i])
        else:
            m0, m1, m2, m3, c0, c1, c2, c3 = self.row_numbers(i) if numbers is None else numbers
            npu, bench = (m0, m1, m2, m3), (c0, c1, c2, c3)
        return stats_error(npu, bench, cells[MAX_ABS_ERR][i], cells[EUC_DIST][i], atol)

    def exceeds(self, atol: float, rtol: float) -> bool:
        """Whether a row's error exceeds ``rtol``: without one, no node of these rows can diverge (every
        rule of the walk asks a tensor's error over ``rtol``, ``flow.walk_nodes``). A
        row whose NPU and Bench statistics are the same cells, with no MaxAbsErr or EucDist but zero,
        has no error (0 or none) and is not measured."""
        cells, md5_only = self.cells, self.md5_only
        same = zip(*(cells[column] for column in STAT_COLUMNS), cells[MAX_ABS_ERR], cells[EUC_DIST])
        for i, (n0, n1, n2, n3, b0, b1, b2, b3, max_abs, euc) in enumerate(same):
            same_cells = n0 == b0 and n1 == b1 and n2 == b2 and n3 == b3
            if same_cells and max_abs in ZERO_CELLS and euc in ZERO_CELLS:
                if not md5_only[i]:
                    continue
            error = self.error(i, atol)
            if error is not None and error > rtol:
                return True
        return False

    def numbers(self) -> list[list[float | None]]:
        """The statistics columns (NPU max .. l2norm, Bench max .. l2norm) as numbers (None: not one),
        converted when first asked for."""
        if not self.converted:
            self.converted.extend(
                [v if v.__class__ is float else number(v) for v in self.cells[column]]
                for column in STAT_COLUMNS
            )
        return self.converted

    def row_numbers(self, i: int) -> list[float | None]:
        """Row ``i``'s statistics as ``numbers`` holds them, converted alone: a part's communication
        nodes and the rows ``exceeds`` measures are a few of its rows, and converting every row's
        statistics for them would take 40% of the time of a part's nodes
        (``summary.divergence.node_part``)."""
        cells = self.cells
        return [v if (v := cells[column][i]).__class__ is float else number(v) for column in STAT_COLUMNS]
