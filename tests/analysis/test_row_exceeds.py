"""row_errors.exceeds, the fast test graph_visualize asks of every row it compares, answers as
stats_error does (an error over rtol), wherever it answers; None where it leaves the row to it."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from msprobe_dask.analysis.row_errors import exceeds, stats_error

_CELL = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(min_value=-4, max_value=4),
    st.sampled_from([0.0, -0.0, 1.0, 1e-7, 2.0]),
    st.integers(-3, 3),
    st.none(),
)
_TOLERANCE = st.one_of(st.floats(min_value=-1, max_value=2), st.sampled_from([0.0, 1e-6, 0.1, math.inf]))


@settings(max_examples=500, deadline=None)
@given(st.tuples(*[_CELL] * 4), st.tuples(*[_CELL] * 4), _TOLERANCE, _TOLERANCE)
def test_exceeds_answers_as_stats_error(
    npu: tuple[float, ...], bench: tuple[float, ...], atol: float, rtol: float
) -> None:
    found = exceeds(npu, bench, atol, rtol)
    if found is None:
        return
    error = stats_error(npu, bench, None, None, atol)
    assert found == (error is not None and error > rtol), (npu, bench, atol, rtol, error)


def test_exceeds_answers_the_usual_rows() -> None:
    """Four finite floats a side: answered (the rows of a statistics dump)."""
    assert exceeds((2.0, -1.0, 0.5, 3.0), (2.0, -1.0, 0.5, 3.0), 1e-6, 0.1) is False
    assert exceeds((2.5, -1.0, 0.5, 3.0), (2.0, -1.0, 0.5, 3.0), 1e-6, 0.1) is True
    assert exceeds((2.1, -1.0, 0.5, 3.0), (2.0, -1.0, 0.5, 3.0), 1e-6, 0.1) is False
    assert exceeds((1.0, 0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 0.0), 1e-6, 0.1) is True  # (no scale: infinite)
    assert exceeds((math.nan, 0.0, 0.0, 0.0), (1.0, 0.0, 0.0, 0.0), 1e-6, 0.1) is None
    assert exceeds((1, 0.0, 0.0, 0.0), (1.0, 0.0, 0.0, 0.0), 1e-6, 0.1) is None
