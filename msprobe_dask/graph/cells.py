"""The compare cells of a pair of node items (graph_visualize.md §3.3): one row per NPU item, a dict
keyed by the reference's column names, by mode (summary statistics, md5, tensor metrics).

Summary rows, the common case, carry two keys of their own (NORM_RATIO, QUIET) and leave out the cells
no checker will read (graph/checks.py reads them; graph/compare.py writes a few back into the items).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from msprobe_dask.columns import (
    BENCH_DTYPE,
    BENCH_MD5,
    BENCH_NAME,
    BENCH_REQUIRES_GRAD,
    BENCH_SHAPE,
    DIFF_COLUMNS,
    ERR_MESSAGE,
    NA,
    NAN,
    NPU_DTYPE,
    NPU_MD5,
    NPU_NAME,
    NPU_REQUIRES_GRAD,
    NPU_SHAPE,
    REQUIRES_GRAD_CONSISTENT,
    RESULT,
    STAT_COLUMNS,
    TENSOR_METRIC_COLUMNS,
)
from msprobe_dask.dump.markers import PARAMETERS_GRAD, STATS
from msprobe_dask.graph import speedups
from msprobe_dask.graph.item_text import DECIMALS, ExportedText, format_str
from msprobe_dask.graph.jsontext import dumps
from msprobe_dask.graph.model import Node
from msprobe_dask.judge import rules
from msprobe_dask.metrics.stats import INF, PERCENT

SUMMARY, MD5, TENSOR, STRUCTURE = "summary", "md5", "tensor", "structure"

STAT_DIFFS = tuple(DIFF_COLUMNS[:4])
STAT_RELS = tuple(DIFF_COLUMNS[4:])
MAX_DIFF, MIN_DIFF, MEAN_DIFF, NORM_DIFF = STAT_DIFFS
MAX_REL, MIN_REL, MEAN_REL, NORM_REL = STAT_RELS
NPU_STATS = tuple(STAT_COLUMNS[:4])
BENCH_STATS = tuple(STAT_COLUMNS[4:])
TENSOR_INDEX = tuple(TENSOR_METRIC_COLUMNS)
STATE_GROUPS = (("input", "kwargs"), ("parameters",), ("output",), (PARAMETERS_GRAD,))
# the cells compare_pair writes back into the NPU items, by mode (§3.6)
WRITE_BACK = {
    SUMMARY: STAT_DIFFS + STAT_RELS + (REQUIRES_GRAD_CONSISTENT, RESULT, ERR_MESSAGE),
    MD5: (RESULT, REQUIRES_GRAD_CONSISTENT, ERR_MESSAGE),
    TENSOR: TENSOR_INDEX + (REQUIRES_GRAD_CONSISTENT, RESULT, ERR_MESSAGE),
}
# a relative error r (in %) in this range has a positional repr and 6 decimals tell floats apart
# (rel_text): 1e-4 <= r < 2**33
POSITIONAL = (1e-4, 8589934592.0)

SPECIAL_TEXTS = ("inf", "-inf", "nan")
_INFS = (math.inf, -math.inf)
_PLAIN_NUMBERS = frozenset((int, float))
# a Bench name that stands for no partner, an NPU name for no item (the checkers skip such rows)
NO_BENCH = ("", NA, None)
NO_NPU = NA
NO_VALUE = NA  # the diff and relative-error cells stat_diff cannot make
# summary rows also hold the exact NormRelativeErr as a ratio (None where it is not a number): the
# checkers use it, while the NormRelativeErr cell holds the exported text (see rel_text)
NORM_RATIO = "norm_ratio"
# ... and whether a per-row checker could flag the row at all (see summary_row)
QUIET = "quiet"
UNREADABLE = "unreadable"  # a tensor row's key: why its tensor files could not be read


def _stat_list(item: Mapping[str, Any]) -> list[Any]:
    return ["None" if item.get(s) is None else item.get(s) for s in STATS]


def _stored_stat(v: Any) -> Any:
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
    v = _stored_stat(v)
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


def _diffs(ns: tuple[Any, ...], bs: tuple[Any, ...]) -> tuple[list[Any], list[str], float | None]:
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


NULL_STAT = "None"  # a statistic that is null (or missing), as _stats gives it


def _stats(item: Mapping[str, Any]) -> tuple[Any, ...]:
    """The item's Max, Min, Mean and Norm, None as 'None'."""
    try:
        values = _GET_STATS(item)
    except KeyError:
        values = tuple(map(item.get, STATS))
    if None in values:
        return tuple(NULL_STAT if v is None else v for v in values)
    return values


def _cells(values: tuple[Any, ...]) -> tuple[Any, ...]:
    """The statistics as summary cells (_summary_cell)."""
    try:
        total = sum(values)
        if total - total == 0:  # ints and finite floats only: they are their own cells
            return values
    except (TypeError, OverflowError):  # a string or an int too large for a float
        pass
    return tuple(map(_summary_cell, values))


