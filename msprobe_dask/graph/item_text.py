"""The exported form of node items (graph_visualize.md §7.6): each value's text by the export rules
(``format_item``), and the JSON text of a node's items made straight from them (``items_json``), as
``tb_nodes``' input_data and output_data cells hold it."""

from __future__ import annotations

import re
from collections.abc import Callable
from json.encoder import encode_basestring_ascii as _enc
from operator import itemgetter
from typing import Any, NamedTuple

import orjson

from msprobe_dask.dump.markers import (
    GROUP_ID,
    GROUP_RANKS,
    INPUT_PART,
    LEAF_KEYS,
    MAX,
    NO_DATA_NAME,
    OUTPUT_PART,
    P2P_CLASS,
    P2P_KEYS,
    PARAMETERS_GRAD,
    PEER_ARGUMENTS,
    PROCESS_GROUP,
    SCALAR_SHAPE,
    SHAPED_KINDS,
)
from msprobe_dask.graph import speedups
from msprobe_dask.graph.items import BOOL_TEXT, ITEM_KEYS, SUB_KEYS
from msprobe_dask.graph.jsontext import dumps
from msprobe_dask.metrics.float_repr import float_repr
from msprobe_dask.metrics.stats import PERCENT

try:
    from operator import call  # Python 3.11
except ImportError:  # pragma: no cover

    def call(f: Callable[[Any], Any], x: Any) -> Any:  # type: ignore[misc]
        return f(x)


# a string the rule rounds: all decimal digits, with more than 6 after the point
# §7.6: a text of 1 to 20 digits, a point and 7 to 20 decimals (and maybe a %) is rounded to 6 decimals
LONG_DECIMAL = (20, 7, 20)  # digits before the point at most; decimals at least, at most
DECIMALS = 6


def long_decimal_text(limits: tuple[int, int, int]) -> re.Pattern[str]:
    """The texts the rule rounds, under ``limits`` (as LONG_DECIMAL): digits, a point, decimals, maybe
    the percent sign."""
    return re.compile(r"^\d{{1,{}}}\.\d{{{},{}}}(?:{})?$".format(*limits, re.escape(PERCENT)))


_LONG_DECIMAL = long_decimal_text(LONG_DECIMAL)
_SHORTEST_LONG_DECIMAL = 2 + LONG_DECIMAL[1]  # d.ddddddd
# None's exported text (JSON's null), which also stands for None's str (NONE_TEXT) within a string
NULL_TEXT = dumps(None)
NONE_TEXT = str(None)
# format_item: an item whose NULL_KEY's text is NULL_TEXT is exported as NULL_ITEM alone
NULL_KEY = MAX
NULL_ITEM = {LEAF_KEYS.value: NULL_TEXT}
# the keys an exported process group keeps
_PG_KEEP = (LEAF_KEYS.type, GROUP_RANKS, GROUP_ID, LEAF_KEYS.data_name)
_BATCH_P2P_DROP = tuple(P2P_KEYS)
_SKIP_KEEP_MD5 = frozenset((LEAF_KEYS.state, LEAF_KEYS.full_op_name))
_SKIP = _SKIP_KEEP_MD5 | {LEAF_KEYS.md5}
# (keep_md5, batch_p2p) -> the keys an exported item leaves out
_SKIPPED = {
    (False, False): _SKIP,
    (True, False): _SKIP_KEEP_MD5,
    (False, True): _SKIP | frozenset(_BATCH_P2P_DROP),
    (True, True): _SKIP_KEEP_MD5 | frozenset(_BATCH_P2P_DROP),
}


def format_str(s: str) -> str:
    if "'" in s:
        s = s.replace("'", "")
    if NONE_TEXT in s:
        s = s.replace(NONE_TEXT, NULL_TEXT)
    if len(s) < _SHORTEST_LONG_DECIMAL or not s[0].isdigit() or not _LONG_DECIMAL.match(s):
        return s
    if s.endswith(PERCENT):
        return f"{float(s[: -len(PERCENT)]):.{DECIMALS}f}{PERCENT}"
    return f"{float(s):.{DECIMALS}f}"


def _fmt_text(s: str) -> str:
    """format_str, with the check that most strings need no change inline."""
    if "'" in s or NONE_TEXT in s or (len(s) >= _SHORTEST_LONG_DECIMAL and s[0].isdigit()):
        return format_str(s)
    return s


def _fmt_other(v: Any) -> str:
    return format_str(v) if isinstance(v, str) else str(v)


class ExportedText(str):
    """A string already in its exported form (a fixed point of the formatting) and safe to stand in
    JSON as it is: the relative errors the compare writes into items (stat_cells.rel_text)."""

    __slots__ = ()


