"""compare_pair (graph/compare.py) against the rules of §3.3-§3.6 written plainly: rows as the
reference's dicts, every checker a loop of its own, the cells written back by name. The compare takes
shortcuts for speed (relative errors kept in their exported text, QUIET rows that skip the per-row
checkers, ...): the items it leaves must export exactly as the plain computation's."""

from __future__ import annotations

import copy
import json
import math
import re
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from msprobe_dask.columns import DIFF_COLUMNS
from msprobe_dask.graph.compare import MD5, SUMMARY, TENSOR, TENSOR_INDEX, compare_pair
from msprobe_dask.graph.item_text import format_item
from msprobe_dask.graph.model import API, Node
from msprobe_dask.judge.rules import ALL_IGNORED_APIS, INPUT_IGNORED_APIS

STATS = ("Max", "Min", "Mean", "Norm")
GROUPS = (("input", "kwargs"), ("parameters",), ("output",), ("parameters_grad",))
TABBED = ("inf", "-inf", "nan")
MSG_THOUSANDTH = "error: The input/parameters of One Thousandth Err Ratio > 0.9 while the output < 0.6."
MSG_COSWARN = "warning: The input/parameters of Cosine > 0.9, and input/parameters - output > 0.1"
MSG_MD5_WARN = "warning: The parameter of NPU does not match the bench."
MSG_MD5_ERR = "error: The CRC-32 value of NPU differs from that of the bench."
EMPTY = {"empty", "empty_like", "empty_with_format", "new_empty_strided", "new_empty", "empty_strided"}
BACK = {
    SUMMARY: (*DIFF_COLUMNS, "Requires_grad Consistent", "Result", "Err_message"),
    MD5: ("Result", "Requires_grad Consistent", "Err_message"),
    TENSOR: (*TENSOR_INDEX, "Requires_grad Consistent", "Result", "Err_message"),
}


# ------------------------------------------------------------------------------- the plain rules


def _stat_list(item: dict) -> list:
    return ["None" if item.get(s) is None else item.get(s) for s in STATS]


def _stored(v: Any) -> Any:
    return "Nan" if isinstance(v, float) and math.isnan(v) else v


def _cell(v: Any) -> Any:
    v = _stored(v)
    return str(v) + "\t" if str(v) in TABBED else v


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _diff(x: Any, y: Any) -> tuple[Any, str]:
    if not (_number(x) and _number(y)):
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


def _row(n: dict, b: dict | None, mode: str, measure: Any) -> dict:
    row = {
        "NPU Name": n["full_op_name"],
        "Bench Name": "Nan" if b is None else b["full_op_name"],
        "NPU Dtype": n.get("dtype"),
        "Bench Dtype": "Nan" if b is None else b.get("dtype"),
        "NPU Tensor Shape": n.get("shape"),
        "Bench Tensor Shape": "Nan" if b is None else b.get("shape"),
        "NPU Requires_grad": n.get("requires_grad"),
        "Bench Requires_grad": "Nan" if b is None else b.get("requires_grad"),
    }
    rg = False if b is None else n.get("requires_grad") == b.get("requires_grad")
    if mode == MD5:
        row["NPU MD5"] = n.get("md5")
        row["BENCH MD5"] = "Nan" if b is None else b.get("md5")
        row.update({"Requires_grad Consistent": rg, "Result": "", "Err_message": ""})
        return row
    ns = _stat_list(n)
    bs = ["Nan"] * 4 if b is None else _stat_list(b)
    if mode == SUMMARY:
        names = ("max", "min", "mean", "l2norm")
        for i, s in enumerate(("Max", "Min", "Mean", "L2norm")):
            rel = ("MaxRelativeErr", "MinRelativeErr", "MeanRelativeErr", "NormRelativeErr")[i]
            if b is None:
                row[f"{s} diff"] = row[rel] = " "
            else:
                d, row[rel] = _diff(ns[i], bs[i])
                row[f"{s} diff"] = _cell(d)
            row[f"NPU {names[i]}"] = _cell(ns[i])
            row[f"Bench {names[i]}"] = "Nan" if b is None else _cell(bs[i])
    else:
        for k in TENSOR_INDEX:
            row[k] = " "
        for i, s in enumerate(("max", "min", "mean", "l2norm")):
            row[f"NPU {s}"] = _stored(ns[i])
            row[f"Bench {s}"] = "Nan" if b is None else _stored(bs[i])
        if b is not None:
            row.update(measure(n, b))
    row.update({"Requires_grad Consistent": rg, "Result": "", "Err_message": ""})
    return row


def _ratio(v: Any) -> float | None:
    if v is None or isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        s = v.strip()
        try:
            return float(s[:-1]) / 100 if s.endswith("%") else float(s)
        except ValueError:
            return None
    return None


