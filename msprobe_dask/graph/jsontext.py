"""``dumps(obj)``: the text of ``json.dumps(obj)`` (default options) at a fraction of the cost for the
small lists and dicts a vis.db row holds.

``json.dumps`` builds a new encoder on every call, which costs more than encoding a short list (3 us
against 0.6 us measured for a one-string list). Here the C encoder of the standard library is built
once; where it is missing or behaves differently, ``json.dumps`` itself is used.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any


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


ASCII_ESCAPES = tuple(dumps(chr(c))[1:-1] for c in range(128))
"""Each ASCII character as ``dumps`` writes it inside a JSON string (itself, or its escape): what the
C row maker (csrc/rows.c) writes lists of ASCII strings with."""
