"""What the first-divergence analysis (analysis/, the rule of compare's summary) reads of compared graph
nodes: the compare rows of their items, made where both sides' items are in hand (a chunk task, or a
pair compared whole), each with its dump entry's place in dump.json (analysis/rank_rows.py)."""

from __future__ import annotations

from array import array
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from itertools import islice
from operator import itemgetter
from typing import Any

from msprobe_dask.analysis.comm_apis import COMM_PREFIXES, is_communication
from msprobe_dask.analysis.rank_rows import RankRows, Row, origin_place
from msprobe_dask.analysis.row_errors import md5_error, number, stats_error
from msprobe_dask.analysis.tolerance import Tolerance
from msprobe_dask.dump.entries import DumpEntries
from msprobe_dask.dump.markers import LEAF_KEYS, P2P_KEYS, STATS
from msprobe_dask.graph.cells import MD5, TENSOR
from msprobe_dask.graph.model import Graph, Node

_NO_STATS = (None,) * len(STATS)


def dump_places(g: Graph) -> Callable[[Iterable[str]], list[int | None]]:
    """Each of some names' place in ``g``'s dump.json (its offset in the file, or its index; None: not a
    dump entry)."""
    data = g.data
    if isinstance(data, DumpEntries):
        return data.starts
    index = {name: i for i, name in enumerate(data)}
    return lambda names: list(map(index.get, names))


def _by_argument(node: Node, partner: Node | None) -> dict[str, Mapping[str, Any]]:
    """The Bench items of ``partner`` by the name of ``node``'s item of the same argument (the name
    without the node's: ``.input.0``, ``.parameters_grad.0.weight``), as compare pairs rows; {}: none."""
    if partner is None:
        return {}
    if partner.id == node.id:  # (the usual pair: the same names)
        return {**partner.input_data, **partner.output_data}
    cut, mine = len(partner.id), node.id
    return {
        mine + name[cut:]: item
        for items in (partner.input_data, partner.output_data)
        for name, item in items.items()
    }


def node_rows(
    nodes: Collection[Node],
    partners: Mapping[Node, Node],
    mode: str,
    places: Callable[[Iterable[str]], list[int | None]],
    tol: Tolerance,
    answered: Mapping[Node, bool] | None = None,
) -> RankRows:
    """The rows of compared ``nodes`` (their items hold what the compare wrote back) that are dump
    entries (``rank_rows.Row``; ``places``: their places in dump.json, ``dump_places``), their
    partners' items beside them, as a compact piece (``RankRows.piece``). Whether a row's error exceeds
    ``tol.rtol`` is measured first (until one does, ``node_exceeds``; ``answered``: its answers the
    compare gave, ``compare.compare_subtrees``); only then are rows made, up to the piece's first origin
    (``_rows_to_origin``), beside those of the communication entries."""
    md5, tensor = mode == MD5, mode == TENSOR
    known = answered or {}
    over = False
    pairs: list[tuple[Node, Node | None, int, bool]] = []  # (node, partner, place, communication)
    for node, at in zip(nodes, places([node.id for node in nodes])):
        if at is None:
            continue
        entry = node.id
        partner = partners.get(node)
        communication = entry.startswith(COMM_PREFIXES) and is_communication(entry)
        pairs.append((node, partner, at, communication))
        if not over and partner is not None:
            over = _pair_exceeds(known, node, partner, mode, tol)
    pairs.sort(key=_PLACE)
    rows: list[tuple[int, Row]] = []
    made, end = 0, -1
    if over:
        exceeding = (
            at
            for node, partner, at, communication in pairs
            if partner is not None and _pair_exceeds(known, node, partner, mode, tol)
        )
        rows, made, end = _rows_to_origin(pairs, exceeding, md5, tensor, tol)
    rows += [
        (at, row)
        for node, partner, at, communication in pairs[made:]
        if communication
        for row in _rows(node, _by_argument(node, partner), md5, tensor, True)
    ]
    entries = array("q", [at for _, _, at, _ in pairs])
    comm = {at for _, _, at, communication in pairs if communication}
    return RankRows.piece(md5, tol, entries, rows, comm, over, end)


def _pair_exceeds(known: Mapping[Node, bool], node: Node, partner: Node, mode: str, tol: Tolerance) -> bool:
    """``node_exceeds`` of ``node`` and its partner, as the compare answered it (``known``) where it did
    (a communication node's too: R8, 7,150 of them a rank, 0.08 s of a rank task's CPU measured again)."""
    if partner.id == node.id:
        found = known.get(node)
        if found is not None:
            return found
    return node_exceeds(node, _by_argument(node, partner), mode, tol)