def _basic(n: Mapping[str, Any], b: Mapping[str, Any] | None) -> dict[str, Any]:
    if b is None:
        return {
            NPU_NAME: n["full_op_name"],
            BENCH_NAME: NAN,
            NPU_DTYPE: n.get("dtype"),
            BENCH_DTYPE: NAN,
            NPU_SHAPE: n.get("shape"),
            BENCH_SHAPE: NAN,
            NPU_REQUIRES_GRAD: n.get("requires_grad"),
            BENCH_REQUIRES_GRAD: NAN,
        }
    return {
        NPU_NAME: n["full_op_name"],
        BENCH_NAME: b["full_op_name"],
        NPU_DTYPE: n.get("dtype"),
        BENCH_DTYPE: b.get("dtype"),
        NPU_SHAPE: n.get("shape"),
        BENCH_SHAPE: b.get("shape"),
        NPU_REQUIRES_GRAD: n.get("requires_grad"),
        BENCH_REQUIRES_GRAD: b.get("requires_grad"),
    }


def summary_row(n: Mapping[str, Any], b: Mapping[str, Any] | None) -> dict[str, Any]:
    """The summary row of an NPU item and its Bench partner (None: missing).

    The relative-error cells hold their exported text (rel_text) and NORM_RATIO the exact
    NormRelativeErr. A QUIET row is one no per-row checker can flag (see _row_messages): it only
    holds the cells written back, the NPU name and the ratio, all the node-wide checkers read."""
    ns = _stats(n)
    nc = _cells(ns)
    if b is None:
        row = _basic(n, None)
        row.update(zip(STAT_DIFFS, (" ",) * 4))
        row.update(zip(STAT_RELS, (" ",) * 4))
        row.update(zip(NPU_STATS, nc))
        row.update(zip(BENCH_STATS, (NAN,) * 4))
        row[REQUIRES_GRAD_CONSISTENT] = False
        row[RESULT] = "pass"
        row[ERR_MESSAGE] = ""
        row[NORM_RATIO] = None
        row[QUIET] = False
        return row
    bs = _stats(b)
    bc = _cells(bs)
    native = speedups.native
    diffs, rels, ratio = native.stat_diffs(ns, bs) if native is not None else _diffs(ns, bs)
    rg, brg = n.get("requires_grad"), b.get("requires_grad")
    dtype, bdtype = n.get("dtype"), b.get("dtype")
    shape, bshape = n.get("shape"), b.get("shape")
    # InfNan, RequiresGrad, DType and Shape need a difference; Parameters a different max
    quiet = (
        nc is ns
        and rg == brg
        and dtype == bdtype
        and shape == bshape
        and (nc[0] == bc[0] or (dtype.__class__ is str and rules.NOT_A_TENSOR not in dtype))
    )
    row = {
        NPU_NAME: n["full_op_name"],
        MAX_DIFF: diffs[0],
        MIN_DIFF: diffs[1],
        MEAN_DIFF: diffs[2],
        NORM_DIFF: diffs[3],
        MAX_REL: rels[0],
        MIN_REL: rels[1],
        MEAN_REL: rels[2],
        NORM_REL: rels[3],
        REQUIRES_GRAD_CONSISTENT: rg == brg,
        RESULT: "pass",
        ERR_MESSAGE: "",
        NORM_RATIO: ratio,
        QUIET: quiet,
    }
    if not quiet:
        row[BENCH_NAME] = b["full_op_name"]
        row[NPU_DTYPE], row[BENCH_DTYPE] = dtype, bdtype
        row[NPU_SHAPE], row[BENCH_SHAPE] = shape, bshape
        row[NPU_REQUIRES_GRAD], row[BENCH_REQUIRES_GRAD] = rg, brg
        row.update(zip(NPU_STATS, nc))
        row.update(zip(BENCH_STATS, bc))
    return row


def md5_row(n: Mapping[str, Any], b: Mapping[str, Any] | None) -> dict[str, Any]:
    row = _basic(n, b)
    row[NPU_MD5] = n.get("md5")
    if b is None:
        row[BENCH_MD5] = NAN
        row[REQUIRES_GRAD_CONSISTENT] = False
        row[RESULT] = NAN
    else:
        row[BENCH_MD5] = b.get("md5")
        row[REQUIRES_GRAD_CONSISTENT] = n.get("requires_grad") == b.get("requires_grad")
        row[RESULT] = "pass" if n.get("md5") == b.get("md5") else "Different"
    row[ERR_MESSAGE] = ""
    return row


TensorMeasure = Callable[[Mapping[str, Any], Mapping[str, Any]], dict[str, Any]]


