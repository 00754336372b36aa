"""Two-graph compare: matching (§3.2), per-item rows (§3.3), checkers (§3.4), precision_index (§3.5).

Rows are dicts keyed by the reference's column names; only a few of their cells are written back
into the NPU node's items (§3.6), the rest feed the checkers. Summary rows, the common case, carry
two keys of their own (NORM_RATIO, QUIET) and leave out the cells no checker will read.
"""

from __future__ import annotations

import json
import math
import re
from collections import deque
from collections.abc import Callable, Mapping
from operator import itemgetter
from typing import Any

from msprobe_dask.columns import DIFF_COLUMNS, STAT_COLUMNS, TENSOR_METRIC_COLUMNS
from msprobe_dask.errors import DumpError
from msprobe_dask.graph import speedups
from msprobe_dask.graph.items import ExportedText, _fmt_str
from msprobe_dask.graph.jsontext import dumps
from msprobe_dask.graph.model import API, COLLECTION, Graph, Node
from msprobe_dask.judge.rules import ALL_IGNORED_APIS, INPUT_IGNORED_APIS, mark_unreadable

SUMMARY, MD5, TENSOR, STRUCTURE = "summary", "md5", "tensor", "structure"
CONFIG_TASK = {SUMMARY: "summary", MD5: "md5", TENSOR: "all", STRUCTURE: "structure"}

STAT_DIFFS = tuple(DIFF_COLUMNS[:4])
STAT_RELS = tuple(DIFF_COLUMNS[4:])
NPU_STATS = tuple(STAT_COLUMNS[:4])
BENCH_STATS = tuple(STAT_COLUMNS[4:])
TENSOR_INDEX = tuple(TENSOR_METRIC_COLUMNS)
WRITE_BACK = {
    SUMMARY: STAT_DIFFS + STAT_RELS + ("Requires_grad Consistent", "Result", "Err_message"),
    MD5: ("Result", "Requires_grad Consistent", "Err_message"),
    TENSOR: TENSOR_INDEX + ("Requires_grad Consistent", "Result", "Err_message"),
}

ALL_IGNORE = ALL_IGNORED_APIS
INPUT_IGNORE = INPUT_IGNORED_APIS
EMPTY_APIS = {"empty", "empty_like", "empty_with_format", "new_empty_strided", "new_empty", "empty_strided"}
STATE_GROUPS = (("input", "kwargs"), ("parameters",), ("output",), ("parameters_grad",))

PASS, WARNING, ERROR = 0, 1, 2
LEVEL_NAME = {PASS: "pass", WARNING: "warning", ERROR: "error"}
LEVEL_INDEX: dict[int, int | float] = {PASS: 0, WARNING: 0.5, ERROR: 1}

# tool_tip / node_colors of tb_config (§3.7)
_SUMMARY_TIPS = {
    "Max diff": "NPU与标杆API统计信息比对，最大值的差值",
    "Min diff": "NPU与标杆API统计信息比对，最小值的差值",
    "Mean diff": "NPU与标杆API统计信息比对，平均值的差值",
    "L2norm diff": "NPU与标杆API统计信息比对，2范数（平方根）的差值",
}
_MD5_TIPS = {"md5": "数据MD5信息，用于比较两个数据信息是否完全一致"}
_TENSOR_TIPS = {k: "" for k in TENSOR_INDEX}
_UNMATCHED = {"value": [], "description": "比对过程中节点未匹配上", "accuracy_level": "unmatched node"}
_STAT_DESC = "此节点所有输入输出的统计量误差, 颜色越深代表调试侧与标杆侧的偏差越大"
_TENSOR_DESC = "此节点所有输入输出的 tensor 误差, 颜色越深代表调试侧与标杆侧的偏差越大"
_MD5_PASS = "与标杆相比, 此节点所有输入输出的md5值相同"
_MD5_DIFF = "与标杆相比, 此节点任意输入输出的md5值不同"


def tool_tip(mode: str) -> str:
    tips = {SUMMARY: _SUMMARY_TIPS, MD5: _MD5_TIPS}.get(mode, _TENSOR_TIPS)
    return json.dumps(tips)


