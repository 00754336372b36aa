"""Statistics-mode diffs of two summary values (compare.md §4.1), as the strings the reference prints."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from msprobe_dask.columns import NA, NAN
from msprobe_dask.metrics.float_repr import float_reprs

SAME = "0"  # the diff and relative error of two statistics printed alike
INF = "inf"  # the relative error where the Bench statistic is 0 (and the marker of infinite diffs)
PERCENT = "%"  # what follows a relative error's number: every cell of one, in Python and in C, takes it here

_NAN, _INF, _NEG_INF, _NUM, _DEVICE, _NA, _OTHER = "nan", "inf", "-inf", "num", "device", "na", "other"
_DEVICE_WORDS = ("npu", "cpu", "cuda")


def _kind(value: Any) -> str:
    t = value.__class__
    if t is float:  # the usual case, decided without printing the number
        if value != value:
            return _NAN
        if value in (math.inf, -math.inf):
            return _INF if value > 0 else _NEG_INF
        return _NUM
    if t is int:
        return _NUM
    text = str(value).strip()
    low = text.lower()
    if low == "nan":
        return _NAN
    if low == "inf":
        return _INF
    if low == "-inf":
        return _NEG_INF
    if low not in ("true", "false") and not isinstance(value, bool):
        try:
            float(text)
            return _NUM
        except ValueError:
            pass
    if any(word in low for word in _DEVICE_WORDS):
        return _DEVICE
    if text == NA:
        return _NA
    return _OTHER


def _number(value: Any) -> float | int:
    return value if isinstance(value, (int, float)) else float(value)


def stat_diff(npu: Any, bench: Any) -> tuple[Any, str]:
    """(diff, relative error) of one statistic; diff is a number or a marker string."""
    (diff,), (rel,) = stat_diffs((npu,), (bench,))
    return diff, rel


def stat_diffs(
    npus: Sequence[Any], benches: Sequence[Any], in_float: bool = False
) -> tuple[list[Any], list[str]]:
    """``stat_diff`` of each pair of one statistic's column: the diffs and the relative errors (the
    relative errors of two finite floats printed at the end by one ``float_reprs``). ``in_float``: the
    column's diffs are float64 (``table.float_stat_columns``): two ints are subtracted as floats."""
    diffs: list[Any] = []
    rels: list[Any] = []
    ratios: list[float] = []  # the relative errors to print, at ``at`` in ``rels``
    at: list[int] = []
    isfinite, copysign = math.isfinite, math.copysign
    for npu, bench in zip(npus, benches):
        if in_float and npu.__class__ is int and bench.__class__ is int:
            npu, bench = float(npu), float(bench)
        if npu.__class__ is float and bench.__class__ is float and isfinite(npu) and isfinite(bench):
            # the usual case, decided as below without printing the numbers: two finite floats print
            # alike when they are equal, zeros of the same sign included
            if npu == bench and (npu or copysign(1.0, npu) == copysign(1.0, bench)):
                diffs.append(SAME)
                rels.append(SAME)
                continue
            diff = npu - bench
            diffs.append(diff)
            if bench == 0:
                rels.append(INF)
            else:
                at.append(len(rels))
                rels.append(None)
                ratios.append(abs(diff / bench * 100))
        else:
            diff, rel = stat_diff_by_kind(npu, bench)
            diffs.append(diff)
            rels.append(rel)
    for i, text in zip(at, float_reprs(ratios)):
        rels[i] = text + PERCENT
    return diffs, rels


def stat_diff_by_kind(npu: Any, bench: Any) -> tuple[Any, str]:
    """stat_diff for any two values, by their kinds (number, nan, inf, device text, N/A...)."""
    if str(npu) == str(bench):
        return "0", "0"
    a, b = _kind(npu), _kind(bench)
    if _NA in (a, b):
        return NA, NA
    infinite = (_INF, _NEG_INF)
    if _NAN in (a, b) and {a, b} <= {_NAN, _NUM, _INF, _NEG_INF}:
        return NAN, NAN
    if a == _NUM and b == _NUM:
        diff = _number(npu) - _number(bench)
        base = _number(bench)
        rel = INF if base == 0 else f"{abs(diff / base * 100)}{PERCENT}"
        return diff, rel
    if a in infinite or b in infinite:
        if {a, b} <= {_NUM, _INF, _NEG_INF}:
            marker = "inf" if (a == _INF or b == _NEG_INF) else "-inf"
            return marker, marker
    if a == _DEVICE and b == _DEVICE:
        return NA, NA
    return "Diff", "Diff"


def percent_fraction(text: str) -> float | None:
    """A ``12.5%`` text as 0.125 (its number over 100); None for a text that is not a percentage."""
    if not text.endswith(PERCENT):
        return None
    try:
        return float(text[: -len(PERCENT)]) / 100
    except ValueError:
        return None


def relative_fraction(rel: Any) -> float | None:
    """A relative-error cell ``12.5%`` as 0.125, its sign dropped; None for cells that are not
    percentages."""
    fraction = percent_fraction(rel) if isinstance(rel, str) else None
    return None if fraction is None else abs(fraction)


def is_nan_or_inf(value: Any) -> bool:
    if value.__class__ is float:  # the usual case
        return value - value != 0.0  # NaN for a NaN or an infinity
    if isinstance(value, float):
        return math.isnan(value) or math.isinf(value)
    return isinstance(value, str) and value.strip().lower() in ("nan", "inf", "-inf")
