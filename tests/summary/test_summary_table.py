"""summarise_table's refs: the worst rows ranked by the metric, one per entry, each with the user frame
of its entry's first row's stack (the rows after it may hold N/A), and the first divergence."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from msprobe_dask.summary.table import summarise_table

COLUMNS = ["NPU Name", "NormRelativeErr", "Result", "Err_message", "NPU_Stack_Info"]


def _stack(line: int) -> str:
    return str(
        ["File /site-packages/torch/nn.py, line 1, in call", f"File /work/train.py, line {line}, in step"]
    )


def test_worst_rows_carry_their_entrys_first_stack() -> None:
    rows = [
        ["a.forward.0.input.0", 0.0, "pass", "", _stack(1)],
        ["a.forward.0.output.0", 0.3, "warning", "", "N/A"],
        ["b.forward.0.input.0", 0.5, "error", "", _stack(2)],
        ["b.forward.0.output.0", 0.9, "error", "", "N/A"],
        ["c.forward.0.input.0", 0.1, "pass", "", _stack(3)],
        ["d.forward.0.output.0", 0.7, "error", "", _stack(4)],
    ]
    entries = ["a.forward.0", "a.forward.0", "b.forward.0", "b.forward.0", "c.forward.0", "d.forward.0"]
    group = summarise_table("rank0", COLUMNS, rows, entries)
    worst = [(ref.name, ref.value, ref.stack, ref.result) for ref in group.worst]
    assert worst == [
        ("b.forward.0.output.0", 0.9, "File /work/train.py, line 2, in step", "error"),
        ("d.forward.0.output.0", 0.7, "File /work/train.py, line 4, in step", "error"),
        ("a.forward.0.output.0", 0.3, "File /work/train.py, line 1, in step", "warning"),
    ]
    first = group.first_divergence
    assert first is not None and (first.name, first.stack) == (
        "a.forward.0.output.0",
        "File /work/train.py, line 1, in step",
    )
    assert (group.total, group.passed, group.warnings, group.errors) == (6, 2, 1, 3)


_CELLS = st.lists(
    st.sampled_from(["0", "12.5%", "50.0%", "N/A", "nan", "inf", " 3 ", "True", "", "x%", "-0.0"])
    | st.sampled_from([0.0, -0.0, 1.5, float("nan"), None, 3, True]),
    max_size=12,
)


@settings(max_examples=300, deadline=None)
@given(_CELLS, st.booleans())
def test_as_floats_is_as_float_of_each_cell(cells: list[object], texts_only: bool) -> None:
    """summary.cells.as_floats (each distinct text converted once) is as_float of each cell, signs of
    zeros and NaNs included; a cell that cannot be hashed is converted on its own."""
    from msprobe_dask.summary.cells import as_float, as_floats

    if texts_only:
        cells = [str(cell) for cell in cells]
    for given_cells in (cells, [*cells, [1.0]]):
        made, expected = as_floats(given_cells), [as_float(cell) for cell in given_cells]
        assert [(math.copysign(1, v), repr(v)) for v in made] == [
            (math.copysign(1, v), repr(v)) for v in expected
        ]