def node_colors(mode: str) -> str:
    if mode == STRUCTURE:
        return json.dumps({"#C7C7C7": _UNMATCHED})
    if mode == MD5:
        d_pass, d_warn = _MD5_PASS, _MD5_DIFF
    else:
        d_pass = d_warn = _TENSOR_DESC if mode == TENSOR else _STAT_DESC
    colors = {
        "#FFFCF3": {"value": [0, 0.3], "description": d_pass, "accuracy_level": "pass"},
        "#FFDC7F": {"value": [0.3, 0.6], "description": d_warn, "accuracy_level": "warning"},
        "#FF704D": {"value": [0.6, 1], "description": d_warn, "accuracy_level": "error"},
        "#C7C7C7": _UNMATCHED,
    }
    return json.dumps(colors)


# ------------------------------------------------------------------------------------ mode


def _has_md5(value: Any) -> bool:
    if isinstance(value, dict):
        return "md5" in value or any(_has_md5(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_md5(v) for v in value)
    return False


def data_has_md5(data: Mapping[str, Any]) -> bool:
    return any(_has_md5(v) for v in data.values())


def compare_mode(npu: Graph, bench: Graph, where: str) -> str:
    if not npu.task or npu.task != bench.task:
        raise DumpError(where, f"the two dumps have different tasks ({npu.task!r} vs {bench.task!r})")
    if npu.task == "tensor":
        return TENSOR
    if npu.task == "structure":
        return STRUCTURE
    a = not npu.no_md5 and data_has_md5(npu.data)
    b = not bench.no_md5 and data_has_md5(bench.data)
    if a != b:
        raise DumpError(where, "one dump has md5 values and the other does not")
    return MD5 if a else SUMMARY


# ------------------------------------------------------------------------------------ rows

_TABBED = ("inf", "-inf", "nan")
_INFS = (math.inf, -math.inf)
_PLAIN_NUMBERS = frozenset((int, float))
# summary rows also hold the exact NormRelativeErr as a ratio (None where it is not a number): the
# checkers use it, while the NormRelativeErr cell holds the exported text (see _rel_text)
NORM_RATIO = "norm_ratio"
# ... and whether a per-row checker could flag the row at all (see summary_row)
QUIET = "quiet"
UNREADABLE = "unreadable"  # a tensor row's key: why its tensor files could not be read


def _stat_list(item: Mapping[str, Any]) -> list[Any]:
    return ["None" if item.get(s) is None else item.get(s) for s in ("Max", "Min", "Mean", "Norm")]


def _stored_stat(v: Any) -> Any:
    return "Nan" if isinstance(v, float) and math.isnan(v) else v


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _summary_cell(v: Any) -> Any:
    """A summary statistic or diff cell: nan is stored as 'Nan', and a cell whose str() is exactly
    inf, -inf or nan gets a trailing TAB."""
    t = v.__class__
    if t is float:
        if v != v:
            return "Nan"
        return repr(v) + "\t" if v in _INFS else v
    if t is int or (t is str and len(v) > 4):
        return v
    v = _stored_stat(v)
    s = str(v)
    return s + "\t" if s in _TABBED else v


def _rel_text(r: float) -> str:
    """``str(r) + '%'`` in its exported form: §7.6 rounds it to 6 decimals where it has more.

    Between 1e-4 and 2**33, where ``repr`` is positional and floats are closer than 1e-6, the text
    rounded to 6 decimals is the exported one unless the repr has fewer than 6 decimals; then the
    rounded text ends with a 0 and ``round(r, 6) == r``. This spares the repr and its parsing back.
    Elsewhere the rule is applied to the text. The result is a fixed point of the export formatting,
    and marked so (ExportedText).
    """
    if 1e-4 <= r < 8589934592.0:
        t = f"{r:.6f}%"
        if t[-2] != "0" or round(r, 6) != r:
            return ExportedText(t)
        return ExportedText(repr(r) + "%")
    if r == 0.0:
        return "0.0%"
    return ExportedText(_fmt_str(repr(r) + "%"))


def _stat_diff(x: Any, y: Any) -> tuple[Any, str, float | None]:
    """(diff cell, relative-error cell, relative error as a ratio) of one NPU/Bench statistic."""
    if not (
        x.__class__ in _PLAIN_NUMBERS and y.__class__ in _PLAIN_NUMBERS or _is_number(x) and _is_number(y)
    ):
        return "N/A", "N/A", None
    d = x - y
    if d != d:
        return "Nan", "Nan", None
    if y == 0:
        return _summary_cell(d), "N/A", None
    try:
        r = abs(d / y * 100)
    except OverflowError:
        return _summary_cell(d), "inf%", math.inf
    return _summary_cell(d), _rel_text(r), r / 100


def _diffs(ns: tuple[Any, ...], bs: tuple[Any, ...]) -> tuple[list[Any], list[str], float | None]:
    """The diff cells, the relative-error cells and the last (Norm) relative error as a ratio."""
    diffs, rels = [], []
    ratio: float | None
    for x, y in zip(ns, bs):
        if x.__class__ is float and y.__class__ is float and y:
            # the common case, _stat_diff and _rel_text inline: r is finite when d is
            d = x - y
            r = abs(d / y * 100)
            if 1e-4 <= r < 8589934592.0:
                t = f"{r:.6f}%"
                t = ExportedText(repr(r) + "%" if t[-2] == "0" and round(r, 6) == r else t)
            elif r == 0.0:
                t = "0.0%"
            else:
                d, t, ratio = _stat_diff(x, y)
                diffs.append(d)
                rels.append(t)
                continue
            diffs.append(d)
            rels.append(t)
            ratio = r / 100
        elif x.__class__ is int and x == y and y.__class__ is int and y:  # equal scalar arguments
            diffs.append(0)
            rels.append("0.0%")
            ratio = 0.0
        else:
            d, t, ratio = _stat_diff(x, y)
            diffs.append(d)
            rels.append(t)
    return diffs, rels, ratio


_STATS = ("Max", "Min", "Mean", "Norm")
_GET_STATS = itemgetter(*_STATS)


def _stats(item: Mapping[str, Any]) -> tuple[Any, ...]:
    """The item's Max, Min, Mean and Norm, None as 'None'."""
    try:
        values = _GET_STATS(item)
    except KeyError:
        values = tuple(map(item.get, _STATS))
    if None in values:
        return tuple("None" if v is None else v for v in values)
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
            "NPU Name": n["full_op_name"],
            "Bench Name": "Nan",
            "NPU Dtype": n.get("dtype"),
            "Bench Dtype": "Nan",
            "NPU Tensor Shape": n.get("shape"),
            "Bench Tensor Shape": "Nan",
            "NPU Requires_grad": n.get("requires_grad"),
            "Bench Requires_grad": "Nan",
        }
    return {
        "NPU Name": n["full_op_name"],
        "Bench Name": b["full_op_name"],
        "NPU Dtype": n.get("dtype"),
        "Bench Dtype": b.get("dtype"),
        "NPU Tensor Shape": n.get("shape"),
        "Bench Tensor Shape": b.get("shape"),
        "NPU Requires_grad": n.get("requires_grad"),
        "Bench Requires_grad": b.get("requires_grad"),
    }


