"""The C hot path (graph/csrc/) gives the Python path's answers: the same items, in the same key
order, with values of the same classes, the same compare cells and levels, and the same JSON text.

Each test runs a function with the extension and again without it (``speedups.native = None``) on
generated inputs that mix what the C code takes with what it hands back to Python (nested values,
None, P2P ops, process groups, non-ASCII text, bools, huge ints, nan and inf ...).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import os
import random
import struct
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest
from comparable import shape
from hypothesis import given, settings
from hypothesis import strategies as st

from msprobe_dask.columns import UNLINKED, UNMODIFIED, VISDB_NODE_COLUMNS
from msprobe_dask.dump import entry_index, entry_shape, markers
from msprobe_dask.dump import rows as dump_rows
from msprobe_dask.errors import DumpError
from msprobe_dask.graph import (
    build,
    cells,
    checks,
    dump_files,
    item_text,
    items,
    jsontext,
    micro_steps,
    rows,
    speedups,
    stat_cells,
)
from msprobe_dask.graph.compare import MD5, SUMMARY, TENSOR, compare_pair
from msprobe_dask.graph.model import API, Graph, Node
from msprobe_dask.judge import rules
from msprobe_dask.pipeline import sides  # noqa: F401 (hands rows.LEAF_RULES to the C module)
from msprobe_dask.summary.nodes import JUDGED_PRECISIONS, SUMMARY_KEYS

NATIVE = speedups.native
needs_native = pytest.mark.skipif(NATIVE is None, reason="the C extension is not built")


def test_the_extension_is_built() -> None:
    """CI builds it (pip install -e . compiles graph/csrc/): without it only the Python path
    would be tested here."""
    if os.environ.get("MSPROBE_DASK_PURE_PYTHON"):
        pytest.skip("MSPROBE_DASK_PURE_PYTHON is set")
    assert NATIVE is not None, "msprobe_dask.graph._speedups is missing: reinstall with a C compiler"


def test_the_extension_matches_the_sources() -> None:
    """speedups.py takes a build only if its API number is the one the Python side expects."""
    if NATIVE is None:
        pytest.skip("the C extension is not built")
    assert NATIVE.API == speedups.API


@needs_native
def test_unconfigured_module_refuses_instead_of_crashing() -> None:
    """The module loaded alone (item_text.py, cells.py and rows.py not imported, so their rules not
    handed to it) raises."""
    code = (
        "import importlib.util, sys, glob\n"
        "path = glob.glob(sys.argv[1] + '/_speedups*.so')[0]\n"
        "spec = importlib.util.spec_from_file_location('msprobe_dask.graph._speedups', path)\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "for call in (lambda: m.stat_diffs((1.5,), (1.25,)),\n"
        "             lambda: m.items_json({}, frozenset()),\n"
        "             lambda: m.node_rows([], 0, None, [], {})):\n"
        "    try:\n"
        "        call()\n"
        "    except RuntimeError as exc:\n"
        "        print(exc)\n"
    )
    folder = os.path.dirname(NATIVE.__file__)
    res = subprocess.run([sys.executable, "-c", code, folder], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("was not called") == 3, res.stdout


@needs_native
def test_other_mappings_take_the_python_path() -> None:
    data = MappingProxyType({"k": {"Max": 1.5}})
    assert NATIVE.items_json(data, item_text.skipped_keys(False, False)) is None
    assert item_text.items_json(data, False, False) == '{"k": {"Max": "1.5"}}'  # type: ignore[arg-type]
    assert NATIVE.summary_pair(data, {}, {}, {}) is None


def test_a_null_max_of_any_text_class_makes_the_item_null(monkeypatch: pytest.MonkeyPatch) -> None:
    """format_item's rule: the item is {"value": "null"} when its Max text is null, whatever the class."""
    data = {"k": {"Max": item_text.ExportedText("null"), "Min": 1}}
    want = json.dumps({"k": {"value": "null"}})
    assert json.dumps(item_text.format_items(data, False, False)) == want
    with_c, python = _both(monkeypatch, lambda: item_text.items_json(data, False, False))
    assert with_c == python == want


@needs_native
def test_the_texts_remembered_by_their_text_keep_their_class(monkeypatch: pytest.MonkeyPatch) -> None:
    """text.c remembers the texts it wrote as they stand by their text (their hash): a str of the text
    of an ExportedText remembered (the same slot) is still a str, rounded or swapped as format_str has
    it; another object of a remembered key or text stands for it."""
    texts = ["0.123456789", "a None", "dtype"]
    data = {"k": {**{f"e{i}": item_text.ExportedText(t) for i, t in enumerate(texts)}, "n": 1}}
    other = {"k": {**{f"s{i}": "".join(list(t)) for i, t in enumerate(texts)}, "".join("n"): 1}}
    with_c, python = _both(
        monkeypatch, lambda: [item_text.items_json(d, False, False) for d in (data, other)]
    )
    assert with_c == python
    assert with_c[1] == '{"k": {"s0": "0.123457", "s1": "a null", "s2": "dtype", "n": "1"}}'


def test_rows_hold_no_stray_references(monkeypatch: pytest.MonkeyPatch) -> None:
    """node_rows with micro None (the root's) must not leak references to None."""
    graph = type("G", (), {"step": 0, "rank": 0, "data_path": "p"})()
    nodes = [Node(f"Module.m{i}.forward.0", 0) for i in range(50)]
    ids = rows.number_stacks(nodes)
    rows.chunk_rows(graph, "NPU", nodes, 0, ids)  # type: ignore[arg-type]
    before = sys.getrefcount(None)
    for _ in range(20):
        rows.chunk_rows(graph, "NPU", nodes, 0, ids)  # type: ignore[arg-type]
    assert sys.getrefcount(None) - before < 50


def _both(monkeypatch: pytest.MonkeyPatch, fn: Any) -> tuple[Any, Any]:
    """(fn() with the C path, fn() with the Python path)."""
    with_c = fn()
    monkeypatch.setattr(speedups, "native", None)
    try:
        return with_c, fn()
    finally:
        monkeypatch.setattr(speedups, "native", NATIVE)


# ------------------------------------------------------------------ generated dump entries

_NAMES = st.sampled_from(["Functional.linear.0.forward", "Tensor.add.3.backward", "Module.a.b.forward.0"])
_NODE_IDS = _NAMES | st.sampled_from(["Module.w.parameters_grad", "x.parameters_grad.0", "Torch.é.0"])
_TEXT = st.text(alphabet="ab.'N\"\\\u00e9 ", max_size=6) | st.sampled_from(["None", "torch.float32", ""])
_FLOATS = st.floats() | st.sampled_from([0.0, -0.0, 1e-5, 1e16, 2.5, -3.75, 1e300])
_STAT = st.none() | st.integers(-(10**20), 10**20) | _FLOATS | _TEXT | st.booleans()
_TENSOR = st.fixed_dictionaries(
    {"type": st.sampled_from(["torch.Tensor", "mindspore.Tensor"])},
    optional={
        "dtype": st.sampled_from(["torch.float32", "", None, 3, False, True]),
        "shape": st.lists(st.integers(0, 9), max_size=3) | st.just([10**30]),
        "Max": _STAT,
        "Min": _STAT,
        "Mean": _STAT,
        "Norm": _STAT,
        "requires_grad": st.booleans() | st.none(),
        "data_name": st.sampled_from(["-1", "a.b.c.pt", "nodot", "", None]),
        "md5": st.sampled_from(["", "1a2b3c4d", None, False, True]),
        "value": _STAT,
    },
)
_SCALAR = st.fixed_dictionaries(
    {
        "type": st.sampled_from(["int", "float", "bool", "str", "torch.Size", "slice", "torch.ProcessGroup"]),
        "value": _STAT | st.lists(st.integers(0, 3), max_size=2),
    },
    optional={"group_ranks": st.just([0, 1]), "md5": st.just("abc")},
)
_P2P = st.fixed_dictionaries(
    {"class_type": st.just("torch.distributed.P2POp"), "tensor": _TENSOR, "op": st.just("isend")}
)
_LEAF = (
    _TENSOR | _SCALAR | _P2P | st.none() | st.dictionaries(st.sampled_from(["x", "src"]), _TENSOR, max_size=2)
)
# the leaves of real dumps, which the C path takes itself
_COMMON_STAT = st.floats(allow_nan=False, allow_infinity=False) | st.integers(-3, 3)
_COMMON = st.fixed_dictionaries(
    {
        "type": st.just("torch.Tensor"),
        "dtype": st.sampled_from(["torch.float32", "torch.bfloat16"]),
        "shape": st.lists(st.integers(0, 9), max_size=3),
        "Max": _COMMON_STAT,
        "Min": _COMMON_STAT,
        "Mean": _COMMON_STAT,
        "Norm": _COMMON_STAT,
    },
    optional={
        "requires_grad": st.booleans(),
        "data_name": st.sampled_from(["x.y.0.pt", "-1"]),
        "md5": st.sampled_from(["", "abc", False, True]),
    },
) | st.fixed_dictionaries(
    {"type": st.sampled_from(["int", "float"]), "value": st.integers(-(10**20), 10**20) | _FLOATS},
    optional={"md5": st.sampled_from(["", "abc", False]), "dtype": st.sampled_from(["", False, None])},
)
_PART = st.lists(_COMMON, max_size=4) | st.lists(_LEAF | _COMMON, max_size=4) | st.just({}) | _LEAF
_ENTRY = st.fixed_dictionaries(
    {},
    optional={
        "input_args": _PART,
        "input_kwargs": _PART,
        "input": _PART,
        "output": _PART,
        "parameters": _PART,
    },
) | st.fixed_dictionaries(
    {"input_args": st.lists(_COMMON, max_size=4), "output": st.lists(_COMMON, max_size=2)},
    optional={"input_kwargs": st.just({}), "parameters": st.lists(_COMMON, max_size=2)},
)


