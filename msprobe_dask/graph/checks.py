"""The checkers of one node's compare rows (graph_visualize.md §3.4): each row's Result and
Err_message, and the node's worst level. The rules' numbers and messages are judge/rules.py's."""

from __future__ import annotations

from operator import itemgetter
from typing import Any

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
from msprobe_dask.dump.markers import OUTPUT_PART, SCALAR_SHAPE
from msprobe_dask.graph.cells import (
    MD5,
    NO_BENCH,
    NO_NPU,
    NORM_RATIO,
    QUIET,
    STRUCTURE,
    SUMMARY,
    TENSOR,
)
from msprobe_dask.graph.jsontext import dumps
from msprobe_dask.graph.merge.rename import without_trailing_rank
from msprobe_dask.graph.stat_cells import special_cell
from msprobe_dask.judge import rules
from msprobe_dask.judge.rules import (
    ALL_IGNORED_APIS,
    FUSED_WEIGHTS,
    INPUT_IGNORED_APIS,
    LIMITS,
    MSG_COSINE,
    MSG_DTYPE,
    MSG_MD5_DIFFERS,
    MSG_MD5_MISSING,
    MSG_NAN_INF,
    MSG_NORM_OUTPUT,
    MSG_NORM_TENFOLD,
    MSG_ONE_THOUSANDTH,
    MSG_REQUIRES_GRAD,
    MSG_SCALAR,
    MSG_SHAPE,
    NOT_A_TENSOR,
)
from msprobe_dask.metrics.stats import PERCENT, percent_fraction

PASS, WARNING, ERROR = 0, 1, 2
LEVEL_NAME = {PASS: rules.PASS, WARNING: rules.WARNING, ERROR: rules.ERROR}
PASSED = LEVEL_NAME[PASS]


def _ratio(v: Any) -> float | None:
    t = v.__class__
    if t is float:
        return v
    if v is None or t is bool:
        return None
    if isinstance(v, (int, float)):
        return float(v)
    if t is str or isinstance(v, str):
        s = v.strip()
        if s.endswith(PERCENT):
            return percent_fraction(s)
        try:
            return float(s)
        except ValueError:
            return None
    return None


def _min_over(rows: list[dict[str, Any]], key: str) -> float:
    m = 1.0
    for r in rows:
        v = _ratio(r.get(key))
        if v is not None and v < m:
            m = v
    return m


_NO_MD5 = (NA, NAN, "")


def _ignore_class(rows: list[dict[str, Any]], is_out: list[bool], merge: bool) -> str:
    """'all', 'input' or '' from the API name of the first input row (§3.4)."""
    if False not in is_out:
        return ""
    parts = str(rows[is_out.index(False)][NPU_NAME]).split(".", 2)
    api = parts[1] if len(parts) > 1 else ""
    if merge:
        api = without_trailing_rank(api)
    if api in ALL_IGNORED_APIS:
        return "all"
    return "input" if api in INPUT_IGNORED_APIS else ""


def _row_messages(
    r: dict[str, Any], out: bool, selected: bool, ignore: str, merge: bool, relerr: bool
) -> list[str]:
    """The messages of checkers 1, 2 (summary RelativeErr), 3, 4, 5 and 6 for one row, in order (the
    order of cells.SUMMARY_RULES.messages, for the summary rows the C summary compare makes)."""
    msgs = []
    nd, bd = r[NPU_DTYPE], r[BENCH_DTYPE]
    if selected:
        if (special_cell(r[NPU_MAX]) or special_cell(r[NPU_MIN])) and not (
            special_cell(r[BENCH_MAX]) or special_cell(r[BENCH_MIN])
        ):
            msgs.append(MSG_NAN_INF)
    if relerr and out:
        v = r[NORM_RATIO]
        if v is not None and abs(v) > LIMITS.big_output_norm:
            msgs.append(MSG_NORM_OUTPUT)
    bench_missing = r.get(BENCH_NAME) in NO_BENCH
    if selected and not bench_missing:
        nrg, brg = r[NPU_REQUIRES_GRAD], r[BENCH_REQUIRES_GRAD]
        if nrg and brg and nrg != brg:
            msgs.append(MSG_REQUIRES_GRAD)
    if not out and not ignore:
        if (
            isinstance(nd, str)
            and isinstance(bd, str)
            and NOT_A_TENSOR in nd
            and NOT_A_TENSOR in bd
            and r[NPU_SHAPE] == SCALAR_SHAPE
            and r[NPU_MAX] != r[BENCH_MAX]
        ):
            msgs.append(MSG_SCALAR)
    if selected and not bench_missing:
        bn = str(r[BENCH_NAME])
        if nd and bd and nd != bd and r[NPU_NAME] != NO_NPU and not any(p in bn for p in FUSED_WEIGHTS):
            msgs.append(MSG_DTYPE)
        if not merge:
            ns, bs = r[NPU_SHAPE], r[BENCH_SHAPE]
            if ns is not None and bs is not None and ns != bs:
                msgs.append(MSG_SHAPE)
    return msgs


