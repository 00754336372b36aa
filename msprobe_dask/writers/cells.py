"""How one table cell is printed, as the reference's pandas-based writer prints it."""

from __future__ import annotations

import math
import re
from typing import Any

_FORMULA_START = "＋－＝％＠+-=%@"
_FORMULA = re.compile(r"^[＋－＝％＠+\-=%@]|;[＋－＝％＠+\-=%@]")
_INFS = (math.inf, -math.inf)
_BLANKS = "\t\r\n "


def float_text(value: float) -> str:
    if value != value:
        return "Nan"
    if value in _INFS:
        return " inf" if value > 0 else " -inf"
    return repr(value)


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
        text[0] not in _FORMULA_START
        and text[0] not in _BLANKS
        and ";" not in text
        and "\r" not in text
        and "\n" not in text
    ):  # the common case, no regex
        return text
    formula = bool(_FORMULA.search(text.lstrip(_BLANKS))) and not _parses_as_float(text)
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
