"""NodeGroup reads each set of Err_message cells once (judged nodes' cells repeat): nodes whose cells
repeat, or are not hashable, are counted as nodes read one by one."""

from __future__ import annotations

import json

from msprobe_dask.judge.rules import UNREADABLE
from msprobe_dask.summary.nodes import API_NODE, NodeGroup

UNREAD = json.dumps([f"{UNREADABLE}x.pt: no such file", "error: NaN in npu"])
SHAPE = json.dumps(["error: shape differs between npu and bench"])


def _group(nodes: list[tuple[str, float, list[dict[str, object]]]]) -> NodeGroup:
    group = NodeGroup("step0/rank0")
    for i, (name, precision, items) in enumerate(nodes):
        group.add(name, API_NODE, precision, i, lambda items=items: items)  # type: ignore[misc]
    return group


def _facts(group: NodeGroup) -> tuple[object, ...]:
    s = group.summary
    kinds = [(k.text, k.count, k.structural) for k in group.kinds.most_common()]
    return s.total, s.warnings, s.errors, kinds, group.unreadable, group.first, len(group.ranked)


def test_repeated_and_unhashable_cells_count_per_node() -> None:
    shape = [{"Err_message": SHAPE, "NormRelativeErr": "5.0%"}]
    unread = [{"Err_message": UNREAD}, {"Err_message": None, "NormRelativeErr": "2.5%"}]
    listed = [{"Err_message": [SHAPE]}]  # (not hashable: read as it is)
    group = _group([("a", 1, shape), ("b", 1, unread), ("c", 0.5, shape), ("d", 1, unread), ("e", 1, listed)])
    total, warnings, errors, kinds, unreadable, first, ranked = _facts(group)
    assert (total, warnings, errors, ranked) == (5, 1, 4, 4)
    assert unreadable == ["x.pt: no such file", "x.pt: no such file"]
    assert [(count, structural) for _, count, structural in kinds] == [
        (2, True),
        (2, False),
        (2, False),
        (1, True),
    ]
    assert first is not None and first[0][0] == "b"  # a's messages are structural only
    again = _group([("a", 1, shape), ("b", 1, unread), ("c", 0.5, shape), ("d", 1, unread), ("e", 1, listed)])
    assert _facts(again) == _facts(group)
