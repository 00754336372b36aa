"""entry_texts (graph/csrc/entry_text.c) makes a dump entry's exported items straight from its JSON
text: where it answers, its texts are the ones the Python path makes from the parsed entry's items
(items.entry_items, then item_text.items_json); where it does not (None), the Python path makes them.
node_items (graph/csrc/entry_items.c) makes the items themselves, checked on the same entries.

The entries are real dumps' and generated ones, written as json.dump writes them (indented, NaN and
Infinity for non-finite floats) and in other valid or invalid JSON forms.
"""

from __future__ import annotations

import json
import math
import random
import re
from decimal import ROUND_DOWN, ROUND_UP, Decimal, localcontext
from pathlib import Path
from typing import Any

import pytest
from comparable import shape
from hypothesis import given, settings
from hypothesis import strategies as st

from msprobe_dask.dump.entry_index import read_dump_doc
from msprobe_dask.dump.fastjson import loads
from msprobe_dask.errors import DumpError
from msprobe_dask.graph import item_text, items, speedups

NATIVE = speedups.native
pytestmark = pytest.mark.skipif(NATIVE is None, reason="the C extension is not built")
DATA = Path(__file__).resolve().parents[1] / "data"


def _python_texts(node_id: str, text: bytes) -> Any:
    """The Python path's texts of the entry ``text``, or "refused" where it gives an error."""
    native, speedups.native = speedups.native, None
    try:
        try:
            inputs, outputs = items.entry_items(node_id, loads(text))
        except (ValueError, DumpError):
            return "refused"
        return item_text.items_json(inputs, False, False), item_text.items_json(outputs, False, False)
    finally:
        speedups.native = native


def _python_items(node_id: str, text: bytes) -> Any:
    """The Python path's items of the entry ``text``, or "refused" where it gives an error."""
    try:
        return shape(items.entry_items(node_id, loads(text)))
    except (ValueError, DumpError):
        return "refused"


def _taken(node_id: str, text: bytes) -> bool:
    """Whether entry_texts answers for the entry; where it does, its texts are Python's. node_items
    (graph/csrc/entry_items.c) is checked on it too: where it answers, its items are Python's."""
    assert NATIVE is not None
    padded = b"xx" + text + b"yy"  # a span inside a bigger text, as in dump.json
    made = NATIVE.node_items([node_id], {node_id: (2, 2 + len(text))}, {}, padded)[0]
    if made is not None:
        assert shape(made) == _python_items(node_id, text), text
    got = NATIVE.entry_texts(padded, 2, 2 + len(text), node_id)
    if got is None:
        return False
    assert got == _python_texts(node_id, text), text
    return True


def test_every_entry_of_the_test_dumps() -> None:
    """All the entries of tests/data, read by span: the common ones are taken (all but parameters_grad,
    P2P ops, rank parameters and slices), with Python's texts."""
    taken = total = 0
    for path in sorted(DATA.rglob("dump.json")):
        _, data = read_dump_doc(path)
        found = data.span_texts(data)  # type: ignore[attr-defined]
        assert found is not None, path
        spans, _, text = found
        for name, (start, end) in spans.items():
            total += 1
            taken += _taken(name, text[start:end])
    assert total > 20_000
    assert taken / total > 0.9


def test_node_items_of_many_entries_at_once() -> None:
    """node_items reads the entries of a call onto one tape first (without the GIL when they are many),
    then makes their items: each node's answer is the one it gives for that node alone, laid out as
    dump.json is (indented) or compactly (more values than the tape is first given room for)."""
    assert NATIVE is not None
    for path in sorted(DATA.rglob("dump.json")):
        _, data = read_dump_doc(path)
        found = data.span_texts(data)  # type: ignore[attr-defined]
        assert found is not None, path
        spans, small, text = found
        compact, compact_spans = bytearray(), {}
        for name, (start, end) in spans.items():
            entry = json.dumps(loads(text[start:end]), separators=(",", ":")).encode()
            compact_spans[name] = (len(compact), len(compact) + len(entry))
            compact += entry
        names = [*spans, "absent"]
        for spans_of, small_of, text_of in ((spans, small, text), (compact_spans, {}, bytes(compact))):
            together = NATIVE.node_items(names, spans_of, small_of, text_of)
            alone = [NATIVE.node_items([name], spans_of, small_of, text_of)[0] for name in names]
            assert [shape(x) for x in together] == [shape(x) for x in alone], path


