"""The exported items (§7.6): items_json writes the JSON text straight from the items, with caches of
texts and of whole items; it must give json.dumps of the items formatted by the rule, always."""

from __future__ import annotations

import json
import math
from typing import Any

from export_rule import text_by_the_rule
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from msprobe_dask.graph.item_text import exported_cells, format_item, format_items, items_json
from msprobe_dask.graph.stat_cells import rel_text

_PG_KEEP = ("type", "group_ranks", "group_id", "data_name")


def _item_by_the_rule(item: dict[str, Any], keep_md5: bool, batch_p2p: bool) -> dict[str, str]:
    """§7.6 as written."""
    if item.get("type") == "torch.ProcessGroup":
        item = {k: v for k, v in item.items() if k in _PG_KEEP}
    drop = {"state", "full_op_name"} | (set() if keep_md5 else {"md5"})
    if batch_p2p:
        drop |= {"op", "peer", "tag", "group_id"}
    out = {}
    for k, v in item.items():
        if k in drop:
            continue
        if isinstance(v, str):
            out[k] = text_by_the_rule(v)
        elif v is None:
            out[k] = "null"
        else:
            out[k] = repr(v) if type(v) is float else str(v)
    return {"value": "null"} if out.get("Max") == "null" else out


_KEYS = st.sampled_from(
    [
        "type",
        "dtype",
        "shape",
        "Max",
        "Min",
        "value",
        "data_name",
        "full_op_name",
        "state",
        "md5",
        "op",
        "peer",
        "group_id",
        "group_ranks",
        "requires_grad",
        "Max diff",
        "NormRelativeErr",
        "Result",
        "a key longer than the C code's cache of key texts holds",
    ]
) | st.text(max_size=6)
_TEXT = st.text(alphabet="0123456789.%'Nonea-\"\\\n\t\u00e9\u4e2d\u0663", max_size=12)
_SCALAR = (
    st.none()
    | st.booleans()
    | st.integers(-(10**20), 10**20)
    | st.floats()
    | _TEXT
    | st.from_regex(r"\d{1,3}\.\d{1,10}%?", fullmatch=True)
    | st.sampled_from(["torch.ProcessGroup", "torch.Tensor", "None", "<class 'int'>", "pass", "[]"])
    | st.floats(min_value=0).map(rel_text)
)
_VALUE = _SCALAR | st.lists(_SCALAR, max_size=3) | st.dictionaries(_TEXT, _SCALAR, max_size=2)
_ITEM = st.dictionaries(_KEYS, _VALUE, max_size=8)
_DATA = st.dictionaries(_TEXT, _ITEM, max_size=3)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])  # (a busy machine)
@given(_DATA, st.booleans(), st.booleans())
def test_items_json_is_the_json_of_the_rule(data: dict, keep_md5: bool, batch_p2p: bool) -> None:
    want = json.dumps({k: _item_by_the_rule(v, keep_md5, batch_p2p) for k, v in data.items()})
    assert json.dumps(format_items(data, keep_md5, batch_p2p)) == want
    assert items_json(data, keep_md5, batch_p2p) == want
    assert items_json(data, keep_md5, batch_p2p) == want  # again, from the caches


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_ITEM, st.lists(_KEYS, max_size=4).map(tuple), st.booleans(), st.booleans())
def test_exported_cells_are_those_of_the_formatted_item(
    item: dict, keys: tuple[str, ...], keep_md5: bool, batch_p2p: bool
) -> None:
    """What the run's summary reads of an item (graph/row_summary.py summarise_rows) is what the vis.db
    holds."""
    whole = format_item(item, keep_md5, batch_p2p)
    assert exported_cells(item, keys, keep_md5, batch_p2p) == {k: v for k, v in whole.items() if k in keys}


def test_items_json_repeated_scalar_items() -> None:
    """Items with equal values of other classes (1, 1.0, True, '1') are not confused by the cache."""
    base = {"type": "int", "data_name": "-1", "full_op_name": "x", "state": "input", "requires_grad": None}
    for value in (1, True, "1", 1.0, 0, False, 0.0, -0.0, None, "None"):
        item = {**base, "value": value, "Max": value, "Min": value, "Mean": value, "Norm": value}
        for _ in range(2):
            want = json.dumps({"k": _item_by_the_rule(item, False, False)})
            assert items_json({"k": item}, False, False) == want, value


@given(st.floats(min_value=0) | st.just(math.nan) | st.floats(min_value=1e-5, max_value=1e10))
def test_rel_text_is_the_rounded_text(r: float) -> None:
    assert rel_text(r) == text_by_the_rule(str(r) + "%")


def test_rel_text_at_the_edges() -> None:
    for r in (
        0.0,
        1e-4,
        math.nextafter(1e-4, 0),
        2.0**33,
        math.nextafter(2.0**33, 0),
        0.5,
        100.0,
        1.25,
        123.456,
        9.9999995,
        9.99999949999,
        0.000123456789,
        1234567.0000001,
        1e16,
        math.inf,
        math.nan,
    ):
        assert rel_text(r) == text_by_the_rule(str(r) + "%"), r
