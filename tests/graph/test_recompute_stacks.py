"""The stack test of a recompute candidate (graph_visualize.md §2.8, ``build._stack_shows_recompute``)."""

from __future__ import annotations

import pytest

from msprobe_dask.graph import build

CHECKPOINT = "File /py/torch/utils/checkpoint.py, line 10, in recompute_fn, out = fn(*args)"
FUNCTION = "File /py/torch/autograd/function.py, line 5, in apply, return super().apply(*args)"
FORWARD = "File /m/model.py, line 3, in forward, x = self.fc(x)"


@pytest.mark.parametrize(
    ("lines", "shows"),
    [
        ([FORWARD, CHECKPOINT], True),
        (["File /m/checkpoint.py, line 10, in recompute_fn, x"], False),  # not torch/utils/checkpoint.py
        (["File /m/train.py, line 7, in backward, loss.backward()", FORWARD, FUNCTION], True),
        (["File /m/train.py, line 7, in backward, loss.backward()", FORWARD, FORWARD, FUNCTION], False),
        (["File /megatron/core/ckpt.py, line 2, in checkpoint_function_backward, y", FUNCTION], True),
        (["File /other/ckpt.py, line 2, in checkpoint_function_backward, y", FUNCTION], False),
        ([FORWARD, "backward and recompute_fn in a line that is no frame", FUNCTION], False),
        ([FORWARD, FUNCTION, 7, None], False),  # (a hostile stack.json's numbers)
        ([], False),
    ],
)
def test_a_stack_shows_recompute_by_its_frames(lines: list[object], shows: bool) -> None:
    assert build._stack_shows_recompute(lines) is shows