# ------------------------------------------------------------------ exported JSON text


@needs_native
@settings(max_examples=300, deadline=None)
@given(_NODE_IDS, _ENTRY, st.booleans(), st.booleans())
def test_items_json_as_python(node_id: str, entry: dict[str, Any], keep_md5: bool, batch_p2p: bool) -> None:
    try:
        inputs, outputs = items.entry_items(node_id, entry)
    except Exception:
        return
    monkeypatch = pytest.MonkeyPatch()
    for data in (inputs, outputs):
        with_c, python = _both(monkeypatch, lambda d=data: item_text.items_json(d, keep_md5, batch_p2p))
        assert with_c == python


# ------------------------------------------------------------------ summary compare


_NUMBERS = st.integers(-5, 5) | st.floats(-1e6, 1e6) | st.sampled_from([math.nan, math.inf, 0.0, 1e-9, 2**40])


@needs_native
@settings(max_examples=500, deadline=None)
@given(st.tuples(*[_NUMBERS | _STAT] * 4), st.tuples(*[_NUMBERS | _STAT] * 4))
def test_stat_diffs_as_python(ns: tuple[Any, ...], bs: tuple[Any, ...]) -> None:
    assert shape(NATIVE.stat_diffs(ns, bs)) == shape(stat_cells.stat_diffs(ns, bs))


@needs_native
def test_stat_diffs_take_their_no_value_cell_and_small_relative_errors_texts_from_python() -> None:
    """The cells of a text statistic or a Bench 0, and the texts of a relative error outside POSITIONAL
    and of equal statistics, are the rules' (cells.SUMMARY_RULES: no_value, rel_text, zero_rel): none is
    written in C."""
    trial = cells.SUMMARY_RULES._replace(
        no_value="trial n/a", rel_text=lambda r: f"trial {r!r}", zero_rel="trial 0"
    )
    NATIVE.configure_summary(trial)
    try:
        diffs, rels, _ = NATIVE.stat_diffs(("x", 2.0, 3, 1.0000000001), ("y", 0.0, 0, 1.0))
        zeros = NATIVE.stat_diffs((2.5, 4), (2.5, 4))[1]
    finally:
        NATIVE.configure_summary(cells.SUMMARY_RULES)
    r = abs((1.0000000001 - 1.0) / 1.0 * 100)
    assert diffs[:3] == ["trial n/a", 2.0, 3] and rels == ["trial n/a"] * 3 + [f"trial {r!r}"]
    assert zeros == ["trial 0", "trial 0"]
    assert NATIVE.stat_diffs((1.0000000001,), (1.0,))[1] == [stat_cells.rel_text(r)]


