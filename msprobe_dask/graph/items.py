"""Dump entries -> node items (graph_visualize.md §2.4); their exported form is graph/item_text.py's.

An *item* is one flattened leaf of a dump entry (a tensor, a scalar argument, a process group ...)
as an insertion-ordered dict; the key order is the JSON order written to the vis.db.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any, NamedTuple

from msprobe_dask.dump.json_limits import MAX_DEPTH
from msprobe_dask.dump.markers import (
    GROUP_RANKS,
    INPUT_PART,
    LEAF_KEYS,
    NO_DATA_NAME,
    OUTPUT_PART,
    P2P_CLASS,
    P2P_KEYS,
    P2P_TENSOR,
    PARAMETERS_GRAD,
    PEER_ARGUMENTS,
    PROCESS_GROUP,
    SCALAR_SHAPE,
    SHAPED_KINDS,
    SLICE,
    STATS,
    TORCH_SIZE,
)
from msprobe_dask.errors import DumpError
from msprobe_dask.graph import speedups

SUB_KEYS = (
    ("input_args", ".input", "input"),
    ("input_kwargs", ".input", "input"),
    ("input", ".input", "input"),
    ("output", ".output", "output"),
    ("parameters", ".parameters", "parameters"),
)
# the keys every item has: a leaf without one gets it, after its own keys, in this order (the dtype and
# shape of a leaf that is not a tensor follow, then its md5); entry_text.c follows it (TEXT_RULES)
ITEM_KEYS = (LEAF_KEYS.data_name, LEAF_KEYS.full_op_name, LEAF_KEYS.state, LEAF_KEYS.requires_grad, *STATS)
P2P_ITEM_KEYS = (LEAF_KEYS.class_type, *P2P_KEYS)  # what the item of a P2P op argument takes of it


def _default_item(name: str, state: str) -> dict[str, Any]:
    k = LEAF_KEYS
    return {
        k.full_op_name: name,
        k.type: None,
        **dict.fromkeys(STATS),
        k.dtype: None,
        k.shape: None,
        k.md5: None,
        k.value: None,
        k.data_name: NO_DATA_NAME,
        k.state: state,
        k.requires_grad: None,
    }


def _np_shape(value: Any) -> str:
    """``str(numpy.shape(numpy.array(value)))`` for the nested lists a slice is dumped as."""
    import numpy

    try:
        return str(numpy.shape(numpy.array(value)))
    except ValueError:
        return str(numpy.shape(numpy.array(value, dtype=object)))


# the text of a bool value in an item: Python's str of it, as the reference writes it (entry_items.c takes it
# by ITEM_RULES, the C texts of items by item_text.TEXT_RULES)
BOOL_TEXT = {b: str(b) for b in (False, True)}


def _leaf(leaf: dict[str, Any], name: str, state: str) -> dict[str, Any]:
    """The item of a leaf of a dump entry."""
    item = leaf.copy()
    for k, v in leaf.items():
        if v.__class__ is bool:
            item[k] = BOOL_TEXT[v]
    for k in ITEM_KEYS:  # in their order; a requires_grad or statistic the leaf lacks is None
        if k not in item:
            item[k] = None
    data_name = leaf.get(LEAF_KEYS.data_name) or NO_DATA_NAME
    if not isinstance(data_name, str):
        raise DumpError(None, f"{name}: data_name {data_name!r} is not a string")
    item[LEAF_KEYS.data_name] = data_name
    item[LEAF_KEYS.full_op_name] = data_name.rsplit(".", 1)[0] if data_name != NO_DATA_NAME else name
    item[LEAF_KEYS.state] = state
    if not item.get(LEAF_KEYS.dtype):
        _fill_non_tensor(item, leaf, name)
    if not item.get(LEAF_KEYS.md5):
        item[LEAF_KEYS.md5] = crc32_text(leaf[LEAF_KEYS.value]) if LEAF_KEYS.value in leaf else _CRC32_EMPTY
    return item


def crc32_text(value: Any) -> str:
    text = str(value)
    crc = _CRC32_SEEN.get(text)
    if crc is None:
        crc = format(zlib.crc32(text.encode()), "08x")
        if len(_CRC32_SEEN) < 4096:  # scalar arguments repeat (1, -1, True ...): remember the first few
            _CRC32_SEEN[text] = crc
    return crc


_CRC32_SEEN: dict[str, str] = {}


_CRC32_EMPTY = crc32_text("")


def _fill_non_tensor(item: dict[str, Any], leaf: dict[str, Any], name: str) -> None:
    """dtype, shape and the statistics of a leaf that is not a tensor (a scalar, a size, a group ...)."""
    kind = leaf.get(LEAF_KEYS.type)
    value = leaf.get(LEAF_KEYS.value)
    if kind in SHAPED_KINDS:
        item[LEAF_KEYS.dtype] = kind
        if kind == TORCH_SIZE:
            item[LEAF_KEYS.shape] = str(value)
        elif kind == SLICE:
            item[LEAF_KEYS.shape] = _np_shape(value)
        else:  # ellipsis
            item[LEAF_KEYS.shape] = SCALAR_SHAPE
            for s in STATS:
                item[s] = value
    elif name.rpartition(".")[2] in PEER_ARGUMENTS:
        item[LEAF_KEYS.dtype] = kind
        item[LEAF_KEYS.shape] = SCALAR_SHAPE
        for s in STATS:
            item[s] = str(value)
        item[LEAF_KEYS.md5] = str(value)
    elif kind == PROCESS_GROUP:
        ranks = str(leaf.get(GROUP_RANKS))
        item[LEAF_KEYS.dtype] = kind
        item[LEAF_KEYS.shape] = SCALAR_SHAPE
        for s in STATS:
            item[s] = ranks
        item[LEAF_KEYS.md5] = ranks
    else:
        item[LEAF_KEYS.dtype] = _type_text(value)
        item[LEAF_KEYS.shape] = SCALAR_SHAPE
        for s in STATS:
            item[s] = value


_TYPE_TEXT: dict[type, str] = {}


def _type_text(value: Any) -> str:
    """``str(type(value))``, e.g. ``"<class 'int'>"``."""
    t = type(value)
    text = _TYPE_TEXT.get(t)
    if text is None:
        text = _TYPE_TEXT[t] = str(t)
    return text


def _parse(value: Any, name: str, state: str, out: list[dict[str, Any]], depth: int) -> None:
    if depth > MAX_DEPTH:
        raise DumpError(None, f"{name}: dump item nesting is deeper than {MAX_DEPTH} levels")
    if value is None:
        out.append(_default_item(name, state))
    elif isinstance(value, list):
        _parse_list(value, name, state, out, depth)
    elif isinstance(value, dict):
        if not value:
            return
        if value.get(LEAF_KEYS.class_type) == P2P_CLASS:
            tensor = value.get(P2P_TENSOR)
            item = _leaf(tensor, name, state) if isinstance(tensor, dict) else _default_item(name, state)
            for k in P2P_ITEM_KEYS:
                item[k] = value.get(k)
            out.append(item)
        elif isinstance(value.get(LEAF_KEYS.type), str):
            out.append(_leaf(value, name, state))
        else:
            for k, v in value.items():
                _parse(v, f"{name}.{k}", state, out, depth + 1)


def _parse_list(value: list[Any], name: str, state: str, out: list[dict[str, Any]], depth: int) -> None:
    """_parse of a list (at ``depth``): element i is named ``name.i``, except under parameters_grad."""
    keep = PARAMETERS_GRAD in name and PARAMETERS_GRAD in name.split(".")
    prefix = name + "."
    for i, v in enumerate(value):
        sub = name if keep else prefix + str(i)
        # the common element, a leaf, without the recursive call (same depth rule)
        if (
            v.__class__ is dict
            and depth < MAX_DEPTH
            and v.get(LEAF_KEYS.type).__class__ is str
            and v.get(LEAF_KEYS.class_type) != P2P_CLASS
        ):
            out.append(_leaf(v, sub, state))
        else:
            _parse(v, sub, state, out, depth + 1)


def parse_entry(node_id: str, entry: Any) -> list[dict[str, Any]]:
    """Flatten one dump.json entry into items, in the reference's order."""
    out: list[dict[str, Any]] = []
    if not isinstance(entry, dict):
        return out
    if PARAMETERS_GRAD in node_id:
        parts = node_id.split(".")
        if parts[-1] == PARAMETERS_GRAD or (len(parts) > 1 and parts[-2] == PARAMETERS_GRAD):
            _parse(entry, node_id, PARAMETERS_GRAD, out, 0)
            return out
    for key, suffix, state in SUB_KEYS:
        value = entry.get(key, _ABSENT)
        if value is _ABSENT:
            continue
        if value.__class__ is list:
            _parse_list(value, node_id + suffix, state, out, 0)
        else:
            _parse(value, node_id + suffix, state, out, 0)
    return out