def summary_row(n: Mapping[str, Any], b: Mapping[str, Any] | None) -> dict[str, Any]:
    """The summary row of an NPU item and its Bench partner (None: missing).

    The relative-error cells hold their exported text (_rel_text) and NORM_RATIO the exact
    NormRelativeErr. A QUIET row is one no per-row checker can flag (see _row_messages): it only
    holds the cells written back, the NPU name and the ratio, all the node-wide checkers read."""
    ns = _stats(n)
    nc = _cells(ns)
    if b is None:
        row = _basic(n, None)
        row.update(zip(STAT_DIFFS, (" ",) * 4))
        row.update(zip(STAT_RELS, (" ",) * 4))
        row.update(zip(NPU_STATS, nc))
        row.update(zip(BENCH_STATS, ("Nan",) * 4))
        row["Requires_grad Consistent"] = False
        row["Result"] = "pass"
        row["Err_message"] = ""
        row[NORM_RATIO] = None
        row[QUIET] = False
        return row
    bs = _stats(b)
    bc = _cells(bs)
    native = speedups.native
    diffs, rels, ratio = native.stat_diffs(ns, bs, _stat_diff) if native is not None else _diffs(ns, bs)
    rg, brg = n.get("requires_grad"), b.get("requires_grad")
    dtype, bdtype = n.get("dtype"), b.get("dtype")
    shape, bshape = n.get("shape"), b.get("shape")
    # InfNan, RequiresGrad, DType and Shape need a difference; Parameters a different max
    quiet = (
        nc is ns
        and rg == brg
        and dtype == bdtype
        and shape == bshape
        and (nc[0] == bc[0] or (dtype.__class__ is str and "class" not in dtype))
    )
    row = {
        "NPU Name": n["full_op_name"],
        "Max diff": diffs[0],
        "Min diff": diffs[1],
        "Mean diff": diffs[2],
        "L2norm diff": diffs[3],
        "MaxRelativeErr": rels[0],
        "MinRelativeErr": rels[1],
        "MeanRelativeErr": rels[2],
        "NormRelativeErr": rels[3],
        "Requires_grad Consistent": rg == brg,
        "Result": "pass",
        "Err_message": "",
        NORM_RATIO: ratio,
        QUIET: quiet,
    }
    if not quiet:
        row["Bench Name"] = b["full_op_name"]
        row["NPU Dtype"], row["Bench Dtype"] = dtype, bdtype
        row["NPU Tensor Shape"], row["Bench Tensor Shape"] = shape, bshape
        row["NPU Requires_grad"], row["Bench Requires_grad"] = rg, brg
        row.update(zip(NPU_STATS, nc))
        row.update(zip(BENCH_STATS, bc))
    return row