def _extreme(rows: list[dict], key: str, start: float, better: Any) -> float:
    m = start
    for r in rows:
        v = _ratio(r.get(key))
        if v is not None and better(v, m):
            m = v
    return m


def _special(v: Any) -> bool:
    if isinstance(v, float):
        return math.isinf(v) or math.isnan(v)
    return isinstance(v, str) and v.strip().lower() in TABBED


def _missing(r: dict) -> bool:
    return r["Bench Name"] in ("", "N/A", None)


def _check(rows: list[dict], mode: str, merge: bool) -> int:
    levels, msgs = [0] * len(rows), [[] for _ in rows]

    def flag(i: int, level: int, msg: str) -> None:
        levels[i] = max(levels[i], level)
        msgs[i].append(msg)

    outs = [i for i, r in enumerate(rows) if ".output." in str(r["NPU Name"])]
    ins = [i for i in range(len(rows)) if i not in outs]
    ignore = ""
    if ins:
        parts = str(rows[ins[0]]["NPU Name"]).split(".")
        api = parts[1] if len(parts) > 1 else ""
        api = re.sub(r"_rank\d+$", "", api) if merge else api
        ignore = "all" if api in ALL_IGNORED_APIS else "input" if api in INPUT_IGNORED_APIS else ""
    if ignore != "all":
        sel = outs if ignore == "input" else list(range(len(rows)))
        rin, rout = [rows[i] for i in ins], [rows[i] for i in outs]
        if mode == MD5:
            for i in sel:
                a, b = rows[i]["NPU MD5"], rows[i]["BENCH MD5"]
                if a != b:
                    if a in ("N/A", "Nan", "") or b in ("N/A", "Nan", ""):
                        flag(i, 1, MSG_MD5_WARN)
                    else:
                        flag(i, 2, MSG_MD5_ERR)
        else:
            for i in sel:
                r = rows[i]
                if not (_special(r["Bench max"]) or _special(r["Bench min"])) and (
                    _special(r["NPU max"]) or _special(r["NPU min"])
                ):
                    flag(i, 2, "error: There is nan/inf/-inf in the maximum or minimum value of NPU.")
            a = abs(_extreme(rin, "NormRelativeErr", 0.0, float.__gt__))
            if not ignore and mode == SUMMARY and a < 0.1:
                for i in outs:
                    v = _ratio(rows[i]["NormRelativeErr"])
                    if v is not None and abs(v) > 0.5:
                        flag(i, 2, "error: The NormRelativeErr of output is greater than 0.5.")
            if not ignore and mode == TENSOR and outs:
                key = "One Thousandth Err Ratio"
                if (
                    _extreme(rin, key, 1.0, float.__lt__) > 0.9
                    and _extreme(rout, key, 1.0, float.__lt__) < 0.1
                ):
                    flag(outs[0], 2, MSG_THOUSANDTH)
            for i in sel:
                r = rows[i]
                if not _missing(r) and r["NPU Requires_grad"] and r["Bench Requires_grad"]:
                    if r["NPU Requires_grad"] != r["Bench Requires_grad"]:
                        flag(i, 2, "error: The Required_Grad of NPU and Bench are inconsistent")
            for i in ins if not ignore else ():
                r = rows[i]
                nd, bd = r["NPU Dtype"], r["Bench Dtype"]
                if isinstance(nd, str) and isinstance(bd, str) and "class" in nd and "class" in bd:
                    if r["NPU Tensor Shape"] == "[]" and r["NPU max"] != r["Bench max"]:
                        flag(i, 2, "error: The scalar parameters of NPU and Bench are inconsistent.")
            for i in sel:
                r = rows[i]
                bn = str(r["Bench Name"])
                if _missing(r) or r["NPU Name"] == "N/A" or "qkv" in bn or "gate_up" in bn:
                    continue
                if r["NPU Dtype"] and r["Bench Dtype"] and r["NPU Dtype"] != r["Bench Dtype"]:
                    flag(i, 2, "error: The dtype of NPU and Bench are inconsistent.")
            for i in sel if not merge else ():
                r = rows[i]
                if _missing(r) or r["NPU Tensor Shape"] is None or r["Bench Tensor Shape"] is None:
                    continue
                if r["NPU Tensor Shape"] != r["Bench Tensor Shape"]:
                    flag(i, 2, "error: The shape of NPU and Bench are inconsistent.")
            if outs and not ignore:
                if mode == SUMMARY:
                    b = abs(_extreme(rout, "NormRelativeErr", 0.0, float.__gt__))
                    if (a == 0 and b > 0.1) or (a != 0 and b / a > 10):
                        flag(
                            outs[0],
                            1,
                            "warning: The norm relative error of output is 10 times that of input.",
                        )
                else:
                    cin = _extreme(rin, "Cosine", 1.0, float.__lt__)
                    if cin > 0.9 and cin - _extreme(rout, "Cosine", 1.0, float.__lt__) > 0.1:
                        flag(outs[0], 1, MSG_COSWARN)
    for i, r in enumerate(rows):
        r["Result"] = ("pass", "warning", "error")[levels[i]]
        r["Err_message"] = json.dumps(msgs[i])
    return max(levels, default=0)


