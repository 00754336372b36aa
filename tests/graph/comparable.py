"""Values as comparable structures for the tests that hold the C code to the Python definitions."""

from __future__ import annotations

import math
from typing import Any


def shape(value: Any) -> Any:
    """A value as a comparable structure that keeps classes and key order (1 != 1.0 != True here)."""
    if isinstance(value, dict):
        return ("dict", [(k, shape(v)) for k, v in value.items()])
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [shape(v) for v in value])
    if isinstance(value, float) and math.isnan(value):
        return ("float", "nan")
    return (type(value).__name__, value)