# ------------------------------------------------------------------ generated entries

_KEYS = ["type", "dtype", "shape", "Max", "Min", "Mean", "Norm", "requires_grad", "data_name", "md5", "value"]
_OTHER_KEYS = ["state", "full_op_name", "group_ranks", "class_type", "extra", "src"]
_STRINGS = st.sampled_from(
    ["torch.float32", "", "None", "a'b", "x.y.0.pt", "nodot", "-1", "12.123456789", "3.5%", "é", 'a\\"b']
)
_FLOATS = st.floats() | st.sampled_from([0.0, -0.0, 1e-5, 1e-4, 1e16, 9007199254740993.0, 1e300, 5e-324])
_SCALARS = st.none() | st.booleans() | st.integers(-(10**20), 10**20) | _FLOATS | _STRINGS
_VALUES = _SCALARS | st.lists(st.integers(-3, 10**19) | st.lists(st.integers(0, 3), max_size=2), max_size=3)
_TYPES = st.sampled_from(
    ["torch.Tensor", "int", "float", "bool", "str", "torch.Size", "slice", "ellipsis", "torch.ProcessGroup"]
)


@st.composite
def _leaf(draw: st.DrawFn) -> dict[str, Any]:
    """A leaf with some of the keys items.py reads, in any order, and values of any JSON class."""
    keys = draw(st.lists(st.sampled_from(_KEYS + _OTHER_KEYS), unique=True, max_size=8))
    leaf = {k: draw(_VALUES) for k in keys}
    if draw(st.booleans()):
        leaf["type"] = draw(_TYPES)
    if "dtype" in leaf and draw(st.booleans()):
        leaf["dtype"] = draw(st.sampled_from(["torch.float32", "", None, False, 0]))
    if "class_type" in leaf and draw(st.booleans()):
        leaf["class_type"] = "torch.distributed.P2POp"
    return leaf


_PART = st.recursive(
    _leaf() | st.none() | _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["a", "src", "0", "p"]), inner)
    ),
    max_leaves=6,
)
_ENTRY = st.dictionaries(
    st.sampled_from(["input_args", "input_kwargs", "input", "output", "parameters", "other"]),
    _PART,
    max_size=4,
)
_NODE_IDS = st.sampled_from(
    ["Functional.linear.0.forward", "Module.a.output.b.forward.0", "x.parameters_grad", "Torch.é.0", 'a"b']
)


@settings(max_examples=1500, deadline=None)
@given(_NODE_IDS, _ENTRY, st.sampled_from([1, 2, None]))
def test_generated_entries(node_id: str, entry: dict[str, Any], indent: int | None) -> None:
    _taken(node_id, json.dumps(entry, indent=indent).encode())


def test_the_common_entries_are_taken() -> None:
    """A tensor, scalar arguments and a null, as msProbe dumps them, are taken (not handed to Python)."""
    tensor = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [4, 64], "Max": 2.5, "Min": -1.0}
    tensor |= {
        "Mean": 0.125,
        "Norm": 30.0,
        "requires_grad": True,
        "data_name": "Functional.a.0.forward.input.0.pt",
    }
    entry = {
        "input_args": [tensor, {"type": "int", "value": -0}, {"type": "float", "value": 1e-7}, None],
        "input_kwargs": {"dim": {"type": "int", "value": 1}, "inplace": {"type": "bool", "value": False}},
        "output": [{**tensor, "Max": float("nan"), "data_name": "-1"}, {"type": "str", "value": "mean"}],
    }
    for indent in (1, None):
        assert _taken("Functional.a.0.forward", json.dumps(entry, indent=indent).encode())


