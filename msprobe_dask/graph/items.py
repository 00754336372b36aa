"""Dump entries -> node items (graph_visualize.md §2.4) and their export formatting (§7.6).

An *item* is one flattened leaf of a dump entry (a tensor, a scalar argument, a process group ...)
as an insertion-ordered dict; the key order is the JSON order written to the vis.db.
"""

from __future__ import annotations

import re
import zlib
from typing import Any

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


def _leaf(leaf: dict[str, Any], name: str, state: str) -> dict[str, Any]:
    item = {k: (("True" if v else "False") if v.__class__ is bool else v) for k, v in leaf.items()}
    data_name = leaf.get("data_name") or "-1"
    item["data_name"] = data_name
    item["full_op_name"] = data_name.rsplit(".", 1)[0] if data_name != "-1" else name
    item["state"] = state
    if "requires_grad" not in item:
        item["requires_grad"] = None
    for s in STATS:
        if s not in item:
            item[s] = None
    if not item.get("dtype"):
        _fill_non_tensor(item, leaf, name)
    if not item.get("md5"):
        item["md5"] = _crc32(leaf["value"]) if "value" in leaf else _CRC32_EMPTY
    return item


def _crc32(value: Any) -> str:
    return format(zlib.crc32(str(value).encode()), "08x")


_CRC32_EMPTY = _crc32("")


def _fill_non_tensor(item: dict[str, Any], leaf: dict[str, Any], name: str) -> None:
    """dtype, shape and the statistics of a leaf that is not a tensor (a scalar, a size, a group ...)."""
    kind = leaf.get("type")
    value = leaf.get("value")
    if kind == "torch.Size":
        item["dtype"] = kind
        item["shape"] = str(value)
    elif kind == "slice":
        item["dtype"] = kind
        item["shape"] = _np_shape(value)
    elif kind == "ellipsis":
        item["dtype"] = kind
        item["shape"] = "[]"
        for s in STATS:
            item[s] = value
    elif name.split(".")[-1] in RANK_PARAMS:
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
        item["dtype"] = str(type(value))
        item["shape"] = "[]"
        for s in STATS:
            item[s] = value


def _parse(value: Any, name: str, state: str, out: list[dict[str, Any]], depth: int) -> None:
    if depth > MAX_DEPTH:
        from msprobe_dask.errors import DumpError

        raise DumpError(None, f"{name}: dump item nesting is deeper than {MAX_DEPTH} levels")
    if value is None:
        out.append(_default_item(name, state))
    elif isinstance(value, list):
        keep = "parameters_grad" in name.split(".")
        for i, v in enumerate(value):
            _parse(v, name if keep else f"{name}.{i}", state, out, depth + 1)
    elif isinstance(value, dict):
        if not value:
            return
        if value.get("class_type") == "torch.distributed.P2POp":
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


def parse_entry(node_id: str, entry: Any) -> list[dict[str, Any]]:
    """Flatten one dump.json entry into items, in the reference's order."""
    out: list[dict[str, Any]] = []
    if not isinstance(entry, dict):
        return out
    parts = node_id.split(".")
    if parts[-1] == "parameters_grad" or (len(parts) > 1 and parts[-2] == "parameters_grad"):
        _parse(entry, node_id, "parameters_grad", out, 0)
        return out
    for key, suffix, state in SUB_KEYS:
        if key in entry:
            _parse(entry[key], node_id + suffix, state, out, 0)
    return out


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

_DECIMAL = re.compile(r"^\d{1,20}\.(\d{1,20})%?$")
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


def _fmt_str(s: str) -> str:
    if "'" in s:
        s = s.replace("'", "")
    if "None" in s:
        s = s.replace("None", "null")
    # the shortest string _DECIMAL rounds is d.ddddddd (9 characters)
    if len(s) < 9 or not s[0].isdigit():
        return s
    m = _DECIMAL.match(s)
    if m and len(m.group(1)) > 6:
        if s.endswith("%"):
            return f"{float(s[:-1]):.6f}%"
        return f"{float(s):.6f}"
    return s


def format_item(item: dict[str, Any], keep_md5: bool, batch_p2p: bool) -> dict[str, Any]:
    """A new dict holding the exported form of ``item``."""
    if item.get("type") == "torch.ProcessGroup":
        item = {k: v for k, v in item.items() if k in _PG_KEEP}
    skip = _SKIPPED[bool(keep_md5), bool(batch_p2p)]
    out: dict[str, Any] = {}
    for k, v in item.items():
        if k in skip:
            continue
        t = v.__class__
        if t is float:
            out[k] = repr(v)
        elif t is str:
            # inline pre-check: most strings need no change (see _fmt_str)
            out[k] = _fmt_str(v) if ("'" in v or "None" in v or (len(v) > 8 and v[0].isdigit())) else v
        elif v is None:
            out[k] = "null"
        else:
            out[k] = _fmt_str(v) if isinstance(v, str) else str(v)
    if out.get("Max") == "null":
        return {"value": "null"}
    return out


def format_items(data: dict[str, dict], keep_md5: bool, batch_p2p: bool) -> dict[str, dict]:
    return {k: format_item(v, keep_md5, batch_p2p) for k, v in data.items()}
