"""Result / Err_message: the reference's indicator analysis (compare.md §5).

Rows arrive grouped by dump entry. Each checker may raise a row's level and append a message; the
final ``Err_message`` is the JSON list of those messages (all earlier texts are discarded, as in the
reference). A table is judged by its columns, each kind of check over all its rows in turn (a row's
messages keep the reference's order); only the rows a check flags get a list of messages.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from msprobe_dask.columns import (
    BENCH_DTYPE,
    BENCH_MAX,
    BENCH_MD5,
    BENCH_MIN,
    BENCH_NAME,
    BENCH_REQUIRES_GRAD,
    BENCH_SHAPE,
    COSINE,
    ERR_MESSAGE,
    NA,
    NAN,
    NORM_RELATIVE_ERR,
    NPU_DTYPE,
    NPU_MAX,
    NPU_MD5,
    NPU_MIN,
    NPU_NAME,
    NPU_REQUIRES_GRAD,
    NPU_SHAPE,
    ONE_THOUSANDTH_RATIO,
    RESULT,
)
from msprobe_dask.dump.markers import BATCH_P2P, OUTPUT_PART, SCALAR_SHAPE
from msprobe_dask.match.dtypes import same_dtype
from msprobe_dask.metrics.stats import INF, is_nan_or_inf, relative_fraction

Row = dict[str, Any]

PASS, WARNING, ERROR = "pass", "warning", "error"
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


class Limits(NamedTuple):
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

# the texts the DType and Scalar checkers read (compare.md §5; graph_visualize.md §3.4)
FUSED_WEIGHTS = ("qkv", "gate_up")  # a Bench name holding one of these is never flagged for its dtype
NOT_A_TENSOR = "class"  # what the dtype of an argument that is not a tensor holds ("<class 'int'>")
NO_GRAD = ("", NA)  # Requires_grad cells the RequiresGrad checker does not compare


def grads_differ(npu_grad: str, bench_grad: str) -> bool:
    """The RequiresGrad checker's rule: both sides have a requires_grad and they differ (a side without
    one, as MindSpore dumps it, is not judged: D7)."""
    return npu_grad not in NO_GRAD and bench_grad not in NO_GRAD and npu_grad != bench_grad


MSG_NAN_INF = "error: There is nan/inf/-inf in the maximum or minimum value of NPU."
MSG_NORM_OUTPUT = "error: The NormRelativeErr of output is greater than 0.5."
MSG_ONE_THOUSANDTH = "error: The input/parameters of One Thousandth Err Ratio > 0.9 while the output < 0.6."
MSG_REQUIRES_GRAD = "error: The Required_Grad of NPU and Bench are inconsistent"
MSG_SCALAR = "error: The scalar parameters of NPU and Bench are inconsistent."
MSG_DTYPE = "error: The dtype of NPU and Bench are inconsistent."
MSG_SHAPE = "error: The shape of NPU and Bench are inconsistent."
MSG_NORM_TENFOLD = "warning: The norm relative error of output is 10 times that of input."
MSG_COSINE = "warning: The input/parameters of Cosine > 0.9, and input/parameters - output > 0.1"
SUMMARY_MESSAGES = (
    MSG_NAN_INF,
    MSG_NORM_OUTPUT,
    MSG_REQUIRES_GRAD,
    MSG_SCALAR,
    MSG_DTYPE,
    MSG_SHAPE,
    MSG_NORM_TENFOLD,
)
"""The messages a statistics row can get, in the order it gets them (its NaN/Inf check's, its group's
first check's, its pair checks', its group's last check's)."""
MSG_MD5_MISSING = "warning: The parameter of NPU does not match the bench."
MSG_MD5_DIFFERS = "error: The CRC-32 value of NPU differs from that of the bench."


class CheckerRules(NamedTuple):
    """The statistics checkers' rules that both C kernels read (writers/csrc/stat_lines.c and
    graph/csrc/compare.c, through csrc/checker_rules.h): each is handed CHECKERS as the ``checkers`` of
    its rules (writers/stat_lines.StatRules, graph/cells.SummaryRules)."""

    output_part: str  # what an output item's name holds
    all_ignored: frozenset[str]  # APIs whose rows are not checked
    input_ignored: frozenset[str]  # APIs whose input rows are not checked
    limits: Limits  # the node-wide checkers' numbers
    messages: tuple[str, ...]  # SUMMARY_MESSAGES, in the order of the kernels' bits (checker_rules.h)
    fused_weights: tuple[str, ...]  # Bench names the DType checker skips
    not_a_tensor: str  # what the dtype of an argument that is not a tensor holds (Scalar checker)
    scalar_shape: str  # a scalar's shape (Scalar checker)


CHECKERS = CheckerRules(
    OUTPUT_PART,
    ALL_IGNORED_APIS,
    INPUT_IGNORED_APIS,
    LIMITS,
    SUMMARY_MESSAGES,
    FUSED_WEIGHTS,
    NOT_A_TENSOR,
    SCALAR_SHAPE,
)


Columns = Mapping[str, Sequence[Any]]
"""A table's cells by column name (each column as long as the table)."""


