"""The cells of a summary row's statistics (graph_visualize.md §3.3): each side's Max, Min, Mean and
Norm as cells, and of each pair of them the diff cell, the relative-error cell in its exported text and
the relative error as a ratio. graph/cells.py makes the rows of them; csrc/compare.c makes the same cells
of plain numbers itself, by these rules (cells.SUMMARY_RULES)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from operator import itemgetter
from typing import Any

from msprobe_dask.columns import NA, NAN
from msprobe_dask.dump.markers import STATS
from msprobe_dask.graph.item_text import DECIMALS, ExportedText, format_str
from msprobe_dask.metrics.stats import INF, PERCENT

# a relative error r (in %) in this range has a positional repr and 6 decimals tell floats apart
# (rel_text): 1e-4 <= r < 2**33
POSITIONAL = (1e-4, 8589934592.0)

SPECIAL_TEXTS = ("inf", "-inf", "nan")
_INFS = (math.inf, -math.inf)
_PLAIN_NUMBERS = frozenset((int, float))
NO_VALUE = NA  # the diff and relative-error cells stat_diff cannot make


def stored_stat(v: Any) -> Any:
    return NAN if isinstance(v, float) and math.isnan(v) else v


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _summary_cell(v: Any) -> Any:
    """A summary statistic or diff cell: nan is stored as 'Nan', and a cell whose str() is exactly
    inf, -inf or nan gets a trailing TAB."""
    t = v.__class__
    if t is float:
        if v != v:
            return NAN
        return repr(v) + "\t" if v in _INFS else v
    if t is int or (t is str and len(v) > 4):
        return v
    v = stored_stat(v)
    s = str(v)
    return s + "\t" if s in SPECIAL_TEXTS else v


def special_cell(v: Any) -> bool:
    """v is nan, inf or -inf: a float, or a string such as 'Nan' or 'inf\\t' (the NaN/Inf checker reads
    the max and min cells so)."""
    t = v.__class__
    if t is float:
        return v - v != 0.0  # type: ignore[no-any-return]
    if t is int:
        return False
    if isinstance(v, float):
        return math.isinf(v) or math.isnan(v)
    return isinstance(v, str) and v.strip().lower() in SPECIAL_TEXTS


ZERO_REL = "0.0" + PERCENT
"""The relative-error cell of two equal statistics (r = 0: not rel_text's exported form of a number)."""


def rel_text(r: float) -> str:
    """``str(r) + PERCENT`` in its exported form: §7.6 rounds it to 6 decimals where it has more.

    Between 1e-4 and 2**33, where ``repr`` is positional and floats are closer than 1e-6, the text
    rounded to 6 decimals is the exported one unless the repr has fewer than 6 decimals; then the
    rounded text ends with a 0 and ``round(r, DECIMALS) == r``. This spares the repr and its parsing back.
    Elsewhere the rule is applied to the text. The result is a fixed point of the export formatting,
    and marked so (ExportedText).
    """
    if POSITIONAL[0] <= r < POSITIONAL[1]:
        t = f"{r:.{DECIMALS}f}"
        if t[-1] != "0" or round(r, DECIMALS) != r:
            return ExportedText(t + PERCENT)
        return ExportedText(repr(r) + PERCENT)
    if r == 0.0:
        return ZERO_REL
    return ExportedText(format_str(repr(r) + PERCENT))


def stat_diff(x: Any, y: Any) -> tuple[Any, str, float | None]:
    """(diff cell, relative-error cell, relative error as a ratio) of one NPU/Bench statistic."""
    if not (
        x.__class__ in _PLAIN_NUMBERS and y.__class__ in _PLAIN_NUMBERS or _is_number(x) and _is_number(y)
    ):
        return NO_VALUE, NO_VALUE, None
    d = x - y
    if d != d:
        return NAN, NAN, None
    if y == 0:
        return _summary_cell(d), NO_VALUE, None
    try:
        r = abs(d / y * 100)
    except OverflowError:
        return _summary_cell(d), INF + PERCENT, math.inf
    return _summary_cell(d), rel_text(r), r / 100


def stat_diffs(ns: tuple[Any, ...], bs: tuple[Any, ...]) -> tuple[list[Any], list[str], float | None]:
    """The diff cells, the relative-error cells and the last (Norm) relative error as a ratio."""
    diffs, rels = [], []
    ratio: float | None
    for x, y in zip(ns, bs):
        if x.__class__ is float and y.__class__ is float and y:
            # the common case, stat_diff and rel_text inline: r is finite when d is
            d = x - y
            r = abs(d / y * 100)
            if POSITIONAL[0] <= r < POSITIONAL[1]:
                t = f"{r:.{DECIMALS}f}"
                t = ExportedText((repr(r) if t[-1] == "0" and round(r, DECIMALS) == r else t) + PERCENT)
            elif r == 0.0:
                t = ZERO_REL
            else:
                d, t, ratio = stat_diff(x, y)
                diffs.append(d)
                rels.append(t)
                continue
            diffs.append(d)
            rels.append(t)
            ratio = r / 100
        elif x.__class__ is int and x == y and y.__class__ is int and y:  # equal scalar arguments
            diffs.append(0)
            rels.append(ZERO_REL)
            ratio = 0.0
        else:
            d, t, ratio = stat_diff(x, y)
            diffs.append(d)
            rels.append(t)
    return diffs, rels, ratio


_GET_STATS = itemgetter(*STATS)


NULL_STAT = "None"  # a statistic that is null (or missing), as stats_of gives it


def stats_of(item: Mapping[str, Any]) -> tuple[Any, ...]:
    """The item's Max, Min, Mean and Norm, None as 'None'."""
    try:
        values = _GET_STATS(item)
    except KeyError:
        values = tuple(map(item.get, STATS))
    if None in values:
        return tuple(NULL_STAT if v is None else v for v in values)
    return values


def cells_of(values: tuple[Any, ...]) -> tuple[Any, ...]:
    """The statistics as summary cells (_summary_cell)."""
    try:
        total = sum(values)
        if total - total == 0:  # ints and finite floats only: they are their own cells
            return values
    except (TypeError, OverflowError):  # a string or an int too large for a float
        pass
    return tuple(map(_summary_cell, values))
