"""stat_diff's path for two finite floats answers what its general rule answers."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from msprobe_dask.metrics import stats

EDGES = [0.0, -0.0, 1.0, -1.0, 1e-300, 5e-324, 1.7976931348623157e308, 0.1 + 0.2, 0.3, 3.0]


def same(a: tuple, b: tuple) -> bool:
    return a == b and all(
        math.copysign(1, x) == math.copysign(1, y) for x, y in zip(a, b) if isinstance(x, float)
    )


@given(st.floats(allow_nan=False, allow_infinity=False), st.floats(allow_nan=False, allow_infinity=False))
def test_floats_path_equals_the_general_rule(a: float, b: float) -> None:
    assert same(stats.stat_diff(a, b), stats.stat_diff_by_kind(a, b))


def test_edge_values() -> None:
    for a in EDGES:
        for b in EDGES:
            assert same(stats.stat_diff(a, b), stats.stat_diff_by_kind(a, b)), (a, b)
            assert same(stats.stat_diff(a, a), ("0", "0"))


_CELLS = st.one_of(
    st.floats(), st.integers(-5, 5), st.sampled_from(["N/A", "inf", "-inf", "nan", "cpu", "1.5"])
)


@given(st.lists(st.tuples(_CELLS, _CELLS), max_size=40))
def test_a_column_answers_what_each_pair_answers(pairs: list[tuple[object, object]]) -> None:
    """(A column's relative errors are printed together at its end: each is still its own pair's.)"""
    diffs, rels = stats.stat_diffs([a for a, _ in pairs], [b for _, b in pairs])
    for (a, b), diff, rel in zip(pairs, diffs, rels, strict=True):
        assert same((diff, rel), stats.stat_diff_by_kind(a, b)), (a, b)