@needs_native
@pytest.mark.parametrize("null", ["trial none", "nan"])
def test_null_statistics_take_their_text_from_python(null: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A null statistic's text is the rules' (stat_cells.NULL_STAT); one that is not its own cell or that
    the NaN/Inf checker reads as special ("nan") sends the item to the Python cells."""
    npu = _node("Functional.linear.0.forward", [("input", (3.0, None, "True", None), {})])
    bench = _node("Functional.linear.0.forward", [("input", (2.0, None, "False", 4.0), {})])

    def compared() -> Any:
        n, b = copy.deepcopy(npu), copy.deepcopy(bench)
        compare_pair(n, b, SUMMARY)
        return shape((n.precision, n.input_data))

    monkeypatch.setattr(stat_cells, "NULL_STAT", null)
    NATIVE.configure_summary(cells.SUMMARY_RULES._replace(null_stat=null))
    try:
        with_c, python = _both(monkeypatch, compared)
    finally:
        NATIVE.configure_summary(cells.SUMMARY_RULES)
    assert with_c == python


def _tensor_item(full: str, state: str, stats: tuple[Any, ...], extra: dict[str, Any]) -> dict[str, Any]:
    item = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [4], "requires_grad": "True"}
    item.update(zip(("Max", "Min", "Mean", "Norm"), stats))
    item.update({"data_name": "-1", "full_op_name": full, "state": state, "md5": "00000000"})
    item.update(extra)
    return item


_EXTRA = st.fixed_dictionaries(
    {},
    optional={
        "dtype": st.sampled_from(["torch.float16", "<class 'int'>", "<class 'float'>", None, "", 3]),
        "shape": st.sampled_from([[4], [2, 2], "[]", None]),
        "requires_grad": st.sampled_from(["False", None, "", True]),
        "state": st.sampled_from(["kwargs", "parameters", "parameters_grad", "other", None]),
        # names the checkers read: no partner, no item, fused weights (the DType checker skips them)
        "full_op_name": st.sampled_from(["N/A", "", "Module.qkv.input.0", "Module.gate_up.output.0"]),
    },
)
_PLAIN = st.floats(-1e6, 1e6) | st.sampled_from([0.0, 1e-9, 2.0**40, 7.25])
_STATS = (
    st.tuples(*[_PLAIN] * 4)
    | st.tuples(*[st.integers(-3, 3)] * 4)
    | st.tuples(*[_NUMBERS] * 4)  # mixed, nan and inf
    | st.tuples(*[_STAT] * 4)  # None, texts, bools, long ints (the C code asks cells.py for their cells)
)
_ROW = st.tuples(st.sampled_from(["input", "output"]), _STATS, _EXTRA | st.just({}))
_APIS = st.sampled_from(
    [
        "Functional.linear.0.forward",
        "Torch.empty.0.forward",
        "Distributed.batch_isend_irecv.0.forward",
        "Distributed.all_to_all_single.0.forward",
    ]
)


def _node(api: str, rows: list[tuple[str, tuple[Any, ...], dict[str, Any]]]) -> Node:
    node = Node(api, API)
    for i, (state, stats, extra) in enumerate(rows):
        full = f"{api}.{state}.{i}"
        data = node.output_data if state == "output" else node.input_data
        data[full] = _tensor_item(full, state, stats, extra)
    return node


@needs_native
@settings(max_examples=500, deadline=None)
@given(_APIS, st.lists(_ROW, max_size=4), st.lists(_ROW, max_size=4), st.booleans(), st.floats(0.5, 2))
def test_summary_pair_as_python(
    api: str, npu_rows: list[Any], bench_rows: list[Any], same: bool, scale: float
) -> None:
    """``same``: the Bench rows are the NPU rows with the statistics scaled (the common pairs)."""
    npu = _node(api, npu_rows)
    if same:
        bench_rows = [
            (s, tuple(x * scale if isinstance(x, float) else x for x in xs), e) for s, xs, e in npu_rows
        ]
    bench = _node(api, bench_rows)

    def compared() -> Any:
        n, b = copy.deepcopy(npu), copy.deepcopy(bench)
        compare_pair(n, b, SUMMARY)
        return shape((n.precision, n.input_data, n.output_data, b.input_data, b.output_data))

    with_c, python = _both(pytest.MonkeyPatch(), compared)
    assert with_c == python


@needs_native
def test_summary_pair_takes_flagged_pairs_itself() -> None:
    """Rows the per-row checkers flag (here DType, Shape and RequiresGrad), not only quiet ones."""
    rows = [("input", (2.0, -1.0, 0.5, 3.0), {}), ("output", (4.0, 1.0, 2.0, 9.0), {})]
    other = {"dtype": "torch.float16", "shape": [2, 2], "requires_grad": "False"}
    npu, bench = (
        _node("Functional.relu.0.forward", rows),
        _node("Functional.relu.0.forward", [(s, xs, other) for s, xs, _ in rows]),
    )
    assert NATIVE.summary_pair(npu.input_data, npu.output_data, bench.input_data, bench.output_data) == 2
    item = npu.input_data["Functional.relu.0.forward.input.0"]
    assert item["Result"] == "error"
    assert json.loads(item["Err_message"]) == [rules.MSG_REQUIRES_GRAD, rules.MSG_DTYPE, rules.MSG_SHAPE]


_SCALAR = {"dtype": "<class 'float'>", "shape": "[]"}


def _taken_as_python(npu: Node, bench: Node, monkeypatch: pytest.MonkeyPatch) -> None:
    """The C summary compare takes the pair, and compares it as the Python path does."""

    def compared() -> Any:
        n, b = copy.deepcopy(npu), copy.deepcopy(bench)
        compare_pair(n, b, SUMMARY)
        return shape((n.precision, n.input_data, n.output_data))

    n, b = copy.deepcopy(npu), copy.deepcopy(bench)
    assert NATIVE.summary_pair(n.input_data, n.output_data, b.input_data, b.output_data) is not None
    with_c, python = _both(monkeypatch, compared)
    assert with_c == python


@needs_native
@pytest.mark.parametrize(
    ("api", "npu_extra", "bench_extra"),
    [
        ("Functional.linear.0.forward", _SCALAR, _SCALAR),  # Scalar: another value
        ("Distributed.all_to_all_single.0.forward", _SCALAR, _SCALAR),  # inputs not checked
        ("Distributed.all_to_all_single.0.forward", {}, {"dtype": "torch.float16"}),
        ("Functional.linear.0.forward", {}, {"dtype": "torch.float16", "full_op_name": "Module.qkv.input.0"}),
        ("Functional.linear.0.forward", {}, {"dtype": "torch.float16", "full_op_name": "gate_up.0"}),
        ("Functional.linear.0.forward", {"full_op_name": "N/A"}, {"dtype": "torch.float16"}),
        ("Functional.linear.0.forward", {}, {"shape": [2, 2], "full_op_name": "N/A"}),  # no partner
        ("Functional.linear.0.forward", {}, {"requires_grad": "", "shape": [2, 2], "full_op_name": ""}),
        ("Torch.empty.0.forward", {}, {"dtype": "torch.float16"}),  # nothing checked
    ],
)
def test_summary_pair_flags_as_python(
    api: str, npu_extra: dict[str, Any], bench_extra: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each checker's conditions the C summary compare reads, on pairs it takes itself."""
    npu = _node(api, [("input", (2.0, -1.0, 0.5, 3.0), npu_extra), ("output", (4.0, 1.0, 2.0, 9.0), {})])
    bench = _node(api, [("input", (2.5, -1.0, 0.5, 3.0), bench_extra), ("output", (4.0, 1.0, 2.0, 9.5), {})])
    _taken_as_python(npu, bench, monkeypatch)


@needs_native
@pytest.mark.parametrize(
    ("npu_stats", "bench_stats"),
    [
        ((math.inf, -1.0, 0.5, 3.0), (2.0, -1.0, 0.5, 3.0)),  # NaN/Inf: the NPU's only
        ((math.nan, -1.0, 0.5, 3.0), (math.inf, -1.0, 0.5, 3.0)),  # ... not when the Bench has one too
        ((None, None, None, None), (None, None, None, None)),  # an argument given as None
        (("True", "False", None, None), ("True", "True", None, None)),  # a bool tensor
        (("inf", "-1", "0", "1"), ("2", "-1", "0", "1")),  # texts read as nan or inf
        ((3, 0, 1.5, 10**30), (3, 1, 1.5, 2.0)),  # ints and floats
        ((True, False, 0.5, 1), (True, True, 0.5, 1)),
    ],
)
def test_summary_pair_takes_statistics_that_are_not_plain_numbers(
    npu_stats: tuple[Any, ...], bench_stats: tuple[Any, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Their cells from cells.py (SummaryRules.stats_of, cells_of, special), the checks in C."""
    api = "Functional.linear.0.forward"
    npu = _node(api, [("input", npu_stats, {}), ("output", (4.0, 1.0, 2.0, 9.0), {})])
    bench = _node(api, [("input", bench_stats, {}), ("output", (4.0, 1.0, 2.0, 9.5), {})])
    _taken_as_python(npu, bench, monkeypatch)


@needs_native
def test_summary_pair_asks_the_cells_of_a_text_once_whatever_its_object() -> None:
    """A process group's statistics are the text of its ranks, a new str in each entry's items: the C
    compare asks the rules' cells_of of a text once, not once per str object of it."""
    asked: list[tuple[Any, ...]] = []

    def cells_of(values: tuple[Any, ...]) -> tuple[Any, ...]:
        asked.append(values)
        return stat_cells.cells_of(values)

    api = "Distributed.all_reduce.0.forward"
    NATIVE.configure_summary(cells.SUMMARY_RULES._replace(cells_of=cells_of))
    try:
        for _ in range(5):
            ranks = "".join(["[", "7", "]"])  # (a new object of the same text each time)
            npu, bench = (_node(api, [("input", (ranks,) * 4, {})]) for _ in range(2))
            NATIVE.summary_pair(npu.input_data, npu.output_data, bench.input_data, bench.output_data)
            assert npu.input_data[f"{api}.input.0"]["Max diff"] == stat_cells.NO_VALUE
    finally:
        NATIVE.configure_summary(cells.SUMMARY_RULES)
    assert asked == [("[7]",) * 4]


@needs_native
def test_summary_pair_takes_quiet_pairs_itself() -> None:
    rows = [("input", (2.0, -1.0, 0.5, 3.0), {}), ("output", (4.0, 1.0, 2.0, 9.0), {})]
    npu, bench = (
        _node("Functional.relu.0.forward", rows),
        _node("Functional.relu.0.forward", rows[:1] + [("output", (4.5, 1.0, 2.5, 8.0), {})]),
    )
    assert NATIVE.summary_pair(npu.input_data, npu.output_data, bench.input_data, bench.output_data) == 1
    item = npu.output_data["Functional.relu.0.forward.output.1"]
    # inputs equal, output Norm 12.5% off: RelativeWarn (a warning, level 1)
    assert item["Max diff"] == -0.5 and item["NormRelativeErr"] == "12.5%" and item["Result"] == "warning"


@pytest.mark.parametrize("mode", [MD5, TENSOR])
def test_other_modes_take_the_python_path(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """summary_pair is for summary mode only: the others never call it."""
    calls: list[Any] = []

    class Spy:
        def __getattr__(self, name: str) -> Any:
            calls.append(name)
            return getattr(NATIVE, name)

    if NATIVE is not None:
        monkeypatch.setattr(speedups, "native", Spy())
    rows = [("input", (1.0, 0.0, 0.5, 1.0), {"md5": "abc"})]
    compare_pair(_node("Functional.relu.0.forward", rows), _node("Functional.relu.0.forward", rows), mode)
    assert "summary_pair" not in calls


DATA = Path(__file__).resolve().parents[1] / "data"


def test_a_hierarchy_too_deep_for_micro_steps_names_the_first_node_too_deep() -> None:
    chain = [Node("DefaultModel", 0)] + [
        Node(f"Module.m{i}.forward.0", 0) for i in range(micro_steps.MAX_MICRO_DEPTH + 3)
    ]
    for parent, child in zip(chain, chain[1:]):
        child.parent = parent
        parent.children.append(child)
    g = Graph(chain[0], {n.id: n for n in chain}, {}, "", "pytorch", None)

    with pytest.raises(DumpError) as caught:
        micro_steps.assign_micro_steps(g)
    assert f"m{micro_steps.MAX_MICRO_DEPTH + 1}.forward.0: the model hierarchy is deeper" in str(caught.value)


# ------------------------------------------------------------------ the rules are Python's


@needs_native
@settings(max_examples=200, deadline=None)
@given(_APIS, st.lists(_ROW, min_size=1, max_size=4), st.floats(0.5, 2), st.lists(_EXTRA, min_size=4))
def test_the_summary_compare_takes_its_numbers_and_messages_from_python(
    api: str, npu_rows: list[Any], scale: float, bench_extras: list[dict[str, Any]]
) -> None:
    """Other limits and messages handed to the C summary compare (cells.SUMMARY_RULES): it flags as the
    Python checkers do with them, so no number or message of the rules is written in C. The Bench
    items may differ in dtype, shape, requires_grad and name (``bench_extras``)."""
    limits = rules.Limits(small_input_norm=0.6, big_output_norm=0.05, tenfold=1.5, output_norm_over_zero=0.01)
    names = ("NAN_INF", "NORM_OUTPUT", "REQUIRES_GRAD", "SCALAR", "DTYPE", "SHAPE", "NORM_TENFOLD")
    messages = tuple(f"trial {name}" for name in names)
    npu = _node(api, npu_rows)
    bench = _node(
        api,
        [
            (s, tuple(x * scale if isinstance(x, float) else x for x in xs), {**e, **other})
            for (s, xs, e), other in zip(npu_rows, bench_extras)
        ],
    )

    def compared() -> Any:
        n, b = copy.deepcopy(npu), copy.deepcopy(bench)
        compare_pair(n, b, SUMMARY)
        return shape((n.precision, n.input_data, n.output_data))

    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(checks, "LIMITS", limits)
        for name, message in zip(names, messages):
            monkeypatch.setattr(checks, f"MSG_{name}", message)
        checkers = rules.CHECKERS._replace(limits=limits, messages=messages)
        trial = cells.SUMMARY_RULES._replace(checkers=checkers)
        NATIVE.configure_summary(trial)
        try:
            with_c, python = _both(monkeypatch, compared)
        finally:
            NATIVE.configure_summary(cells.SUMMARY_RULES)
    assert with_c == python


def _forget_texts() -> None:
    """Drop the texts item_text remembers (made under other rules)."""
    for forms in item_text._FORMS.values():
        forms.clear()
    for cls in (str, int):
        item_text._JSON_TEXT[cls].__self__.clear()  # type: ignore[attr-defined]


@needs_native
def test_float_texts_are_repr_at_every_magnitude() -> None:
    """The C text of a finite float is orjson's digits in repr's notation (csrc/buffer.c repr_text):
    repr's text, on doubles of every bit pattern and magnitude, the edges of the notations included."""
    rng = random.Random(16)
    values = [
        0.0,
        -0.0,
        5e-324,
        -5e-324,
        1e-5,
        1e-4,
        9.999e-5,
        1e-7,
        1e15,
        1e16,
        9999999999999998.0,
        1e22,
        1e23,
    ]
    values += [1.7976931348623157e308, 2.2250738585072014e-308, 0.1, 1 / 3, 123456789012345678.0, 100.0, 12.5]
    for _ in range(40_000):
        bits = struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0]
        scaled = rng.uniform(-1, 1) * 10.0 ** rng.randint(-30, 30)
        decimal = float(f"{rng.randint(1, 10 ** rng.randint(1, 17))}e{rng.randint(-330, 310)}")
        values += [x for x in (bits, scaled, decimal) if math.isfinite(x)]
    for at in range(0, len(values), 1000):
        data = {f"k{i}": {"Max": x, "dtype": "torch.float32"} for i, x in enumerate(values[at : at + 1000])}
        assert json.loads(item_text.items_json(data, False, False)) == {
            k: {"Max": repr(v["Max"]), "dtype": "torch.float32"} for k, v in data.items()
        }


@needs_native
@pytest.mark.parametrize(("long_decimal", "decimals"), [((20, 4, 20), 3), ((3, 9, 12), 8)])
def test_the_items_text_takes_its_rounding_rule_from_python(
    long_decimal: tuple[int, int, int], decimals: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another long-decimal rule handed to the C text of items (item_text.TEXT_RULES): its texts are
    the Python path's under that rule."""
    values = ["3.14159265", "12.345678%", "1.23456", "1234.123456789", "0.1234567890123", "7.5", "x1.23456"]
    data = {f"k{i}": {"Max": v, "Min": float(i) / 7, "dtype": "torch.float32"} for i, v in enumerate(values)}
    monkeypatch.setattr(item_text, "DECIMALS", decimals)
    monkeypatch.setattr(item_text, "_SHORTEST_LONG_DECIMAL", 2 + long_decimal[1])
    monkeypatch.setattr(item_text, "_LONG_DECIMAL", item_text.long_decimal_text(long_decimal))
    _forget_texts()
    NATIVE.configure_text(item_text.TEXT_RULES._replace(long_decimal=long_decimal, decimals=decimals))
    try:
        with_c, python = _both(monkeypatch, lambda: item_text.items_json(data, False, False))
    finally:
        NATIVE.configure_text(item_text.TEXT_RULES)
        _forget_texts()
    assert with_c == python
    assert f'"{float("3.14159265"):.{decimals}f}"' in with_c or long_decimal[1] > 8


def _entry_texts(text: bytes, node_id: str) -> Any:
    """The texts of an entry's inputs and outputs: entry_texts' (None: handed back), or the Python
    path's where the C module is set aside (_both)."""
    native = speedups.native
    if native is not None:
        return native.entry_texts(text, 0, len(text), node_id)
    inputs, outputs = items.entry_items(node_id, json.loads(text))
    return item_text.items_json(inputs, False, False), item_text.items_json(outputs, False, False)


def _add_entry(input_stats: dict[str, float], output_stats: dict[str, float]) -> Callable[[], Any]:
    """The _entry_texts of an add of a tensor of ``input_stats`` and 3, giving a tensor of
    ``output_stats``."""
    tensor = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], **input_stats}
    out = {"type": "torch.Tensor", "dtype": "torch.float16", "shape": [], **output_stats}
    text = json.dumps({"input_args": [tensor, {"type": "int", "value": 3}], "output": [out]}, indent=4)
    return lambda: _entry_texts(text.encode(), "Tensor.add.0.forward")


def _texts_under(
    monkeypatch: pytest.MonkeyPatch,
    texts: Callable[[], Any],
    names: dict[str, Any],
    patch: Callable[[], None] | None = None,
    **rules: Any,
) -> tuple[Any, Any, Any]:
    """(the usual C texts, the C texts and the Python path's) of ``texts`` (the usual ones the Python
    path's too) with the fields ``rules`` of item_text.TEXT_RULES changed and items' ``names`` set
    alike (and whatever ``patch`` sets)."""
    usual, usual_python = _both(monkeypatch, texts)
    assert usual == usual_python
    for name, value in names.items():
        monkeypatch.setattr(items, name, value)
    if patch is not None:
        patch()
    _forget_texts()
    NATIVE.configure_text(item_text.TEXT_RULES._replace(**rules))
    try:
        with_c, python = _both(monkeypatch, texts)
    finally:
        NATIVE.configure_text(item_text.TEXT_RULES)
        _forget_texts()
    return usual, with_c, python


@needs_native
def test_the_items_text_takes_its_key_order_from_python(monkeypatch: pytest.MonkeyPatch) -> None:
    """Another order of the keys items._leaf gives a leaf without them (items.ITEM_KEYS, handed to
    entry_text.c in item_text.TEXT_RULES): the C texts of an entry follow it, as the Python path's do."""
    texts = _add_entry({"Min": 1.5}, {"Max": 2.0, "Mean": 0.5})
    order = ("requires_grad", *reversed(items.STATS), "state", "full_op_name", "data_name")
    usual, with_c, python = _texts_under(monkeypatch, texts, {"ITEM_KEYS": order}, item_keys=order)
    assert with_c == python != usual
    keys = [with_c[0].index(f'"{k}"') for k in ("requires_grad", "Norm", "Max", "data_name")]
    assert keys == sorted(keys)
    with pytest.raises(ValueError, match="cannot add the key dtype"):
        NATIVE.configure_text(item_text.TEXT_RULES._replace(item_keys=("dtype",)))


@needs_native
def test_the_items_text_takes_the_statistics_keys_from_python(monkeypatch: pytest.MonkeyPatch) -> None:
    """Other keys of a leaf's statistics (markers.STATS, handed to the C kernels as graph/speedups.py
    loads them): the C texts of an entry read, add and fill them, as the Python path's do; a key of
    another role, or twice, is refused."""
    texts = _add_entry({"Max": 1.5, "Norm": 2.5}, {"Max": 2.0, "L2": 0.5})
    usual, usual_python = _both(monkeypatch, texts)
    assert usual == usual_python
    stats = (*markers.STATS[:3], "L2")
    order = (*items.ITEM_KEYS[: -len(stats)], *stats)
    monkeypatch.setattr(items, "STATS", stats)
    monkeypatch.setattr(items, "ITEM_KEYS", order)
    _forget_texts()
    NATIVE.configure_stats(stats)
    NATIVE.configure_text(item_text.TEXT_RULES._replace(item_keys=order))
    try:
        with_c, python = _both(monkeypatch, texts)
    finally:
        NATIVE.configure_stats(markers.STATS)
        NATIVE.configure_text(item_text.TEXT_RULES)
        _forget_texts()
    assert with_c == python != usual
    assert '"L2": "3"' in with_c[0] and '"Norm": "2.5", ' in with_c[0] and '"L2": "0.5"' in with_c[1]
    for refused in ((*stats[:3], "dtype"), (*stats[:3], stats[0]), (*stats[:3], ""), stats[:3]):
        with pytest.raises(ValueError, match="configure_stats"):
            NATIVE.configure_stats(refused)


@needs_native
def test_the_items_text_takes_the_bools_texts_from_python(monkeypatch: pytest.MonkeyPatch) -> None:
    """Other texts of a bool value (items.BOOL_TEXT, Python's str of a bool, handed to the C texts in
    item_text.TEXT_RULES): the C texts of items (text.c) and of an entry (entry_text.c) follow them,
    as the Python path's do."""
    assert items.BOOL_TEXT == {False: str(False), True: str(True)}
    bools = {False: "no", True: "yes"}
    data = {"k": {"value": True, "requires_grad": False}}
    tensor = {"type": "torch.Tensor", "dtype": "torch.float32", "Max": 1.5, "requires_grad": True}
    arguments = [tensor, {"type": "bool", "value": False}]
    entry = json.dumps({"input_args": arguments, "output": [tensor]}, indent=4)

    def texts() -> Any:
        return item_text.items_json(data, False, False), _entry_texts(entry.encode(), "Tensor.add.0.forward")

    usual, with_c, python = _texts_under(
        monkeypatch,
        texts,
        {"BOOL_TEXT": bools},
        lambda: monkeypatch.setitem(item_text._JSON_TEXT, bool, bools.__getitem__),
        bool_text=("no", "yes"),
    )
    assert with_c == python != usual
    assert with_c[0] == '{"k": {"value": "yes", "requires_grad": "no"}}'
    assert '"requires_grad": "yes"' in with_c[1][0] and '"value": "no"' in with_c[1][0]


def _renamed(value: Any, names: dict[str, str]) -> Any:
    """``value`` with every dict key of ``names`` renamed (lists, tuples and dicts within it too)."""
    if isinstance(value, dict):
        return {names.get(k, k): _renamed(v, names) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_renamed(v, names) for v in value)
    return value


@needs_native
def test_the_kernels_take_a_leafs_keys_from_python() -> None:
    """Other texts of the keys of a leaf (markers.LEAF_KEYS, handed to the C kernels as graph/speedups.py
    loads them): the C texts and items of an entry whose leaves' keys are renamed, under the rules
    renamed alike, are the usual ones renamed, and its compare rows the usual ones, so that none of
    these keys is written in C (two of the names share a length, first and last characters); a key
    twice, or a statistic's, is refused."""
    names = {key: f"x_{key}" for key in markers.LEAF_KEYS}
    group = {"type": "torch.ProcessGroup", "group_ranks": [0, 1], "group_id": 3}
    entry = {
        "input_args": [
            {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "Max": 1.5, "md5": "0a1b2c3d"},
            {"type": "int", "value": 3},
            {"type": "bool", "value": True},
            group,
        ],
        "input_kwargs": {"p": {"type": "torch.Tensor", "dtype": "torch.int8", "requires_grad": True}},
        "output": [{"type": "torch.Tensor", "dtype": "torch.float16", "shape": [2], "Max": 2.0, "Min": 0.5}],
    }
    node = "Tensor.add.0.forward"

    def made(entry: dict[str, Any]) -> tuple[Any, Any]:
        text = json.dumps(entry, indent=4).encode()
        texts = NATIVE.entry_texts(text, 0, len(text), node)
        assert texts is not None
        found = NATIVE.node_items([node], {node: (0, len(text))}, {}, text)[0]
        rows = NATIVE.leaf_rows(text, 0, len(text), node)
        assert rows is not None
        return tuple(json.loads(t) for t in texts), found, shape(rows)

    usual = made(entry)
    NATIVE.configure_keys(markers.LeafKeys(*names.values()))
    NATIVE.configure_text(
        item_text.TEXT_RULES._replace(
            left_out=tuple(names.get(k, k) for k in item_text.TEXT_RULES.left_out),
            process_group_kept=tuple(names.get(k, k) for k in item_text.TEXT_RULES.process_group_kept),
            item_keys=tuple(names.get(k, k) for k in item_text.TEXT_RULES.item_keys),
            null_item=json.dumps(_renamed(item_text.NULL_ITEM, names)),
        )
    )
    item_keys = tuple(names.get(k, k) for k in items.ITEM_RULES.item_keys)
    NATIVE.configure_items(items.ITEM_RULES._replace(item_keys=item_keys))
    _forget_texts()
    try:
        texts, found, rows = made(_renamed(entry, names))
        assert (texts, found) == _renamed(usual[:2], names) != usual[:2]
        assert rows == usual[2]
        for refused in (
            markers.LEAF_KEYS._replace(shape="dtype"),
            markers.LEAF_KEYS._replace(state="md5"),
            markers.LEAF_KEYS._replace(value=markers.MAX),
            markers.LEAF_KEYS._replace(md5=""),
            markers.LEAF_KEYS[:-1],
        ):
            with pytest.raises(ValueError, match="configure_keys"):
                NATIVE.configure_keys(refused)
    finally:
        NATIVE.configure_keys(markers.LEAF_KEYS)
        NATIVE.configure_text(item_text.TEXT_RULES)
        NATIVE.configure_items(items.ITEM_RULES)
        _forget_texts()
    assert made(entry) == usual


@needs_native
def test_the_items_text_takes_the_scalar_shape_from_python(monkeypatch: pytest.MonkeyPatch) -> None:
    """Another shape of an argument that is not a tensor (markers.SCALAR_SHAPE, handed to entry_text.c in
    item_text.TEXT_RULES): the C texts of an entry follow it, as the Python path's do."""
    texts = _add_entry({"Max": 1.5}, {"Max": 2.0})
    usual, with_c, python = _texts_under(monkeypatch, texts, {"SCALAR_SHAPE": "()"}, scalar_shape="()")
    assert with_c == python != usual


@needs_native
def test_the_items_text_takes_the_parameters_grad_marker_from_python(monkeypatch: pytest.MonkeyPatch) -> None:
    """Another text for markers.PARAMETERS_GRAD (handed to entry_text.c in item_text.TEXT_RULES): the C
    texts hand back to the Python path the entries that hold the new text (in their name or in a key,
    under which a list's elements are not numbered) and take those that hold the old one, and every
    text is the Python path's."""
    tensor = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "Max": 1.5, "Min": 0.5}
    entries = {
        key: json.dumps({"input_args": [{key: [tensor, tensor]}], "output": [tensor]}, indent=4).encode()
        for key in ("parameters_grad", "grads_of")
    }
    node_ids = ("Module.w.Linear.forward.0", "Module.w.parameters_grad", "Module.w.grads_of")

    def all_texts() -> dict[tuple[str, str], Any]:
        return {
            (node_id, key): _entry_texts(entries[key], node_id) for node_id in node_ids for key in entries
        }

    def check(marker: str) -> dict[tuple[str, str], Any]:
        with_c, python = _both(monkeypatch, all_texts)
        handed_back = {case for case, text in with_c.items() if text is None}
        assert handed_back == {case for case in with_c if marker in case[0] or marker == case[1]}
        assert all(with_c[case] == python[case] for case in with_c if case not in handed_back)
        return python

    usual = check("parameters_grad")
    monkeypatch.setattr(items, "PARAMETERS_GRAD", "grads_of")
    NATIVE.configure_text(item_text.TEXT_RULES._replace(parameters_grad="grads_of"))
    try:
        other = check("grads_of")
    finally:
        NATIVE.configure_text(item_text.TEXT_RULES)
    plain = ("Module.w.Linear.forward.0", "grads_of")
    assert '"Module.w.Linear.forward.0.input.0.grads_of.1"' in usual[plain][0]
    assert '"Module.w.Linear.forward.0.input.0.grads_of"' in other[plain][0]
    assert other[("Module.w.grads_of", "parameters_grad")] != usual[("Module.w.grads_of", "parameters_grad")]
    with pytest.raises(ValueError, match="parameters_grad is empty"):
        NATIVE.configure_text(item_text.TEXT_RULES._replace(parameters_grad=""))


@needs_native
def test_the_items_text_takes_an_entrys_parts_from_python(monkeypatch: pytest.MonkeyPatch) -> None:
    """Other parts of an entry and another rule for an output's item (items.SUB_KEYS, OUTPUT_PART and
    INPUT_PART, handed to entry_text.c in item_text.TEXT_RULES): the C texts follow them, as the
    Python path's do."""
    tensor = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "Max": 1.5, "Min": 0.5}
    text = json.dumps({"input_args": [tensor], "output": [tensor], "result": [tensor]}, indent=4).encode()
    node_id = "Tensor.add.0.forward"

    def texts() -> Any:
        return _entry_texts(text, node_id)

    usual, usual_python = _both(monkeypatch, texts)
    assert usual == usual_python and '.output.0"' in usual[1] and ".result" not in usual[0] + usual[1]
    sub_keys = (*items.SUB_KEYS[:3], ("output", ".out", "output"), ("result", ".result", "output"))
    monkeypatch.setattr(items, "SUB_KEYS", sub_keys)
    monkeypatch.setattr(items, "OUTPUT_PART", ".result.")
    _forget_texts()
    rules = item_text.TEXT_RULES._replace(sub_keys=sub_keys, output_part=".result.")
    NATIVE.configure_text(rules)
    try:
        with_c, python = _both(monkeypatch, texts)
    finally:
        NATIVE.configure_text(item_text.TEXT_RULES)
        _forget_texts()
    assert with_c == python
    assert '.out.0"' in with_c[0] and '.result.0"' in with_c[1] and ".output" not in with_c[0] + with_c[1]
    with pytest.raises(ValueError, match="an item part is empty"):
        NATIVE.configure_text(item_text.TEXT_RULES._replace(input_part=""))


