"""A result cell as a number: what the typed API and the summary's metrics read.

Numbers stay numbers; a percentage text is a fraction (``12.5%`` -> 0.125); ``inf``/``nan`` texts are
those floats; a bool or its text (a bool tensor's max) is 0.0 or 1.0; anything else (``N/A``, ``unsupported``,
``shape unmatched``, empty) is NaN.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from msprobe_dask.metrics.stats import PERCENT, percent_fraction

NAN = float("nan")
BOOL_TEXTS = {str(b): float(b) for b in (False, True)}  # a bool's text (Python's str) -> its number


def as_float(cell: Any) -> float:
    if cell.__class__ is float:  # (most cells: at once)
        return cell  # type: ignore[no-any-return]
    if cell is None:
        return NAN
    if isinstance(cell, (int, float)):  # bools too
        return float(cell)
    if cell.__class__ is str and cell.endswith(PERCENT):  # (float() refuses it: the percentage, at once)
        fraction = percent_fraction(cell.strip())
        return NAN if fraction is None else fraction
    try:
        return float(cell)  # numpy scalars, "1.5", "inf", "nan"
    except (TypeError, ValueError):
        pass
    text = str(cell).strip()
    if text in BOOL_TEXTS:
        return BOOL_TEXTS[text]
    if text.endswith(PERCENT):
        fraction = percent_fraction(text)
        return NAN if fraction is None else fraction
    return NAN


def as_floats(cells: Sequence[Any]) -> list[float]:
    """``as_float`` of each cell; cells that are all texts converted once a distinct text (a table's
    metric column is a few texts many times: ``0``, a dump's repeated percentages)."""
    try:
        distinct = set(cells)
    except TypeError:  # (a cell that is not hashable)
        return list(map(as_float, cells))
    if any(cell.__class__ is not str for cell in distinct):  # (numbers: 0.0 and -0.0 are one key)
        return list(map(as_float, cells))
    made = {text: as_float(text) for text in distinct}
    return list(map(made.__getitem__, cells))


def is_number(value: float) -> bool:
    return not math.isnan(value)
