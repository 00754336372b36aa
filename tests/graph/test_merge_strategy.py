"""Parallel parameters (§6.1), strategy table (§6.2) and Megatron default groups (§6.3)."""

from __future__ import annotations

import pytest

from msprobe_dask.errors import ConfigError
from msprobe_dask.graph.merge.strategy import (
    FULL,
    NO_PARALLEL,
    PP,
    TP,
    TP_PP,
    VPP,
    ParallelParams,
    default_groups,
    parse_params,
)


@pytest.mark.parametrize(
    ("rank_size", "tp", "pp", "vpp", "strategy"),
    [
        (1, 1, 1, 1, NO_PARALLEL),
        (2, 2, 1, 1, TP),
        (2, 1, 2, 1, PP),
        (2, 1, 2, 2, VPP),
        (8, 2, 1, 1, TP),
        (8, 1, 2, 1, PP),
        (4, 2, 2, 1, TP_PP),
        (8, 2, 2, 1, FULL),
    ],
)
def test_strategy_table(rank_size: int, tp: int, pp: int, vpp: int, strategy: str) -> None:
    assert ParallelParams(rank_size, tp, pp, vpp).strategy == strategy


def test_default_groups_follow_megatron_order() -> None:
    p = ParallelParams(8, 2, 2)
    assert default_groups(p, "tp") == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert default_groups(p, "pp") == [[0, 4], [1, 5], [2, 6], [3, 7]]
    q = ParallelParams(8, 2, 2, order="tp-pp-dp")
    assert default_groups(q, "tp") == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert default_groups(q, "pp") == [[0, 2], [1, 3], [4, 6], [5, 7]]


@pytest.mark.parametrize(
    ("order", "needle"),
    [("dp-pp", "(tp)"), ("tp-ep-pp-dp", "ep must be next to dp"), ("tp-xx-dp-pp", "unknown dimension 'xx'")],
)
def test_default_groups_refuse_bad_orders(order: str, needle: str) -> None:
    with pytest.raises(ConfigError, match=r"\[Bench\]") as exc:
        default_groups(ParallelParams(8, 2, 2, order=order, side="Bench"), "tp")
    assert needle in str(exc.value)


def test_build_takes_first_vpp_and_order_compare_needs_two() -> None:
    (npu,) = parse_params([2], [1], [2], [2, 1], ["tp-dp-pp", "x"], compare=False)
    assert (npu.vpp, npu.order, npu.side) == (2, "tp-dp-pp", "NPU")
    npu, bench = parse_params([2, 1], [1, 1], [2, 1], [2], ["tp-dp-pp"], compare=True)
    assert (npu.vpp, bench.vpp, npu.order) == (1, 1, "tp-cp-ep-dp-pp")
    npu, bench = parse_params([2, 1], [1, 1], [2, 1], [2, 1], None, compare=True)
    assert (npu.vpp, bench.vpp, bench.side) == (2, 1, "Bench")