# the exported text of a value, by its class (floats by repr, None as null, strings by format_str,
# anything else by str); a class missing here takes _fmt_other
_FORMAT: dict[type, Callable[[Any], str]] = {
    float: float.__repr__,
    str: _fmt_text,
    ExportedText: str.__str__,
    type(None): {None: NULL_TEXT}.__getitem__,
    int: int.__repr__,
    bool: BOOL_TEXT.__getitem__,
    list: list.__repr__,
}


def format_item(item: dict[str, Any], keep_md5: bool, batch_p2p: bool) -> dict[str, str]:
    """A new dict holding the exported form of ``item``."""
    if item.get(LEAF_KEYS.type) == PROCESS_GROUP:
        item = {k: v for k, v in item.items() if k in _PG_KEEP}
    skip = skipped_keys(keep_md5, batch_p2p)
    fmt = _FORMAT.get
    out = {k: fmt(v.__class__, _fmt_other)(v) for k, v in item.items() if k not in skip}
    if out.get(NULL_KEY) == NULL_TEXT:
        return dict(NULL_ITEM)
    return out


_ABSENT = object()  # (item.get's answer for a key the item does not hold)


def exported_cells(
    item: dict[str, Any], keys: tuple[str, ...], keep_md5: bool, batch_p2p: bool
) -> dict[str, str]:
    """``format_item``'s cells of ``keys`` (those it gives), without making the others."""
    kept = _PG_KEEP if item.get(LEAF_KEYS.type) == PROCESS_GROUP else item
    skip = _SKIPPED[bool(keep_md5), bool(batch_p2p)]
    fmt = _FORMAT.get
    top = item.get(NULL_KEY, _ABSENT)
    if top.__class__ is not float and NULL_KEY in kept and NULL_KEY not in skip:
        # (a float's text, repr's, is never NULL_TEXT: not made)
        if fmt(top.__class__, _fmt_other)(top) == NULL_TEXT:
            return {k: v for k, v in NULL_ITEM.items() if k in keys}
    out = {}
    for k in keys:
        v = item.get(k, _ABSENT)
        if v is not _ABSENT and k not in skip and (kept is item or k in kept):
            out[k] = fmt(v.__class__, _fmt_other)(v)
    return out


def format_items(data: dict[str, dict], keep_md5: bool, batch_p2p: bool) -> dict[str, dict]:
    return {k: format_item(v, keep_md5, batch_p2p) for k, v in data.items()}


# ---------------------------------------------------------------- export straight to JSON text
#
# items_json gives the text json.dumps gives for the formatted items, without building them: each
# value's exported text is made ready to stand between the quotes of a JSON string (escaped where
# needed), and the texts are laid between the JSON pieces of the item's keys.


def _json_safe(text: str) -> bool:
    """``text`` goes into JSON as it is: printable ASCII without a quote or a backslash."""
    return text.isascii() and text.isprintable() and '"' not in text and "\\" not in text


def _escaped(text: str) -> str:
    """``text`` as it stands between the quotes of a JSON string."""
    return text if _json_safe(text) else _enc(text)[1:-1]


class _Texts(dict):  # type: ignore[type-arg]
    """value -> its JSON-ready text, remembered for values of one class (strings and ints repeat: type
    names, dtypes, "True", "pass", small ints ...). The memory is dropped when it fills up."""

    def __init__(self, make: Callable[[Any], str], size: int) -> None:
        super().__init__()
        self.make = make
        self.size = size

    def __missing__(self, value: Any) -> str:
        text = self.make(value)
        if len(self) >= self.size:
            self.clear()
        self[value] = text
        return text


def _str_text(s: str) -> str:
    return _escaped(_fmt_text(s))


def _list_text(v: list[Any]) -> str:
    text = list.__repr__(v)  # then _escaped, inline (a shape on every tensor)
    if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
        return text
    return _enc(text)[1:-1]


def _other_text(v: Any) -> str:
    return _escaped(_fmt_other(v))


# the JSON-ready exported text of a value, by its class; a class missing here takes _other_text
_JSON_TEXT: dict[type, Callable[[Any], str]] = {
    float: float_repr,  # digits, '.', 'e', '+', '-', 'inf', 'nan': always JSON-ready
    str: _Texts(_str_text, 1 << 12).__getitem__,
    ExportedText: str.__str__,
    list: _list_text,
    int: _Texts(int.__repr__, 1 << 12).__getitem__,
    type(None): {None: NULL_TEXT}.__getitem__,
    bool: BOOL_TEXT.__getitem__,
}


