"""A rank's compare rows for the first-divergence walk, gathered in pieces made apart (graph_visualize's
chunk tasks, whose nodes come in the graph's order, not the dump's): each row with its dump entry's
place in dump.json, put in dump order when the rank is walked (``rank_nodes``).

A piece says whether a row's error exceeds ``rtol`` (as ``RowColumns.exceeds`` measures it, where the
piece is made): a rank none of whose pieces does is never walked, nor its rows put together, unless its
communication nodes are linked to another rank's.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Collection, Container, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from msprobe_dask.analysis.comm_apis import COMM_PREFIXES, is_communication
from msprobe_dask.analysis.row_errors import RowColumns
from msprobe_dask.analysis.tolerance import Tolerance
from msprobe_dask.columns import (
    BENCH_MD5,
    EUC_DIST,
    MAX_ABS_ERR,
    NPU_DTYPE,
    NPU_MD5,
    NPU_NAME,
    NPU_P2P_OP,
    NPU_P2P_PEER,
    STACK_COLUMN,
    STAT_COLUMNS,
)

if TYPE_CHECKING:  # (the walk's modules are imported where a rank is walked: most runs walk none)
    from msprobe_dask.analysis.divergence import RankNodes
    from msprobe_dask.analysis.findings import Divergence
    from msprobe_dask.analysis.flow import LightNode, Node
    from msprobe_dask.analysis.quiet_rows import QuietRun

Row = tuple[Any, ...]
"""A row: its NPU name, dump entry, state, NPU statistics (Max, Min, Mean, Norm), Bench statistics, its
cells of ``EXTRA_COLUMNS`` (None: none there) and its node's stack (its first row's; else None)."""
EXTRA_COLUMNS = (MAX_ABS_ERR, EUC_DIST, NPU_MD5, BENCH_MD5, NPU_DTYPE, NPU_P2P_OP, NPU_P2P_PEER)
_NO_EXTRA = (None,) * len(EXTRA_COLUMNS)
WALKED_BLOCK = 1 << 14
"""How many of a rank's entries its first-divergence walk puts in order at a time (``RankRows``)."""
_KWARGS, _INPUT = "kwargs", "input"  # (a keyword argument is an input, as compare's rows name it)


def row_columns(rows: Sequence[Row], md5_only: bool) -> RowColumns:
    """``rows`` as the analysis reads them (``md5_only``: md5 rows, without statistics)."""
    names, entries, states, npus, benches, extras, stacks = zip(*rows) if rows else ((),) * 7
    columns: dict[str, Sequence[Any]] = {
        NPU_NAME: names,
        "api_origin_name": entries,
        "state": [_INPUT if state == _KWARGS else state for state in states],
        STACK_COLUMN: stacks,
    }
    columns.update(zip(STAT_COLUMNS, (*zip(*npus), *zip(*benches)) if rows else ((),) * 8))
    columns.update(
        zip(EXTRA_COLUMNS, zip(*(_NO_EXTRA if e is None else e for e in extras)) if rows else ((),) * 7)
    )
    return RowColumns(columns, [md5_only] * len(rows))


