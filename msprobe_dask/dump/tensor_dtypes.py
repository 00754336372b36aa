"""Tensor dtypes by name: numpy's, and those torch dumps that numpy lacks (bfloat16, the float8 kinds),
which ml_dtypes gives.

ml_dtypes is imported only when one of its dtypes is made (:func:`named_dtype`): importing it costs
0.5-1 s of CPU (it registers its types and their casts with numpy) in every process that does, and a
compare of float32 / float16 tensors, or of bfloat16 ones that the C pass measures from their bytes
(``metrics/one_shot.py``), never needs it. Until then a tensor's element type is its name
(:data:`Element`).
"""

from __future__ import annotations

import functools

import numpy as np

ML_DTYPES: dict[str, int] = {
    "bfloat16": 2,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "float8_e4m3fnuz": 1,
    "float8_e5m2fnuz": 1,
    "float8_e8m0fnu": 1,
}
"""The dtypes ml_dtypes gives (every one since its 0.5), by name, and their item sizes."""

Element = np.dtype | str
"""A tensor's element type: a numpy dtype, or the name of one of ``ML_DTYPES`` (not made yet)."""


@functools.cache
def named_dtype(name: str) -> np.dtype:
    """The dtype called ``name``: numpy's, or ml_dtypes' for one of ``ML_DTYPES``; TypeError for neither."""
    if name in ML_DTYPES:
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, name))
    return np.dtype(name)


def element_of(name: str) -> Element:
    """The element type called ``name``: an ml_dtypes one stays a name, numpy's is made."""
    return name if name in ML_DTYPES else np.dtype(name)


def as_dtype(element: Element) -> np.dtype:
    return named_dtype(element) if isinstance(element, str) else element


def element_size(element: Element) -> int:
    return ML_DTYPES[element] if isinstance(element, str) else element.itemsize


def is_ml_dtype(dtype: np.dtype) -> bool:
    """``dtype`` is one of ``ML_DTYPES`` (told by its name: ml_dtypes is not imported)."""
    return dtype.name in ML_DTYPES


NUMBER_KINDS = "biufc"
"""numpy's kinds of numbers: bool, signed and unsigned integers, floats, complex numbers (strings, bytes,
void or structured records, datetimes and timedeltas are not numbers)."""


def holds_numbers(element: Element) -> bool:
    """``element`` is a type of numbers (an ml_dtypes one, named, always is)."""
    return isinstance(element, str) or element.kind in NUMBER_KINDS


def native_name(element: Element) -> str | None:
    """The name of an element type in this machine's byte order; None for one in the other order."""
    if isinstance(element, str):
        return element
    return element.name if element.isnative else None