def md5_row(n: Mapping[str, Any], b: Mapping[str, Any] | None) -> dict[str, Any]:
    row = _basic(n, b)
    row["NPU MD5"] = n.get("md5")
    if b is None:
        row["BENCH MD5"] = "Nan"
        row["Requires_grad Consistent"] = False
        row["Result"] = "Nan"
    else:
        row["BENCH MD5"] = b.get("md5")
        row["Requires_grad Consistent"] = n.get("requires_grad") == b.get("requires_grad")
        row["Result"] = "pass" if n.get("md5") == b.get("md5") else "Different"
    row["Err_message"] = ""
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
            row[k] = "Nan"
        row["Requires_grad Consistent"] = False
    else:
        for k, v in zip(BENCH_STATS, _stat_list(b)):
            row[k] = _stored_stat(v)
        row["Requires_grad Consistent"] = n.get("requires_grad") == b.get("requires_grad")
        if measure is not None:
            row.update(measure(n, b))
    row["Result"] = "pass"
    row["Err_message"] = ""
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


# ------------------------------------------------------------------------------------ checkers


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
        pct = s.endswith("%")
        try:
            x = float(s[:-1] if pct else s)
        except ValueError:
            return None
        return x / 100 if pct else x
    return None


def _min_over(rows: list[dict[str, Any]], key: str) -> float:
    m = 1.0
    for r in rows:
        v = _ratio(r.get(key))
        if v is not None and v < m:
            m = v
    return m


def _special(v: Any) -> bool:
    """v is nan, inf or -inf: a float, or a string such as 'Nan' or 'inf\\t'."""
    t = v.__class__
    if t is float:
        return v - v != 0.0
    if t is int:
        return False
    if isinstance(v, float):
        return math.isinf(v) or math.isnan(v)
    return isinstance(v, str) and v.strip().lower() in _TABBED


MSG_INFNAN = "error: There is nan/inf/-inf in the maximum or minimum value of NPU."
MSG_RELERR = "error: The NormRelativeErr of output is greater than 0.5."
MSG_THOUSANDTH = "error: The input/parameters of One Thousandth Err Ratio > 0.9 while the output < 0.6."
MSG_RG = "error: The Required_Grad of NPU and Bench are inconsistent"
MSG_PARAM = "error: The scalar parameters of NPU and Bench are inconsistent."
MSG_DTYPE = "error: The dtype of NPU and Bench are inconsistent."
MSG_SHAPE = "error: The shape of NPU and Bench are inconsistent."
MSG_RELWARN = "warning: The norm relative error of output is 10 times that of input."
MSG_COSWARN = "warning: The input/parameters of Cosine > 0.9, and input/parameters - output > 0.1"
MSG_MD5_WARN = "warning: The parameter of NPU does not match the bench."
MSG_MD5_ERR = "error: The CRC-32 value of NPU differs from that of the bench."
_NO_MD5 = ("N/A", "Nan", "")
_NO_BENCH = ("", "N/A", None)


