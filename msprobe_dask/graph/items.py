"""Dump entries -> node items (graph_visualize.md §2.4) and their export formatting (§7.6).

An *item* is one flattened leaf of a dump entry (a tensor, a scalar argument, a process group ...)
as an insertion-ordered dict; the key order is the JSON order written to the vis.db.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable
from json.encoder import encode_basestring_ascii as _enc
from operator import itemgetter
from typing import Any

import orjson

from msprobe_dask.errors import DumpError
from msprobe_dask.graph import speedups
from msprobe_dask.graph.jsontext import dumps, float_text

try:
    from operator import call  # Python 3.11
except ImportError:  # pragma: no cover

    def call(f: Callable[[Any], Any], x: Any) -> Any:  # type: ignore[misc]
        return f(x)


MAX_DEPTH = 400

SUB_KEYS = (
    ("input_args", ".input", "input"),
    ("input_kwargs", ".input", "input"),
    ("input", ".input", "input"),
    ("output", ".output", "output"),
    ("parameters", ".parameters", "parameters"),
)
STATS = ("Max", "Min", "Mean", "Norm")
RANK_PARAMS = {"src", "dst", "group_src", "group_dst"}
P2P_KEYS = ("class_type", "op", "peer", "tag", "group_id")
P2P_CLASS = "torch.distributed.P2POp"


def _default_item(name: str, state: str) -> dict[str, Any]:
    return {
        "full_op_name": name,
        "type": None,
        "Max": None,
        "Min": None,
        "Mean": None,
        "Norm": None,
        "dtype": None,
        "shape": None,
        "md5": None,
        "value": None,
        "data_name": "-1",
        "state": state,
        "requires_grad": None,
    }


def _np_shape(value: Any) -> str:
    """``str(numpy.shape(numpy.array(value)))`` for the nested lists a slice is dumped as."""
    import numpy

    try:
        return str(numpy.shape(numpy.array(value)))
    except ValueError:
        return str(numpy.shape(numpy.array(value, dtype=object)))


_BOOL_TEXT = {True: "True", False: "False"}
_NO_STATS = dict.fromkeys(STATS)


def _leaf(leaf: dict[str, Any], name: str, state: str) -> dict[str, Any]:
    """The item of a leaf of a dump entry."""
    native = speedups.native
    if native is not None:
        item = native.leaf(leaf, name, state, _CRC32_EMPTY)
        if item is not None:
            return item  # type: ignore[no-any-return]
    return _python_leaf(leaf, name, state)


def _python_leaf(leaf: dict[str, Any], name: str, state: str) -> dict[str, Any]:
    item = leaf.copy()
    for k, v in leaf.items():
        if v.__class__ is bool:
            item[k] = _BOOL_TEXT[v]
    data_name = leaf.get("data_name") or "-1"
    if not isinstance(data_name, str):
        raise DumpError(None, f"{name}: data_name {data_name!r} is not a string")
    item["data_name"] = data_name
    item["full_op_name"] = data_name.rsplit(".", 1)[0] if data_name != "-1" else name
    item["state"] = state
    if "requires_grad" not in item:
        item["requires_grad"] = None
    if "Max" not in item or "Min" not in item or "Mean" not in item or "Norm" not in item:
        if item.keys().isdisjoint(STATS):
            item.update(_NO_STATS)
        else:
            for s in STATS:
                if s not in item:
                    item[s] = None
    if not item.get("dtype"):
        _fill_non_tensor(item, leaf, name)
    if not item.get("md5"):
        item["md5"] = _crc32(leaf["value"]) if "value" in leaf else _CRC32_EMPTY
    return item


def _crc32(value: Any) -> str:
    text = str(value)
    crc = _CRC32_SEEN.get(text)
    if crc is None:
        crc = format(zlib.crc32(text.encode()), "08x")
        if len(_CRC32_SEEN) < 4096:  # scalar arguments repeat (1, -1, True ...): remember the first few
            _CRC32_SEEN[text] = crc
    return crc


_CRC32_SEEN: dict[str, str] = {}


_CRC32_EMPTY = _crc32("")
NATIVE_LEAF = (_CRC32_EMPTY, _python_leaf)  # the C functions' last arguments: md5 of nothing, the leaf


def _fill_non_tensor(item: dict[str, Any], leaf: dict[str, Any], name: str) -> None:
    """dtype, shape and the statistics of a leaf that is not a tensor (a scalar, a size, a group ...)."""
    kind = leaf.get("type")
    value = leaf.get("value")
    if kind in _SHAPED_KINDS:
        item["dtype"] = kind
        if kind == "torch.Size":
            item["shape"] = str(value)
        elif kind == "slice":
            item["shape"] = _np_shape(value)
        else:  # ellipsis
            item["shape"] = "[]"
            for s in STATS:
                item[s] = value
    elif name.rpartition(".")[2] in RANK_PARAMS:
        item["dtype"] = kind
        item["shape"] = "[]"
        for s in STATS:
            item[s] = str(value)
        item["md5"] = str(value)
    elif kind == "torch.ProcessGroup":
        ranks = str(leaf.get("group_ranks"))
        item["dtype"] = kind
        item["shape"] = "[]"
        for s in STATS:
            item[s] = ranks
        item["md5"] = ranks
    else:
        item["dtype"] = _type_text(value)
        item["shape"] = "[]"
        item["Max"] = item["Min"] = item["Mean"] = item["Norm"] = value


_SHAPED_KINDS = frozenset(("torch.Size", "slice", "ellipsis"))


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
        if value.get("class_type") == P2P_CLASS:
            tensor = value.get("tensor")
            item = _leaf(tensor, name, state) if isinstance(tensor, dict) else _default_item(name, state)
            for k in P2P_KEYS:
                item[k] = value.get(k)
            out.append(item)
        elif isinstance(value.get("type"), str):
            out.append(_leaf(value, name, state))
        else:
            for k, v in value.items():
                _parse(v, f"{name}.{k}", state, out, depth + 1)


def _parse_list(value: list[Any], name: str, state: str, out: list[dict[str, Any]], depth: int) -> None:
    """_parse of a list (at ``depth``): element i is named ``name.i``, except under parameters_grad."""
    keep = "parameters_grad" in name and "parameters_grad" in name.split(".")
    prefix = name + "."
    for i, v in enumerate(value):
        sub = name if keep else prefix + str(i)
        # the common element, a leaf, without the recursive call (same depth rule)
        if (
            v.__class__ is dict
            and depth < MAX_DEPTH
            and v.get("type").__class__ is str
            and v.get("class_type") != P2P_CLASS
        ):
            out.append(_leaf(v, sub, state))
        else:
            _parse(v, sub, state, out, depth + 1)


def parse_entry(node_id: str, entry: Any) -> list[dict[str, Any]]:
    """Flatten one dump.json entry into items, in the reference's order."""
    out: list[dict[str, Any]] = []
    if not isinstance(entry, dict):
        return out
    if "parameters_grad" in node_id:
        parts = node_id.split(".")
        if parts[-1] == "parameters_grad" or (len(parts) > 1 and parts[-2] == "parameters_grad"):
            _parse(entry, node_id, "parameters_grad", out, 0)
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
    native = speedups.native
    if native is not None:
        data = native.entry_items(node_id, entry, *NATIVE_LEAF)
        if data is not None:
            return data  # type: ignore[no-any-return]
    return split_items(parse_entry(node_id, entry))