def _check_md5(rows: list[dict[str, Any]], is_out: list[bool], ignore: str) -> int:
    worst = PASS
    for r, out in zip(rows, is_out):
        level, msg = PASS, ""
        if ignore != "input" or out:
            nm, bm = r[NPU_MD5], r[BENCH_MD5]
            if nm != bm:
                if nm in _NO_MD5 or bm in _NO_MD5:
                    level, msg = WARNING, MSG_MD5_MISSING
                else:
                    level, msg = ERROR, MSG_MD5_DIFFERS
        r[RESULT] = LEVEL_NAME[level]
        r[ERR_MESSAGE] = dumps([msg]) if msg else "[]"
        worst = max(worst, level)
    return worst


def check_rows(rows: list[dict[str, Any]], mode: str, merge: bool = False) -> int:
    """Run the checkers on one node's rows in place; return the node's worst level.

    Every checker's rule is that of §3.4; they run row by row (a row's messages keep the checkers'
    order), with the node-wide quantities (the maximum relative errors of inputs and outputs ...)
    computed first. A QUIET summary row can only get the RelativeErr message."""
    is_out = [OUTPUT_PART in (n if n.__class__ is str else str(n)) for n in map(npu_name, rows)]
    ignore = _ignore_class(rows, is_out, merge)
    if ignore == "all" or mode == STRUCTURE:
        for r in rows:
            r[RESULT] = PASSED
            r[ERR_MESSAGE] = "[]"
        return PASS
    if mode == MD5:
        return _check_md5(rows, is_out, ignore)
    # node-wide checkers: 2 RelativeErr (summary, per output row), 2' OneThousandth, 7 RelativeWarn,
    # 7' CosineWarn (on the first output row)
    first_out = is_out.index(True) if True in is_out else -1
    relerr = first_error = first_warning = False
    if not ignore:
        if mode == SUMMARY:
            a = b = 0.0  # the largest NormRelativeErr ratios of inputs and of outputs
            for r, out in zip(rows, is_out):
                v = r[NORM_RATIO]
                if v is not None:
                    if out:
                        if v > b:
                            b = v
                    elif v > a:
                        a = v
            a, b = abs(a), abs(b)
            relerr = a < LIMITS.small_input_norm
            if first_out >= 0:
                first_warning = (a == 0 and b > LIMITS.output_norm_over_zero) or (
                    a != 0 and b / a > LIMITS.tenfold
                )
        elif first_out >= 0:
            ins = [r for r, out in zip(rows, is_out) if not out]
            outs = [r for r, out in zip(rows, is_out) if out]
            first_error = (
                _min_over(ins, ONE_THOUSANDTH_RATIO) > LIMITS.thousandth_input
                and _min_over(outs, ONE_THOUSANDTH_RATIO) < LIMITS.thousandth_output
            )
            cin = _min_over(ins, COSINE)
            first_warning = cin > LIMITS.cosine_input and cin - _min_over(outs, COSINE) > LIMITS.cosine_drop
    worst = PASS
    for i, r in enumerate(rows):
        out = is_out[i]
        if r.get(QUIET):
            v = r[NORM_RATIO]
            msgs = (
                [MSG_NORM_OUTPUT]
                if relerr and out and v is not None and abs(v) > LIMITS.big_output_norm
                else []
            )
        else:
            msgs = _row_messages(r, out, ignore != "input" or out, ignore, merge, relerr)
        level = ERROR if msgs else PASS
        if i == first_out:
            if first_error:
                msgs.insert(0 if not msgs or msgs[0] != MSG_NAN_INF else 1, MSG_ONE_THOUSANDTH)
                level = ERROR
            if first_warning:
                msgs.append(MSG_COSINE if mode == TENSOR else MSG_NORM_TENFOLD)
                level = max(level, WARNING)
        if msgs:
            r[RESULT] = LEVEL_NAME[level]
            r[ERR_MESSAGE] = dumps(msgs)
            if level > worst:
                worst = level
        else:
            r[RESULT] = PASSED
            r[ERR_MESSAGE] = "[]"
    return worst


npu_name = itemgetter(NPU_NAME)
