"""The C test of a compared pair's rows against rtol, made by the C summary compare of the pair
(csrc/compare.c: summary_pair with atol and rtol, csrc/row_exceeds.c), answers as
divergence_rows.node_exceeds, the Python definition (row_errors' rule), wherever it answers; it
answers the rows of statistics dumps (floats, the same ints, texts and None, NaN and infinities)."""

from __future__ import annotations

import copy
import math
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from msprobe_dask.analysis import row_errors
from msprobe_dask.analysis.tolerance import Tolerance
from msprobe_dask.dump import markers
from msprobe_dask.graph import divergence_rows, speedups
from msprobe_dask.graph.compare import SUMMARY, compare_subtrees
from msprobe_dask.graph.divergence_rows import node_exceeds, node_rows
from msprobe_dask.graph.model import API, Node

NATIVE = speedups.native
pytestmark = pytest.mark.skipif(NATIVE is None, reason="the C extension is not built")

_NUMBER = (
    st.floats()
    | st.floats(min_value=-4, max_value=4)
    | st.sampled_from([0.0, -0.0, 1e-7, 2.0, math.inf, -math.inf, math.nan, 1e308, -1e308])
)
_STAT = _NUMBER | st.integers(-3, 3) | st.none() | st.sampled_from(["True", "torch.int64"]) | st.booleans()
_NAMES = [f"Functional.f.0.forward.{part}" for part in ("input.0", "input.1", "output.0", "output.1")]


@st.composite
def _items(draw: Any, stats: Any, name: str) -> dict[str, Any]:
    """An item named ``name``: its statistics (sometimes one missing), beside other keys."""
    state = "output" if ".output." in name else "input"
    item: dict[str, Any] = {"type": "torch.Tensor", "dtype": "torch.float32", "state": state}
    item["full_op_name"] = name
    for key in markers.STATS:
        if draw(st.integers(0, 9)):
            item[key] = draw(stats)
    return item


@st.composite
def _pair(draw: Any) -> tuple[Node, Node]:
    """A node and its partner of the same name: items of the same names, some left out of the node (so
    that the compare pairs some by position with another name's: the test pairs them by name), some the
    same statistics (equal, or the very objects) as their partner's, some near them."""
    npu, bench = Node("Functional.f.0.forward", API), Node("Functional.f.0.forward", API)
    stats = draw(st.sampled_from([_NUMBER, _STAT]))  # (a statistics dump's: floats)
    for name in _NAMES:
        side = npu.output_data if ".output." in name else npu.input_data
        theirs = bench.output_data if ".output." in name else bench.input_data
        mine = draw(_items(stats, name))
        if draw(st.booleans()):
            side[name] = mine
        kind = draw(st.sampled_from(["other", "same", "equal", "near"]))
        if kind == "same":
            partner = dict(mine)
        elif kind == "equal":
            partner = {k: float(v) if v.__class__ is float else v for k, v in mine.items()}
        elif kind == "near":
            partner = {
                k: v * draw(st.sampled_from([1.0, 1.0001, 0.95, 1.5])) if v.__class__ is float else v
                for k, v in mine.items()
            }
        else:
            partner = draw(_items(stats, name))
        theirs[name] = partner
    return npu, bench


_TOLERANCE = st.builds(
    Tolerance, st.sampled_from([1e-6, 0.0, 0.5, -1.0]), st.sampled_from([0.1, 0.0, 1.0, 1e-3])
) | st.builds(  # (those the C path leaves to Python)
    Tolerance,
    st.sampled_from([1e-6, math.inf, math.nan, -math.inf]),
    st.sampled_from([0.1, -0.5, math.inf, math.nan]),
)


def _python(npu: Node, bench: Node, tol: Tolerance) -> bool:
    return node_exceeds(npu, {**bench.input_data, **bench.output_data}, SUMMARY, tol)


def _native(npu: Node, bench: Node, tol: Tolerance) -> bool | None:
    """The C compare's answer (its compare cells written into copies of the items; it takes every pair
    whose items all have partners)."""
    assert NATIVE is not None
    sides = [copy.deepcopy(items) for items in (npu.input_data, npu.output_data)]
    found = NATIVE.summary_pair(*sides, bench.input_data, bench.output_data, tol.atol, tol.rtol)
    if found is None:  # (a node without items: no rows to compare)
        assert not (npu.input_data or npu.output_data)
        return None
    level, exceeds = found
    assert level in (0, 1, 2)
    return exceeds  # type: ignore[no-any-return]


