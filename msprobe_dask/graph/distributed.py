"""Cross-rank links of communication nodes: ``matched_distributed`` (graph_visualize.md §5).

Runs over the exported rows of all graphs (the formatted JSON, so every value is a string), after
every (step, rank) graph is finished; it is the one task that needs all ranks.

``batch_isend_irecv`` nodes are linked too (README D14; the reference leaves them ``{}``): the n-th
``isend`` to rank p in rank r's batches pairs with the n-th ``irecv`` from rank r in rank p's batches
(same ``group_id``). A batch gets one link per peer, typed ``send``, ``receive`` or, when it both sends
and receives, ``send_receive``.
"""

from __future__ import annotations

import json
from typing import Any

from msprobe_dask.columns import NAN
from msprobe_dask.dump.markers import BATCH_P2P, GROUP_ID, GROUP_RANKS, IRECV, ISEND, LEAF_KEYS
from msprobe_dask.graph.p2p import P2POp
from msprobe_dask.graph.rows import COL, GraphRows

# api -> (counterpart, rank parameter, type)
P2P = {
    "send": ("recv", "dst", "send"),
    ISEND: (IRECV, "dst", "send"),
    "recv": ("send", "src", "receive"),
    IRECV: (ISEND, "src", "receive"),
}
ROOTED = {
    "broadcast": ("1", "send"),
    "scatter": ("src", "send"),
    "gather": ("dst", "receive"),
    "reduce": ("1", "receive"),
}
REVERSED = {"send": "receive", "receive": "send", "send_receive": "send_receive"}
BATCH_SIDES = {ISEND: (IRECV, "send"), IRECV: (ISEND, "receive")}  # op -> (counterpart, type)


_INPUT_DATA = COL["input_data"]
_NAME = COL["node_name"]
_IS_DISTRIBUTED = COL["is_distributed"]
_LINK_COLUMNS = tuple(
    COL[name]
    for name in (
        "id",
        "node_order",
        "node_name",
        "precision_index",
        "overflow_level",
        "matched_distributed",
        "input_data",
        "is_distributed",
    )
)
"""The cells of a communication row that linking across ranks (link_distributed) and its cells'
update (writers/visdb.linked_cells) read or set, and its place in its graph (rows.join_rows)."""


def _api_of(name: str) -> str:
    """The API of a communication node's name (``Distributed.all_reduce.0.forward``: all_reduce)."""
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else ""


def _may_hold_group(text: Any) -> bool:
    """Whether a row's input_data text may hold a group id: its key is in it, or an escape that could
    spell it (a text that is not a string: whatever its items say)."""
    return not isinstance(text, str) or GROUP_ID in text or "\\u" in text


def link_rows(rows: list[list[Any]], p2p: dict[str, list[P2POp]]) -> list[list[Any]]:
    """The communication rows among ``rows`` that linking across ranks may read or set, each with only
    the cells it uses (_LINK_COLUMNS; None in the others): a batch of p2p ops (``p2p``), a point-to-point
    op, a collective whose input_data may hold a group id. The others are never linked, nor read by
    another rank's link: a (step, rank)'s Part holds these until every rank is made (a rank of 50,050
    entries a side of gen_synthetic_tree.py, no group ids: 14,300 rows a side, none kept)."""
    kept = []
    for row in rows:
        name = row[_NAME]
        if row[_IS_DISTRIBUTED] != 1:
            continue
        if name in p2p or _api_of(name) in P2P or _may_hold_group(row[_INPUT_DATA]):
            cells: list[Any] = [None] * len(row)
            for i in _LINK_COLUMNS:
                cells[i] = row[i]
            kept.append(cells)
    return kept


class _Comm:
    __slots__ = ("row", "name", "api", "_inputs", "value", "unique", "ops")

    def __init__(self, row: list[Any], ops: list[P2POp]):
        self.row = row
        self.name: str = row[COL["node_name"]]
        self.api = _api_of(self.name)
        self._inputs: dict[str, Any] | None = None
        self.value: dict[str, Any] | None = None
        self.unique: str | None = None
        self.ops = ops  # batch_isend_irecv only

    @property
    def inputs(self) -> dict[str, Any]:
        """The row's input items, parsed from its input_data text when first asked for (most rows of a
        dump without group ids never are: group)."""
        if self._inputs is None:
            try:
                self._inputs = json.loads(self.row[_INPUT_DATA] or "{}")
            except ValueError:
                self._inputs = {}
        return self._inputs

    def param(self, p: str) -> str | None:
        item = self.inputs.get(f"{self.name}.input.{p}")
        return item.get(LEAF_KEYS.value) if isinstance(item, dict) else None

    def group(self) -> tuple[list[int], str] | None:
        if self._inputs is None and not _may_hold_group(self.row[_INPUT_DATA]):
            return None  # (not parsed)
        item = self.inputs.get(f"{self.name}.input.group")
        if not isinstance(item, dict):
            return None
        ranks, gid = item.get(GROUP_RANKS), item.get(GROUP_ID)
        if not ranks or not gid:
            return None
        try:
            parsed = json.loads(ranks)
        except ValueError:
            return None
        return (parsed, gid) if isinstance(parsed, list) and parsed else None


