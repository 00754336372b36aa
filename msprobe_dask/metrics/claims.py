"""Whether a tensor file holds what dump.json says of it: the dtype and the shape of its entry (D35).

The reference compares a file as the file says, so another dtype or shape than the dumped one (a file
replaced, a dump mixed from two runs) can give a ``pass``; such a row is an ``error`` here, whose
Err_message names the file, what it holds and what dump.json says (its cells stay the reference's).
"""

from __future__ import annotations

import functools
import re
from typing import Any

from msprobe_dask.dump.tensor_dtypes import ML_DTYPES, Element
from msprobe_dask.dump.tensor_handle import TensorHandle
from msprobe_dask.match.dtypes import normalised_dtype
from msprobe_dask.metrics.tensor_cells import squeezed

Claim = tuple[str, str]
"""What dump.json says of one tensor: its dtype and shape cells (``torch.float32``, ``[2, 8, 32]``)."""

HELD_AS = {("BFloat16", "float32")}
"""(dtype claimed, dtype held) that a dumper writes on purpose: MindSpore saves a bfloat16 tensor as a
float32 ``.npy`` (numpy has no bfloat16)."""

_SHAPE = re.compile(r"\[(?:\d+(?:, \d+)*)?\]")
"""A shape cell as dump.json's list prints; a cell of another form is not checked."""


def claim_of(dtype: Any, shape: Any) -> Claim:
    """The claim of a dump item whose shape is a list (graph_visualize's items) or its text."""
    return (dtype if isinstance(dtype, str) else "", str(shape))


TENSOR_DTYPES = frozenset(
    {"bool", "float16", "float32", "float64", "complex64", "complex128", *ML_DTYPES}
    | {f"{sign}int{bits}" for sign in ("", "u") for bits in (8, 16, 32, 64)}
)
"""The dtypes a tensor file may hold, by name; a dtype cell naming another is not checked."""


def _sizes(shape: str) -> tuple[int, ...] | None:
    """A shape cell's sizes but those of 1 (as the compare squeezes both tensors); None for a cell that is
    no list of sizes."""
    if _SHAPE.fullmatch(shape) is None:
        return None
    return squeezed(tuple(int(n) for n in shape[1:-1].split(", ") if n))


def _name(element: Element) -> str:
    return element if isinstance(element, str) else element.name


NULL_DTYPE = str(type(None))
"""The dtype cell of a leaf whose dtype is null (dump/rows.py reads it as a value, as the reference does):
it claims nothing of a tensor file, which is compared as the reference compares it."""


@functools.lru_cache(maxsize=4096)
def _agrees(dtype: str, shape: str, element: Element, held_shape: tuple[int, ...]) -> bool:
    """``disagreement``'s rule (cached: a dump's tensors share few dtypes and shapes)."""
    if dtype == NULL_DTYPE:
        return True
    held, claimed, sizes = _name(element), normalised_dtype(dtype), _sizes(shape)
    wrong_dtype = held != claimed and claimed in TENSOR_DTYPES and (dtype, held) not in HELD_AS
    return not wrong_dtype and (sizes is None or sizes == squeezed(held_shape))


def disagreement(handle: TensorHandle, claim: Claim) -> str | None:
    """Why ``handle``'s file is not the tensor ``claim`` describes (its dtype, its shape but for sizes of 1,
    which the compare squeezes away), or None.

    A dtype or shape cell this cannot read (an unknown spelling, a shape that is no list of sizes) is not
    checked: only a plain disagreement makes the row an error."""
    dtype, shape = claim
    if _agrees(dtype, shape, handle.element, handle.shape):
        return None
    held = _name(handle.element)
    return f"{handle.path}: the file holds {held} {list(handle.shape)}, dump.json says {dtype} {shape}"


def pair_disagreement(
    npu: TensorHandle, bench: TensorHandle, claims: tuple[Claim, Claim] | None
) -> str | None:
    """Why the NPU's file, the bench's or both do not hold what dump.json says, or None."""
    if claims is None:
        return None
    npu_problem, bench_problem = disagreement(npu, claims[0]), disagreement(bench, claims[1])
    if npu_problem is None or bench_problem is None:
        return npu_problem or bench_problem
    return f"{npu_problem}; {bench_problem}"