@pytest.mark.parametrize(
    "text",
    [
        '{"output": [{"type": "float", "value": Infinity}, {"type": "float", "value": -Infinity}]}',
        '{"output": [{"type": "int", "value": -0}, {"type": "float", "value": -0.0}]}',
        '{"output": [{"type": "float", "value": 1E5}, {"type": "float", "value": 2.50e-3}]}',
        '{"output": [{"type": "int", "value": 1234567890123456789}]}',  # 19 digits: Python reads it
        '{"output": [{"type": "float", "value": 1e400}]}',  # json gives inf
        '{"output": [{"type": "int", "value": 01}]}',  # not JSON: both refuse
        '{"output": [{"type": "int", "value": 1}],}',
        '{"output": [{"type": "int" "value": 1}]}',
        '{"output": [{"type": "str", "value": "a\\u0041"}]}',
        '{"output": [{"type": "str", "value": "tab\there"}]}',  # a raw control character
        '{"output": [{"type": "int", "value": 1, "value": 2}]}',  # json keeps the last
        '{"output": [], "output": [{"type": "int", "value": 2}]}',
        '{"out\\u0070ut": [{"type": "int", "value": 2}]}',  # a key spelled with an escape
        '{"output": [{"type": "int", "value": 1}]} x',
        '{"output": [{"type": "int", "value": 1}]',
        '[{"type": "int", "value": 1}]',
        '{"output": {"a": {"b": [null, {"type": "int", "value": 3}]}}}',
        '{"output": [{"type": "torch.Tensor", "dtype": true, "Max": 1}]}',
        '{"output": [{"type": "torch.Tensor", "dtype": "x", "shape": [[1, 2], [], -0]}]}',
        '{"output": [{"type": "torch.Tensor", "dtype": "x", "shape": [1.5]}]}',
        '{"input": [{"type": "int", "value": 1, "data_name": "x.output.y.pt"}]}',
        '{"input": [{"type": "int", "value": 1}], "input_args": [{"type": "int", "value": 2}]}',
    ],
)
def test_json_forms(text: str) -> None:
    _taken("Functional.a.0.forward", text.encode())


# ------------------------------------------------------------------ floats read straight from text


def _float_entry(number: str) -> bytes:
    return b'{"input_args": [{"type": "float", "value": ' + number.encode() + b"}]}"