def _float_pair(npu: tuple[Any, ...], bench: tuple[Any, ...]) -> tuple[Node, Node]:
    n, b = Node("Tensor.add.0.forward", API), Node("Tensor.add.0.forward", API)
    name = "Tensor.add.0.forward.output.0"
    n.output_data[name] = {**dict(zip(markers.STATS, npu)), "state": "output", "full_op_name": name}
    b.output_data[name] = {**dict(zip(markers.STATS, bench)), "state": "output", "full_op_name": name}
    return n, b


@settings(max_examples=1000, deadline=None)
@given(_pair(), _TOLERANCE)
def test_pair_exceeds_answers_as_node_exceeds(pair: tuple[Node, Node], tol: Tolerance) -> None:
    npu, bench = pair
    found = _native(npu, bench, tol)
    if found is not None:
        assert found is _python(npu, bench, tol), (npu.input_data, npu.output_data, bench, tol)


@settings(max_examples=300, deadline=None)
@given(_pair(), st.sampled_from([Tolerance(), Tolerance(0.0, 0.0), Tolerance(1e-3, 1.0)]))
def test_pair_exceeds_answers_rows_of_floats_and_of_the_same_statistics(
    pair: tuple[Node, Node], tol: Tolerance
) -> None:
    """Each row's statistics floats (any: NaN, infinities), or the same (equal ints, texts, None):
    answered in C (where the node has items: else there is no compare)."""
    npu, bench = pair
    theirs = {**bench.input_data, **bench.output_data}
    keys = markers.STATS
    answered = bool(npu.input_data or npu.output_data) and all(
        all(item.get(k).__class__ is float and other.get(k).__class__ is float for k in keys)
        or [item.get(k) for k in keys] == [other.get(k) for k in keys]
        for items in (npu.input_data, npu.output_data)
        for name, item in items.items()
        if (other := theirs.get(name)) is not None
    )
    if answered:
        assert _native(npu, bench, tol) is _python(npu, bench, tol)


def test_pair_exceeds_of_usual_rows() -> None:
    def pair(npu: tuple[Any, ...], bench: tuple[Any, ...]) -> bool | None:
        return _native(*_float_pair(npu, bench), Tolerance())

    assert pair((2.0, -1.0, 0.5, 3.0), (2.0, -1.0, 0.5, 3.0)) is False
    assert pair((2.1, -1.0, 0.5, 3.0), (2.0, -1.0, 0.5, 3.0)) is False
    assert pair((2.5, -1.0, 0.5, 3.0), (2.0, -1.0, 0.5, 3.0)) is True
    assert pair((1.0, 0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 0.0)) is True  # (no scale: infinite)
    assert pair((1e-6, 0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 0.0)) is False  # (no more than atol: none)
    assert pair((1.0, 0.0, 0.5, 5.0), (1.0, 0.0, 0.5, math.inf)) is False  # (no Bench norm: not measured)
    assert pair((1.0, 0.0, 0.5, math.inf), (1.0, 0.0, 0.5, 5.0)) is True
    assert pair((1.25, -math.inf, -math.inf, math.inf), (1.2524, -math.inf, -math.inf, math.inf)) is False
    assert pair((1.25, math.nan, 0.0, 1.0), (1.25, 0.0, 0.0, 1.0)) is True
    assert pair((-1, -1, -1, -1), (-1, -1, -1, -1)) is False
    assert pair(("True", "False", None, None), ("True", "False", None, None)) is False
    assert pair((1, 0, 0, 0), (2, 0, 0, 0)) is None  # (ints that differ: the Python path)


