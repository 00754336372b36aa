"""Two-graph compare: matching (§3.2), per-item rows (§3.3), checkers (§3.4), precision_index (§3.5).

Rows are dicts keyed by the reference's column names; only a few of their cells are written back
into the NPU node's items (§3.6), the rest feed the checkers.
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
from msprobe_dask.graph.model import API, COLLECTION, Graph, Node
from msprobe_dask.judge.rules import ALL_IGNORED_APIS, INPUT_IGNORED_APIS

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


def _stat_list(item: Mapping[str, Any]) -> list[Any]:
    return ["None" if item.get(s) is None else item.get(s) for s in ("Max", "Min", "Mean", "Norm")]


def _stored_stat(v: Any) -> Any:
    return "Nan" if isinstance(v, float) and math.isnan(v) else v


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


_TABBED = ("inf", "-inf", "nan")
_INFS = (math.inf, -math.inf)
_PLAIN_NUMBERS = frozenset((int, float))


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


def _stat_diff(x: Any, y: Any) -> tuple[Any, str]:
    """(diff, relative diff text) of one NPU/Bench statistic."""
    plain = x.__class__ in _PLAIN_NUMBERS and y.__class__ in _PLAIN_NUMBERS
    if not (plain or _is_number(x) and _is_number(y)):
        return "N/A", "N/A"
    d = x - y
    if d != d:
        return "Nan", "Nan"
    if y == 0:
        return d, "N/A"
    try:
        return d, str(abs(d / y * 100)) + "%"
    except OverflowError:
        return d, "inf%"


def summary_row(n: Mapping[str, Any], b: Mapping[str, Any] | None) -> dict[str, Any]:
    row = _basic(n, b)
    ns = _stat_list(n)
    if b is None:
        for i in range(4):
            row[STAT_DIFFS[i]] = row[STAT_RELS[i]] = " "
            row[NPU_STATS[i]] = _summary_cell(ns[i])
            row[BENCH_STATS[i]] = "Nan"
        row["Requires_grad Consistent"] = False
    else:
        bs = _stat_list(b)
        for i in range(4):
            x, y = ns[i], bs[i]
            diff, row[STAT_RELS[i]] = _stat_diff(x, y)
            row[STAT_DIFFS[i]] = _summary_cell(diff)
            row[NPU_STATS[i]] = _summary_cell(x)
            row[BENCH_STATS[i]] = _summary_cell(y)
        row["Requires_grad Consistent"] = n.get("requires_grad") == b.get("requires_grad")
    row["Result"] = "pass"
    row["Err_message"] = ""
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


def _grouped(node: Node) -> list[list[dict[str, Any]]]:
    """The node's items by STATE_GROUPS, inputs before outputs within a group."""
    groups: list[list[dict[str, Any]]] = [[] for _ in STATE_GROUPS]
    for data in (node.input_data, node.output_data):
        for it in data.values():
            g = _GROUP_OF_STATE.get(it.get("state") or "")
            if g is not None:
                groups[g].append(it)
    return groups


def pair_rows(
    npu: Node, bench: Node, mode: str, measure: TensorMeasure | None = None
) -> list[dict[str, Any]]:
    rows = []
    for ng, bg in zip(_grouped(npu), _grouped(bench)):
        for i, n in enumerate(ng):
            b = bg[i] if i < len(bg) else None
            if mode == SUMMARY:
                rows.append(summary_row(n, b))
            elif mode == MD5:
                rows.append(md5_row(n, b))
            else:
                rows.append(tensor_row(n, b, measure))
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


def _max_over(rows: list[dict[str, Any]], key: str) -> float:
    m = 0.0
    for r in rows:
        v = _ratio(r.get(key))
        if v is not None and v > m:
            m = v
    return m


def _min_over(rows: list[dict[str, Any]], key: str) -> float:
    m = 1.0
    for r in rows:
        v = _ratio(r.get(key))
        if v is not None and v < m:
            m = v
    return m


def _special(v: Any) -> bool:
    if v.__class__ is float:
        return v != v or v in _INFS
    if isinstance(v, float):
        return math.isinf(v) or math.isnan(v)
    return isinstance(v, str) and v.strip().lower() in _TABBED


def _bench_missing(r: Mapping[str, Any]) -> bool:
    return r.get("Bench Name") in ("", "N/A", None)


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


