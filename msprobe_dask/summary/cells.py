"""A result cell as a number: what the typed API and the summary's metrics read.

Numbers stay numbers; a percentage text is a fraction (``12.5%`` -> 0.125); ``inf``/``nan`` texts are
those floats; anything else (``N/A``, ``unsupported``, ``shape unmatched``, empty) is NaN. A bool is
not a number here.
"""

from __future__ import annotations

import math
from typing import Any

NAN = float("nan")


def as_float(cell: Any) -> float:
    if isinstance(cell, bool) or cell is None:
        return NAN
    if isinstance(cell, (int, float)):
        return float(cell)
    try:
        return float(cell)  # numpy scalars, "1.5", "inf", "nan"
    except (TypeError, ValueError):
        pass
    text = str(cell).strip()
    if text.endswith("%"):
        try:
            return float(text[:-1]) / 100
        except ValueError:
            return NAN
    return NAN


def is_number(value: float) -> bool:
    return not math.isnan(value)
