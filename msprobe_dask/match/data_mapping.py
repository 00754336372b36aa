"""Data mapping ``-dm`` (compare.md §3.3): an explicit ``target row name: golden row name`` table.

The target name is looked up as written (not renumbered); the golden side keeps its renumbered
keys, as in the reference. No dtype gate applies to these pairs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from msprobe_dask.match.mapfile import warn_unused


def data_keys(
    npu_names: Sequence[str], table: Mapping[str, str], path: str | Path | None = None
) -> list[str]:
    """Join key of each target row: its mapped golden name, or its own name when it is not mapped."""
    if path is not None:
        present = set(npu_names)
        warn_unused(path, "data mapping", [name for name in table if name not in present])
    return [table.get(name, name) for name in npu_names]