def _ignore_class(rows: list[dict[str, Any]], is_out: list[bool], merge: bool) -> str:
    """'all', 'input' or '' from the API name of the first input row (§3.4)."""
    if False not in is_out:
        return ""
    parts = str(rows[is_out.index(False)]["NPU Name"]).split(".", 2)
    api = parts[1] if len(parts) > 1 else ""
    if merge:
        api = re.sub(r"_rank\d+$", "", api)
    if api in ALL_IGNORE:
        return "all"
    return "input" if api in INPUT_IGNORE else ""


def _row_messages(
    r: dict[str, Any], out: bool, selected: bool, ignore: str, merge: bool, relerr: bool
) -> list[str]:
    """The messages of checkers 1, 2 (summary RelativeErr), 3, 4, 5 and 6 for one row, in order."""
    msgs = []
    nd, bd = r["NPU Dtype"], r["Bench Dtype"]
    if selected:
        if (_special(r["NPU max"]) or _special(r["NPU min"])) and not (
            _special(r["Bench max"]) or _special(r["Bench min"])
        ):
            msgs.append(MSG_INFNAN)
    if relerr and out:
        v = r[NORM_RATIO]
        if v is not None and abs(v) > 0.5:
            msgs.append(MSG_RELERR)
    bench_missing = r.get("Bench Name") in _NO_BENCH
    if selected and not bench_missing:
        nrg, brg = r["NPU Requires_grad"], r["Bench Requires_grad"]
        if nrg and brg and nrg != brg:
            msgs.append(MSG_RG)
    if not out and not ignore:
        if (
            isinstance(nd, str)
            and isinstance(bd, str)
            and "class" in nd
            and "class" in bd
            and r["NPU Tensor Shape"] == "[]"
            and r["NPU max"] != r["Bench max"]
        ):
            msgs.append(MSG_PARAM)
    if selected and not bench_missing:
        bn = str(r["Bench Name"])
        if r["NPU Name"] != "N/A" and "qkv" not in bn and "gate_up" not in bn and nd and bd and nd != bd:
            msgs.append(MSG_DTYPE)
        if not merge:
            ns, bs = r["NPU Tensor Shape"], r["Bench Tensor Shape"]
            if ns is not None and bs is not None and ns != bs:
                msgs.append(MSG_SHAPE)
    return msgs


def _check_md5(rows: list[dict[str, Any]], is_out: list[bool], ignore: str) -> int:
    worst = PASS
    for r, out in zip(rows, is_out):
        level, msg = PASS, ""
        if ignore != "input" or out:
            nm, bm = r["NPU MD5"], r["BENCH MD5"]
            if nm != bm:
                if nm in _NO_MD5 or bm in _NO_MD5:
                    level, msg = WARNING, MSG_MD5_WARN
                else:
                    level, msg = ERROR, MSG_MD5_ERR
        r["Result"] = LEVEL_NAME[level]
        r["Err_message"] = dumps([msg]) if msg else "[]"
        worst = max(worst, level)
    return worst


