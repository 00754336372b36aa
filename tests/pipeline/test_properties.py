"""Properties: a dump compared with itself is all pass with zero diffs; swapping sides negates diffs."""

from __future__ import annotations

import math

from conftest import case_dir
from hypothesis import given
from hypothesis import strategies as st

from msprobe_dask.columns import DIFF_COLUMNS
from msprobe_dask.metrics.stats import stat_diff
from msprobe_dask.pipeline.compare import compare


def test_compare_with_itself_is_all_pass() -> None:
    dump = case_dir("stat_mix") / "target" / "dump.json"
    (result,) = compare(dump, dump)
    records = result.table.records()
    assert records
    for record in records:
        assert record["Result"] == "pass" or "nan/inf" in record["Err_message"]
        assert all(record[c] in ("0", "N/A") for c in DIFF_COLUMNS), record["NPU Name"]
        assert record["Bench Name"] == record["NPU Name"]


def test_swapping_sides_negates_diffs() -> None:
    target, golden = case_dir("stat_mix") / "target", case_dir("stat_mix") / "golden"
    (forward,) = compare(target, golden)
    (backward,) = compare(golden, target)
    back = {r["NPU Name"]: r for r in backward.table.records()}
    checked = 0
    for record in forward.table.records():
        other = back[record["NPU Name"]]
        for column in DIFF_COLUMNS[:4]:
            a, b = record[column], other[column]
            if isinstance(a, float) and isinstance(b, float):
                assert a == -b
                checked += 1
    assert checked > 100


finite = st.floats(allow_nan=False, allow_infinity=False, width=64)


@given(finite, finite)
def test_stat_diff_is_antisymmetric(a: float, b: float) -> None:
    diff_ab, _ = stat_diff(a, b)
    diff_ba, _ = stat_diff(b, a)
    if diff_ab == "0":
        assert diff_ba == "0"
    else:
        assert math.isclose(diff_ab, -diff_ba) or (math.isinf(diff_ab) and math.isinf(diff_ba))


@given(finite)
def test_stat_diff_of_equal_values_is_zero(a: float) -> None:
    assert stat_diff(a, a) == ("0", "0")