def check_rows(rows: list[dict[str, Any]], mode: str, merge: bool = False) -> int:
    """Run the checkers on one node's rows in place; return the node's worst level."""
    levels = [PASS] * len(rows)
    msgs: list[list[str]] = [[] for _ in rows]

    def flag(i: int, level: int, msg: str) -> None:
        levels[i] = max(levels[i], level)
        msgs[i].append(msg)

    out_idx: list[int] = []
    in_idx: list[int] = []
    for i, r in enumerate(rows):
        (out_idx if ".output." in str(r["NPU Name"]) else in_idx).append(i)
    ignore = ""
    if in_idx:
        parts = str(rows[in_idx[0]]["NPU Name"]).split(".")
        api = parts[1] if len(parts) > 1 else ""
        if merge:
            api = re.sub(r"_rank\d+$", "", api)
        if api in ALL_IGNORE:
            ignore = "all"
        elif api in INPUT_IGNORE:
            ignore = "input"
    if ignore != "all" and mode != STRUCTURE:
        selected = out_idx if ignore == "input" else list(range(len(rows)))
        if mode == MD5:
            for i in selected:
                r = rows[i]
                if r["NPU MD5"] != r["BENCH MD5"]:
                    if r["NPU MD5"] in ("N/A", "Nan", "") or r["BENCH MD5"] in ("N/A", "Nan", ""):
                        flag(i, WARNING, MSG_MD5_WARN)
                    else:
                        flag(i, ERROR, MSG_MD5_ERR)
        else:
            ins = [rows[i] for i in in_idx]
            outs = [rows[i] for i in out_idx]
            in_norm_rel = abs(_max_over(ins, "NormRelativeErr")) if mode == SUMMARY else 0.0
            # 1 InfNan
            for i in selected:
                r = rows[i]
                if _special(r["Bench max"]) or _special(r["Bench min"]):
                    continue
                if _special(r["NPU max"]) or _special(r["NPU min"]):
                    flag(i, ERROR, MSG_INFNAN)
            # 2 RelativeErr / 2' OneThousandth
            if ignore:
                pass
            elif mode == SUMMARY:
                if in_norm_rel < 0.1:
                    for i in out_idx:
                        v = _ratio(rows[i]["NormRelativeErr"])
                        if v is not None and abs(v) > 0.5:
                            flag(i, ERROR, MSG_RELERR)
            elif out_idx:
                if (
                    _min_over(ins, "One Thousandth Err Ratio") > 0.9
                    and _min_over(outs, "One Thousandth Err Ratio") < 0.1
                ):
                    flag(out_idx[0], ERROR, MSG_THOUSANDTH)
            # 3 RequiresGrad
            for i in selected:
                r = rows[i]
                if _bench_missing(r) or not r["NPU Requires_grad"] or not r["Bench Requires_grad"]:
                    continue
                if r["NPU Requires_grad"] != r["Bench Requires_grad"]:
                    flag(i, ERROR, MSG_RG)
            # 4 Parameters
            for i in in_idx if not ignore else ():
                r = rows[i]
                nd, bd = r["NPU Dtype"], r["Bench Dtype"]
                if (
                    isinstance(nd, str)
                    and isinstance(bd, str)
                    and "class" in nd
                    and "class" in bd
                    and r["NPU Tensor Shape"] == "[]"
                    and r["NPU max"] != r["Bench max"]
                ):
                    flag(i, ERROR, MSG_PARAM)
            # 5 DType
            for i in selected:
                r = rows[i]
                bn = r["Bench Name"]
                if _bench_missing(r) or r["NPU Name"] == "N/A" or "qkv" in str(bn) or "gate_up" in str(bn):
                    continue
                if not r["NPU Dtype"] or not r["Bench Dtype"]:
                    continue
                if r["NPU Dtype"] != r["Bench Dtype"]:
                    flag(i, ERROR, MSG_DTYPE)
            # 6 Shape
            if not merge:
                for i in selected:
                    r = rows[i]
                    if _bench_missing(r) or r["NPU Tensor Shape"] is None or r["Bench Tensor Shape"] is None:
                        continue
                    if r["NPU Tensor Shape"] != r["Bench Tensor Shape"]:
                        flag(i, ERROR, MSG_SHAPE)
            # 7 RelativeWarn / 7' CosineWarn
            if out_idx and not ignore:
                if mode == SUMMARY:
                    a = in_norm_rel
                    b = abs(_max_over(outs, "NormRelativeErr"))
                    if (a == 0 and b > 0.1) or (a != 0 and b / a > 10):
                        flag(out_idx[0], WARNING, MSG_RELWARN)
                else:
                    cin = _min_over(ins, "Cosine")
                    cout = _min_over(outs, "Cosine")
                    if cin > 0.9 and cin - cout > 0.1:
                        flag(out_idx[0], WARNING, MSG_COSWARN)
    for i, r in enumerate(rows):
        r["Result"] = LEVEL_NAME[levels[i]]
        r["Err_message"] = json.dumps(msgs[i]) if msgs[i] else "[]"
    return max(levels, default=PASS)


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


def write_back(npu: Node, rows: list[dict[str, Any]], mode: str) -> None:
    keys = WRITE_BACK[mode]
    cells = itemgetter(*keys)
    by_name = {r["NPU Name"]: r for r in rows}
    for data in (npu.input_data, npu.output_data):
        for k, item in data.items():
            r = by_name.get(k)
            if r is not None:
                item.update(zip(keys, cells(r)))


def compare_pair(
    npu: Node, bench: Node, mode: str, measure: TensorMeasure | None = None, merge: bool = False
) -> None:
    if mode == STRUCTURE:
        return
    rows = pair_rows(npu, bench, mode, measure)
    if not rows:
        return
    level = check_rows(rows, mode, merge)
    write_back(npu, rows, mode)
    precision: int | float = LEVEL_INDEX[level]
    parts = npu.id.split(".")
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
