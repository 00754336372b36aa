"""Which dump entry each compare row belongs to, its state (input, output, parameters, ...), and what
identifies the NPU tensor it holds: how the divergence analysis reads a row's name and cells."""

from __future__ import annotations

import re
from collections.abc import Sequence
from itertools import compress
from operator import ne
from typing import Any

from msprobe_dask.analysis.row_errors import RowColumns
from msprobe_dask.columns import NA, NPU_NAME
from msprobe_dask.dump.markers import PARAMETERS_GRAD

INPUT_ROLES = ("input", "parameters")
_ENTRY = re.compile(r"^(.+?\.(?:forward|backward)(?:\.\d+)?)\.(input|output|parameters)(?:\.|$)")
_GRAD_ENTRY = re.compile(rf"^(.+?\.{re.escape(PARAMETERS_GRAD)}(?:\.\d+)?)(?:\.|$)")

Signature = tuple[object, object]


def entry_and_state(name: str) -> tuple[str, str]:
    """``Module.fc1.Linear.forward.0.input.0`` -> (``Module.fc1.Linear.forward.0``, ``input``)."""
    match = _ENTRY.match(name)
    if match:
        return match.group(1), match.group(2)
    match = _GRAD_ENTRY.match(name)
    if match:
        return match.group(1), PARAMETERS_GRAD
    return name, "output"


def row_entries(rows: RowColumns) -> list[str]:
    """The dump entry of each row."""
    origins = rows.cells["api_origin_name"]
    if all(origins):  # (a table's rows: each row's entry given)
        return list(map(str, origins))
    return [
        str(origin) if origin else entry_and_state(str(name))[0]
        for origin, name in zip(origins, rows.cells[NPU_NAME])
    ]


def entry_spans(entries: Sequence[str]) -> list[tuple[int, int]]:
    """(start, end) of each run of consecutive rows of one entry."""
    count = len(entries)
    starts = [0, *compress(range(1, count), map(ne, entries[1:], entries))] if count else []
    return list(zip(starts, [*starts[1:], count]))


def tensor_signature(high: float | None, low: float | None, md5: Any) -> Signature | None:
    """What identifies the tensor on the NPU side: its max and min (unchanged by views, reshapes and
    copies), or its md5 in an md5 dump; none where the max or min is NaN: a NaN equals nothing, so such a
    tensor is no earlier tensor (as a key, one NaN object would equal itself: ``number`` hands out one)."""
    if high is not None and low is not None:
        return (high, low) if high == high and low == low else None
    return ("md5", str(md5)) if md5 not in (None, NA) else None