def split_items(items: list[dict[str, Any]]) -> tuple[dict[str, dict], dict[str, dict]]:
    """(input_data, output_data): outputs by full_op_name, everything else by data_name/full name."""
    inputs: dict[str, dict] = {}
    outputs: dict[str, dict] = {}
    for item in items:
        full = item["full_op_name"]
        if ".output." in full and ".input." not in full:
            outputs[full] = item
        else:
            dn = item.get("data_name", "-1")
            inputs[dn.rsplit(".", 1)[0] if dn != "-1" else full] = item
    return inputs, outputs


# ---------------------------------------------------------------- export formatting (§7.6)

# a string the rule rounds: all decimal digits, with more than 6 after the point
_LONG_DECIMAL = re.compile(r"^\d{1,20}\.\d{7,20}%?$")
_PG_KEEP = ("type", "group_ranks", "group_id", "data_name")
_BATCH_P2P_DROP = ("op", "peer", "tag", "group_id")
_SKIP = frozenset(("state", "full_op_name", "md5"))
_SKIP_KEEP_MD5 = frozenset(("state", "full_op_name"))
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
    if "None" in s:
        s = s.replace("None", "null")
    # the shortest string _LONG_DECIMAL matches is d.ddddddd (9 characters)
    if len(s) < 9 or not s[0].isdigit() or not _LONG_DECIMAL.match(s):
        return s
    if s[-1] == "%":
        return f"{float(s[:-1]):.6f}%"
    return f"{float(s):.6f}"


def _fmt_text(s: str) -> str:
    """format_str, with the check that most strings need no change inline."""
    if "'" in s or "None" in s or (len(s) > 8 and s[0].isdigit()):
        return format_str(s)
    return s


def _fmt_other(v: Any) -> str:
    return format_str(v) if isinstance(v, str) else str(v)


class ExportedText(str):
    """A string already in its exported form (a fixed point of the formatting) and safe to stand in
    JSON as it is: the relative errors the compare writes into items (cells.rel_text)."""

    __slots__ = ()