class _Form:
    """How items with one sequence of keys are exported: the values to take and the JSON pieces the
    values' texts go between (``parts``: pieces at even positions, texts to fill the odd ones).
    ``kinds``: the _Kind of each sequence of the values' classes seen."""

    __slots__ = ("take", "parts", "null_key_at", "kinds")

    def __init__(self, keys: tuple[str, ...], skip: frozenset[str]) -> None:
        kept = tuple(k for k in keys if k not in skip)
        self.take: Callable[[dict[str, Any]], tuple[Any, ...]] = (
            itemgetter(*kept) if len(kept) > 1 else (lambda d: tuple(d[k] for k in kept))
        )
        opening = ["{"] + ['", '] * (len(kept) - 1)  # the first key opens the object, the others a value
        pieces = [f'{o}{_enc(k)}: "' for o, k in zip(opening, kept)]
        self.parts: list[str | None] = [None] * (2 * len(kept) + 1)
        self.parts[0::2] = [*pieces, '"}' if kept else "{}"]
        self.null_key_at = kept.index(NULL_KEY) if NULL_KEY in kept else -1
        self.kinds: dict[tuple[type, ...], _Kind] = {}

    def new_kind(self, classes: tuple[type, ...]) -> _Kind:
        kind = _Kind(classes, self.null_key_at)
        if len(self.kinds) < _MAX_FORMS:
            self.kinds[classes] = kind
        return kind


class _Kind:
    """How the items of one form whose values have one sequence of classes are exported: the text
    function of each value, and ``null_at``, the position of a NULL_KEY value whose text may be NULL_TEXT
    (which makes the whole item NULL_ITEM), or -1.

    ``memo`` remembers the texts of whole items whose values are all strings, ints, bools or None
    (scalar arguments repeat, and so do their compare cells): equal values of these classes give
    equal texts. Floats are left out (0.0 == -0.0), and so are lists (tensor shapes)."""

    __slots__ = ("texts", "null_at", "memo")

    def __init__(self, classes: tuple[type, ...], null_key_at: int) -> None:
        self.texts = tuple(_JSON_TEXT.get(c, _other_text) for c in classes)
        self.null_at = null_key_at if null_key_at >= 0 and classes[null_key_at] not in _NEVER_NULL else -1
        self.memo: dict[tuple[Any, ...], str] | None = {} if _MEMO_CLASSES.issuperset(classes) else None

    def json(self, form: _Form, values: tuple[Any, ...]) -> str:
        texts = list(map(call, self.texts, values))
        if self.null_at >= 0 and texts[self.null_at] == NULL_TEXT:
            return _NULL_ITEM_JSON
        parts = form.parts.copy()
        parts[1::2] = texts
        return "".join(parts)  # type: ignore[arg-type]


_NEVER_NULL = frozenset((float, int, bool, list))  # classes whose text is never NULL_TEXT
_MEMO_CLASSES = frozenset((str, int, bool, type(None), ExportedText))
_MEMO_SIZE = 256
_FORMS: dict[frozenset[str], dict[tuple[str, ...], _Form]] = {skip: {} for skip in _SKIPPED.values()}
_MAX_FORMS = 512  # distinct key sequences remembered per skip set (dumps hold a handful), and kinds per form
_NULL_ITEM_JSON = dumps(NULL_ITEM)


def _item_json(item: dict[str, Any], skip: frozenset[str], forms: dict[tuple[str, ...], _Form]) -> str:
    if item.get(LEAF_KEYS.type) == PROCESS_GROUP:
        item = {k: v for k, v in item.items() if k in _PG_KEEP}
    keys = tuple(item)
    form = forms.get(keys)
    if form is None:
        form = _Form(keys, skip)
        if len(forms) < _MAX_FORMS:
            forms[keys] = form
    values = form.take(item)
    classes = tuple(map(type, values))
    kind = form.kinds.get(classes) or form.new_kind(classes)
    memo = kind.memo
    if memo is None:
        return kind.json(form, values)
    text = memo.get(values)
    if text is None:
        text = kind.json(form, values)
        if len(memo) >= _MEMO_SIZE:
            memo.clear()
        memo[values] = text
    return text


def skipped_keys(keep_md5: bool, batch_p2p: bool) -> frozenset[str]:
    """The keys an exported item leaves out."""
    return _SKIPPED[bool(keep_md5), bool(batch_p2p)]


