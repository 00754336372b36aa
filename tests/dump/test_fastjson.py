"""dump/fastjson.py and metrics/float_repr.py: orjson's speed, json's and repr's answers."""

from __future__ import annotations

import json
import random
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from msprobe_dask.dump.fastjson import has_long_integer, loads
from msprobe_dask.metrics.float_repr import float_repr, float_reprs


def _same_as_json(text: str) -> None:
    # repr tells 1 from 1.0 and from True, -0.0 from 0.0, and shows nan
    assert repr(loads(text.encode("utf-8"))) == repr(json.loads(text))


@pytest.mark.parametrize(
    "text",
    [
        '{"Max": NaN, "Min": -Infinity, "Mean": Infinity}',  # what the dumper writes on overflow
        "[18446744073709551616, -9223372036854775809, 9999999999999999999]",  # beyond 64 bits
        "[123456789012345678, -123456789012345678, 9223372036854775807]",  # within
        "[0.00012345678901234567, 1.00000000000000000000001, 1e-400, -0.0, -0, 1E5]",
        '{"a": 1, "a": 2, "b": {"a": [1, 2.5, true, null]}}',  # a repeated key: the last value
        '["\\ud800", "\\u00e9t\\u00e9", "md5 0123456789012345678901"]',  # a lone surrogate, a long digit run
        "1E400",
    ],
)
def test_loads_gives_what_json_gives(text: str) -> None:
    _same_as_json(text)


@pytest.mark.parametrize("text", [b"", b"[1,", b"{'a': 1}", b"[1] 2", b'["\xff"]', b"[01]"])
def test_loads_refuses_what_json_refuses(text: bytes) -> None:
    with pytest.raises(ValueError):
        loads(text)


def test_long_integers_are_told_from_long_fractions() -> None:
    assert has_long_integer(b"[1234567890123456789]")
    assert has_long_integer(b'{"a": -1234567890123456789}')
    assert has_long_integer(b"[0.1, 1234567890123456789]")
    assert not has_long_integer(b"[123456789012345678, 0.00012345678901234567]")
    assert not has_long_integer(b"[0.00012345678901234567, 0.000123456789012345678901]")


_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=400, deadline=None)
@given(_json_values, st.sampled_from([None, 1]))
def test_loads_matches_json_on_any_value(value: object, indent: int | None) -> None:
    _same_as_json(json.dumps(value, indent=indent, ensure_ascii=False))


@settings(max_examples=2000, deadline=None)
@given(st.floats(allow_nan=True, allow_infinity=True))
def test_float_repr_is_repr(x: float) -> None:
    assert float_repr(x) == repr(x)
    assert float_reprs([x, x]) == [repr(x)] * 2


def test_float_repr_is_repr_on_many_floats() -> None:
    rng = random.Random(5)
    values = [struct.unpack("d", rng.getrandbits(64).to_bytes(8, "little"))[0] for _ in range(50_000)]
    values += [rng.random() * 10.0 ** rng.randint(-6, 17) * rng.choice((1, -1)) for _ in range(50_000)]
    values += [1e-4, -1e-4, 1e16, -1e16, 9999999999999998.0, 0.00010000000000000002, 5e-324, 0.0, -0.0]
    assert [float_repr(x) for x in values] == [repr(x) for x in values]
    assert float_reprs(values) == [repr(x) for x in values]
    assert float_reprs([]) == []
