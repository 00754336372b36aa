"""How one table cell is printed, as the reference's pandas-based writer prints it."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from msprobe_dask.columns import NAN
from msprobe_dask.metrics.float_repr import float_reprs

FORMULA_START = "＋－＝％＠+-=%@"
_FORMULA = re.compile(f"^[{re.escape(FORMULA_START)}]|;[{re.escape(FORMULA_START)}]")
_INFS = (math.inf, -math.inf)
LEADING_BLANKS = "\t\r\n "
NEUTRALISED_INSIDE = ";\r\n"
"""``neutralise`` leaves a text as it is unless it starts with one of FORMULA_START or LEADING_BLANKS or
holds one of NEUTRALISED_INSIDE."""
_INSIDE = re.compile(f"[{re.escape(NEUTRALISED_INSIDE)}]")


def float_text(value: float) -> str:
    if value != value:
        return NAN
    if value in _INFS:
        return " inf" if value > 0 else " -inf"
    return repr(value)


def float_texts(values: Sequence[float]) -> list[str]:
    """``float_text`` of each of ``values`` (of class float): a finite one's is its ``float_reprs``."""
    return [text if x - x == 0 else float_text(x) for x, text in zip(values, float_reprs(values))]


def _parses_as_float(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def neutralise(text: str) -> str:
    """D9: a text that a spreadsheet would run as a formula gets a leading quote instead of aborting
    (also when tabs, spaces, CR or LF come before the formula sign), and a raw CR, which the csv
    writer leaves unquoted and a reader takes for a line end, is written as the two characters
    ``\\r`` (a LF is quoted in csv, as the reference writes its kernel messages' line ends)."""
    if not text or (
        text[0] not in FORMULA_START and text[0] not in LEADING_BLANKS and _INSIDE.search(text) is None
    ):  # the common case, no regex
        return text
    formula = bool(_FORMULA.search(text.lstrip(LEADING_BLANKS))) and not _parses_as_float(text)
    text = text.replace("\r", "\\r")
    return "'" + text if formula else text


def cell_text(value: Any) -> str:
    t = value.__class__
    if t is str:
        return neutralise(value)
    if t is float:
        return float_text(value)
    if t is bool:
        return str(value)
    if value is None:
        return ""
    if isinstance(value, float):  # numpy floats
        return float_text(value)
    return neutralise(str(value))