def check_rows(rows: list[dict[str, Any]], mode: str, merge: bool = False) -> int:
    """Run the checkers on one node's rows in place; return the node's worst level.

    Every checker's rule is that of §3.4; they run row by row (a row's messages keep the checkers'
    order), with the node-wide quantities (the maximum relative errors of inputs and outputs ...)
    computed first. A QUIET summary row can only get the RelativeErr message."""
    is_out = [".output." in (n if n.__class__ is str else str(n)) for n in map(_NPU_NAME, rows)]
    ignore = _ignore_class(rows, is_out, merge)
    if ignore == "all" or mode == STRUCTURE:
        for r in rows:
            r["Result"] = "pass"
            r["Err_message"] = "[]"
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
            relerr = a < 0.1
            if first_out >= 0:
                first_warning = (a == 0 and b > 0.1) or (a != 0 and b / a > 10)
        elif first_out >= 0:
            ins = [r for r, out in zip(rows, is_out) if not out]
            outs = [r for r, out in zip(rows, is_out) if out]
            first_error = (
                _min_over(ins, "One Thousandth Err Ratio") > 0.9
                and _min_over(outs, "One Thousandth Err Ratio") < 0.1
            )
            cin = _min_over(ins, "Cosine")
            first_warning = cin > 0.9 and cin - _min_over(outs, "Cosine") > 0.1
    worst = PASS
    for i, r in enumerate(rows):
        out = is_out[i]
        if r.get(QUIET):
            v = r[NORM_RATIO]
            msgs = [MSG_RELERR] if relerr and out and v is not None and abs(v) > 0.5 else []
        else:
            msgs = _row_messages(r, out, ignore != "input" or out, ignore, merge, relerr)
        level = ERROR if msgs else PASS
        if i == first_out:
            if first_error:
                msgs.insert(0 if not msgs or msgs[0] != MSG_INFNAN else 1, MSG_THOUSANDTH)
                level = ERROR
            if first_warning:
                msgs.append(MSG_COSWARN if mode == TENSOR else MSG_RELWARN)
                level = max(level, WARNING)
        if msgs:
            r["Result"] = LEVEL_NAME[level]
            r["Err_message"] = dumps(msgs)
            if level > worst:
                worst = level
        else:
            r["Result"] = "pass"
            r["Err_message"] = "[]"
    return worst


_NPU_NAME = itemgetter("NPU Name")


# ------------------------------------------------------------------------------------ matching


def _bfs(g: Graph):
    q = deque([g.root])
    while q:
        node = q.popleft()
        yield node
        q.extend(node.children)


def _fuzzy_key(node_id: str) -> str:
    return re.sub(r"_rank\d+", "", re.sub(r"\.\d+\.", ".", node_id))


def _has_ancestors(node: Node, ids: list[str]) -> bool:
    """``node.ancestors() == ids``, without building the list when the parents' ids match."""
    p, i = node.parent, len(ids) - 1
    while p is not None:
        if i < 0 or ids[i] != p.id:
            return node.ancestors() == ids  # (a parent cycle makes ancestors() empty)
        p, i = p.parent, i - 1
    return i == -1


def match_pairs(
    npu: Graph, bench: Graph, fuzzy: bool = False, mapping: Mapping[str, str] | None = None
) -> list[tuple[Node, Node]]:
    """Set ``link`` on matched nodes of both sides; return the matched pairs in BFS order."""
    pairs: list[tuple[Node, Node]] = []
    if fuzzy:
        for node in _bfs(npu):
            if node.type == API:
                continue
            b = bench.nodes.get(node.id)
            if b is None:
                continue
            node.link = b.ancestors() + [b.id]
            b.link = node.ancestors() + [node.id]
            pairs.append((node, b))
            counts: dict[str, int] = {}
            bkeys: dict[str, Node] = {}
            for c in b.children:
                if c.type == API:
                    k = _fuzzy_key(c.id)
                    counts[k] = counts.get(k, 0) + 1
                    bkeys.setdefault(f"{k}{counts[k]}", c)
            counts = {}
            for c in node.children:
                if c.type != API:
                    continue
                k = _fuzzy_key(c.id)
                counts[k] = counts.get(k, 0) + 1
                bc = bkeys.get(f"{k}{counts[k]}")
                if bc is not None:
                    c.link = bc.ancestors() + [bc.id]
                    bc.link = c.ancestors() + [c.id]
                    pairs.append((c, bc))
        return pairs
    if mapping is not None:
        for node in _bfs(npu):
            target = mapping.get(node.id, node.id)
            b = bench.nodes.get(target)
            if b is None:
                continue
            node.link = b.ancestors() + [b.id]
            b.link = node.ancestors() + [node.id]
            pairs.append((node, b))
        return pairs
    known: dict[Node, list[str]] = {}  # node -> ancestors(), filled parents first (BFS)
    for node in _bfs(npu):
        up = node.parent
        anc = known[up] + [up.id] if up in known else node.ancestors()
        known[node] = anc
        b = bench.nodes.get(node.id)
        if b is None or not _has_ancestors(b, anc):
            continue
        node.link = anc + [b.id]
        b.link = list(node.link)
        pairs.append((node, b))
    return pairs


