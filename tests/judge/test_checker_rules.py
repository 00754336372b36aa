"""The statistics checkers' rules are defined once (judge/rules.py: CHECKERS) and both C kernels take
them from there (csrc/checker_rules.h): the statistics csv's (writers/csrc/stat_lines.c) and the graph's
summary compare (graph/csrc/compare.c). A rule changed in that one record changes both kernels' rows."""

from __future__ import annotations

import json
from typing import Any

import pytest

from msprobe_dask.dump.rows import LeafRow
from msprobe_dask.graph import cells, speedups
from msprobe_dask.graph.model import API, Node
from msprobe_dask.judge import rules
from msprobe_dask.table import Sides
from msprobe_dask.writers import csv_writer, stat_lines

pytestmark = pytest.mark.skipif(
    speedups.native is None or csv_writer.native is None, reason="the C extensions are not built"
)

OP = "Functional.relu.0.forward"
NPU = {"dtype": "torch.float32", "shape": [4]}
BENCH = {"dtype": "torch.float16", "shape": [2, 2]}  # the DType and Shape checkers flag the pair
STATS = (2.0, -1.0, 0.5, 3.0)


def statistics_messages() -> list[str]:
    """The Err_message of the statistics csv kernel's row for the pair."""

    def row(side: dict[str, Any]) -> LeafRow:
        shape = str(side["shape"]).replace(" ", "")
        return LeafRow(f"{OP}.input.0", OP, "input", side["dtype"], shape, "True", STATS, "00000000", "-1")

    stat_lines.RULES[False] = stat_lines._rules(False)  # (as the module makes them, from rules.CHECKERS)
    made = stat_lines.statistics_cells(Sides([row(NPU)], [row(BENCH)]), (True,) * 12)
    assert made is not None
    return json.loads(made["Err_message"][0])


def graph_messages() -> list[str]:
    """The Err_message of the graph's C summary compare for the pair, configured from rules.CHECKERS."""

    def node(side: dict[str, Any]) -> Node:
        n = Node(OP, API)
        full = f"{OP}.input.0"
        n.input_data[full] = {
            "type": "torch.Tensor",
            "requires_grad": "True",
            **dict(zip(("Max", "Min", "Mean", "Norm"), STATS)),
            **{"data_name": "-1", "full_op_name": full, "state": "input", "md5": "00000000"},
            **side,
        }
        return n

    native = speedups.native
    assert native is not None
    native.configure_summary(cells.SUMMARY_RULES._replace(checkers=rules.CHECKERS))
    npu, bench = node(NPU), node(BENCH)
    assert native.summary_pair(npu.input_data, npu.output_data, bench.input_data, bench.output_data) == 2
    return json.loads(npu.input_data[f"{OP}.input.0"]["Err_message"])


def test_both_kernels_take_the_checkers_rules_from_one_record(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(stat_lines.RULES, False, stat_lines.RULES[False])  # (restored at the end)
    try:
        assert statistics_messages() == graph_messages() == [rules.MSG_DTYPE, rules.MSG_SHAPE]
        messages = tuple(f"{m.split(':')[0]}: trial {i}" for i, m in enumerate(rules.SUMMARY_MESSAGES))
        # the Bench name holds "relu": the DType checker now skips it, as a fused weight's
        trial = rules.CHECKERS._replace(messages=messages, fused_weights=("relu",))
        monkeypatch.setattr(rules, "CHECKERS", trial)
        assert statistics_messages() == graph_messages() == [messages[5]]  # (Shape's)
    finally:
        speedups.native.configure_summary(cells.SUMMARY_RULES)  # type: ignore[union-attr]
