"""Flatten dump entries into compare rows, one per leaf (compare.md §1.2).

A row keeps the raw values the reference's table holds before output: statistics as numbers, bools
or the string ``None``; dtype and shape already rendered as the reference prints them.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from sys import intern
from typing import Any, NamedTuple

from msprobe_dask.columns import NA
from msprobe_dask.dump.entry_shape import ENTRY_SHAPES
from msprobe_dask.dump.json_limits import MAX_DEPTH
from msprobe_dask.dump.markers import (
    ELLIPSIS,
    GROUP_RANKS,
    LEAF_KEYS,
    MAX,
    MEAN,
    MIN,
    NAME_SEP,
    NO_DATA_NAME,
    NORM,
    P2P_CLASS,
    P2P_KEYS,
    P2P_TENSOR,
    PARAMETERS_GRAD,
    PEER_ARGUMENTS,
    PROCESS_GROUP,
    SHAPED_KINDS,
    SLICE,
    TORCH_SIZE,
)

NO_MD5 = "00000000"  # the md5 cell of a tensor leaf without md5 and value

Stat = Any  # float | int | bool | str


class LeafRow(NamedTuple):
    """One compare row of one side: a tensor, a scalar argument, or a None argument (a tuple: made,
    pickled and sent between tasks 2-3x faster than a slotted dataclass)."""

    name: str  # the 'NPU Name' / 'Bench Name' text
    entry: str  # the dump.json key the row came from (api_origin_name)
    state: str  # input | output | parameters | parameters_grad | debug
    dtype: str
    shape: str
    requires_grad: str  # 'True' | 'False' | 'N/A'
    stats: tuple[Stat, Stat, Stat, Stat]  # max, min, mean, l2norm
    md5: str
    data_name: str  # file name in dump_tensor_data, '-1' when the leaf has none
    p2p_op: str = NA
    p2p_peer: str = NA


class RowKey(NamedTuple):
    """What the matching rules read of a row: a LeafRow's first four fields (a few bytes, where a
    whole row is a few hundred)."""

    name: str
    entry: str
    state: str
    dtype: str


NAME, ENTRY, DTYPE = (RowKey._fields.index(field) for field in ("name", "entry", "dtype"))
"""Where a row's name, entry and dtype are in a RowKey, in a LeafRow (whose first fields are a RowKey's)
and in a plain tuple of either's fields: read by index where rows are many (faster than a NamedTuple's
attribute, and the rows need not be made into NamedTuples)."""


def row_key(row: LeafRow) -> RowKey:
    return RowKey(row.name, row.entry, row.state, row.dtype)


def _crc(value: Any) -> str:
    return format(zlib.crc32(str(value).encode()), "08x")


def _stat(value: Any) -> Stat:
    return "None" if value is None else value


def _tensor_stat(value: Any) -> Stat:
    """Tensor summaries keep numbers; bools (a bool tensor's Max) become the strings True/False, and a
    list or object (no dumper writes one) its text, the cell it is written as: nested hundreds of
    levels, it would not pickle (a table part's result)."""
    return str(value) if isinstance(value, (bool, list, dict)) else _stat(value)


def _numpy_shape(value: Any) -> str:
    if isinstance(value, list):
        return f"({len(value)},)"
    return "()"


def _leaf_row(name: str, entry: str, state: str, leaf: dict[str, Any] | None) -> LeafRow:
    if leaf is None:
        return LeafRow(name, entry, state, NA, NA, NA, ("None",) * 4, NA, NO_DATA_NAME)  # type: ignore[arg-type]
    kind = leaf[LEAF_KEYS.type]
    requires_grad = leaf.get(LEAF_KEYS.requires_grad)
    grad = NA if requires_grad is None else str(requires_grad)
    data_name = leaf.get(LEAF_KEYS.data_name) or NO_DATA_NAME
    if leaf.get(LEAF_KEYS.dtype) is not None:  # a null dtype: the reference reads the leaf as a value (None)
        get = leaf.get
        stats = high, low, mean, norm = get(MAX), get(MIN), get(MEAN), get(NORM)
        if not high.__class__ is low.__class__ is mean.__class__ is norm.__class__ is float:
            # (four floats, the usual case, stay as they are)
            stats = tuple(_tensor_stat(v) for v in stats)
        md5 = leaf.get(LEAF_KEYS.md5, NO_MD5 if LEAF_KEYS.value not in leaf else _crc(leaf[LEAF_KEYS.value]))
        shape = leaf.get(LEAF_KEYS.shape)
        return LeafRow(
            name,
            entry,
            state,
            intern(str(leaf.get(LEAF_KEYS.dtype))),  # (one text each, shared: rows pack and load faster)
            intern(str(shape if shape is not None else [])),
            grad,
            stats,
            md5,
            data_name,
        )  # type: ignore[arg-type]
    value = leaf.get(LEAF_KEYS.value)
    if name.rsplit(NAME_SEP, 1)[-1] in PEER_ARGUMENTS:
        text = str(value)
        return LeafRow(name, entry, state, kind, "[]", grad, (text,) * 4, text, data_name)  # type: ignore[arg-type]
    if kind == PROCESS_GROUP:
        text = str(leaf.get(GROUP_RANKS))
        return LeafRow(name, entry, state, kind, "[]", grad, (text,) * 4, text, data_name)  # type: ignore[arg-type]
    if kind == TORCH_SIZE:
        return LeafRow(name, entry, state, kind, str(value), grad, ("None",) * 4, _crc(value), data_name)  # type: ignore[arg-type]
    if kind == SLICE:
        return LeafRow(
            name, entry, state, kind, _numpy_shape(value), grad, ("None",) * 4, _crc(value), data_name
        )  # type: ignore[arg-type]
    if kind == ELLIPSIS:
        return LeafRow(name, entry, state, kind, "[]", grad, ("...",) * 4, _crc("..."), data_name)  # type: ignore[arg-type]
    stat, md5 = _stat(value), leaf.get(LEAF_KEYS.md5, _crc(value))
    return LeafRow(name, entry, state, str(type(value)), "[]", grad, (stat,) * 4, md5, data_name)  # type: ignore[arg-type]


def _walk(
    node: Any, path: str, entry: str, state: str, index_lists: bool, out: list[LeafRow], depth: int = 0
) -> None:
    """Append to ``out`` the rows of ``node``'s leaves, in the dump's order."""
    if depth > MAX_DEPTH:
        raise RecursionError(f"{entry}: nesting deeper than {MAX_DEPTH}")
    if node is None:
        out.append(_leaf_row(path, entry, state, None))
    elif isinstance(node, dict):
        if node.get(LEAF_KEYS.class_type) == P2P_CLASS and isinstance(node.get(P2P_TENSOR), dict):
            row = _leaf_row(path, entry, state, node[P2P_TENSOR])
            op, peer = node.get(P2P_KEYS.op, NA), node.get(P2P_KEYS.peer, NA)
            out.append(row._replace(p2p_op=str(op), p2p_peer=str(peer)))
        elif node.get(LEAF_KEYS.type).__class__ is str:
            data_name = node.get(LEAF_KEYS.data_name)
            name = data_name.rsplit(NAME_SEP, 1)[0] if isinstance(data_name, str) and data_name else path
            out.append(_leaf_row(name, entry, state, node))
        else:
            for key, value in node.items():
                _walk(value, f"{path}{NAME_SEP}{key}", entry, state, index_lists, out, depth + 1)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            member = f"{path}{NAME_SEP}{i}" if index_lists else path
            _walk(value, member, entry, state, index_lists, out, depth + 1)


_ENTRY_PARTS = (
    ("input_args", "input"),
    ("input_kwargs", "input"),
    ("input", "input"),
    ("parameters", "parameters"),
    ("output", "output"),
)
"""An entry's keys whose values hold its rows, in the rows' order, and their rows' state (also the
name of the path below the entry's: ``entry.input.0``, joined by NAME_SEP)."""


def entry_rows(entry: str, body: Any, debug: bool = False) -> list[LeafRow]:
    """All rows of one dump entry, inputs first, then parameters, outputs and parameter gradients."""
    rows: list[LeafRow] = []
    if debug:
        _walk(body, entry, entry, "debug", True, rows)
        return rows
    if not isinstance(body, dict):
        return rows
    if PARAMETERS_GRAD in entry and PARAMETERS_GRAD in entry.split(NAME_SEP)[-2:]:
        _walk(body, entry, entry, PARAMETERS_GRAD, False, rows)
        return rows
    for key, state in _ENTRY_PARTS:
        if key in body:
            _walk(body[key], f"{entry}{NAME_SEP}{state}", entry, state, True, rows)
    return rows


class LeafRules(NamedTuple):
    """What graph/csrc/leaf_rows.c takes of this module's rules (read by field name): it makes the rows
    of the entries it can take straight from their JSON text (``pipeline/sides.py: rows_of_text``)."""

    row: type  # LeafRow
    na: str
    no_data_name: str
    no_md5: str
    peer_arguments: tuple[str, ...]  # a scalar leaf named ``....src`` (etc.): left to _leaf_row
    own_kinds: tuple[str, ...]  # the leaf types _leaf_row renders by rules of their own: left to it
    process_group: tuple[str, str]  # the type of a process group's leaf, the member that is its text
    entry_parts: tuple[tuple[str, str], ...]
    entry_shapes: tuple[tuple[str, type], ...]  # entry_shape.check_entry's: an entry of another, left
    parameters_grad: str  # the state of the rows of an entry named by it (entry_rows)
    crc: Callable[[Any], str]  # a scalar leaf's md5 cell when it has none
    text: Callable[[Any], str]  # how _leaf_row writes a bool, None and an empty shape: str
    separator: str  # NAME_SEP (one ASCII character): a row's name's parts, a data_name's last part


LEAF_RULES = LeafRules(
    LeafRow,
    NA,
    NO_DATA_NAME,
    NO_MD5,
    PEER_ARGUMENTS,
    SHAPED_KINDS,
    (PROCESS_GROUP, GROUP_RANKS),
    _ENTRY_PARTS,
    ENTRY_SHAPES,
    PARAMETERS_GRAD,
    _crc,
    str,
    NAME_SEP,
)