class _Flags:
    """The messages flagged on the rows of a table: made only for the rows that get one."""

    __slots__ = ("messages",)

    def __init__(self) -> None:
        self.messages: dict[int, list[str]] = {}

    def flag(self, row: int, message: str) -> None:
        held = self.messages.get(row)
        if held is None:
            self.messages[row] = [message]
        else:
            held.append(message)


def _max_fraction(fractions: Sequence[float | None], rows: Sequence[int]) -> float:
    """The largest relative fraction of these rows (0.0 if none has one)."""
    held = [v for v in map(fractions.__getitem__, rows) if v is not None]
    return max(held) if held else 0.0


def _output_norm(value: Any, fraction: float | None) -> float:
    if value == INF:
        return float("inf")
    return fraction or 0.0


def _numbers(column: Sequence[Any], rows: Sequence[int]) -> list[float]:
    out = []
    for value in map(column.__getitem__, rows):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out.append(float(value))
    return out


def same_value(npu: Any, bench: Any) -> bool:
    """As the reference compares two scalar arguments: equal values (an int and its float, whichever
    side's column the reference typed float), or the same text (``Nan`` and ``Nan``)."""
    return str(npu) == str(bench) or (npu == bench) is True


def _nan_inf_checks(cells: Columns, rows: Sequence[int], flags: _Flags) -> None:
    npu_max, npu_min = cells[NPU_MAX], cells[NPU_MIN]
    bench_max, bench_min = cells[BENCH_MAX], cells[BENCH_MIN]
    for i in rows:
        if (is_nan_or_inf(npu_max[i]) or is_nan_or_inf(npu_min[i])) and not (
            is_nan_or_inf(bench_max[i]) or is_nan_or_inf(bench_min[i])
        ):
            flags.flag(i, MSG_NAN_INF)


def _pair_checks(cells: Columns, rows: Sequence[int], outputs: Sequence[bool], flags: _Flags) -> None:
    """The checks of each matched row against its partner, in the order of ``rows``."""
    bench_names = cells[BENCH_NAME]
    npu_grads, bench_grads = cells[NPU_REQUIRES_GRAD], cells[BENCH_REQUIRES_GRAD]
    npu_dtypes, bench_dtypes = cells[NPU_DTYPE], cells[BENCH_DTYPE]
    npu_shapes, bench_shapes = cells[NPU_SHAPE], cells[BENCH_SHAPE]
    npu_max, bench_max = cells[NPU_MAX], cells[BENCH_MAX]
    same_dtypes: dict[tuple[str, str], bool] = {}  # (a table's dtype pairs are few)
    for i in rows:
        bench_name = bench_names[i]
        if bench_name == NA:
            continue
        if grads_differ(npu_grads[i], bench_grads[i]):
            flags.flag(i, MSG_REQUIRES_GRAD)
        npu_dtype, bench_dtype, npu_shape = npu_dtypes[i], bench_dtypes[i], npu_shapes[i]
        if (
            not outputs[i]
            and NOT_A_TENSOR in npu_dtype
            and NOT_A_TENSOR in bench_dtype
            and npu_shape == SCALAR_SHAPE
            and not same_value(npu_max[i], bench_max[i])
        ):
            flags.flag(i, MSG_SCALAR)
        same = same_dtypes.get((npu_dtype, bench_dtype))
        if same is None:
            same = same_dtypes[npu_dtype, bench_dtype] = same_dtype(npu_dtype, bench_dtype)
        if not same and not any(part in bench_name for part in FUSED_WEIGHTS):
            flags.flag(i, MSG_DTYPE)
        if npu_shape != bench_shapes[i]:
            flags.flag(i, MSG_SHAPE)


class _Table:
    """The columns the group checks read, and what they derive from them (made once, when first read)."""

    __slots__ = ("cells", "_fractions")

    def __init__(self, cells: Columns) -> None:
        self.cells = cells
        self._fractions: list[float | None] | None = None

    def fractions(self) -> list[float | None]:
        """``relative_fraction`` of each NormRelativeErr cell."""
        if self._fractions is None:
            self._fractions = list(map(relative_fraction, self.cells[NORM_RELATIVE_ERR]))
        return self._fractions


def _norm_output(table: _Table, inputs: list[int], outputs: list[int], flags: _Flags) -> None:
    fractions = table.fractions()
    if _max_fraction(fractions, inputs) < LIMITS.small_input_norm:
        norms = table.cells[NORM_RELATIVE_ERR]
        for i in outputs:
            if _output_norm(norms[i], fractions[i]) > LIMITS.big_output_norm:
                flags.flag(i, MSG_NORM_OUTPUT)


def _norm_tenfold(table: _Table, inputs: list[int], outputs: list[int], flags: _Flags) -> None:
    if outputs:
        fractions = table.fractions()
        norm_in, norm_out = _max_fraction(fractions, inputs), _max_fraction(fractions, outputs)
        if (norm_in == 0 and norm_out > LIMITS.output_norm_over_zero) or (
            norm_in > 0 and norm_out / norm_in > LIMITS.tenfold
        ):
            flags.flag(outputs[0], MSG_NORM_TENFOLD)