def _index(c: _Comm, overflow: bool) -> str:
    v = c.row[COL["overflow_level"]] if overflow else c.row[COL["precision_index"]]
    return NAN if v is None else str(v)


def _link_batches(ranks: dict[str, list[_Comm]], overflow: bool) -> None:
    """Link every batch_isend_irecv op to its counterpart op in the peer rank's batches."""
    by_unique: dict[str, dict[str, tuple[_Comm, P2POp]]] = {}
    for rank, comms in ranks.items():
        counts: dict[str, int] = {}
        table = by_unique.setdefault(rank, {})
        for c in comms:
            for op in c.ops:
                key = f"{op.op}rank{op.peer}"
                counts[key] = counts.get(key, 0) + 1
                table[f"{key}_{counts[key]}"] = (c, op)
    for rank, table in by_unique.items():
        linked: dict[int, tuple[_Comm, dict[str, list[str]], set[str]]] = {}
        for unique, (c, op) in table.items():
            counterpart, kind = BATCH_SIDES[op.op]
            n = unique.rsplit("_", 1)[1]
            found = by_unique.get(op.peer, {}).get(f"{counterpart}rank{rank}_{n}")
            if found is None or found[1].group_id != op.group_id:
                continue
            _, info, kinds = linked.setdefault(id(c), (c, {}, set()))
            info[op.peer] = [_index(found[0], overflow), found[0].name]
            kinds.add(kind)
        for c, info, kinds in linked.values():
            kind = kinds.pop() if len(kinds) == 1 else "send_receive"
            c.value = {"communications_type": kind, "nodes_info": info}


def _link_group(ranks: dict[str, list[_Comm]], overflow: bool) -> None:
    _link_batches(ranks, overflow)
    by_unique: dict[str, dict[str, _Comm]] = {}
    for rank, comms in ranks.items():
        counts: dict[str, int] = {}
        table = by_unique.setdefault(rank, {})
        for c in comms:
            if c.api in P2P:
                t = c.param(P2P[c.api][1])
                if t is None:
                    continue
                key = f"{c.api}rank{t}"
            elif c.api == BATCH_P2P:
                continue
            else:
                g = c.group()
                if g is None:
                    continue
                key = g[1] + c.api
            counts[key] = counts.get(key, 0) + 1
            c.unique = f"{key}_{counts[key]}"
            table[c.unique] = c
    for rank, comms in ranks.items():
        for c in comms:
            if c.unique is None or c.value is not None:
                continue
            if c.api in P2P:
                counterpart, rank_param, kind = P2P[c.api]
                t = c.param(rank_param)
                target_unique = c.unique.replace(f"rank{t}", f"rank{rank}").replace(c.api, counterpart)
                target = by_unique.get(str(t), {}).get(target_unique)
                if target is None or target.param(P2P[target.api][1]) != rank:
                    continue
                c.value = {
                    "communications_type": kind,
                    "nodes_info": {str(t): [_index(target, overflow), target.name]},
                }
                target.value = {
                    "communications_type": P2P[target.api][2],
                    "nodes_info": {rank: [_index(c, overflow), c.name]},
                }
                continue
            group = c.group()
            if group is None:
                continue
            group_ranks, gid = group
            kind = "send_receive"
            if c.api in ROOTED:
                rank_param, kind = ROOTED[c.api]
                if c.param(rank_param) != rank:
                    continue
            info: dict[str, list[str]] = {}
            for member in group_ranks:
                if str(member) == rank:
                    continue
                target = by_unique.get(str(member), {}).get(c.unique)
                if target is None:
                    continue
                tg = target.group()
                if tg is None or tg[1] != gid:
                    continue
                info[str(member)] = [_index(target, overflow), target.name]
                if c.api in ROOTED:
                    target.value = {
                        "communications_type": REVERSED[kind],
                        "nodes_info": {rank: [_index(c, overflow), c.name]},
                    }
            if info:
                c.value = {"communications_type": kind, "nodes_info": info}


def link_distributed(graphs: list[GraphRows], overflow: bool) -> None:
    """Fill ``matched_distributed`` in place for every linked communication node."""
    groups: dict[tuple[str, int], dict[str, list[_Comm]]] = {}
    for g in graphs:
        comms = [_Comm(row, g.p2p.get(row[_NAME], [])) for row in g.nodes if row[_IS_DISTRIBUTED] == 1]
        if comms:
            groups.setdefault((g.source, g.step), {}).setdefault(str(g.rank), []).extend(comms)
    md = COL["matched_distributed"]
    for ranks in groups.values():
        _link_group(ranks, overflow)
        for comms in ranks.values():
            for c in comms:
                if c.value is not None:
                    c.row[md] = json.dumps(c.value)
