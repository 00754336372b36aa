"""``dumps(obj)``: the text of ``json.dumps(obj)`` (default options) at a fraction of the cost for the
small lists and dicts a vis.db row holds; ``float_text(x)``: ``repr(x)``, faster.

``json.dumps`` builds a new encoder on every call, which costs more than encoding a short list (3 us
against 0.6 us measured for a one-string list). Here the C encoder of the standard library is built
once; where it is missing or behaves differently, ``json.dumps`` itself is used.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import orjson


def _make_dumps() -> Callable[[Any], str]:
    from json import encoder

    make = getattr(encoder, "c_make_encoder", None)
    if make is None:
        return json.dumps
    default = json.JSONEncoder().default
    try:
        # markers=None: no circular-reference check (JSON-born data has no cycles, and a shared
        # markers dict would not be thread-safe)
        enc = make(None, default, encoder.encode_basestring_ascii, None, ": ", ", ", False, False, True)
    except TypeError:  # another signature in this Python version
        return json.dumps

    def dumps(obj: Any) -> str:
        return "".join(enc(obj, 0))

    sample = {"a\u00e9\n": [1, 2.5, None, True, float("nan")], "b": {"c": "'d'"}}
    return dumps if dumps(sample) == json.dumps(sample) else json.dumps


dumps = _make_dumps()


FLOAT_DUMPS_RANGE = (1e-4, 1e16)  # orjson writes repr's text of a float x with lo <= |x| < hi


def float_text(x: float) -> str:
    """``repr(x)``, made by orjson where its text is repr's: both write the shortest digits that read
    back as ``x``, and the same text for 1e-4 <= |x| < 1e16 (below, orjson writes 0.00001 where repr
    writes 1e-05). A third of repr's cost: the statistics of a vis.db row need a dozen."""
    lo, hi = FLOAT_DUMPS_RANGE
    if lo <= x < hi or -hi < x <= -lo:
        return orjson.dumps(x).decode()
    return repr(x)
