"""Cell mapping ``-cm`` (compare.md §3.4): MindSpore ``Cell.{cell}.{Class}`` rows keyed as PyTorch Modules.

``Cell`` becomes ``Module``; with a yaml, the ``{cell_name}.{class}`` part is replaced whole when it is a
yaml key, otherwise every yaml pair replaces its first occurrence, in yaml order.
"""

from __future__ import annotations

from collections.abc import Mapping

from msprobe_dask.columns import NA
from msprobe_dask.dump.markers import PARAMETERS_GRAD

_MARKERS = (".forward.", ".backward.", f".{PARAMETERS_GRAD}.")


def _cell_span(name: str) -> tuple[int, int] | None:
    """Start and end of ``{cell_name}.{class}``: after the first dot, up to the first direction marker."""
    first = name.find(".")
    ends = [i for i in (name.find(m) for m in _MARKERS) if i > first]
    if first < 0 or not ends:
        return None
    return first + 1, min(ends)


def cell_key(name: str, table: Mapping[str, str], used: set[str] | None = None) -> str:
    """The golden-side name a target row is looked up as (``N/A``: never matches)."""
    parts = name.split(".")
    if ".forward." not in name and ".backward." not in name and PARAMETERS_GRAD not in parts:
        return NA
    name = name.replace("Cell", "Module", 1)
    if not table:
        return name
    span = _cell_span(name)
    if span is None:
        return name
    start, end = span
    cell = name[start:end]
    if cell in table:
        if used is not None:
            used.add(cell)
        cell = table[cell]
    else:
        for old, new in table.items():
            if old in cell:
                cell = cell.replace(old, new, 1)
                if used is not None:
                    used.add(old)
    return name[:start] + cell + name[end:]
