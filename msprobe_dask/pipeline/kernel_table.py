"""The kernel compare's table and how its cells are written, as the reference's pandas writer does.

The reference builds a DataFrame from rows of numpy scalars, so each column gets the dtype pandas infers
(``_column_dtype``: all float32 -> float32, float32 with a missing cell -> float64, float16 with int32 ->
float32, a bool among numbers -> object...). In the csv it then replaces infinities by the texts
`` inf``/`` -inf``, which turns a typed column holding one into Python floats. So the same float32
maximum prints ``0.64042264`` in one file and ``0.6404226422309875`` in another; we reproduce that.
The xlsx has the numbers as numbers (``inf`` as text) and missing cells empty.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from msprobe_dask.columns import (
    BASE_COLUMNS,
    DIFF_COLUMNS,
    ERR_MESSAGE,
    KERNEL_VERDICT,
    STAT_COLUMNS,
    TENSOR_METRIC_COLUMNS,
)
from msprobe_dask.dump.kernel import NPY_MODE
from msprobe_dask.table import CompareTable

HEAD = BASE_COLUMNS[:6]  # names, dtypes, shapes: no Requires_grad
VERDICT = [KERNEL_VERDICT, ERR_MESSAGE]
NPY_COLUMNS = HEAD + STAT_COLUMNS + VERDICT + list(TENSOR_METRIC_COLUMNS)
STATISTIC_COLUMNS = HEAD + STAT_COLUMNS + VERDICT + DIFF_COLUMNS + ["NPU CSV File", "Bench CSV File"]
_INT64_MAX = 2**63 - 1


@dataclass
class KernelTable:
    """The rows of one (rank, step), in ``columns`` order, cells as the reference holds them."""

    mode: str  # "npy" or "statistic"
    rows: list[list[Any]]

    @property
    def columns(self) -> list[str]:
        return NPY_COLUMNS if self.mode == NPY_MODE else STATISTIC_COLUMNS

    def column(self, name: str) -> list[Any]:
        index = self.columns.index(name)
        return [row[index] for row in self.rows]


def _is_nan(value: Any) -> bool:
    return isinstance(value, (float, np.floating)) and math.isnan(value)


def _missing(value: Any) -> bool:
    return value is None or _is_nan(value)


def _column_dtype(values: Sequence[Any]) -> np.dtype | None:
    """The dtype pandas gives a column of these cells (its object-array inference); None for object.

    Floats (with NaN/None) -> float, ints -> int (float with a None), bools alone -> bool, anything
    mixed with a bool or a string -> object; the width is the widest numpy scalar's, or 64 bits as
    soon as one cell is a Python object (None, a Python float).
    """
    itemsize = 0
    null = nan = boolean = floats = ints = signed = unsigned = False
    for value in values:
        if itemsize != -1:
            size = value.dtype.itemsize if isinstance(value, np.generic) else -1
            if size > itemsize or size == -1:
                itemsize = size
        if value is None:
            null = True
        elif _is_nan(value):
            nan = True
        elif isinstance(value, (bool, np.bool_)):
            boolean = True
        elif isinstance(value, (float, np.floating)):
            floats = True
        elif isinstance(value, (int, np.integer)):
            ints = True
            signed = signed or bool(value < 0) or isinstance(value, np.signedinteger)
            unsigned = unsigned or bool(value > _INT64_MAX) or isinstance(value, np.unsignedinteger)
            if signed and unsigned:
                return None
        else:
            return None
    if boolean:
        return np.dtype(bool) if not (null or nan or floats or ints) else None
    if floats or nan or ((null or nan) and ints):
        kind = "f"
    elif ints:
        kind = "u" if unsigned else "i"
    else:
        return None
    return np.dtype(f"{kind}{itemsize}" if itemsize > 0 else f"{kind}8")


def _typed_array(values: Sequence[Any]) -> np.ndarray | None:
    """The column as pandas types it (NaN where missing); None when pandas keeps it as objects."""
    dtype = _column_dtype(values)
    if dtype is None:
        return None
    return np.array([np.nan if _missing(v) else v for v in values], dtype=dtype)


def _object_text(value: Any) -> str:
    if _missing(value):
        return ""
    if isinstance(value, (float, np.floating)) and math.isinf(value):
        return " inf" if value > 0 else " -inf"
    return str(value)


def _csv_column(values: Sequence[Any]) -> list[str]:
    column = _typed_array(values)
    if column is None:
        return [_object_text(v) for v in values]
    if column.dtype.kind == "f" and np.isinf(column).any():  # replace(inf, " inf") makes Python floats
        return [_object_text(v) for v in column.tolist()]
    texts = column.astype(str)  # what pandas writes for a typed column
    if column.dtype.kind == "f":
        texts[np.isnan(column)] = ""
    return texts.tolist()


def _xlsx_column(values: Sequence[Any]) -> list[Any]:
    column = _typed_array(values)
    cells = column.tolist() if column is not None else values
    return [None if _missing(v) else v.item() if isinstance(v, np.generic) else v for v in cells]


def _view(table: KernelTable, render: Any) -> CompareTable:
    columns = [render([row[i] for row in table.rows]) for i in range(len(table.columns))]
    rows = [list(cells) for cells in zip(*columns)] if table.rows else []
    return CompareTable(mode=f"kernel_{table.mode}", columns=list(table.columns), rows=rows)


def csv_view(table: KernelTable) -> CompareTable:
    """Every cell as the text the reference's csv holds."""
    return _view(table, _csv_column)


def xlsx_view(table: KernelTable) -> CompareTable:
    """Every cell as a Python number, bool or text, None where the reference's cell is empty."""
    return _view(table, _xlsx_column)