_ABSENT = object()


def entry_items(node_id: str, entry: Any) -> tuple[dict[str, dict], dict[str, dict]]:
    """``split_items(parse_entry(node_id, entry))``: a node's (input_data, output_data)."""
    return split_items(parse_entry(node_id, entry))


def split_items(items: list[dict[str, Any]]) -> tuple[dict[str, dict], dict[str, dict]]:
    """(input_data, output_data): outputs by full_op_name, everything else by data_name/full name."""
    inputs: dict[str, dict] = {}
    outputs: dict[str, dict] = {}
    for item in items:
        full = item[LEAF_KEYS.full_op_name]
        if OUTPUT_PART in full and INPUT_PART not in full:
            outputs[full] = item
        else:
            dn = item.get(LEAF_KEYS.data_name, NO_DATA_NAME)
            inputs[dn.rsplit(".", 1)[0] if dn != NO_DATA_NAME else full] = item
    return inputs, outputs


class ItemRules(NamedTuple):
    """What the C items of an entry (csrc/entry_items.c) take of this module's rules, by name, handed to
    it once when this module is imported (the kinds and names of the leaves it hands back to this
    module are item_text.TEXT_RULES')."""

    sub_keys: tuple[tuple[str, str, str], ...]  # SUB_KEYS
    item_keys: tuple[str, ...]  # ITEM_KEYS
    stats: tuple[str, ...]  # STATS
    no_data_name: str
    bool_text: tuple[str, str]  # the texts of False and True
    default_item: Callable[[str, str], dict[str, Any]]  # the item of a null
    crc32_text: Callable[[Any], str]  # the md5 of a leaf with a value ...
    crc32_empty: str  # ... and of one without
    scalar_shape: str  # the shape of an argument that is not a tensor
    output_part: str  # OUTPUT_PART, INPUT_PART
    input_part: str
    grad_state: str  # the state of the items of a parameters_grad entry (parse_entry)


ITEM_RULES = ItemRules(
    SUB_KEYS,
    ITEM_KEYS,
    STATS,
    NO_DATA_NAME,
    (BOOL_TEXT[False], BOOL_TEXT[True]),
    _default_item,
    crc32_text,
    _CRC32_EMPTY,
    SCALAR_SHAPE,
    OUTPUT_PART,
    INPUT_PART,
    PARAMETERS_GRAD,
)
if speedups.native is not None:
    speedups.native.configure_items(ITEM_RULES)