def _groups(node: Node) -> list[list[dict]]:
    out: list[list[dict]] = [[] for _ in GROUPS]
    for data in (node.input_data, node.output_data):
        for it in data.values():
            for g, states in enumerate(GROUPS):
                if (it.get("state") or "") in states:
                    out[g].append(it)
    return out


def _compare_plainly(npu: Node, bench: Node, mode: str, measure: Any, merge: bool) -> None:
    rows = []
    for ng, bg in zip(_groups(npu), _groups(bench)):
        rows += [_row(n, bg[i] if i < len(bg) else None, mode, measure) for i, n in enumerate(ng)]
    if not rows:
        return
    level = _check(rows, mode, merge)
    by_name = {r["NPU Name"]: r for r in rows}
    for data in (npu.input_data, npu.output_data):
        for k, item in data.items():
            if k in by_name:
                for c in BACK[mode]:
                    item[c] = by_name[k][c]
    precision: float = (0, 0.5, 1)[level]
    parts = npu.id.split(".")
    if len(parts) > 1 and parts[1] in EMPTY:
        precision = 1 if mode == MD5 else 0
    npu.precision = precision


# ------------------------------------------------------------------------------- random nodes

_STAT = (
    st.floats(-1e6, 1e6)
    | st.sampled_from([0.0, -0.0, 1.0, 2.5, math.inf, -math.inf, math.nan, 1e-300, 1e300])
    | st.integers(-3, 3)
    | st.sampled_from([None, "inf", "nan", "N/A", "none", "1", True, 10**20])
)
_ITEM = st.fixed_dictionaries(
    {
        "type": st.sampled_from(["torch.Tensor", "int", "float"]),
        "dtype": st.sampled_from(
            ["torch.float32", "torch.float16", "<class 'int'>", "<class 'float'>", None]
        ),
        "shape": st.sampled_from([[4, 64], [4, 32], "[]", None]),
        "Max": _STAT,
        "Min": _STAT,
        "Mean": _STAT,
        "Norm": _STAT,
        "requires_grad": st.sampled_from(["True", "False", None]),
        "md5": st.sampled_from(["00000000", "1234abcd", "N/A", ""]),
    }
)
_SLOT = st.tuples(st.sampled_from(["input", "kwargs", "parameters", "output", "parameters_grad"]), _ITEM)
_API = st.sampled_from(
    ["linear", "empty", "batch_isend_irecv", "to", "all_to_all_single", "qkv_rank1", "gelu"]
)
_METRIC = st.sampled_from([0.5, 0.95, 0.05, 1.0, "unsupported", "Nan", " ", 0.999])


def _node(node_id: str, slots: list[tuple[str, dict]]) -> Node:
    node = Node(node_id, API)
    for i, (state, item) in enumerate(slots):
        part = "output" if state == "output" else "input"
        name = f"{node_id}.{part}.{i}"
        item = {**item, "full_op_name": name, "state": state}
        (node.output_data if state == "output" else node.input_data)[name] = item
    return node


@settings(max_examples=400, deadline=None)
@given(
    _API,
    st.lists(_SLOT, max_size=5),
    st.lists(_SLOT, max_size=5),
    st.sampled_from([SUMMARY, MD5, TENSOR]),
    st.booleans(),
    st.lists(_METRIC, min_size=2 * len(TENSOR_INDEX), max_size=2 * len(TENSOR_INDEX)),
)
def test_compare_pair_gives_the_plain_rules_items(
    api: str, npu_slots: list, bench_slots: list, mode: str, merge: bool, metrics: list
) -> None:
    node_id = f"Functional.{api}.0.forward"

    def measure(n: dict, b: dict) -> dict:
        shift = len(n["full_op_name"]) % 2 * len(TENSOR_INDEX)
        return dict(zip(TENSOR_INDEX, metrics[shift : shift + len(TENSOR_INDEX)]))

    npu, bench = _node(node_id, npu_slots), _node(node_id, bench_slots)
    plain_npu, plain_bench = copy.deepcopy(npu), copy.deepcopy(bench)
    compare_pair(npu, bench, mode, measure if mode == TENSOR else None, merge)
    _compare_plainly(plain_npu, plain_bench, mode, measure, merge)
    assert npu.precision == plain_npu.precision
    assert type(npu.precision) is type(plain_npu.precision)
    for ours, plain in ((npu.input_data, plain_npu.input_data), (npu.output_data, plain_npu.output_data)):
        assert list(ours) == list(plain)
        for k in ours:
            assert list(ours[k]) == list(plain[k])
            assert format_item(ours[k], mode == MD5, False) == format_item(plain[k], mode == MD5, False), k
