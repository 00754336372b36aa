"""Where one tensor's elements are (:class:`TensorHandle`), read from a file's header only, and helpers
that the tensor file readers (``tensor_file.py``, ``pt_file.py``) share."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from msprobe_dask.dump.tensor_dtypes import Element, as_dtype, element_size


@dataclass(frozen=True, slots=True)
class TensorHandle:
    """Where one tensor's elements are, read from headers only.

    Element ``i`` (a multi-index) lives at byte ``offset + itemsize * sum(i[k] * strides[k])``, counted in the
    file itself when ``zip_member`` is None (``.npy``, and ``.pt`` storages stored uncompressed, which is what
    torch writes) and otherwise inside that (compressed) zip member.
    """

    path: Path
    kind: Literal["npy", "pt", "zarr"]
    element: Element  # the dtype, or the name of an ml_dtypes one (made when ``dtype`` is asked for)
    shape: tuple[int, ...]
    offset: int
    strides: tuple[int, ...]  # in elements, never negative
    zip_member: str | None = None

    @property
    def dtype(self) -> np.dtype:
        return as_dtype(self.element)

    @property
    def itemsize(self) -> int:
        return element_size(self.element)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.itemsize

    @property
    def is_contiguous(self) -> bool:
        """C-contiguous: the elements are one run of ``size`` items from ``offset``."""
        return self.size <= 1 or all(
            n == 1 or s == c for n, s, c in zip(self.shape, self.strides, c_strides(self.shape))
        )

    @property
    def extent(self) -> int:
        """Elements spanned from ``offset``, from the first element to one past the last."""
        if self.size == 0:
            return 0
        return 1 + sum((n - 1) * s for n, s in zip(self.shape, self.strides))


def c_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))
