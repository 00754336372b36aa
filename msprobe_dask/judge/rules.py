"""Result / Err_message: the reference's indicator analysis (compare.md §5).

Rows arrive grouped by dump entry. Each checker may raise a row's level and append a message; the
final ``Err_message`` is the JSON list of those messages (all earlier texts are discarded, as in the
reference).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any

from msprobe_dask.dump.markers import BATCH_P2P
from msprobe_dask.match.dtypes import same_dtype
from msprobe_dask.metrics.stats import NA, is_nan_or_inf, relative_fraction

Row = dict[str, Any]

PASS, WARNING, ERROR = "pass", "warning", "error"
OUTPUT_PART = ".output."  # what the name of an output row holds
_LEVELS = {PASS: 0, WARNING: 1, ERROR: 2}

ALL_IGNORED_APIS = frozenset(
    {
        "empty",
        "empty_like",
        "numpy",
        "to",
        "__setitem__",
        "empty_with_format",
        "new_empty_strided",
        "new_empty",
        "empty_strided",
    }
)
INPUT_IGNORED_APIS = frozenset({"_reduce_scatter_base", "_all_gather_base", "all_to_all_single", BATCH_P2P})


@dataclass(frozen=True)
class Limits:
    """The numbers of the node-wide checkers (compare.md §5 rules 2, 2t, 7, 7t; graph_visualize.md
    §3.4): the one definition, used by this module, graph/checks.py and handed to the C kernel."""

    small_input_norm: float = 0.1  # rule 2: the inputs' largest NormRelativeErr below this ...
    big_output_norm: float = 0.5  # ... flags each output whose NormRelativeErr is above this
    tenfold: float = 10.0  # rule 7: the outputs' largest NormRelativeErr over the inputs' above this ...
    output_norm_over_zero: float = 0.1  # ... or, where the inputs' is 0, the outputs' above this
    thousandth_input: float = 0.9  # rule 2t: the inputs' smallest One Thousandth ratio above this ...
    thousandth_output: float = 0.1  # ... and the outputs' below this (the reference's message says 0.6)
    cosine_input: float = 0.9  # rule 7t: the inputs' smallest Cosine above this ...
    cosine_drop: float = 0.1  # ... and the outputs' smaller by more than this


LIMITS = Limits()

MSG_NAN_INF = "error: There is nan/inf/-inf in the maximum or minimum value of NPU."
MSG_NORM_OUTPUT = "error: The NormRelativeErr of output is greater than 0.5."
MSG_ONE_THOUSANDTH = "error: The input/parameters of One Thousandth Err Ratio > 0.9 while the output < 0.6."
MSG_REQUIRES_GRAD = "error: The Required_Grad of NPU and Bench are inconsistent"
MSG_SCALAR = "error: The scalar parameters of NPU and Bench are inconsistent."
MSG_DTYPE = "error: The dtype of NPU and Bench are inconsistent."
MSG_SHAPE = "error: The shape of NPU and Bench are inconsistent."
MSG_NORM_TENFOLD = "warning: The norm relative error of output is 10 times that of input."
MSG_COSINE = "warning: The input/parameters of Cosine > 0.9, and input/parameters - output > 0.1"
MSG_MD5_MISSING = "warning: The parameter of NPU does not match the bench."
MSG_MD5_DIFFERS = "error: The CRC-32 value of NPU differs from that of the bench."


class _Verdict:
    __slots__ = ("level", "messages")

    def __init__(self) -> None:
        self.level = PASS
        self.messages: list[str] = []

    def flag(self, message: str) -> None:
        level = message.split(":", 1)[0]
        if _LEVELS[level] > _LEVELS[self.level]:
            self.level = level
        self.messages.append(message)


def _is_output(row: Row) -> bool:
    return OUTPUT_PART in row["NPU Name"]


def _matched(row: Row) -> bool:
    return row["Bench Name"] != NA


def _api_name(rows: Sequence[Row]) -> str:
    """The API of a dump entry, of the name of its first input row (given its input rows, or all its
    rows where it has none)."""
    parts = rows[0]["NPU Name"].split(".", 2)
    return parts[1] if len(parts) > 1 else ""


def _max_input_norm(inputs: Sequence[Row]) -> float:
    values = [relative_fraction(r["NormRelativeErr"]) for r in inputs]
    return max((v for v in values if v is not None), default=0.0)


def _output_norm(row: Row) -> float:
    value = row["NormRelativeErr"]
    if value == "inf":
        return float("inf")
    return relative_fraction(value) or 0.0


def _numbers(rows: Sequence[Row], column: str) -> list[float]:
    out = []
    for r in rows:
        value = r[column]
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out.append(float(value))
    return out


def _nan_inf_check(row: Row, verdict: _Verdict) -> None:
    npu_bad = is_nan_or_inf(row["NPU max"]) or is_nan_or_inf(row["NPU min"])
    bench_bad = is_nan_or_inf(row["Bench max"]) or is_nan_or_inf(row["Bench min"])
    if npu_bad and not bench_bad:
        verdict.flag(MSG_NAN_INF)


def _same_value(npu: Any, bench: Any) -> bool:
    """As the reference compares two scalar arguments: equal values (an int and its float, whichever
    side's column the reference typed float), or the same text (``Nan`` and ``Nan``)."""
    return str(npu) == str(bench) or (npu == bench) is True


def _pair_checks(row: Row, verdict: _Verdict, is_input: bool) -> None:
    if not _matched(row):
        return
    npu_grad, bench_grad = row["NPU Requires_grad"], row["Bench Requires_grad"]
    if npu_grad not in ("", NA) and bench_grad not in ("", NA) and npu_grad != bench_grad:
        verdict.flag(MSG_REQUIRES_GRAD)
    if (
        is_input
        and "class" in row["NPU Dtype"]
        and "class" in row["Bench Dtype"]
        and row["NPU Tensor Shape"] == "[]"
        and not _same_value(row["NPU max"], row["Bench max"])
    ):
        verdict.flag(MSG_SCALAR)
    bench_name = row["Bench Name"]
    if (
        not same_dtype(row["NPU Dtype"], row["Bench Dtype"])
        and "qkv" not in bench_name
        and "gate_up" not in bench_name
    ):
        verdict.flag(MSG_DTYPE)
    if row["NPU Tensor Shape"] != row["Bench Tensor Shape"]:
        verdict.flag(MSG_SHAPE)


def _norm_output(inputs: Sequence[Row], outputs: Sequence[Row], verdicts: dict[int, _Verdict]) -> None:
    if _max_input_norm(inputs) < LIMITS.small_input_norm:
        for r in outputs:
            if _output_norm(r) > LIMITS.big_output_norm:
                verdicts[id(r)].flag(MSG_NORM_OUTPUT)


def _norm_tenfold(inputs: Sequence[Row], outputs: Sequence[Row], verdicts: dict[int, _Verdict]) -> None:
    if outputs:
        norm_in, norm_out = _max_input_norm(inputs), _max_input_norm(outputs)
        if (norm_in == 0 and norm_out > LIMITS.output_norm_over_zero) or (
            norm_in > 0 and norm_out / norm_in > LIMITS.tenfold
        ):
            verdicts[id(outputs[0])].flag(MSG_NORM_TENFOLD)


def _one_thousandth(inputs: Sequence[Row], outputs: Sequence[Row], verdicts: dict[int, _Verdict]) -> None:
    if not outputs:
        return
    ratio_in = min(_numbers(inputs, "One Thousandth Err Ratio"), default=1.0)
    ratio_out = min(_numbers(outputs, "One Thousandth Err Ratio"), default=1.0)
    if ratio_in > LIMITS.thousandth_input and ratio_out < LIMITS.thousandth_output:
        verdicts[id(outputs[0])].flag(MSG_ONE_THOUSANDTH)


def _tensor_cosine(inputs: Sequence[Row], outputs: Sequence[Row], verdicts: dict[int, _Verdict]) -> None:
    # like the one-thousandth rule, inputs without a numeric Cosine count as 1.0
    cos_in = min(_numbers(inputs, "Cosine"), default=1.0)
    cos_out = min(_numbers(outputs, "Cosine"), default=1.0)
    if outputs and cos_in > LIMITS.cosine_input and cos_in - cos_out > LIMITS.cosine_drop:
        verdicts[id(outputs[0])].flag(MSG_COSINE)


def _md5_row(row: Row, verdict: _Verdict) -> None:
    npu, bench = str(row["NPU MD5"]), str(row["BENCH MD5"])
    if npu != bench:
        missing = {npu, bench} & {NA, "Nan", ""}
        verdict.flag(MSG_MD5_MISSING if missing else MSG_MD5_DIFFERS)


GroupCheck = Callable[[Sequence[Row], Sequence[Row], dict[int, _Verdict]], None]
_GROUP_CHECKS: dict[str, tuple[GroupCheck, GroupCheck]] = {
    "statistics": (_norm_output, _norm_tenfold),
    "tensor": (_one_thousandth, _tensor_cosine),
}


def judge_group(rows: Sequence[Row], mode: str) -> None:
    """Fill ``Result`` and ``Err_message`` of the rows of one dump entry, in place."""
    verdicts = {id(r): _Verdict() for r in rows}
    outputs = [r for r in rows if _is_output(r)]
    inputs = [r for r in rows if not _is_output(r)] if len(outputs) < len(rows) else []
    api = _api_name(inputs or rows) if rows else ""
    if mode == "md5":
        for r in rows:
            _md5_row(r, verdicts[id(r)])
    elif api not in ALL_IGNORED_APIS:
        input_ignored = api in INPUT_IGNORED_APIS
        if input_ignored:
            inputs = []
        first_check, last_check = _GROUP_CHECKS[mode]
        for r in chain(inputs, outputs):  # each row's checks are its own: their order is the rows'
            _nan_inf_check(r, verdicts[id(r)])
        if not input_ignored:
            first_check(inputs, outputs, verdicts)
        for r in inputs:
            _pair_checks(r, verdicts[id(r)], True)
        for r in outputs:
            _pair_checks(r, verdicts[id(r)], False)
        if not input_ignored:
            last_check(inputs, outputs, verdicts)
    for r in rows:
        verdict = verdicts[id(r)]
        r["Result"] = verdict.level
        r["Err_message"] = _message_text(tuple(verdict.messages))


_MESSAGE_TEXTS: dict[tuple[str, ...], str] = {}


def _message_text(messages: tuple[str, ...]) -> str:
    """The Err_message of these messages (the checkers' messages are few: each list printed once)."""
    text = _MESSAGE_TEXTS.get(messages)
    if text is None:
        text = _MESSAGE_TEXTS[messages] = json.dumps(list(messages))
    return text


UNREADABLE = "error: the tensor could not be read: "
"""The start of the Err_message of a row whose tensor files could not be read (D27)."""


def mark_unreadable(row: Row, problem: str) -> None:
    """A row whose tensor files could not be read is an ``error`` whatever its cells say, and its
    Err_message says why (``problem`` names the file); set last, after the checkers."""
    row["Result"] = ERROR
    row["Err_message"] = json.dumps([UNREADABLE + problem])