@dataclass(slots=True)
class RankRows:
    """Rows of one rank, or of a piece of one: ``entries`` holds the place in dump.json of each of its
    dump entries, ``places[i]`` that of row ``i``'s (rows of one entry together, in their order). An
    entry without rows is read as a node without tensors (its place in the rank's order kept)."""

    md5_only: bool
    tolerance: Tolerance
    entries: array[int] = field(default_factory=lambda: array("q"))
    places: list[int] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    exceeds: bool = False
    # the rank's communication nodes for the links across ranks, made ahead (``link_ahead``); None:
    # made when linked
    comms: list[Node] | None = None

    @classmethod
    def piece(
        cls,
        md5_only: bool,
        tol: Tolerance,
        entries: array[int],
        rows: list[tuple[int, Row]],
        comm: Container[int],
        exceeds: bool,
        end: int,
    ) -> RankRows:
        """A piece of the ``entries`` (their places, in order) and ``rows`` ((place, row) in dump
        order), compact: it keeps the rows of its communication entries (the places ``comm``: the links
        across ranks read them) and, where a row's error exceeds rtol (``exceeds``), those up to ``end``,
        its first entry where the walk finds an origin when it starts there (``origin_place``; -1:
        none). What the walk knows when it reaches the piece (the tensors before it, their errors, what
        peers sent) only takes origins away: without one walked alone, the piece holds none in the
        rank's walk either. (Its nodes that use a tensor a peer sent, and so received the divergence
        without being a communication node, are not kept: a rank's first divergent node may then be
        found later.)"""
        kept = [(place, row) for place, row in rows if place <= end or place in comm]
        return cls(md5_only, tol, entries, [place for place, _ in kept], [row for _, row in kept], exceeds)

    def copy(self) -> RankRows:
        return RankRows(
            self.md5_only,
            self.tolerance,
            array("q", self.entries),
            list(self.places),
            list(self.rows),
            self.exceeds,
            self.comms,
        )

    def add(self, later: RankRows) -> None:
        self.entries += later.entries
        self.places += later.places
        self.rows += later.rows
        self.exceeds = self.exceeds or later.exceeds

    def link_ahead(self, rank: int) -> None:
        """The whole rank's communication nodes made now, for its links to other ranks (in the task
        that made its rows, beside other ranks' tasks, rather than in the job's last: R8, 8 ranks of
        50,050 entries a side, 1.4 s of CPU); a rank that no rule finds a node in (not ``exceeds``)
        is never walked, and keeps no rows."""
        self.comms = self._comm_nodes(rank)
        if not self.exceeds:
            self.places, self.rows = [], []

    def rank_nodes(self, rank: int, linked: bool, block: int = WALKED_BLOCK) -> RankNodes:
        """The rank's nodes for ``analyse_firsts``, its rows put in dump order as they are read,
        ``block`` entries at a time (``linked``: its communication nodes are read to link it to other
        ranks)."""
        from msprobe_dask.analysis.divergence import RankNodes

        def comms() -> list[Any]:
            if not linked:
                return []
            return self._comm_nodes(rank) if self.comms is None else self.comms

        def read(receiving: Collection[int]) -> Iterator[Node | LightNode | QuietRun]:
            return self._walked(rank, receiving, block)

        return RankNodes(len(self.entries), comms, read, self.exceeds)

    def _walked(
        self, rank: int, receiving: Collection[int], block: int
    ) -> Iterator[Node | LightNode | QuietRun]:
        """``flow.walk_nodes`` of every entry's rows in dump order (an entry without rows as one row
        without tensors), made ``block`` entries at a time as the walk asks for them: a walk that stops
        at the rank's first origin half way in (S200k) neither orders nor converts the rows after it.
        (A node reads only its own rows, and a QuietRun cut in two is read as the whole: the same
        nodes as of the whole rank's rows, each Node at its index among them.)"""
        from msprobe_dask.analysis.flow import Node, walk_nodes

        rows: dict[int, list[Row]] = {}
        for place, row in zip(self.places, self.rows):
            rows.setdefault(place, []).append(row)
        order = sorted(self.entries)
        received = sorted(receiving)
        tol, md5_only = self.tolerance, self.md5_only
        for start in range(0, len(order), block):
            end = start + block
            ordered = [row for place in order[start:end] for row in rows.get(place) or (_no_tensor(place),)]
            columns = row_columns(ordered, md5_only)
            here = {i - start for i in received[bisect_left(received, start) : bisect_left(received, end)]}
            for node in walk_nodes(columns, rank, tol.atol, tol.rtol, here):
                yield node.moved(start) if start and node.__class__ is Node else node

    def _comm_nodes(self, rank: int) -> list[Node]:
        """``flow.part_nodes``' communication nodes of the rank's rows in dump order, made of only the
        communication entries' rows (a rank of 50,050 entries has a few hundred): each entry is a node
        of its own (its name, a graph node's id, is its place's alone; an entry without rows is none),
        so the i-th node made is that of the i-th such place, and its index among the rank's nodes is
        its place's among ``entries`` (R8: 1.4 s of the job's last task, its 8 ranks' rows put whole
        in dump order for these nodes)."""
        from msprobe_dask.analysis.flow import part_nodes

        rows: dict[int, list[Row]] = {}
        entry, communication = None, False
        for place, row in zip(self.places, self.rows):
            if row[1] is not entry:  # (an entry's rows come together: each entry tested once)
                entry = row[1]
                communication = entry.startswith(COMM_PREFIXES) and is_communication(entry)
            if communication:
                rows.setdefault(place, []).append(row)
        places = sorted(rows)
        columns = row_columns([row for place in places for row in rows[place]], self.md5_only)
        order = sorted(self.entries)
        indexes = [bisect_left(order, place) for place in places]
        return part_nodes(columns, rank, self.tolerance.atol, True, indexes).comms