# what _speedups.summary_pair needs of the rules: the general diff, the ignored APIs, and the
# Err_message and Result texts a QUIET row can get
_HOW = (
    _stat_diff,
    frozenset(ALL_IGNORE),
    frozenset(INPUT_IGNORE),
    ("[]", dumps([MSG_RELERR]), dumps([MSG_RELWARN]), dumps([MSG_RELERR, MSG_RELWARN])),
    (LEVEL_NAME[PASS], LEVEL_NAME[WARNING], LEVEL_NAME[ERROR]),
)
_WRITE_BACK_CELLS = {mode: itemgetter(*keys) for mode, keys in WRITE_BACK.items()}


def write_back(npu: Node, rows: list[dict[str, Any]], mode: str) -> None:
    keys = WRITE_BACK[mode]
    cells = _WRITE_BACK_CELLS[mode]
    by_name = dict(zip(map(_NPU_NAME, rows), rows))
    for data in (npu.input_data, npu.output_data):
        for k, item in data.items():
            r = by_name.get(k)
            if r is not None:
                item.update(zip(keys, cells(r)))


def _mark_unreadable(rows: list[dict[str, Any]]) -> int:
    """Rows whose tensor files could not be read become errors (their Err_message says why, D27);
    ERROR if there was one."""
    worst = PASS
    for r in rows:
        problem = r.get(UNREADABLE)
        if problem is not None:
            mark_unreadable(r, problem)
            worst = ERROR
    return worst


def compare_pair(
    npu: Node, bench: Node, mode: str, measure: TensorMeasure | None = None, merge: bool = False
) -> None:
    if mode == STRUCTURE:
        return
    native = speedups.native
    level = None
    if native is not None and mode == SUMMARY and not merge:
        # all of it in C when every row is QUIET (else None, and nothing changed)
        level = native.summary_pair(
            npu.input_data, npu.output_data, bench.input_data, bench.output_data, _HOW
        )
    if level is None:
        rows = pair_rows(npu, bench, mode, measure)
        if not rows:
            return
        level = check_rows(rows, mode, merge)
        if mode == TENSOR:
            level = max(level, _mark_unreadable(rows))
        write_back(npu, rows, mode)
    precision: int | float = LEVEL_INDEX[level]
    parts = npu.id.split(".", 2)
    if len(parts) > 1 and parts[1] in EMPTY_APIS:
        precision = 1 if mode == MD5 else 0
    npu.precision = precision


def _collection_precision(c: Node, mode: str) -> None:
    for sub in c.children:
        if sub.type == COLLECTION:  # the per-rank collections of a merged graph's _All_Ranks one
            _collection_precision(sub, mode)
    if mode == TENSOR:
        c.precision = 0
    else:
        c.precision = max([0] + [x.precision for x in c.children if x.precision is not None])


def collection_precision(npu: Graph, mode: str) -> None:
    """Collections take the worst of their children's indices. In tensor mode the reference does this
    before its tensor engine has filled any index, so collections are always 0 there."""
    for c in npu.root.children:
        if c.type == COLLECTION:
            _collection_precision(c, mode)


def compare_subtrees(
    nodes: list[Node],
    partners: Mapping[Node, Node],
    root: Node,
    mode: str,
) -> None:
    """compare_graphs' work after matching, for ``nodes``: a run of sorted_nodes() that holds each
    collection's whole subtree or none of it. ``partners`` maps matched NPU nodes to Bench ones."""
    for n in nodes:
        b = partners.get(n)
        if b is not None:
            compare_pair(n, b, mode)
    for c in nodes:
        if c.type == COLLECTION and c.parent is root:
            _collection_precision(c, mode)


def compare_graphs(
    npu: Graph,
    bench: Graph,
    mode: str,
    fuzzy: bool = False,
    mapping: Mapping[str, str] | None = None,
    measure: TensorMeasure | None = None,
    merge: bool = False,
) -> None:
    """``merge``: the graphs are parallel-merged ones (merge checkers, §3.4)."""
    for n, b in match_pairs(npu, bench, fuzzy, mapping):
        compare_pair(n, b, mode, measure, merge)
    collection_precision(npu, mode)
