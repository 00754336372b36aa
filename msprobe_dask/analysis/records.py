"""Per-rank first-diff records: the compare rows of one rank grouped by dump entry, with ``is_same``.

This is what the reference writes to ``compare_result_rank{N}_{ts}.json`` under ``-da`` (compare.md
§7.1-2): tensor dumps are compared as statistics, Result/Err_message are left empty (md5 mode: a bare
pass/Different and a NaN message), NaN statistics are the text ``Nan``, and every row also carries
its state, entry and P2POp op/peer.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from msprobe_dask.columns import (
    BENCH_MD5,
    BENCH_P2P_OP,
    BENCH_P2P_PEER,
    DIFF_COLUMNS,
    ERR_MESSAGE,
    MD5_DIFFERENT,
    NA,
    NAN,
    NPU_MD5,
    NPU_P2P_OP,
    NPU_P2P_PEER,
    RESULT,
    STACK_COLUMN,
    STAT_COLUMNS,
)
from msprobe_dask.judge import rules
from msprobe_dask.metrics.stats import relative_fraction
from msprobe_dask.table import Matched, build_table, pair_sides

RELATIVE_COLUMNS = tuple(DIFF_COLUMNS[4:])  # MaxRelativeErr .. NormRelativeErr
THRESHOLD = 0.5  # diff_analyze_threshold.yaml: each relative error, as a fraction
IGNORED_OUTPUTS = {"npu_fusion_attention": (4, 5)}  # ignore_op_list.yaml: entry's api -> output indices
DIFF_COLUMNS_AS_TEXT = tuple(DIFF_COLUMNS)  # Max diff .. L2norm diff, then RELATIVE_COLUMNS

Records = dict[str, dict[str, Any]]


def _p2p(value: str, peer: bool) -> Any:
    if value == NA:
        return "None"
    if peer and value.lstrip("-").isdigit():
        return int(value)
    return value


def _is_same(entry: str, items: list[dict[str, Any]], mode: str) -> bool:
    ignored = IGNORED_OUTPUTS.get(entry.split(".")[-3], ()) if entry.count(".") >= 2 else ()
    outputs = [item for item in items if item["state"] == "output"]
    for index, item in enumerate(outputs):
        if index in ignored:
            continue
        if mode == "md5":
            if item[RESULT] == MD5_DIFFERENT:
                return False
            continue
        for column in RELATIVE_COLUMNS:
            fraction = relative_fraction(item.get(column))
            if fraction is not None and fraction > THRESHOLD:
                return False
    return True


def rank_records(matched: Matched) -> Records:
    """``{entry: {"is_same": bool, "op_items": [row dicts]}}`` of one rank, in dump order."""
    mode = "statistics" if matched.mode == "tensor" else matched.mode
    table = build_table(pair_sides(matched.pairs), mode, matched.stacks, None, matched.float_stats)
    records: Records = {}
    previous = None
    for pair, row in zip(matched.pairs, table.rows):
        item = dict(zip(table.columns, row))
        for column in DIFF_COLUMNS_AS_TEXT:
            if column in item:
                item[column] = str(item[column])
        for column in STAT_COLUMNS:
            value = item.get(column)
            if isinstance(value, float) and math.isnan(value):
                item[column] = NAN  # as the reference's table holds it (its json shows the text)
        if mode == "md5":  # indicator analysis is skipped: a bare md5 verdict, no message (NaN)
            item[RESULT] = rules.PASS if item[NPU_MD5] == item[BENCH_MD5] else MD5_DIFFERENT
            item[ERR_MESSAGE] = math.nan
        else:
            item[RESULT] = item[ERR_MESSAGE] = ""
        entry = pair.npu.entry
        if STACK_COLUMN in item:
            first = entry != previous
            stack = matched.stacks.get(entry) if matched.stacks is not None else None
            item[STACK_COLUMN] = list(stack) if first and stack is not None else NA
        previous = entry
        item["state"] = pair.npu.state
        item["api_origin_name"] = entry
        item[NPU_P2P_OP] = _p2p(pair.npu.p2p_op, False)
        item[BENCH_P2P_OP] = _p2p(pair.bench.p2p_op, False) if pair.bench else "None"
        item[NPU_P2P_PEER] = _p2p(pair.npu.p2p_peer, True)
        item[BENCH_P2P_PEER] = _p2p(pair.bench.p2p_peer, True) if pair.bench else "None"
        if len(entry.split(".")) < 4:
            continue
        records.setdefault(entry, {"is_same": True, "op_items": []})["op_items"].append(item)
    for entry, record in records.items():
        record["is_same"] = _is_same(entry, record["op_items"], mode)
    return records


def statistics_only(matched: Matched) -> Matched:
    """Tensor dumps are analysed on their statistics: no tensor file is read."""
    return replace(matched, mode="statistics" if matched.mode == "tensor" else matched.mode, jobs=[])