def _no_tensor(place: int) -> Row:
    """The row of an entry whose rows were left out: no tensor, a name of its own."""
    return ("", f"\x00{place}", None, _NO_STATS, _NO_STATS, None, None)


_NO_STATS = (None,) * 4


def origin_place(rows: list[tuple[int, Row]], md5_only: bool, tol: Tolerance) -> int:
    """The place of the first entry of ``rows`` (in dump order) where the walk finds an origin, when it
    walks them alone from the first; -1: none."""
    from msprobe_dask.analysis.divergence import Walk, walk_rank
    from msprobe_dask.analysis.findings import ORIGIN
    from msprobe_dask.analysis.flow import walk_nodes
    from msprobe_dask.analysis.links import Links
    from msprobe_dask.analysis.row_entries import entry_spans, row_entries

    columns = row_columns([row for _, row in rows], md5_only)
    places = [place for place, _ in rows]
    spans = entry_spans(row_entries(columns))
    walked = walk_rank("", walk_nodes(columns, 0, tol.atol, tol.rtol), Links(), tol, Walk())
    origin = next((found for found in walked if found.kind == ORIGIN), None)
    return places[spans[origin.index][0]] if origin is not None else -1


def analyse_rank_rows(ranks: Iterable[tuple[str, RankRows]]) -> Divergence | None:
    """The job's divergence from each (step, rank)'s rows (``(label, rows)``, the label as
    ``findings.step_and_rank`` reads it), walked as compare walks its tables; None: no rows. The
    ranks of a step none of whose rows exceeds rtol are neither linked nor walked (no rule finds a node
    there): where no rank's do, the answer is none, the walk's modules not imported."""
    from msprobe_dask.analysis.findings import Divergence, step_and_rank

    steps: dict[str, dict[int, RankRows]] = {}
    for label, rows in ranks:
        step, rank = step_and_rank(label)
        steps.setdefault(step, {})[rank] = rows
    if not steps:
        return None
    tol = next(rows for ranks_of in steps.values() for rows in ranks_of.values()).tolerance
    if not any(rows.exceeds for ranks_of in steps.values() for rows in ranks_of.values()):
        counts = {
            (step, rank): len(rows.entries)
            for step, ranks_of in steps.items()
            for rank, rows in ranks_of.items()
        }
        return Divergence(tol, None, nodes=counts)
    from msprobe_dask.analysis.divergence import analyse_firsts

    groups = {}
    for step, ranks_of in steps.items():
        linked = len(ranks_of) > 1 and any(rows.exceeds for rows in ranks_of.values())
        groups[step] = {rank: rows.rank_nodes(rank, linked) for rank, rows in ranks_of.items()}
    return analyse_firsts(groups, tol)