def test_pair_exceeds_reads_the_statistics_by_their_configured_keys() -> None:
    """The statistics' keys are markers.STATS, handed to the C module as graph/speedups.py loads it."""
    assert NATIVE is not None
    n, b = Node("Tensor.add.0.forward", API), Node("Tensor.add.0.forward", API)
    keys = {"state": "output", "full_op_name": "x"}
    n.output_data["x"] = {"Max": 1.0, "Min": 0.0, "Mean": 0.5, "Norm": 9.0, "L2": 2.0, **keys}
    b.output_data["x"] = {"Max": 1.0, "Min": 0.0, "Mean": 0.5, "Norm": 2.0, "L2": 2.0, **keys}
    assert _native(n, b, Tolerance()) is True
    NATIVE.configure_stats((*markers.STATS[:3], "L2"))
    try:
        assert _native(n, b, Tolerance()) is False
    finally:
        NATIVE.configure_stats(markers.STATS)


@pytest.mark.parametrize(("scale_stats", "norm_stat"), [((2, 3), 0), ((1, 1), 2), ((0, 3), 1)])
def test_pair_exceeds_takes_its_rule_from_python(
    scale_stats: tuple[int, int], norm_stat: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """row_errors' SCALE_STATS and NORM_STAT (the statistics a row's scale is made of, the one measured
    against its own |Bench|) are handed to C (configure_errors, as graph/speedups.py loads it): another
    rule there, and the C test answers as node_exceeds does by it."""
    assert NATIVE is not None
    n, b = _float_pair((1.0, 0.0, 0.7, 100.0), (1.0, 0.0, 0.5, 100.0))
    assert _native(n, b, Tolerance()) is _python(n, b, Tolerance()) is True  # (Mean's 0.2 over a scale of 1)
    rng = random.Random(7)
    values = [0.0, 1.0, -2.0, 0.5, 100.0, 1e-7, math.inf, math.nan]
    pairs = [
        _float_pair(
            tuple(rng.choice(values) for _ in markers.STATS),
            tuple(rng.choice(values) * rng.choice([1.0, 1.05, 1.5]) for _ in markers.STATS),
        )
        for _ in range(300)
    ]
    before = [_python(n, b, Tolerance()) for n, b in pairs]
    monkeypatch.setattr(row_errors, "SCALE_STATS", scale_stats)
    monkeypatch.setattr(row_errors, "NORM_STAT", norm_stat)
    NATIVE.configure_errors(scale_stats, norm_stat)
    try:
        after = [_python(n, b, Tolerance()) for n, b in pairs]
        assert after != before  # (the rule changed answers)
        assert [_native(n, b, Tolerance()) for n, b in pairs] == after
        with pytest.raises(ValueError, match="configure_errors"):
            NATIVE.configure_errors((0, len(markers.STATS)), norm_stat)
    finally:
        monkeypatch.undo()
        NATIVE.configure_errors(row_errors.SCALE_STATS, row_errors.NORM_STAT)


def test_the_compares_answers_reach_the_first_divergences_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """compare_subtrees hands node_rows the kernel's answers: a run whose pairs the C compare took asks
    Python's node_exceeds nothing, and its piece says what node_exceeds would."""
    over = _float_pair((2.5, -1.0, 0.5, 3.0), (2.0, -1.0, 0.5, 3.0))
    within = _float_pair((2.0, -1.0, 0.5, 3.0), (2.0, -1.0, 0.5, 3.0))
    within[0].id = within[1].id = "Tensor.mul.0.forward"
    # (a communication node's answer is the compare's too)
    comm = _float_pair((2.0, -1.0, 0.5, 3.0), (2.0, -1.0, 0.5, 3.0))
    comm[0].id = comm[1].id = "Distributed.all_reduce.0.forward"
    root = Node("root", API)
    for pairs, exceeds in (([within, comm], False), ([within, comm, over], True)):
        answered = compare_subtrees([n for n, _ in pairs], dict(pairs), root, SUMMARY, Tolerance())
        assert answered == {n: _python(n, b, Tolerance()) for n, b in pairs}
        monkeypatch.setattr(divergence_rows, "node_exceeds", _refuse)
        nodes = [n for n, _ in pairs]
        places = lambda names: list(range(len(names)))  # noqa: E731
        piece = node_rows(nodes, dict(pairs), SUMMARY, places, Tolerance(), answered)
        monkeypatch.undo()
        assert piece.exceeds is exceeds


def _refuse(*args: Any) -> bool:
    raise AssertionError("node_exceeds asked of a pair the C compare answered")
