"""A rank's match across its parts: the rows of both sides paired from their keys, and the plan that
tells each table part where its rows' partners are (the golden parts of its window, or rows exported
from the golden parts outside it)."""

from __future__ import annotations

import marshal
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any

from msprobe_dask.errors import DumpError
from msprobe_dask.graph.gcpause import rare_collections_from_now
from msprobe_dask.pipeline.pairing import MatchOptions, pair_indices
from msprobe_dask.pipeline.part_scan import PartKeys, RowPart, SideScan
from msprobe_dask.pipeline.sides import MatchSide, compare_mode, is_cross_framework
from msprobe_dask.table import StatKinds, columns_for, float_columns


def bench_window(k: int, npu_parts: int, bench_parts: int) -> range:
    """The bench parts a table part gets whole: those at the same place of their dump (the partners of
    rows of dumps that differ little, or not at all); the others' partners come as foreign rows."""
    return range(k * bench_parts // npu_parts, ((k + 1) * bench_parts - 1) // npu_parts + 1)


@dataclass(frozen=True, slots=True)
class PlanHead:
    """What every table part needs from the match."""

    mode: str
    columns: list[str]
    float_stats: tuple[bool, ...]
    bench_offsets: tuple[int, ...]  # index of each bench part's first row among all bench rows


@dataclass(frozen=True, slots=True)
class RankFacts:
    """What the match of a rank knows before pairing a row: the compare mode and the plan head's facts."""

    mode: str
    cross_framework: bool
    columns: list[str]
    npu_kinds: list[StatKinds]
    bench_kinds: list[StatKinds]
    bench_offsets: tuple[int, ...]  # index of each bench part's first row among all bench rows, and the total

    def head(self, unpaired: bool) -> PlanHead:
        """The plan head, once it is known whether any npu row has no partner."""
        float_stats = float_columns(self.npu_kinds, self.bench_kinds, unpaired)
        return PlanHead(self.mode, self.columns, float_stats, self.bench_offsets)


def rank_facts(
    npu_scan: SideScan, bench_scan: SideScan, npu_keys: Sequence[PartKeys], bench_keys: Sequence[PartKeys]
) -> RankFacts:
    """The rank's facts from its parts' keys (a DumpError for two dumps that cannot be compared)."""
    npu, bench = (
        MatchSide(scan.source, scan.task, scan.framework, any(p.has_md5 for p in keys), ())
        for scan, keys in ((npu_scan, npu_keys), (bench_scan, bench_keys))
    )
    mode = compare_mode(npu, bench)
    if mode == "tensor":
        raise DumpError(npu.source.dump_json, "holds tensors, but its head said statistics")
    cross_framework = is_cross_framework(npu, bench)
    offsets = [0]
    for part in bench_keys:
        offsets.append(offsets[-1] + part.count)
    return RankFacts(
        mode,
        cross_framework,
        columns_for(mode, npu_scan.source.has_stack()),
        [part.stat_kinds for part in npu_keys],
        [part.stat_kinds for part in bench_keys],
        tuple(offsets),
    )


def plan_head(facts: RankFacts, *unpaired: bool) -> PlanHead:
    """The plan head of a match cut into partitions (``unpaired``: each partition's)."""
    return facts.head(any(unpaired))


Runs = list[tuple[int, int, int]]
"""A table part's rows as runs (first npu row in the part, its partner among all bench rows or -1 for
none, length): consecutive npu rows paired with consecutive bench rows, or unpaired, make one run (a
part of two aligned dumps is one run; a row paired twice comes twice)."""

PlanCut = tuple[bytes, dict[int, list[int]]]
"""A table part's plan: its runs (marshal bytes), and the partners outside its window, by bench part
({bench part: [bench row]})."""


def cut_part_plan(pairs: Iterable[tuple[int, int]], window: range, offsets: Sequence[int]) -> PlanCut:
    """The plan of a table part from its pairs (npu row in the part, partner among all bench rows or -1),
    in npu order."""
    lo, hi = offsets[window.start], offsets[window.stop]
    runs: Runs = []
    far: dict[int, list[int]] = {}
    i0 = j0 = n = -1
    for i, j in pairs:
        if j >= 0 and not lo <= j < hi:
            far.setdefault(bisect_right(offsets, j) - 1, []).append(j)
        if n > 0 and i == i0 + n and (j == j0 + n if j0 >= 0 else j < 0):
            n += 1
            continue
        if n > 0:
            runs.append((i0, j0, n))
        i0, j0, n = i, j, 1
    if n > 0:
        runs.append((i0, j0, n))
    return marshal.dumps(runs), far


def row_starts(*plans: bytes) -> tuple[int, ...]:
    """Index of each table part's first row among the rank's rows, from the parts' plans."""
    starts, at = [], 0
    for plan in plans:
        starts.append(at)
        at += sum(n for _, _, n in marshal.loads(plan))
    return tuple(starts)


def wanted_rows(
    offsets: Sequence[int], *fars: dict[int, list[int]]
) -> tuple[tuple[int, dict[int, list[int]]], ...]:
    """For each bench part, its first row's index and the rows that table parts outside its window
    pair with ({table part: [bench row]}), from each table part's far partners."""
    wanted: list[dict[int, list[int]]] = [{} for _ in offsets[1:]]
    for k, far in enumerate(fars):
        for j, rows in far.items():
            wanted[j][k] = rows
    return tuple(zip(offsets, wanted))


def _match_side(scan: SideScan, keys: Sequence[PartKeys]) -> MatchSide:
    rows = list(chain.from_iterable(part.rows() for part in keys))
    return MatchSide(scan.source, scan.task, scan.framework, any(p.has_md5 for p in keys), rows)


def match_parts(
    npu_scan: SideScan,
    bench_scan: SideScan,
    match: MatchOptions,
    windows: tuple[range, ...],
    *keys: PartKeys,
) -> tuple[Any, ...]:
    """Pair the rows of both sides (every matching option) from their keys in one task and cut the plan:
    the head, each table part's runs (marshal bytes), and for each bench part the rows wanted by table
    parts outside whose window (``windows[k]``, its bench parts) it lies (see ``wanted_rows``)."""
    rare_collections_from_now()
    npu_keys, bench_keys = keys[: len(windows)], keys[len(windows) :]
    facts = rank_facts(npu_scan, bench_scan, npu_keys, bench_keys)
    npu, bench = _match_side(npu_scan, npu_keys), _match_side(bench_scan, bench_keys)
    indices = pair_indices(npu, bench, facts.cross_framework, match)
    cuts = []
    at, start = 0, 0
    for k, part in enumerate(npu_keys):
        end = start + part.count
        begin = at
        while at < len(indices) and indices[at][0] < end:
            at += 1
        own = ((i - start, -1 if j is None else j) for i, j in indices[begin:at])
        cuts.append(cut_part_plan(own, windows[k], facts.bench_offsets))
        start = end
    head = facts.head(any(j is None for _, j in indices))
    return (head, *(runs for runs, _ in cuts), *wanted_rows(facts.bench_offsets, *(far for _, far in cuts)))


def export_rows(
    wanted: tuple[int, dict[int, list[int]]], part: RowPart
) -> dict[int, dict[int, tuple[Any, ...]]]:
    """The rows of one bench part (its first row's index, {table part: [bench row]}) that table parts
    outside its window pair with: {table part: {bench row: row}} (nothing decoded when none is wanted,
    as for aligned dumps)."""
    offset, wanted_by = wanted
    rows = part.rows if wanted_by else ()
    return {k: {j: tuple(rows[j - offset]) for j in js} for k, js in wanted_by.items()}


def gather_foreign(parts: int, *exports: dict[int, dict[int, tuple[Any, ...]]]) -> tuple[bytes, ...]:
    """Each table part's foreign rows, as marshal bytes of {bench row: row}."""
    foreign: list[dict[int, tuple[Any, ...]]] = [{} for _ in range(parts)]
    for export in exports:
        for k, rows in export.items():
            foreign[k].update(rows)
    return tuple(marshal.dumps(rows) for rows in foreign)
