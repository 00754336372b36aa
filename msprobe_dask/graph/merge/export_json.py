"""``--file_type json``: a merged graph written back as a dump folder (§6.7).

``<out>/step{s}/rank{r}/`` gets ``construct.json``, ``dump.json`` (``"is_merged": true``) and
``stack.json`` (new format), all with ``indent=2``, so the merged model can be fed to any tool that
reads dumps. Nodes of the main rank's own dump are copied entry by entry with the merged statistics
written over; nodes that came from other ranks (renamed) are rebuilt from their items.
"""

from __future__ import annotations

import ast
import contextlib
import json
from pathlib import Path
from typing import Any

from msprobe_dask.dump.markers import LEAF_KEYS, STATS
from msprobe_dask.errors import OutputError, cannot
from msprobe_dask.graph.model import ROOT_ID, Graph, Node
from msprobe_dask.writers.atomic import atomic_path, missing_folders, prepare_output_dir

_DROPPED = (LEAF_KEYS.data_name, LEAF_KEYS.full_op_name, LEAF_KEYS.state, LEAF_KEYS.md5)
_HEADER = ("task", "level", "framework", "dump_data_dir")
_NAMES = ("construct.json", "dump.json", "stack.json")


def _without_md5(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_md5(v) for k, v in value.items() if k != LEAF_KEYS.md5}
    if isinstance(value, list):
        return [_without_md5(v) for v in value]
    return value


def _with_stats(leaf: Any, item: dict[str, Any] | None) -> Any:
    if not isinstance(leaf, dict) or item is None:
        return leaf
    out = dict(leaf)
    for s in STATS:
        out[s] = item.get(s)
    return out


def _copied(node: Node, entry: dict[str, Any]) -> dict[str, Any]:
    """The original dump entry with the merged statistics of the node's input/output items written
    over (parameters keep their own rank's statistics, as in the reference)."""
    items = {**node.input_data, **node.output_data}
    out: dict[str, Any] = {}
    for field, value in entry.items():
        if field in ("input_args", "output") and isinstance(value, list):
            part = "input" if field == "input_args" else "output"
            value = [_with_stats(v, items.get(f"{node.id}.{part}.{i}")) for i, v in enumerate(value)]
        elif field == "input_kwargs" and isinstance(value, dict):
            value = {
                k: _with_stats(v, items.get(f"{node.id}.input.{k}"))
                if isinstance(v, dict) and LEAF_KEYS.type in v
                else v
                for k, v in value.items()
            }
        out[field] = _without_md5(value)
    return out


def _leaf(item: dict[str, Any]) -> dict[str, Any] | None:
    if item.get(LEAF_KEYS.type) is None:
        return None
    out = {}
    for k, v in item.items():
        if k in _DROPPED or (k == LEAF_KEYS.requires_grad and v is None):
            continue
        if k == LEAF_KEYS.requires_grad and isinstance(v, str):
            v = v == "True"
        elif k == LEAF_KEYS.shape and isinstance(v, str):
            try:
                v = list(ast.literal_eval(v))
            except (ValueError, SyntaxError, TypeError):
                pass
        out[k] = v
    return out


def _rebuilt(node: Node) -> dict[str, Any]:
    """An entry made from the items of a renamed node: ``input.<digits>`` items become input_args,
    other ``input.<name>`` items input_kwargs, ``output.*`` items output; parameters are dropped."""
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    outputs: list[Any] = []
    prefix = node.id + "."
    for key, item in {**node.input_data, **node.output_data}.items():
        rel = key[len(prefix) :] if key.startswith(prefix) else key
        part, _, name = rel.partition(".")
        if part == "input":
            if name.isdigit():
                args.append(_leaf(item))
            else:
                kwargs[name] = _leaf(item)
        elif part == "output":
            outputs.append(_leaf(item))
    out: dict[str, Any] = {}
    if args:
        out["input_args"] = args
    if kwargs:
        out["input_kwargs"] = kwargs
    if outputs:
        out["output"] = outputs
    return out


def graph_documents(g: Graph) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(construct, dump, stack) documents of a merged graph."""
    nodes = [n for n in g.sorted_nodes() if n is not g.root]
    construct = {n.id: n.parent.id if n.parent is not None else ROOT_ID for n in nodes}
    data: dict[str, Any] = {}
    for n in nodes:
        if not (n.input_data or n.output_data):
            continue
        entry = g.data.get(n.id)
        entry = _copied(n, entry) if isinstance(entry, dict) else _rebuilt(n)
        if not entry:  # a renamed node with parameter items only (parameters_grad)
            continue
        if n.merge_info:
            entry["parallel_merge_info"] = list(n.merge_info)
        data[n.id] = entry
    dump = {k: g.header.get(k) for k in _HEADER}
    dump["is_merged"] = True
    dump["data"] = data
    groups: dict[str, list[Any]] = {}
    for n in nodes:
        if n.stack:
            groups.setdefault(json.dumps(n.stack), [[], n.stack])[0].append(n.id)
    stack = {str(i): group for i, group in enumerate(groups.values())}
    return construct, dump, stack


def _write_graph(g: Graph, out: str, made: list[Path]) -> None:
    """The three files of one merged graph, each complete under its final name or absent; what this
    creates is appended to ``made``."""
    folder = Path(out) / f"step{g.step}" / f"rank{g.rank}"
    documents = graph_documents(g)
    try:
        made += reversed(missing_folders(folder))  # outermost first: removed last
        prepare_output_dir(folder)
        for name, doc in zip(_NAMES, documents):
            path = folder / name
            existed = path.exists()
            with atomic_path(path) as tmp:
                tmp.write_text(json.dumps(doc, indent=2), encoding="utf-8")
            if not existed:
                made.append(path)
    except OSError as exc:
        raise OutputError(folder, cannot("write the merged dump", exc)) from None


def write_merged_json(steps: list[list[Graph]], out: str) -> str:
    """Write every merged graph of every step under ``out``; return ``out``. If one cannot be written,
    the files and folders written before it are removed again: no partial merged dump is left."""
    made: list[Path] = []
    try:
        for graphs in steps:
            for g in graphs:
                _write_graph(g, out, made)
    except BaseException:
        for path in reversed(made):
            with contextlib.suppress(OSError):
                path.rmdir() if path.is_dir() else path.unlink()
        raise
    return out
