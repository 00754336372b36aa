"""The items of a built graph's nodes (graph_visualize.md §2.4), from their dump.json entries: made
with the nodes, or later for some nodes in the chunk tasks that need them (``parse_items``), or as
the JSON texts of their rows straight from the entries' text in C (``export_texts``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

from msprobe_dask.dump.entries import DumpEntries, SpanTexts
from msprobe_dask.errors import DumpError
from msprobe_dask.graph import (
    item_text,  # noqa: F401 (the C reader configured by its TEXT_RULES)
    speedups,
)
from msprobe_dask.graph.items import entry_items
from msprobe_dask.graph.model import COLLECTION, Graph, Node


def node_items(node_id: str, data: Mapping[str, Any], folder: str) -> tuple[dict[str, dict], dict[str, dict]]:
    """The node's items from its entry; an entry the items cannot be made of is refused naming the
    dump.json of ``folder``."""
    return _entry_items(node_id, data.get(node_id), folder)


def _entry_items(node_id: str, entry: Any, folder: str) -> tuple[dict[str, dict], dict[str, dict]]:
    try:
        return entry_items(node_id, entry)
    except DumpError as exc:
        if exc.path is not None:
            raise
        raise DumpError(Path(folder) / "dump.json", exc.problem) from None


def parse_unused(data: Mapping[str, Any], unused: list[str]) -> None:
    """Parse the entries ``unused`` that no node holds, so that a malformed one is refused as the full
    parse would refuse it (the others are parsed with their nodes' items); real dumps have few or none."""
    if isinstance(data, DumpEntries):
        native = speedups.native
        data.parse_each(unused, native.entries_to_parse if native is not None else None)
        return
    for key in unused:
        data[key]


def texts_of(g: Graph, nodes: Iterable[Node]) -> SpanTexts | None:
    """The texts of ``nodes``' entries read at once (DumpEntries.span_texts), for parse_items and
    export_texts to share over runs of them; None where ``g``'s items are made otherwise."""
    if not g.items_pending or not isinstance(g.data, DumpEntries):
        return None
    return g.data.span_texts([n.id for n in nodes])


def parse_items(g: Graph, nodes: Iterable[Node], texts: SpanTexts | None = None) -> None:
    """Give ``nodes`` their items, if ``g`` was built without (``items_pending``); nodes that already
    hold some keep them. The C code makes them straight from the entries' text where it can
    (csrc/entry_items.c), the Python path the others. ``texts``: texts_of nodes that include these."""
    if not g.items_pending:
        return
    wanted = [
        node
        for node in nodes
        if node is not g.root and node.type != COLLECTION and not (node.input_data or node.output_data)
    ]
    native = speedups.native
    ids = [n.id for n in wanted]
    entry: Callable[[str], Any] = g.data.get
    spans = None
    if isinstance(g.data, DumpEntries):
        spans = texts if texts is not None else g.data.span_texts(ids)
        if spans is not None:  # (the Python path parses its entries from the text read: get_in)
            entry = partial(g.data.get_in, spans)
    made: list[Any] = [None] * len(wanted)
    if native is not None and spans is not None:
        made = native.node_items(ids, *spans)
    for node, items in zip(wanted, made):
        node.input_data, node.output_data = items or _entry_items(node.id, entry(node.id), g.folder)


def export_texts(
    g: Graph, nodes: list[Node], texts: SpanTexts | None = None
) -> list[tuple[str, str] | None] | None:
    """For each of ``nodes``, the JSON texts of its exported (input_data, output_data) made by the C
    code straight from the text of its dump.json entry (csrc/entry_text.c), as rows.chunk_rows makes
    them from the items parse_items would give (md5 left out), or None for a node whose items must
    be parsed; None for all of them without the C code or where ``g``'s entries are not read by span.
    ``texts``: texts_of nodes that include these."""
    native = speedups.native
    if native is None or not g.items_pending or not isinstance(g.data, DumpEntries):
        return None
    spans = texts if texts is not None else g.data.span_texts([n.id for n in nodes])
    if spans is None:
        return None
    return native.node_texts(nodes, g.root, COLLECTION, *spans)  # type: ignore[no-any-return]


def parse_all_items(g: Graph) -> None:
    parse_items(g, g.nodes.values())
    g.items_pending = False