@settings(max_examples=3000, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_floats_as_json_writes_them(x: float) -> None:
    assert _taken("Functional.a.0.forward", _float_entry(json.dumps(x)))


@settings(max_examples=3000, deadline=None)
@given(
    st.integers(0, 10**19 - 1),
    st.integers(0, 19),
    st.integers(-30, 30) | st.none(),
    st.booleans(),
)
def test_floats_in_any_decimal_form(digits: int, point: int, exponent: int | None, negative: bool) -> None:
    """Decimal texts of up to 19 digits, the decimal point anywhere, with or without an exponent:
    each read as float() reads it (the exact integer path, or Python's beyond its range)."""
    text = str(digits)
    point = min(point, len(text) - 1)
    number = f"{'-' if negative else ''}{text[: len(text) - point]}.{text[len(text) - point :] or '0'}"
    if exponent is not None:
        number += f"e{exponent}"
    if not re.fullmatch(r"-?(0|[1-9]\d*)\.\d+(e-?\d+)?", number):
        return
    assert _taken("Functional.a.0.forward", _float_entry(number))


def test_floats_near_halfway_between_two_doubles() -> None:
    """Decimals of 17 to 19 digits around the halfway point between two neighbouring doubles: the exact
    integer path rounds each of them as float() does."""
    rng = random.Random(5)
    for _ in range(2000):
        x = rng.uniform(-1e10, 1e10) if rng.random() < 0.5 else rng.uniform(-1, 1)
        halfway = (Decimal(x) + Decimal(math.nextafter(x, math.inf))) / 2  # exact
        for digits in (17, 18, 19):
            for rounding in (ROUND_DOWN, ROUND_UP):
                with localcontext() as ctx:
                    ctx.prec, ctx.rounding = digits, rounding
                    number = +halfway
                text = f"{number:e}".replace("e+", "e")
                assert _taken("Functional.a.0.forward", _float_entry(text)), text
    for text in (
        "9007199254740993",
        "9007199254740993.0",
        "4.9406564584124654e-324",
        "2.2250738585072011e-308",
    ):
        _taken("Functional.a.0.forward", _float_entry(text))


def test_the_md5_of_a_scalar_is_the_one_of_the_rules_configured_last(monkeypatch: pytest.MonkeyPatch) -> None:
    """The C items remember the md5 (crc32_text) of the scalar values met (by object): other rules
    configured, each value's md5 is theirs, not one remembered from the rules before."""
    assert NATIVE is not None
    entry = {"input_args": [{"type": "bool", "value": False}, {"type": "int", "value": 3}]}
    text = json.dumps(entry).encode()
    node = "Functional.a.0.forward"

    def md5s() -> list[str]:
        made = NATIVE.node_items([node], {node: (0, len(text))}, {}, text)
        assert made[0] is not None
        return [item["md5"] for item in made[0][0].values()]

    assert md5s() == [items.crc32_text(False), items.crc32_text(3)]
    trial = items.ITEM_RULES._replace(crc32_text=lambda value: f"crc of {value}")
    NATIVE.configure_items(trial)
    try:
        assert md5s() == ["crc of False", "crc of 3"]
    finally:
        NATIVE.configure_items(items.ITEM_RULES)
    assert md5s() == [items.crc32_text(False), items.crc32_text(3)]


def test_the_items_take_their_rules_from_python(monkeypatch: pytest.MonkeyPatch) -> None:
    """Other texts of bools, another md5 of a leaf without a value and other states handed to node_items
    (items.ITEM_RULES): its items are those the Python path makes with them, so none is written in C."""
    assert NATIVE is not None
    sub_keys = tuple((key, suffix, state.upper()) for key, suffix, state in items.SUB_KEYS)
    trial = items.ITEM_RULES._replace(bool_text=("no", "yes"), crc32_empty="e", sub_keys=sub_keys)
    monkeypatch.setattr(items, "BOOL_TEXT", {False: "no", True: "yes"})
    monkeypatch.setattr(items, "_CRC32_EMPTY", "e")
    monkeypatch.setattr(items, "SUB_KEYS", sub_keys)
    tensor = {"type": "torch.Tensor", "dtype": "torch.float32", "Max": 1.5, "requires_grad": True}
    entry = {"input_args": [tensor, {"type": "bool", "value": False}, None], "output": [tensor]}
    text = json.dumps(entry).encode()
    NATIVE.configure_items(trial)
    try:
        made = NATIVE.node_items(
            ["Functional.a.0.forward"], {"Functional.a.0.forward": (0, len(text))}, {}, text
        )
    finally:
        NATIVE.configure_items(items.ITEM_RULES)
    assert made[0] is not None
    assert shape(made[0]) == _python_items("Functional.a.0.forward", text)


_GROUP_NODE = "Distributed.all_reduce.0.forward"


def _group_entry(group: str) -> bytes:
    return f'{{"input_kwargs": {{"group": {group}}}, "output": [{{"type": "torch.ProcessGroup"}}]}}'.encode()


def _c_group(text: bytes) -> tuple[Any, list[Any]]:
    """node_items' items of the entry ``text`` and items_json's texts of them."""
    assert NATIVE is not None
    made = NATIVE.node_items([_GROUP_NODE], {_GROUP_NODE: (0, len(text))}, {}, text)[0]
    assert made is not None
    return made, [NATIVE.items_json(data, item_text.skipped_keys(False, False)) for data in made]


def test_process_groups_are_made_in_c_as_python_makes_them() -> None:
    """A process group's items (the str of its ranks in the statistics and md5) and their exported text
    (only the keys a process group keeps), from its items or straight from its entry's text, are made
    in C, as the Python path makes them, whatever its ranks hold."""
    python_json = item_text.python_items_json_for(False, False)
    for ranks in ("[0, 1]", "[]", "null", '"0,1"', '""', "[[0], 1.5, -0]", "true", '{"a": 1}'):
        group = (
            f'{{"type": "torch.ProcessGroup", "x": 2, "group_ranks": {ranks}, "group_id": "g", "value": 3}}'
        )
        text = _group_entry(group)
        made, texts = _c_group(text)
        assert shape(made) == _python_items(_GROUP_NODE, text), ranks
        # (entry_texts: Python's texts; a dict, a list of other than ints: the Python path's)
        assert _taken(_GROUP_NODE, text) or ranks.startswith(("{", "[[")), ranks
        python = [python_json(data) for data in made]
        assert [c or p for c, p in zip(texts, python)] == python, ranks
        assert None not in texts or ranks.startswith("{"), ranks  # (a dict's text: the Python path's)
    made, _ = _c_group(_group_entry('{"type": "torch.ProcessGroup", "group_ranks": [4, 5]}'))
    assert made[0][f"{_GROUP_NODE}.input.group"]["md5"] == "[4, 5]"


def test_process_groups_take_their_ranks_and_kept_keys_from_python(monkeypatch: pytest.MonkeyPatch) -> None:
    """Another name of a group's ranks and other keys kept in its export handed to the C code
    (item_text.TEXT_RULES): its items and texts are those the Python path makes with them."""
    assert NATIVE is not None
    trial = item_text.TEXT_RULES._replace(group_ranks="ranks", process_group_kept=("ranks", "x"))
    monkeypatch.setattr(items, "GROUP_RANKS", "ranks")
    monkeypatch.setattr(item_text, "_PG_KEEP", ("ranks", "x"))
    text = _group_entry('{"type": "torch.ProcessGroup", "group_ranks": [4], "x": 1, "ranks": [3]}')
    NATIVE.configure_text(trial)
    try:
        made, texts = _c_group(text)
    finally:
        NATIVE.configure_text(item_text.TEXT_RULES)
    assert shape(made) == _python_items(_GROUP_NODE, text)
    assert made[0][f"{_GROUP_NODE}.input.group"]["md5"] == "[3]"
    assert texts == [item_text.python_items_json_for(False, False)(data) for data in made]
    assert texts[0] == f'{{"{_GROUP_NODE}.input.group": {{"x": "1", "ranks": "[3]"}}}}'


_BREAKS = st.sampled_from(list(',:{}[]"\\ 0e.-+xNIa\t\n') + ["\u00e9", "\x01", "\\u12", "1" * 19])


@settings(max_examples=400, deadline=None)
@given(
    st.lists(_leaf(), max_size=3),
    st.lists(st.tuples(st.integers(0, 10**6), _BREAKS, st.booleans()), max_size=2),
)
def test_entries_to_parse_vouch_only_for_what_json_reads(leaves: list[Any], edits: list[Any]) -> None:
    """entries_to_parse (node_items.parse_unused) leaves out only entries that json.loads reads: valid
    texts, broken ones (a character put in or taken out), non-ASCII and escaped strings, long integers."""
    assert NATIVE is not None
    text = json.dumps({"input_args": leaves}, indent=1, ensure_ascii=False)
    for at, piece, cut in edits:
        at %= len(text) + 1
        text = text[:at] + ("" if cut else piece) + text[at + cut :]
    raw = text.encode()
    names = ["a", "b"]
    doubtful = NATIVE.entries_to_parse(names, {"a": (1, 1 + len(raw)), "b": (0, 1)}, {}, b"[" + raw + b"]")
    assert "b" in doubtful  # ("[" is not JSON)
    if "a" not in doubtful:
        json.loads(raw.decode("utf-8"))


def test_entries_to_parse_leave_out_the_common_entries() -> None:
    """Of the corpus's entries read by span, those read plainly are left out: most of them."""
    assert NATIVE is not None
    total = left_out = 0
    for path in sorted(DATA.rglob("dump.json")):
        _, data = read_dump_doc(path)
        found = data.span_texts(data)  # type: ignore[attr-defined]
        assert found is not None, path
        names = list(found[0])
        total += len(names)
        left_out += len(names) - len(NATIVE.entries_to_parse(names, *found))
    assert left_out > 0.9 * total, (left_out, total)
