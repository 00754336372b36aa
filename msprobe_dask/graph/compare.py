"""Two-graph compare: match the nodes (graph/node_match.py), make each pair's rows (graph/cells.py),
check them (graph/checks.py), write their cells back into the NPU items (§3.6) and set each node's
precision_index (§3.5); and the compare texts of tb_config (§3.7)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from operator import itemgetter
from typing import Any

from msprobe_dask.analysis.tolerance import Tolerance
from msprobe_dask.errors import DumpError
from msprobe_dask.graph import speedups
from msprobe_dask.graph.cells import (
    MD5,
    STAT_DIFFS,
    STRUCTURE,
    SUMMARY,
    TENSOR,
    TENSOR_INDEX,
    UNREADABLE,
    WRITE_BACK,
    TensorMeasure,
    pair_rows,
)
from msprobe_dask.graph.checks import ERROR, LEVEL_NAME, PASS, WARNING, check_rows, npu_name
from msprobe_dask.graph.model import COLLECTION, Graph, Node
from msprobe_dask.graph.node_match import match_pairs
from msprobe_dask.judge.rules import mark_unreadable
from msprobe_dask.summary.nodes import PRECISION_INDEX

CONFIG_TASK = {SUMMARY: "summary", MD5: "md5", TENSOR: "all", STRUCTURE: "structure"}

EMPTY_APIS = {"empty", "empty_like", "empty_with_format", "new_empty_strided", "new_empty", "empty_strided"}

LEVEL_INDEX = {level: PRECISION_INDEX[result] for level, result in LEVEL_NAME.items()}

# tool_tip / node_colors of tb_config (§3.7)
_SUMMARY_TIPS = dict(
    zip(
        STAT_DIFFS,
        (
            "NPU与标杆API统计信息比对，最大值的差值",
            "NPU与标杆API统计信息比对，最小值的差值",
            "NPU与标杆API统计信息比对，平均值的差值",
            "NPU与标杆API统计信息比对，2范数（平方根）的差值",
        ),
        strict=True,
    )
)
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
        "#FFFCF3": {"value": [0, 0.3], "description": d_pass, "accuracy_level": LEVEL_NAME[PASS]},
        "#FFDC7F": {"value": [0.3, 0.6], "description": d_warn, "accuracy_level": LEVEL_NAME[WARNING]},
        "#FF704D": {"value": [0.6, 1], "description": d_warn, "accuracy_level": LEVEL_NAME[ERROR]},
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


_WRITE_BACK_CELLS = {mode: itemgetter(*keys) for mode, keys in WRITE_BACK.items()}


def write_back(npu: Node, rows: list[dict[str, Any]], mode: str) -> None:
    keys = WRITE_BACK[mode]
    cells = _WRITE_BACK_CELLS[mode]
    by_name = dict(zip(map(npu_name, rows), rows))
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
    npu: Node,
    bench: Node,
    mode: str,
    measure: TensorMeasure | None = None,
    merge: bool = False,
    tol: Tolerance | None = None,
) -> bool | None:
    """Compare the pair; given ``tol`` (of a pair of the same name), whether a row's error exceeds
    ``tol.rtol`` (``divergence_rows.node_exceeds``) where the C compare answered it with the compare,
    else None."""
    if mode == STRUCTURE:
        return None
    native = speedups.native
    level, exceeds = None, None
    if native is not None and mode == SUMMARY and not merge:
        # all of it in C when every item has a partner (else None, nothing changed)
        args = (npu.input_data, npu.output_data, bench.input_data, bench.output_data)
        if tol is None:
            level = native.summary_pair(*args)
        elif (found := native.summary_pair(*args, tol.atol, tol.rtol)) is not None:
            level, exceeds = found
    if level is None:
        rows = pair_rows(npu, bench, mode, measure)
        if not rows:
            return None
        level = check_rows(rows, mode, merge)
        if mode == TENSOR:
            level = max(level, _mark_unreadable(rows))
        write_back(npu, rows, mode)
    precision: int | float = LEVEL_INDEX[level]
    parts = npu.id.split(".", 2)
    if len(parts) > 1 and parts[1] in EMPTY_APIS:
        precision = 1 if mode == MD5 else 0
    npu.precision = precision
    return exceeds


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
    tol: Tolerance | None = None,
) -> dict[Node, bool]:
    """compare_graphs' work after matching, for ``nodes``: a run of sorted_nodes() that holds each
    collection's whole subtree or none of it. ``partners`` maps matched NPU nodes to Bench ones. Given
    ``tol``, whether a row of a pair of the same name exceeds ``tol.rtol``, of the pairs whose compare
    answered it (``compare_pair``)."""
    answered = {}
    for n in nodes:
        b = partners.get(n)
        if b is not None:
            exceeds = compare_pair(n, b, mode, tol=tol if b.id == n.id else None)
            if exceeds is not None:
                answered[n] = exceeds
    for c in nodes:
        if c.type == COLLECTION and c.parent is root:
            _collection_precision(c, mode)
    return answered


def compare_graphs(
    npu: Graph,
    bench: Graph,
    mode: str,
    fuzzy: bool = False,
    mapping: Mapping[str, str] | None = None,
    measure: TensorMeasure | None = None,
    merge: bool = False,
) -> list[tuple[Node, Node]]:
    """``merge``: the graphs are parallel-merged ones (merge checkers, §3.4). The matched pairs."""
    pairs = match_pairs(npu, bench, fuzzy, mapping)
    for n, b in pairs:
        compare_pair(n, b, mode, measure, merge)
    collection_precision(npu, mode)
    return pairs