def items_json_for(keep_md5: bool, batch_p2p: bool) -> Callable[[dict[str, dict]], str]:
    """``items_json`` with these options, as a function of the items alone (for many calls)."""
    skip = skipped_keys(keep_md5, batch_p2p)
    python_to_json = python_items_json_for(keep_md5, batch_p2p)

    def to_json(data: dict[str, dict]) -> str:
        native = speedups.native
        if native is not None and data:
            text = native.items_json(data, skip)
            if text is not None:
                return text  # type: ignore[no-any-return]
        return python_to_json(data)

    return to_json


def python_items_json_for(keep_md5: bool, batch_p2p: bool) -> Callable[[dict[str, dict]], str]:
    """items_json_for's Python path alone (for the C code's fallback: it has tried its own)."""
    skip = skipped_keys(keep_md5, batch_p2p)
    forms = _FORMS[skip]

    def to_json(data: dict[str, dict]) -> str:
        if not data:
            return "{}"
        texts = [
            f"{_enc(k)}: {_item_json(item, skip, forms)}" for k, item in data.items() if k.__class__ is str
        ]
        if len(texts) != len(data):  # a key that is not a string: json.dumps' rules for it
            return dumps(format_items(data, keep_md5, batch_p2p))
        return "{" + ", ".join(texts) + "}"

    return to_json


_ITEMS_JSON = {(m, p): items_json_for(m, p) for m in (False, True) for p in (False, True)}


def items_json(data: dict[str, dict], keep_md5: bool, batch_p2p: bool) -> str:
    """``jsontext.dumps(format_items(data, keep_md5, batch_p2p))``, without the intermediate dicts."""
    return _ITEMS_JSON[bool(keep_md5), bool(batch_p2p)](data)


class TextRules(NamedTuple):
    """What the C text of items (csrc/text.c, entry_text.c; compare.c's relative errors) takes of the
    export rules, by name, handed to it once when this module is imported."""

    exported_text: type  # ExportedText
    # orjson.dumps: the shortest digits of finite floats, which the C code writes in repr's notation
    float_dumps: Callable[[Any], bytes]
    long_decimal: tuple[int, int, int]  # LONG_DECIMAL
    decimals: int  # DECIMALS
    percent: str  # metrics.stats.PERCENT: what follows a relative error's number (a long decimal's too)
    left_out: tuple[str, ...]  # the keys a plain exported item leaves out (skipped_keys(False, False))
    # items.py's texts: entry_text.c makes the items' texts by items._leaf's rules, and hands the
    # leaves of these kinds and names back to the Python path
    no_data_name: str
    scalar_shape: str  # SCALAR_SHAPE: the shape of an argument that is not a tensor
    process_group: str
    group_ranks: str  # GROUP_RANKS: a process group's ranks, whose text is its statistics and md5
    process_group_kept: tuple[str, ...]  # the keys an exported process group keeps (_PG_KEEP)
    p2p_class: str
    parameters_grad: str  # an entry whose name, or a key of it, holds it goes back to the Python path
    shaped_kinds: tuple[str, ...]
    peer_arguments: tuple[str, ...]
    item_keys: tuple[str, ...]  # ITEM_KEYS: the keys a leaf without them gets, in this order
    output_part: str  # OUTPUT_PART, INPUT_PART: an item whose key holds the first only is an output's
    input_part: str
    sub_keys: tuple[
        tuple[str, str, str], ...
    ]  # SUB_KEYS: an entry's parts, their names' suffixes (and states)
    null_key: str  # NULL_KEY (a statistic: entry_text.c knows no other key's null text)
    null_item: str  # NULL_ITEM's JSON text
    bool_text: tuple[str, str]  # items.BOOL_TEXT of False and True
    null_text: str  # NULL_TEXT: None's exported text, and what NONE_TEXT becomes within a string
    none_text: str  # NONE_TEXT (not empty)


TEXT_RULES = TextRules(
    ExportedText,
    orjson.dumps,
    LONG_DECIMAL,
    DECIMALS,
    PERCENT,
    tuple(sorted(_SKIP)),
    NO_DATA_NAME,
    SCALAR_SHAPE,
    PROCESS_GROUP,
    GROUP_RANKS,
    _PG_KEEP,
    P2P_CLASS,
    PARAMETERS_GRAD,
    SHAPED_KINDS,
    PEER_ARGUMENTS,
    ITEM_KEYS,
    OUTPUT_PART,
    INPUT_PART,
    SUB_KEYS,
    NULL_KEY,
    _NULL_ITEM_JSON,
    (BOOL_TEXT[False], BOOL_TEXT[True]),
    NULL_TEXT,
    NONE_TEXT,
)
if speedups.native is not None:
    speedups.native.configure_text(TEXT_RULES)
