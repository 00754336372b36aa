"""D6: the legacy xlsx highlighting (compare.md §5, removed from the reference in late 2025).

Whole rows are filled red or yellow (red wins) and the reasons are appended to Err_message in the
xlsx only; the csv keeps the reference's Err_message.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from msprobe_dask.columns import (
    BENCH_NAME,
    BENCH_REQUIRES_GRAD,
    COSINE,
    MAX_ABS_ERR,
    MAX_DIFF,
    MAX_RELATIVE_ERR,
    NA,
    NPU_MAX,
    NPU_MIN,
    NPU_NAME,
    NPU_REQUIRES_GRAD,
    ONE_THOUSANDTH_RATIO,
)
from msprobe_dask.dump.markers import OUTPUT_PART
from msprobe_dask.judge.rules import Row, grads_differ
from msprobe_dask.metrics.stats import is_nan_or_inf, relative_fraction

RED, YELLOW = "red", "yellow"


@dataclass(frozen=True)
class HighlightLimits:
    """The numbers of the highlight rules (compare.md §5; the reasons below are written from them)."""

    huge_error: float = 1e10  # red: a max error above this
    magnitude: float = 1.0  # yellow: output max error >= 10x an input's, both above this (10x: log10 >= 1)
    ratio_input: float = 0.9  # red: an input's One Thousandth ratio above this ...
    ratio_output: float = 0.6  # ... and the output's below this
    ratio_fall: float = 0.1  # yellow: the ratio falls by more than this
    cosine_fall: float = 0.1  # yellow: Cosine falls by more than this
    rel_red: float = 0.5  # red: the output's MaxRelativeErr above this
    rel_yellow_output: float = 0.1  # yellow: the output's above this ...
    rel_yellow_input: float = 0.01  # ... while an input's is below this


LIMITS = HighlightLimits()


def _said(limit: float) -> str:
    """A limit as the reasons write it: 1e10, 1, 0.9."""
    return f"{limit:g}".replace("e+", "e")


REASON_NAN_INF = "highlight red: NPU max or min is nan/inf/-inf."
REASON_HUGE = f"highlight red: the absolute error is above {_said(LIMITS.huge_error)}."
REASON_GRAD = "highlight yellow: requires_grad of NPU and Bench differ."
REASON_MAGNITUDE = (
    "highlight yellow: the output's max error is 10 times or more that of an input above "
    f"{_said(LIMITS.magnitude)}."
)
REASON_RATIO_DROP = (
    f"highlight red: an input's One Thousandth Err Ratio > {_said(LIMITS.ratio_input)} while the output's "
    f"< {_said(LIMITS.ratio_output)}."
)
REASON_RATIO_FALL = (
    f"highlight yellow: One Thousandth Err Ratio falls by more than {_said(LIMITS.ratio_fall)} from input "
    "to output."
)
REASON_COSINE_FALL = (
    f"highlight yellow: Cosine falls by more than {_said(LIMITS.cosine_fall)} from input to output."
)
REASON_REL_RED = f"highlight red: the output's MaxRelativeErr is above {_said(LIMITS.rel_red)}."
REASON_REL_YELLOW = (
    f"highlight yellow: the output's MaxRelativeErr is above {_said(LIMITS.rel_yellow_output)} while an "
    f"input's is below {_said(LIMITS.rel_yellow_input)}."
)


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return None if math.isnan(value) else float(value)
    if isinstance(value, str):
        fraction = relative_fraction(value)
        if fraction is not None:
            return fraction
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _max_error(row: Row, mode: str) -> float | None:
    return _number(row.get(MAX_ABS_ERR if mode == "tensor" else MAX_DIFF))


class _Marks:
    def __init__(self) -> None:
        self.color: str | None = None
        self.reasons: list[str] = []

    def mark(self, reason: str) -> None:
        if reason not in self.reasons:
            self.reasons.append(reason)
        color = RED if reason.startswith("highlight red") else YELLOW
        if self.color != RED:
            self.color = color


def _row_marks(row: Row, mode: str, marks: _Marks) -> None:
    if is_nan_or_inf(row.get(NPU_MAX)) or is_nan_or_inf(row.get(NPU_MIN)):
        marks.mark(REASON_NAN_INF)
    error = _max_error(row, mode)
    if error is not None and abs(error) > LIMITS.huge_error:
        marks.mark(REASON_HUGE)
    if row[BENCH_NAME] != NA and grads_differ(row[NPU_REQUIRES_GRAD], row[BENCH_REQUIRES_GRAD]):
        marks.mark(REASON_GRAD)


def _output_marks(out: Row, inp: Row, mode: str, marks: _Marks) -> None:
    out_err, in_err = _max_error(out, mode), _max_error(inp, mode)
    if (
        out_err is not None
        and in_err is not None
        and out_err > LIMITS.magnitude
        and in_err > LIMITS.magnitude
    ):
        if math.log10(out_err) - math.log10(in_err) >= 1:
            marks.mark(REASON_MAGNITUDE)
    if mode == "tensor":
        ratio_in, ratio_out = (
            _number(inp[ONE_THOUSANDTH_RATIO]),
            _number(out[ONE_THOUSANDTH_RATIO]),
        )
        if ratio_in is not None and ratio_out is not None:
            if ratio_in > LIMITS.ratio_input and ratio_out < LIMITS.ratio_output:
                marks.mark(REASON_RATIO_DROP)
            elif ratio_in - ratio_out > LIMITS.ratio_fall:
                marks.mark(REASON_RATIO_FALL)
        cos_in, cos_out = _number(inp[COSINE]), _number(out[COSINE])
        if cos_in is not None and cos_out is not None and cos_in - cos_out > LIMITS.cosine_fall:
            marks.mark(REASON_COSINE_FALL)
    elif mode == "statistics":
        rel_out, rel_in = _number(out[MAX_RELATIVE_ERR]), _number(inp[MAX_RELATIVE_ERR])
        if rel_out is not None and rel_out > LIMITS.rel_red:
            marks.mark(REASON_REL_RED)
        elif (
            rel_out is not None
            and rel_in is not None
            and rel_out > LIMITS.rel_yellow_output
            and rel_in < LIMITS.rel_yellow_input
        ):
            marks.mark(REASON_REL_YELLOW)


def highlight_group(rows: Sequence[Row], mode: str) -> list[tuple[str | None, list[str]]]:
    """(colour, reasons) for each row of one dump entry."""
    marks = [_Marks() for _ in rows]
    if mode == "md5":
        return [(None, []) for _ in rows]
    inputs = [r for r in rows if OUTPUT_PART not in r[NPU_NAME]]
    for row, mark in zip(rows, marks):
        _row_marks(row, mode, mark)
        if OUTPUT_PART in row[NPU_NAME]:
            for inp in inputs:
                _output_marks(row, inp, mode, mark)
    return [(m.color, m.reasons) for m in marks]