def _rows_to_origin(
    pairs: list[tuple[Node, Node | None, int, bool]],
    exceeding: Iterator[int],
    md5: bool,
    tensor: bool,
    tol: Tolerance,
) -> tuple[list[tuple[int, Row]], int, int]:
    """The rows of ``pairs`` (in dump order) up to the first entry where the walk finds an origin when
    it walks them alone from the first (``origin_place``), how many pairs' rows were made, and that
    entry's place (-1: none). An origin is a node a row of which exceeds rtol (their places
    ``exceeding``, in order, found as they are asked for): the rows are made and walked up to the 1st,
    2nd, 4th ... of them until the walk finds one (the walk goes forward: what it finds in the rows up to
    a node it finds there in all the rows)."""
    rows: list[tuple[int, Row]] = []
    made, found = 0, 0
    while True:
        ahead = list(islice(exceeding, max(1, found)))
        if not ahead:
            return rows, made, -1
        found += len(ahead)
        while made < len(pairs) and pairs[made][2] <= ahead[-1]:
            node, partner, at, communication = pairs[made]
            more = md5 or tensor or communication
            rows += [(at, row) for row in _rows(node, _by_argument(node, partner), md5, tensor, more)]
            made += 1
        end = origin_place(rows, md5, tol)
        if end >= 0:
            return rows, made, end


def node_exceeds(node: Node, theirs: Mapping[str, Mapping[str, Any]], mode: str, tol: Tolerance) -> bool:
    """Whether the error of a row of compared ``node`` (each of its items with the item of ``theirs`` of
    its name, ``_by_argument``) exceeds ``tol.rtol``: a row whose statistics are the same is not
    measured (but in md5 and tensor mode), as ``RowColumns.exceeds`` measures a table's rows."""
    md5, tensor = mode == MD5, mode == TENSOR
    atol, rtol = tol.atol, tol.rtol
    partner_of = theirs.get
    for items in (node.input_data, node.output_data):
        for name, n in items.items():
            b = partner_of(name)
            if b is None:
                continue
            if md5 or tensor:
                if _exceeds(n, b, tensor, md5, atol, rtol):
                    return True
            else:
                if _stats_of(n) != _stats_of(b) and _exceeds(n, b, tensor, md5, atol, rtol):
                    return True
    return False


def _rows(
    node: Node, theirs: Mapping[str, Mapping[str, Any]], md5: bool, tensor: bool, more: bool
) -> Iterator[Row]:
    """The node's rows (``more``: with their cells of EXTRA_COLUMNS; else those are None)."""
    # (its stack as the node holds it, no copy: the walk reads only the code line of the few nodes it
    # names, Node.code_line; made for every row, it was 0.045 s of an R8 rank task's CPU)
    stack: Any = node.stack or None
    for items in (node.input_data, node.output_data):
        for name, n in items.items():
            b = theirs.get(name)
            npu = _NO_STATS if md5 else _stats_of(n)
            bench = _NO_STATS if md5 or b is None else _stats_of(b)
            extra = _extra(n, b, tensor, md5) if more else None
            yield (name, node.id, n.get(LEAF_KEYS.state), npu, bench, extra, stack)
            stack = None


_PLACE = itemgetter(2)  # (of a pair: its node's place)
_GET_STATS = itemgetter(*STATS)


def _stats_of(item: Mapping[str, Any]) -> tuple[Any, ...]:
    try:
        return _GET_STATS(item)  # type: ignore[no-any-return]
    except KeyError:
        return tuple(map(item.get, STATS))


def _extra(n: Mapping[str, Any], b: Mapping[str, Any] | None, tensor: bool, md5: bool) -> tuple[Any, ...]:
    """A row's cells of ``rank_rows.EXTRA_COLUMNS``."""
    return (
        n.get("MaxAbsErr") if tensor else None,
        n.get("EucDist") if tensor else None,
        n.get(LEAF_KEYS.md5) if md5 else None,
        b.get(LEAF_KEYS.md5) if md5 and b is not None else None,
        n.get(LEAF_KEYS.dtype),
        n.get(P2P_KEYS.op),
        n.get(P2P_KEYS.peer),
    )


def _exceeds(
    n: Mapping[str, Any], b: Mapping[str, Any], tensor: bool, md5: bool, atol: float, rtol: float
) -> bool:
    """Whether the error of the row of NPU item ``n`` and Bench item ``b`` (as ``RowColumns.error``
    measures it) exceeds ``rtol``."""
    if md5:
        return md5_error(n.get(LEAF_KEYS.md5), b.get(LEAF_KEYS.md5)) > rtol
    max_abs, euc = (n.get("MaxAbsErr"), n.get("EucDist")) if tensor else (None, None)
    npu, bench = (tuple(map(number, _stats_of(item))) for item in (n, b))
    error = stats_error(npu, bench, max_abs, euc, atol)
    return error is not None and error > rtol