def _one_thousandth(table: _Table, inputs: list[int], outputs: list[int], flags: _Flags) -> None:
    if not outputs:
        return
    column = table.cells[ONE_THOUSANDTH_RATIO]
    ratio_in = min(_numbers(column, inputs), default=1.0)
    ratio_out = min(_numbers(column, outputs), default=1.0)
    if ratio_in > LIMITS.thousandth_input and ratio_out < LIMITS.thousandth_output:
        flags.flag(outputs[0], MSG_ONE_THOUSANDTH)


def _tensor_cosine(table: _Table, inputs: list[int], outputs: list[int], flags: _Flags) -> None:
    # like the one-thousandth rule, inputs without a numeric Cosine count as 1.0
    column = table.cells[COSINE]
    cos_in = min(_numbers(column, inputs), default=1.0)
    cos_out = min(_numbers(column, outputs), default=1.0)
    if outputs and cos_in > LIMITS.cosine_input and cos_in - cos_out > LIMITS.cosine_drop:
        flags.flag(outputs[0], MSG_COSINE)


def _md5_checks(cells: Columns, rows: Sequence[int], flags: _Flags) -> None:
    for i in rows:
        npu, bench = str(cells[NPU_MD5][i]), str(cells[BENCH_MD5][i])
        if npu != bench:
            missing = {npu, bench} & {NA, NAN, ""}
            flags.flag(i, MSG_MD5_MISSING if missing else MSG_MD5_DIFFERS)


GroupCheck = Callable[[_Table, list[int], list[int], _Flags], None]
_GROUP_CHECKS: dict[str, tuple[GroupCheck, GroupCheck]] = {
    "statistics": (_norm_output, _norm_tenfold),
    "tensor": (_one_thousandth, _tensor_cosine),
}


def _api_name(name: str) -> str:
    """The API of a dump entry, of the name of its first input row (or of its first row where it has
    no input)."""
    parts = name.split(".", 2)
    return parts[1] if len(parts) > 1 else ""


def judge_columns(cells: Columns, ends: Sequence[int], mode: str) -> tuple[list[str], list[str]]:
    """``Result`` and ``Err_message`` of each row of a table given by its columns, whose rows of one
    dump entry (the unit the reference judges together) end at each of ``ends``, in order."""
    names = cells[NPU_NAME]
    outputs = [OUTPUT_PART in name for name in names]
    flags = _Flags()
    if mode == "md5":
        _md5_checks(cells, range(len(names)), flags)
    else:
        groups: list[tuple[list[int], list[int]]] = []  # (inputs, outputs) of the groups checked as such
        checked: list[int] = []  # the rows whose own checks run
        start = 0
        for end in ends:
            rows = range(start, end)
            start = end
            ins = [i for i in rows if not outputs[i]]
            outs = [i for i in rows if outputs[i]]
            api = _api_name(names[ins[0] if ins else rows[0]])
            if api in ALL_IGNORED_APIS:
                continue
            if api in INPUT_IGNORED_APIS:  # only the outputs' own checks
                checked.extend(outs)
                continue
            checked.extend(rows)
            groups.append((ins, outs))
        # a row's messages: its nan/inf check's, its group's first check's, its pair checks', its
        # group's last check's (each kind of check run over the whole table in turn)
        table = _Table(cells)
        first_check, last_check = _GROUP_CHECKS[mode]
        _nan_inf_checks(cells, checked, flags)
        for ins, outs in groups:
            first_check(table, ins, outs, flags)
        _pair_checks(cells, checked, outputs, flags)
        for ins, outs in groups:
            last_check(table, ins, outs, flags)
    results, messages = [PASS] * len(names), [verdict(())[1]] * len(names)
    for i, flagged in flags.messages.items():
        results[i], messages[i] = verdict(tuple(flagged))
    return results, messages


_VERDICTS: dict[tuple[str, ...], tuple[str, str]] = {}


def verdict(messages: tuple[str, ...]) -> tuple[str, str]:
    """The Result and Err_message of a row flagged with these messages (the checkers' messages are
    few: each list judged and printed once)."""
    known = _VERDICTS.get(messages)
    if known is None:
        result = max((m.split(":", 1)[0] for m in messages), key=_LEVELS.__getitem__, default=PASS)
        known = _VERDICTS[messages] = (result, json.dumps(list(messages)))
    return known


UNREADABLE = "error: the tensor could not be read: "
"""The start of the Err_message of a row whose tensor files could not be read (D27)."""


def mark_unreadable(row: Row, problem: str) -> None:
    """A row whose tensor files could not be read is an ``error`` whatever its cells say, and its
    Err_message says why (``problem`` names the file); set last, after the checkers."""
    row[RESULT] = ERROR
    row[ERR_MESSAGE] = json.dumps([UNREADABLE + problem])