def _summary_cells_given(nodes: list[Node], md5: bool) -> dict[int, list[dict[str, str]]]:
    """The exported cells node_rows hands summarise_rows, by the node's position (a node it left to
    summarise_rows has none)."""
    graph = type("G", (), {"step": 0, "rank": 0, "data_path": "p"})()
    given: dict[int, list[dict[str, str]]] = {}
    original = rows.summarise_rows

    def summarise(*args: Any) -> Any:
        given.update(args[-1])
        return original(*args)

    rows.summarise_rows = summarise  # type: ignore[assignment]
    try:
        rows.chunk_rows(graph, "NPU", nodes, 0, rows.number_stacks(nodes), md5)  # type: ignore[arg-type]
    finally:
        rows.summarise_rows = original  # type: ignore[assignment]
    return given


@needs_native
@pytest.mark.parametrize("null, none", [("nil", "None"), ("<nothing>", "No"), ("null", "Nothing")])
def test_the_items_text_takes_the_null_text_from_python(
    null: str, none: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Other texts of None (item_text.NULL_TEXT, JSON's null) and of what it stands for within a string
    (NONE_TEXT, None's str), handed to the C texts in TEXT_RULES, shorter, longer or as long as the
    other: the C texts of items (text.c) and of an entry (entry_text.c) follow them, as the Python
    path's do (a string the C texts wrote as it stands under the usual rules, too)."""
    assert (item_text.NULL_TEXT, item_text.NONE_TEXT) == (json.dumps(None), str(None))
    strings = ["a No b", "N'one, None.", "NoNone" * 150, "Nothing but None", "1.None"]
    data = {"k": {"Max": 1.5, "Min": None, **{f"s{i}": s for i, s in enumerate(strings)}}, "j": {"Max": None}}
    arguments = [{"type": "str", "value": s} for s in strings]
    entry = json.dumps(
        {"input_args": [*arguments, {"type": "torch.Tensor", "Max": None, "Min": 1.0}]}, indent=4
    )

    def texts() -> Any:
        return item_text.items_json(data, False, False), _entry_texts(entry.encode(), "Tensor.add.0.forward")

    def patch() -> None:
        for table in (item_text._JSON_TEXT, item_text._FORMAT):
            monkeypatch.setitem(table, type(None), {None: null}.__getitem__)
        monkeypatch.setattr(item_text, "NULL_TEXT", null)
        monkeypatch.setattr(item_text, "NONE_TEXT", none)

    usual, with_c, python = _texts_under(monkeypatch, texts, {}, patch, null_text=null, none_text=none)
    assert with_c == python != usual
    assert f'"Min": "{null}"' in with_c[0] and f'"s0": "{"a No b".replace(none, null)}"' in with_c[0]
    assert f'"requires_grad": "{null}"' in with_c[1][0]
    for refused in ({"none_text": ""}, {"null_text": "n'l"}, {"none_text": 'N"'}):
        with pytest.raises(ValueError, match="configure_text"):
            NATIVE.configure_text(item_text.TEXT_RULES._replace(**refused))


@needs_native
def test_the_items_text_takes_its_null_item_rule_from_python(monkeypatch: pytest.MonkeyPatch) -> None:
    """format_item's rule, an item whose item_text.NULL_KEY's text is null is item_text.NULL_ITEM alone
    (handed to the C texts in TEXT_RULES): with another statistic as the key and another null item,
    the C texts of items (text.c), of an entry (entry_text.c) and the summary's cells (rows.c) follow
    it, as the Python path's do; a key that is not a statistic is refused."""
    data = {"k": {"Max": item_text.ExportedText("null"), "Min": 2}, "j": {"Max": 1.5, "Min": None}}
    entry = _add_entry({"Max": 1.5, "Min": None}, {"Max": None, "Min": 2.0})  # type: ignore[dict-item]
    judged = next(iter(JUDGED_PRECISIONS))
    item = {"Max": 1.5, "Min": None, SUMMARY_KEYS[0]: "a message"}
    node = Node("Functional.linear.0.forward", API, None, [], {"a": item}, {}, [], precision=judged)

    def texts() -> Any:
        return item_text.items_json(data, False, False), entry()

    usual, usual_python = _both(monkeypatch, texts)
    assert usual == usual_python
    assert usual[0] == '{"k": {"value": "null"}, "j": {"Max": "1.5", "Min": "null"}}'
    monkeypatch.setattr(item_text, "NULL_KEY", markers.MIN)
    monkeypatch.setattr(item_text, "NULL_ITEM", {"nothing": "null"})
    monkeypatch.setattr(item_text, "_NULL_ITEM_JSON", '{"nothing": "null"}')
    _forget_texts()
    rules = item_text.TEXT_RULES._replace(null_key=markers.MIN, null_item='{"nothing": "null"}')
    NATIVE.configure_text(rules)
    try:
        with_c, python = _both(monkeypatch, texts)
        cells = _summary_cells_given([node], False)
        want = [item_text.exported_cells(item, SUMMARY_KEYS, False, False)]
    finally:
        NATIVE.configure_text(item_text.TEXT_RULES)
        _forget_texts()
    assert with_c == python != usual
    assert with_c[0] == '{"k": {"Max": "null", "Min": "2"}, "j": {"nothing": "null"}}'
    assert cells.get(0, want) == want == [{}]  # (given, or left to summarise_rows)
    for refused in ("dtype", "L2", ""):
        with pytest.raises(ValueError, match="configure_text"):
            NATIVE.configure_text(item_text.TEXT_RULES._replace(null_key=refused))


@needs_native
def test_the_rows_take_their_columns_from_python(monkeypatch: pytest.MonkeyPatch) -> None:
    """A column added to the table (rows.NODE_COLUMNS, from columns.VISDB_NODE_TABLE) with its cell in
    rows.EXTRA_CELLS: the C rows hold it where the Python rows do, and every other cell as before."""
    g = build.build_graph(dump_files.GraphSource(str(DATA / "L0_only" / "target")))
    columns = (*rows.NODE_COLUMNS[:3], "trial_children", *rows.NODE_COLUMNS[3:])
    monkeypatch.setattr(rows, "NODE_COLUMNS", columns)
    monkeypatch.setitem(rows.EXTRA_CELLS, "trial_children", lambda node: len(node.children))
    NATIVE.configure_rows(rows.ROW_RULES._replace(columns=columns))
    try:
        with_c, python = _both(monkeypatch, lambda: rows.graph_rows(g, "NPU").nodes)
    finally:
        NATIVE.configure_rows(rows.ROW_RULES)
    assert with_c == python
    assert [row[3] for row in with_c] == [len(n.children) for n in g.sorted_nodes()]
    assert [row[:3] + row[4:] for row in with_c] == rows.graph_rows(g, "NPU").nodes


@needs_native
def test_the_rows_take_their_columns_names_from_python() -> None:
    """The names of the columns whose cells the C row maker makes (rows.ROW_RULES.made: those of
    columns.VISDB_NODE_TABLE without a cell in rows.EXTRA_CELLS) and matched_distributed's text
    (columns.UNLINKED) come from Python:
    under a column renamed alike in the rules' columns and names, and another text, the rows are the
    usual ones with that text; a list of names of another length is refused."""
    g = build.build_graph(dump_files.GraphSource(str(DATA / "L0_only" / "target")))
    usual = rows.graph_rows(g, "NPU").nodes
    renamed = tuple("row_key" if c == "id" else c for c in rows.ROW_RULES.columns)
    made = tuple("row_key" if c == "id" else c for c in rows.ROW_RULES.made)
    NATIVE.configure_rows(rows.ROW_RULES._replace(columns=renamed, made=made, unlinked="[]"))
    try:
        trial = rows.graph_rows(g, "NPU").nodes
        with pytest.raises(TypeError, match="configure_rows"):
            NATIVE.configure_rows(rows.ROW_RULES._replace(made=made[:-1]))
        with pytest.raises(ValueError, match="no cell for the column 'id'"):
            NATIVE.configure_rows(rows.ROW_RULES._replace(made=made))
    finally:
        NATIVE.configure_rows(rows.ROW_RULES)
    linked = rows.COL["matched_distributed"]
    assert {row[linked] for row in usual} == {UNLINKED} and {row[linked] for row in trial} == {"[]"}
    assert [row[:linked] + row[linked + 1 :] for row in trial] == [
        row[:linked] + row[linked + 1 :] for row in usual
    ]
    assert rows.ROW_RULES.made == rows.MADE_COLUMNS == VISDB_NODE_COLUMNS
    assert rows.ROW_RULES.unlinked == UNLINKED


@needs_native
def test_the_rows_take_their_made_numbers_from_python() -> None:
    """A node's micro_step_id without a micro step (rows.NO_MICRO) and every row's modified
    (columns.UNMODIFIED) come from ROW_RULES: under other numbers the C rows hold them, the rest as usual."""
    g = build.build_graph(dump_files.GraphSource(str(DATA / "L0_only" / "target")))
    usual = rows.graph_rows(g, "NPU").nodes
    NATIVE.configure_rows(rows.ROW_RULES._replace(no_micro=7, unmodified=5))
    try:
        trial = rows.graph_rows(g, "NPU").nodes
    finally:
        NATIVE.configure_rows(rows.ROW_RULES)
    micro, modified = rows.COL["micro_step_id"], rows.COL["modified"]
    no_micro = [node.micro is None for node in g.sorted_nodes()]
    assert any(no_micro) and {row[modified] for row in usual} == {UNMODIFIED}
    assert [row[micro] for row in trial] == [7 if none else row[micro] for row, none in zip(usual, no_micro)]
    assert {row[modified] for row in trial} == {5}
    kept = [c for c in range(len(rows.NODE_COLUMNS)) if c not in (micro, modified)]
    assert [[row[c] for c in kept] for row in trial] == [[row[c] for c in kept] for row in usual]
    assert (rows.ROW_RULES.no_micro, rows.ROW_RULES.unmodified) == (rows.NO_MICRO, UNMODIFIED)


def test_the_node_attributes_the_kernels_read_are_the_models() -> None:
    """The attributes the C kernels read of a node (the module's NODE_ATTRIBUTES) are fields of
    graph/model.Node: renaming or removing one of them fails here, not as an AttributeError mid-run."""
    if NATIVE is None:
        pytest.skip("the C extension is not built")
    fields = {f.name for f in dataclasses.fields(Node)}
    assert NATIVE.NODE_ATTRIBUTES and set(NATIVE.NODE_ATTRIBUTES) <= fields


@needs_native
@pytest.mark.parametrize("escapes", [jsontext.ASCII_ESCAPES, tuple(f"\\u{c:04x}" for c in range(128))])
def test_the_rows_take_their_string_escapes_from_python(
    escapes: tuple[str, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The C rows write a stack (and sub_nodes, matched_node_link) of ASCII strings with each character
    as ROW_RULES.ascii_escapes has it: with jsontext's, dumps' very text for every ASCII character."""
    graph = type("G", (), {"step": 0, "rank": 0, "data_path": "p"})()
    every = "".join(map(chr, range(128)))
    stacks = [[every, 'File "a.py", line 1, in f\n x = 1'], ["plain", ""], ["\u00e9"]]
    nodes = [Node(f"Module.m{i}.forward.0", 0, stack=stack) for i, stack in enumerate(stacks)]
    nodes[0].children, nodes[0].link = nodes[1:3], [every, "b"]
    ids = rows.number_stacks(nodes)
    NATIVE.configure_rows(rows.ROW_RULES._replace(ascii_escapes=escapes))
    try:
        made = rows.chunk_rows(graph, "NPU", nodes, 0, ids)  # type: ignore[arg-type]
    finally:
        NATIVE.configure_rows(rows.ROW_RULES)

    def text(s: str) -> str:
        return s.translate(dict(enumerate(escapes))) if s.isascii() else json.dumps(s)[1:-1]

    def listed(strings: Any) -> str:
        return "[" + ", ".join(f'"{text(s)}"' for s in strings) + "]"

    assert made.stacks == [(i, listed(stack)) for i, stack in enumerate(stacks)]
    assert made.nodes[0][rows.COL["matched_node_link"]] == listed([every, "b"])
    if escapes == jsontext.ASCII_ESCAPES:
        assert made.stacks == [(i, json.dumps(stack)) for i, stack in enumerate(stacks)]
        with_c, python = _both(monkeypatch, lambda: rows.chunk_rows(graph, "NPU", nodes, 0, ids).nodes)  # type: ignore[arg-type]
        assert with_c == python


_CELL = (
    st.sampled_from(['["error: The dtype of NPU and Bench are inconsistent."]', "[]", "N/A", "None", "it's"])
    | st.sampled_from(["12.3456789%", "0.0%", "1234567890", "é"])
    | st.sampled_from(["0.049124%", "12.3456789%", "N/A"]).map(item_text.ExportedText)
    | st.none()
    | st.floats(allow_nan=False)
    | st.integers(-3, 3)
    | st.booleans()
)
_SUMMARY_ITEM = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(["torch.Tensor", "int", "torch.ProcessGroup", None]),
        "Max": st.floats(allow_nan=False) | st.integers(-3, 3) | st.none() | st.sampled_from(["None", "x"]),
        "Err_message": _CELL,
        "NormRelativeErr": _CELL,
        "Cosine": _CELL,
        "group_id": _CELL,
        "md5": _CELL,
    },
)


@needs_native
@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from([None, 0, 0.5, 1, 1.0, 2]),
            st.dictionaries(st.sampled_from(["a", "b"]), _SUMMARY_ITEM, max_size=2),
            st.dictionaries(st.sampled_from(["c", "d"]), _SUMMARY_ITEM, max_size=2),
            st.sampled_from(["Functional.linear.0.forward", "Distributed.batch_isend_irecv.0.forward"]),
        ),
        max_size=6,
    ),
    st.booleans(),
)
def test_the_summary_reads_of_the_c_rows_what_exported_cells_gives(
    made: list[tuple[Any, dict[str, Any], dict[str, Any], str]], md5: bool
) -> None:
    """node_rows hands summarise_rows the exported cells of the items of the nodes it judges
    (summary.nodes.JUDGED_PRECISIONS), as item_text.exported_cells makes them, or leaves them to it."""
    nodes = [Node(node_id, API, None, [], i, o, [], precision=p) for p, i, o, node_id in made]
    given_cells = _summary_cells_given(nodes, md5)
    for i, cells_made in given_cells.items():
        node = nodes[i]
        assert node.precision in JUDGED_PRECISIONS
        batch = "batch_isend_irecv" in node.id
        want = [
            item_text.exported_cells(item, SUMMARY_KEYS, md5, batch)
            for data in (node.input_data, node.output_data)
            for item in data.values()
        ]
        assert cells_made == want
        assert all(type(v) is str for cells in cells_made for v in cells.values())
    plain = [
        i
        for i, n in enumerate(nodes)
        if n.precision in JUDGED_PRECISIONS
        and all(
            type(item.get("type", "")) is str
            and item.get("type") != "torch.ProcessGroup"
            and type(item.get("Max", 0)) in (int, float)
            and all(
                type(item.get(k, "")) is str or type(item.get(k)) is item_text.ExportedText
                for k in SUMMARY_KEYS
            )
            for data in (n.input_data, n.output_data)
            for item in data.values()
        )
        and not any(
            "'" in c or "None" in c or not c.isascii() or (len(c) >= 9 and c[0].isdigit())
            for data in (n.input_data, n.output_data)
            for item in data.values()
            for k in SUMMARY_KEYS
            if type(c := item.get(k, "")) is str
        )
    ]
    assert set(plain) <= set(given_cells)


# ------------------------------------------------------------------ a statistics compare's rows and diffs


def _leaf_rows_both(entry: str, text: bytes) -> tuple[Any, Any]:
    """(leaf_rows of the entry's text, or None; what sides.py's Python path makes of it, or the
    exception it raises)."""
    assert NATIVE is not None
    made = NATIVE.leaf_rows(text, 0, len(text), entry)
    try:
        body = json.loads(text)
        entry_shape.check_entry(Path("dump.json"), entry, body)
        python: Any = dump_rows.entry_rows(entry, body)
    except Exception as exc:  # noqa: BLE001 (whatever it is, the C path must have handed it back)
        python = exc
    return made, python


_ROW_NAMES = _NODE_IDS | st.sampled_from(
    ["Module.w.parameters_grad.x", "a.parameters_grad", "Distributed.send.0.forward"]
)
_ARGUMENT = st.fixed_dictionaries(
    {"type": st.sampled_from(["int", "str", "torch.ProcessGroup"]), "value": _STAT},
    optional={
        "group_ranks": st.lists(st.integers(-2, 2**64), max_size=3) | st.none() | st.just("0,1"),
        "md5": st.just("abc"),
        "data_name": st.just("a.b"),
    },
)
_PEER = st.fixed_dictionaries({"src": _COMMON | _ARGUMENT, "dst": _ARGUMENT, "group_src": _ARGUMENT})


@needs_native
@settings(max_examples=500, deadline=None)
@given(_ROW_NAMES, _ENTRY | st.fixed_dictionaries({"input_kwargs": _PEER}), st.booleans())
def test_leaf_rows_as_python(entry: str, body: dict[str, Any], indented: bool) -> None:
    """The rows made straight from an entry's text are entry_rows' (same classes, texts and numbers);
    an entry the C path does not take (or that the Python path refuses) gives None."""
    text = json.dumps(body, indent=1 if indented else None).encode()
    made, python = _leaf_rows_both(entry, text)
    if made is not None:
        assert not isinstance(python, Exception)
        assert all(type(row) is dump_rows.LeafRow for row in made)
        assert shape(made) == shape(python)


@needs_native
def test_leaf_rows_hand_back_what_json_reads_otherwise() -> None:
    """Duplicate keys (json keeps the last), escapes, entries of the wrong shape, long integers and
    text json refuses go to the Python path."""
    tensor = (
        '{"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "Max": 1.5, "Min": 1, "Mean": 1, '
        '"Norm": 1}'
    )
    taken = f'{{"input_args": [{tensor}], "output": [{tensor}]}}'.encode()
    made, python = _leaf_rows_both("Functional.linear.0.forward", taken)
    assert made is not None and shape(made) == shape(python)
    escaped = tensor.replace("Max", "M\\u0061x")
    for text in (
        f'{{"input_args": [{tensor}], "input_args": []}}',
        f'{{"input_args": [{escaped}]}}',
        f'{{"input_args": {{"x": {tensor}}}}}',
        f'{{"input_args": [{tensor.replace("1.5", "1234567890123456789")}]}}',
        f'{{"input_args": [{tensor}],}}',
        f'{{"input_args": [{tensor}]}} x',
        f"[{tensor}]",
    ):
        assert NATIVE.leaf_rows(text.encode(), 0, len(text), "Functional.linear.0.forward") is None, text


@needs_native
def test_leaf_rows_take_every_entry_of_the_real_statistics_dumps() -> None:
    """On the corpus's statistics dumps (tests/data) the C path takes every entry but those with
    P2P ops, sizes and slices, and makes what the Python path makes."""
    data = Path(__file__).resolve().parent.parent / "data"
    taken = handed = 0
    for path in sorted(data.glob("*/*/dump.json")) + sorted(data.glob("multirank/*/*/*/dump.json")):
        scanned = entry_index.index_dump(path)
        if scanned is None:
            continue
        text, spans = entry_index.read_spans(path, scanned[1])
        for entry, start, end, _ in spans:
            made, python = _leaf_rows_both(entry, text[start:end])
            if made is None:
                handed += 1
            else:
                taken += 1
                assert shape(made) == shape(python), (path, entry)
    assert taken > 20 * handed, (taken, handed)


@needs_native
def test_leaf_rows_take_process_groups() -> None:
    """A process group's rows (its ranks' text in the statistics and md5 cells) are made in C, as the
    Python path makes them; ranks that are not a list of ints go to the Python path."""
    group = '{"type": "torch.ProcessGroup", "group_ranks": RANKS}'
    tensor = '{"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "Max": 1, "Min": 1, "Norm": 1}'
    for ranks in ("[0, 1]", "[]", "[-0, 7]", "null"):
        text = f'{{"input_args": [{tensor}], "input_kwargs": {{"group": {group.replace("RANKS", ranks)}}}}}'
        made, python = _leaf_rows_both("Distributed.all_reduce.0.forward", text.encode())
        assert made is not None and shape(made) == shape(python), ranks
        assert made[1].md5 == made[1].stats[0] == str(json.loads(ranks))
    for ranks in ('"0,1"', "[0.5]", "[[0]]", "[12345678901234567890]"):
        text = f'{{"input_kwargs": {{"group": {group.replace("RANKS", ranks)}}}}}'.encode()
        assert NATIVE.leaf_rows(text, 0, len(text), "Distributed.all_reduce.0.forward") is None, ranks


@needs_native
def test_leaf_rows_take_their_rules_from_python() -> None:
    """configure_leaf_rows hands rows.py's LEAF_RULES: other texts there are the ones the rows get."""
    assert NATIVE is not None
    text = b'{"input_args": [null, {"type": "int", "value": 3}], "output": [{"type": "slice", "value": 5}]}'
    other = dump_rows.LEAF_RULES._replace(na="n/a", own_kinds=(), crc=lambda value: f"crc{value}")
    NATIVE.configure_leaf_rows(other)
    try:
        made = NATIVE.leaf_rows(text, 0, len(text), "Functional.f.0.forward")
    finally:
        NATIVE.configure_leaf_rows(dump_rows.LEAF_RULES)
    assert made is not None
    assert made[0].dtype == made[0].md5 == "n/a" and made[1].md5 == "crc3" and made[2].md5 == "crc5"
    assert NATIVE.leaf_rows(text, 0, len(text), "Functional.f.0.forward") is None  # (a slice: Python's)


def test_leaf_rows_take_the_names_separator_from_python(monkeypatch: pytest.MonkeyPatch) -> None:
    """leaf_rows joins and splits the rows' names by rows.py's separator (LEAF_RULES.separator,
    markers.NAME_SEP), not one of its own: under another separator its rows are entry_rows' under it (the
    parts' names, a list's members, an object's keys, a data_name's last part, a peer argument, a
    parameters_grad entry)."""
    assert NATIVE is not None
    body = {
        "input_args": [
            {
                "type": "torch.Tensor",
                "dtype": "torch.float32",
                "shape": [2],
                "Max": 1.0,
                "Min": 0.0,
                "Mean": 0.5,
                "Norm": 1.0,
                "requires_grad": True,
                "data_name": "Functional/f/0/forward/input/0/pt",
            },
            {"type": "int", "value": 3},
            [{"type": "int", "value": 4}],
        ],
        "input_kwargs": {"x": {"type": "int", "value": 5}},
        "output": [None],
    }
    text = json.dumps(body).encode()
    peer = b'{"input_kwargs": {"src": {"type": "int", "value": 1}}}'  # (a peer argument: handed back)
    monkeypatch.setattr(dump_rows, "NAME_SEP", "/")
    NATIVE.configure_leaf_rows(dump_rows.LEAF_RULES._replace(separator="/"))
    try:
        made = [
            NATIVE.leaf_rows(text, 0, len(text), "Functional/f/0/forward"),
            NATIVE.leaf_rows(b'{"w": {"type": "int", "value": 1}}', 0, 34, "Module/fc/parameters_grad"),
        ]
        handed_back = NATIVE.leaf_rows(peer, 0, len(peer), "Distributed/send/0/forward")
    finally:
        NATIVE.configure_leaf_rows(dump_rows.LEAF_RULES)
    expected = [
        dump_rows.entry_rows("Functional/f/0/forward", body),
        dump_rows.entry_rows("Module/fc/parameters_grad", {"w": {"type": "int", "value": 1}}),
    ]
    assert made == expected
    assert [row.name for row in made[0]] == [
        "Functional/f/0/forward/input/0",
        "Functional/f/0/forward/input/1",
        "Functional/f/0/forward/input/2/0",
        "Functional/f/0/forward/input/x",
        "Functional/f/0/forward/output/0",
    ] and made[1][0].state == markers.PARAMETERS_GRAD
    assert handed_back is None
    for separator in ("", "::", "\u00e9"):
        with pytest.raises((TypeError, ValueError)):
            NATIVE.configure_leaf_rows(dump_rows.LEAF_RULES._replace(separator=separator))
    NATIVE.configure_leaf_rows(dump_rows.LEAF_RULES)
