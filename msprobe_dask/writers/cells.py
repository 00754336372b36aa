"""How one table cell is printed, as the reference's pandas-based writer prints it."""

from __future__ import annotations

import math
import re
from typing import Any

_FORMULA = re.compile(r"^[＋－＝％＠+\-=%@]|;[＋－＝％＠+\-=%@]")


def float_text(value: float) -> str:
    if math.isnan(value):
        return "Nan"
    if math.isinf(value):
        return " inf" if value > 0 else " -inf"
    return repr(value)


def _parses_as_float(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def neutralise(text: str) -> str:
    """D9: a text that a spreadsheet would run as a formula gets a leading quote instead of aborting."""
    if _FORMULA.search(text) and not _parses_as_float(text):
        return "'" + text
    return text


def cell_text(value: Any) -> str:
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return float_text(value)
    if value is None:
        return ""
    return neutralise(str(value))
