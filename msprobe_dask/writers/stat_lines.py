"""A statistics table part's csv lines straight from its rows, in C (``csrc/stat_lines.c``): the
cells, the checkers' Result and Err_message and the lines made in one pass, without the table's
Python objects; or, where the table is wanted (the summary, ``--xlsx``), its judged cells.
``csv_lines(build_table(...).rows)`` is the definition; the kernel takes every rule
from it (``RULES``) and hands back to it what it does not make itself: the diff cells of statistics
that are not two finite floats, the reading of such cells, the verdict of a set of messages, the
Scalar and DType checkers' comparisons of values that differ, and the text of any unusual cell."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, NamedTuple

from msprobe_dask.columns import BASE_COLUMNS, DIFF_COLUMNS, NA, STACK_COLUMN, STAT_COLUMNS, TAIL_COLUMNS
from msprobe_dask.judge import rules
from msprobe_dask.match.dtypes import same_dtype
from msprobe_dask.metrics import stats
from msprobe_dask.table import Sides, columns_for, stack_cells
from msprobe_dask.writers import csv_writer

JUDGED = (*DIFF_COLUMNS, *STAT_COLUMNS, *TAIL_COLUMNS)
"""The columns of ``statistics_cells``."""
SLOTS = (*BASE_COLUMNS, *JUDGED, STACK_COLUMN)
"""The cells the kernel makes, in the order of its slots (csrc/stat_lines.c: BASE ... STACK)."""


class StatRules(NamedTuple):
    """What csrc/stat_lines.c reads, in its order."""

    csv: tuple[object, ...]  # csv_writer's NATIVE_RULES: how a cell is printed, and the dialect
    field: object  # any other cell's csv field
    order: tuple[int, ...]  # the slot of each column
    na: str
    same: str  # the cells of two statistics printed alike
    inf: str  # the relative error of a Bench statistic 0
    percent: str
    stat_diff: object  # (diff, relative error) of any two statistics
    fraction: object  # a relative error cell as a fraction, or None
    nan_or_inf: object  # the NaN/Inf checker's reading of a statistic
    checkers: rules.CheckerRules  # rules.CHECKERS, also the graph's (csrc/checker_rules.h)
    verdict: object  # (Result, Err_message) of a row's messages
    no_grad: tuple[str, ...]
    same_value: object  # the Scalar checker's comparison
    same_dtype: object  # the DType checker's


def _rules(with_stack: bool) -> tuple[object, ...]:
    return tuple(
        StatRules(
            csv=csv_writer.NATIVE_RULES,
            field=csv_writer.field,
            order=tuple(SLOTS.index(c) for c in columns_for("statistics", with_stack)),
            na=NA,
            same=stats.SAME,
            inf=stats.INF,
            percent=stats.PERCENT,
            stat_diff=stats.stat_diff,
            fraction=stats.relative_fraction,
            nan_or_inf=stats.is_nan_or_inf,
            checkers=rules.CHECKERS,
            verdict=rules.verdict,
            no_grad=rules.NO_GRAD,
            same_value=rules.same_value,
            same_dtype=same_dtype,
        )
    )


RULES = {with_stack: _rules(with_stack) for with_stack in (False, True)}


def statistics_lines(
    sides: Sides, stacks: Mapping[str, list[str]] | None, float_stats: Sequence[bool]
) -> bytes | None:
    """``csv_lines(build_table(sides, "statistics", stacks, None, float_stats, highlight=False).rows)``,
    made by the kernel; None where it is not built or does not take these rows."""
    cells = None if stacks is None else stack_cells([row.entry for row in sides.npus], stacks)
    made = statistics_part(sides, cells, float_stats, ())
    return None if made is None else made[0]


def statistics_part(
    sides: Sides, stack_column: list[str] | None, float_stats: Sequence[bool], columns: Collection[str]
) -> tuple[bytes, dict[str, list[Any]]] | None:
    """``statistics_lines`` (its stacks given as the NPU_Stack_Info cells, ``table.stack_cells``) and
    the cells of ``statistics_cells`` of those of ``columns`` it makes, by one pass of the kernel; None
    where it is not built or does not take these rows."""
    kernel = csv_writer.native
    if kernel is None:
        return None
    wanted = [c for c in JUDGED if c in columns]
    slots = tuple(SLOTS.index(c) for c in wanted)
    rules = RULES[stack_column is not None]
    made = kernel.stat_lines(
        list(sides.npus), list(sides.benches), tuple(float_stats), stack_column, rules, slots
    )
    return None if made is None else (made[0], dict(zip(wanted, made[1], strict=True)))


def statistics_cells(sides: Sides, float_stats: Sequence[bool]) -> dict[str, list[Any]] | None:
    """The ``JUDGED`` columns of ``build_table(sides, "statistics", ..., float_stats)``'s table (its
    ``judged``), made by the kernel; None where it is not built or does not take these rows."""
    kernel = csv_writer.native
    if kernel is None:
        return None
    made = kernel.stat_columns(list(sides.npus), list(sides.benches), tuple(float_stats), RULES[False])
    return None if made is None else dict(zip(JUDGED, made, strict=True))
