"""Which parameters differ across the ranks of a parallel group, and merging their statistics
(graph_visualize.md §6.4 steps 3-5).

A *param* is one item of a node (``input_data`` or ``output_data``), keyed like
``<node id>.input.0``. The same param on another rank is found by the key relative to its node id,
so twins whose ids were renamed (``Tensor.add_rank2.0.forward`` vs ``Tensor.add_rank3.0.forward``
after a PP merge) still pair up.

How TP uses this module, for a main node and its twins on the other ranks of the tp group::

    keys = differing_keys(main, twins)           # step 3 (force=True in the Column..Row second pass)
    if keys:
        main.merge_info = [tp_header(ranks)] + merge_stats(main, twins, keys)   # steps 4-5

``merge_stats`` writes the merged values into the main node's items and returns the
``parallel_merge_info`` lines. PP only needs ``differing_keys`` (and ``is_output_key``) to tell
"inputs differ" from "outputs differ".
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any

from msprobe_dask.dump.markers import LEAF_KEYS, MAX, MEAN, MIN, STATS
from msprobe_dask.graph.model import Node

LISTED_DTYPES = frozenset(
    (
        "torch.int8",
        "torch.int32",
        "torch.int64",
        "torch.bfloat16",
        "torch.float16",
        "torch.float32",
        "torch.float64",
        "Float16",
        "Float32",
        "BFloat16",
    )
)
REL_TOL = 1e-6


def _cast_type(dtype: Any) -> Any:
    """The numpy scalar type a merged value is rounded to (§6.4 step 4), or None for no rounding."""
    if dtype in ("torch.float32", "Float32"):
        import numpy

        return numpy.float32
    if dtype in ("torch.float16", "Float16"):
        import numpy

        return numpy.float16
    if dtype in ("torch.bfloat16", "BFloat16"):
        from msprobe_dask.dump.tensor_dtypes import named_dtype

        return named_dtype("bfloat16").type
    return None


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def relative_key(node: Node, key: str) -> str:
    """``input.0`` for ``<node id>.input.0`` (keys not under the node id stay whole)."""
    prefix = node.id + "."
    return key[len(prefix) :] if key.startswith(prefix) else key


def twin_item(main: Node, other: Node, key: str) -> dict[str, Any] | None:
    """``other``'s item for ``main``'s param ``key``, looked up by the key relative to the node id."""
    rel = relative_key(main, key)
    other_key = f"{other.id}.{rel}" if rel != key else key
    data = other.output_data if key in main.output_data else other.input_data
    return data.get(other_key)


def _listed_params(main: Node) -> Iterator[tuple[str, dict[str, Any]]]:
    """main's params of a listed dtype: input params then output params."""
    for data in (main.input_data, main.output_data):
        for key, item in data.items():
            if item.get(LEAF_KEYS.dtype) in LISTED_DTYPES:
                yield key, item


def _gathered(main: Node, item: dict[str, Any], others: Sequence[Node], key: str) -> list[dict[str, Any]]:
    """``item`` and its twins on the other ranks, in rank order, up to the first rank whose twin is
    missing or of a non-listed dtype."""
    out = [item]
    for other in others:
        twin = twin_item(main, other, key)
        if twin is None or twin.get(LEAF_KEYS.dtype) not in LISTED_DTYPES:
            break
        out.append(twin)
    return out


def _same(stat: str, a: Any, b: Any) -> bool:
    if not (_is_number(a) and _is_number(b)):
        return True
    if stat in (MAX, MIN):
        return a == b
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return math.isinf(a) and math.isinf(b)  # inf equals -inf here (checked on the reference)
    diff = abs(a - b)
    return (diff / abs(a) if a != 0 else diff) < REL_TOL


def _differs(item: dict[str, Any], twin: dict[str, Any]) -> bool:
    return any(not _same(s, item.get(s), twin.get(s)) for s in STATS)


def differing_keys(main: Node, others: Sequence[Node], force: bool = False) -> list[str]:
    """The param keys of ``main`` (inputs then outputs) whose statistics differ on any other rank.

    Only params of the listed dtypes count, on every rank. ``force`` counts every such param as
    different (the TP second pass)."""
    out = []
    for key, item in _listed_params(main):
        if force or any(_differs(item, t) for t in _gathered(main, item, others, key)[1:]):
            out.append(key)
    return out


def is_output_key(main: Node, key: str) -> bool:
    return key in main.output_data


def _merged(stat: str, values: list[Any]) -> Any:
    if stat == MAX:
        return max(values)
    if stat == MIN:
        return min(values)
    if stat == MEAN:
        return sum(values) / len(values)
    return sum(v**2 for v in values) ** 0.5


def _formula(stat: str, values: list[Any]) -> str:
    if stat == MAX:
        return f"max({', '.join(str(v) for v in values)})"
    if stat == MIN:
        return f"min({', '.join(str(v) for v in values)})"
    if stat == MEAN:
        return f"({' + '.join(str(v) for v in values)}) / {len(values)}"
    return f"({' + '.join(f'{v} ** 2' for v in values)}) ** 0.5"


def _round(value: Any, dtype: Any) -> Any:
    cast = _cast_type(dtype)
    if cast is None or not isinstance(value, float) or math.isnan(value) or math.isinf(value):
        return value
    return float(cast(value))


def merge_stats(main: Node, others: Sequence[Node], keys: Sequence[str]) -> list[str]:
    """Merge the statistics of ``keys`` across ``main`` and ``others`` into main's items (step 4);
    return one ``parallel_merge_info`` line per merged statistic (step 5)."""
    lines = []
    for key in keys:
        item = main.output_data.get(key) or main.input_data.get(key)
        if item is None:
            continue
        items = _gathered(main, item, others, key)
        if len(items) < 2:
            continue
        rel = relative_key(main, key)
        for stat in STATS:
            values = [it.get(stat) for it in items]
            if not all(_is_number(v) for v in values):
                continue
            merged = _round(_merged(stat, values), item.get(LEAF_KEYS.dtype))
            item[stat] = merged
            lines.append(f"The {stat} value merging method for {rel} is: {_formula(stat, values)} = {merged}")
    return lines


def tp_header(ranks: Sequence[int]) -> str:
    return (
        "This data is the merged data after tensor parallelism(TP), and the data is merged from "
        f"rank {list(ranks)}."
    )