# the exported text of a value, by its class (floats by repr, None as null, strings by format_str,
# anything else by str); a class missing here takes _fmt_other
_FORMAT: dict[type, Callable[[Any], str]] = {
    float: float.__repr__,
    str: _fmt_text,
    ExportedText: str.__str__,
    type(None): {None: "null"}.__getitem__,
    int: int.__repr__,
    bool: bool.__repr__,
    list: list.__repr__,
}


def format_item(item: dict[str, Any], keep_md5: bool, batch_p2p: bool) -> dict[str, str]:
    """A new dict holding the exported form of ``item``."""
    if item.get("type") == "torch.ProcessGroup":
        item = {k: v for k, v in item.items() if k in _PG_KEEP}
    skip = skipped_keys(keep_md5, batch_p2p)
    fmt = _FORMAT.get
    out = {k: fmt(v.__class__, _fmt_other)(v) for k, v in item.items() if k not in skip}
    if out.get("Max") == "null":
        return {"value": "null"}
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
    float: float_text,  # digits, '.', 'e', '+', '-', 'inf', 'nan': always JSON-ready
    str: _Texts(_str_text, 1 << 12).__getitem__,
    ExportedText: str.__str__,
    list: _list_text,
    int: _Texts(int.__repr__, 1 << 12).__getitem__,
    type(None): {None: "null"}.__getitem__,
    bool: {True: "True", False: "False"}.__getitem__,
}


class _Form:
    """How items with one sequence of keys are exported: the values to take and the JSON pieces the
    values' texts go between (``parts``: pieces at even positions, texts to fill the odd ones).
    ``kinds``: the _Kind of each sequence of the values' classes seen."""

    __slots__ = ("take", "parts", "max_at", "kinds")

    def __init__(self, keys: tuple[str, ...], skip: frozenset[str]) -> None:
        kept = tuple(k for k in keys if k not in skip)
        self.take: Callable[[dict[str, Any]], tuple[Any, ...]] = (
            itemgetter(*kept) if len(kept) > 1 else (lambda d: tuple(d[k] for k in kept))
        )
        opening = ["{"] + ['", '] * (len(kept) - 1)  # the first key opens the object, the others a value
        pieces = [f'{o}{_enc(k)}: "' for o, k in zip(opening, kept)]
        self.parts: list[str | None] = [None] * (2 * len(kept) + 1)
        self.parts[0::2] = [*pieces, '"}' if kept else "{}"]
        self.max_at = kept.index("Max") if "Max" in kept else -1
        self.kinds: dict[tuple[type, ...], _Kind] = {}

    def new_kind(self, classes: tuple[type, ...]) -> _Kind:
        kind = _Kind(classes, self.max_at)
        if len(self.kinds) < _MAX_FORMS:
            self.kinds[classes] = kind
        return kind


class _Kind:
    """How the items of one form whose values have one sequence of classes are exported: the text
    function of each value, and ``null_at``, the position of a Max value whose text may be "null"
    (which makes the whole item ``{"value": "null"}``), or -1.

    ``memo`` remembers the texts of whole items whose values are all strings, ints, bools or None
    (scalar arguments repeat, and so do their compare cells): equal values of these classes give
    equal texts. Floats are left out (0.0 == -0.0), and so are lists (tensor shapes)."""

    __slots__ = ("texts", "null_at", "memo")

    def __init__(self, classes: tuple[type, ...], max_at: int) -> None:
        self.texts = tuple(_JSON_TEXT.get(c, _other_text) for c in classes)
        self.null_at = max_at if max_at >= 0 and classes[max_at] not in _NEVER_NULL else -1
        self.memo: dict[tuple[Any, ...], str] | None = {} if _MEMO_CLASSES.issuperset(classes) else None

    def json(self, form: _Form, values: tuple[Any, ...]) -> str:
        texts = list(map(call, self.texts, values))
        if self.null_at >= 0 and texts[self.null_at] == "null":
            return _NULL_ITEM
        parts = form.parts.copy()
        parts[1::2] = texts
        return "".join(parts)  # type: ignore[arg-type]


_NEVER_NULL = frozenset((float, int, bool, list))  # classes whose text is never "null"
_MEMO_CLASSES = frozenset((str, int, bool, type(None), ExportedText))
_MEMO_SIZE = 256
_FORMS: dict[frozenset[str], dict[tuple[str, ...], _Form]] = {skip: {} for skip in _SKIPPED.values()}
_MAX_FORMS = 512  # distinct key sequences remembered per skip set (dumps hold a handful), and kinds per form
_NULL_ITEM = '{"value": "null"}'


def _item_json(item: dict[str, Any], skip: frozenset[str], forms: dict[tuple[str, ...], _Form]) -> str:
    if item.get("type") == "torch.ProcessGroup":
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


if speedups.native is not None:
    speedups.native.configure(ExportedText, orjson.dumps, _crc32)
