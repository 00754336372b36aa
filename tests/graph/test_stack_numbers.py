"""A graph's tb_stack numbers (``rows.number_stacks``): by first use in node order, one number for
stacks whose JSON texts are equal, whatever list objects hold them."""

from __future__ import annotations

from msprobe_dask.graph import rows
from msprobe_dask.graph.model import Node

LINE = "File /m/model.py, line 3, in forward, x = self.fc(x)"


def _numbers(stacks: list[object]) -> list[int]:
    nodes = [Node(f"Module.m{i}.forward.0", 0, stack=s) for i, s in enumerate(stacks)]  # type: ignore[arg-type]
    ids = rows.number_stacks(nodes)
    assert sorted(ids.first.values()) == list(range(len(ids.first)))
    return [ids.of_list[id(n.stack)] for n in nodes]


def test_equal_texts_share_a_number_and_other_texts_do_not() -> None:
    shared = [LINE]
    stacks = [shared, [LINE], shared, [LINE, LINE], [], [1], ["1"], [1.0], [True], "1", [[LINE]], [LINE, 7]]
    assert _numbers(stacks) == [0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9]


def test_a_list_with_a_line_that_is_no_text_is_numbered_by_its_text() -> None:
    assert _numbers([[LINE, None], [LINE, None], [LINE, "null"], [{"a": 1}], [{"a": 1}]]) == [0, 0, 1, 2, 2]