def tensor_row(
    n: Mapping[str, Any], b: Mapping[str, Any] | None, measure: TensorMeasure | None
) -> dict[str, Any]:
    row = _basic(n, b)
    for k in TENSOR_INDEX:
        row[k] = " "
    ns = _stat_list(n)
    for k, v in zip(NPU_STATS, ns):
        row[k] = _stored_stat(v)
    if b is None:
        for k in BENCH_STATS:
            row[k] = NAN
        row[REQUIRES_GRAD_CONSISTENT] = False
    else:
        for k, v in zip(BENCH_STATS, _stat_list(b)):
            row[k] = _stored_stat(v)
        row[REQUIRES_GRAD_CONSISTENT] = n.get("requires_grad") == b.get("requires_grad")
        if measure is not None:
            row.update(measure(n, b))
    row[RESULT] = "pass"
    row[ERR_MESSAGE] = ""
    return row


_GROUP_OF_STATE = {state: i for i, states in enumerate(STATE_GROUPS) for state in states}


def _grouped(node: Node) -> tuple[list[dict[str, Any]], ...]:
    """The node's items by STATE_GROUPS, inputs before outputs within a group."""
    groups: tuple[list[dict[str, Any]], ...] = ([], [], [], [])
    group_of = _GROUP_OF_STATE.get
    for data in (node.input_data, node.output_data):
        for it in data.values():
            g = group_of(it.get("state") or "")
            if g is not None:
                groups[g].append(it)
    return groups


_ROW_MAKERS: dict[str, Callable[[Mapping[str, Any], Mapping[str, Any] | None], dict[str, Any]]] = {
    SUMMARY: summary_row,
    MD5: md5_row,
}


def pair_rows(
    npu: Node, bench: Node, mode: str, measure: TensorMeasure | None = None
) -> list[dict[str, Any]]:
    rows = []
    make = _ROW_MAKERS.get(mode)
    for ng, bg in zip(_grouped(npu), _grouped(bench)):
        if not ng:
            continue
        nb = len(bg)
        for i, n in enumerate(ng):
            b = bg[i] if i < nb else None
            rows.append(make(n, b) if make is not None else tensor_row(n, b, measure))
    return rows


@dataclass(frozen=True)
class SummaryRules:
    """What the C summary compare (csrc/compare.c: stat_diffs, summary_pair) takes of the rules, by
    name, handed to it once when this module is imported: the definitions stay the Python ones. It
    makes the cells of items whose statistics are plain numbers itself, and asks stats_of, cells_of
    and special for the others'."""

    stat_diff: Callable[[Any, Any], tuple[Any, str, float | None]]  # one statistic's cells, in general
    no_value: str  # NO_VALUE: stat_diff's cells of a Bench 0 or of statistics that are not numbers
    rel_text: Callable[[float], str]  # the relative-error cell of a finite r (made once per r in C)
    zero_rel: str  # ZERO_REL
    null_stat: str  # NULL_STAT
    stats_of: Callable[[Mapping[str, Any]], tuple[Any, ...]]  # an item's statistics (_stats) ...
    cells_of: Callable[[tuple[Any, ...]], tuple[Any, ...]]  # ... and their cells (_cells)
    special: Callable[[Any], bool]  # a max or min cell the NaN/Inf checker reads as nan or inf
    exported_text: type  # the class of texts already in their exported form
    positional: tuple[float, float]  # POSITIONAL
    stats: tuple[str, ...]  # STATS
    state_groups: tuple[tuple[str, ...], ...]  # STATE_GROUPS
    written: tuple[str, ...]  # WRITE_BACK[SUMMARY]
    checkers: rules.CheckerRules  # rules.CHECKERS, also the statistics csv's (csrc/checker_rules.h)
    err_message: Callable[[list[str]], str]  # the Err_message cell of a row's messages
    results: tuple[str, str, str]  # the Result of pass, warning, error
    no_bench: tuple[str | None, ...]  # NO_BENCH
    no_npu: str  # NO_NPU


SUMMARY_RULES = SummaryRules(
    stat_diff=stat_diff,
    no_value=NO_VALUE,
    rel_text=rel_text,
    zero_rel=ZERO_REL,
    null_stat=NULL_STAT,
    stats_of=_stats,
    cells_of=_cells,
    special=special_cell,
    exported_text=ExportedText,
    positional=POSITIONAL,
    stats=STATS,
    state_groups=STATE_GROUPS,
    written=WRITE_BACK[SUMMARY],
    checkers=rules.CHECKERS,
    err_message=dumps,
    results=(rules.PASS, rules.WARNING, rules.ERROR),
    no_bench=NO_BENCH,
    no_npu=NO_NPU,
)
if speedups.native is not None:
    speedups.native.configure_summary(SUMMARY_RULES)
