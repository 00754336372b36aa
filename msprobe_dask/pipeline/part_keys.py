"""The default match (exact compare keys) of a rank cut into hash partitions, so that no task holds
every row key of the rank (at 1M entries a side, 3.5 GB in one task).

parse part (k) ──counts──> side_facts ──mode──> match_partition (p = 0..P-1)
parse parts (0..k of a side) ──backward counts──> key_part (k)
key_part (k) ──the part's rows by partition: rows, keys, dtypes──> match_partition (p = 0..P-1)
match_partition (p) ──each target part's pairs found in p──> pairs_of_part (k) ──> runs, far partners

A row's compare key is its name with the backward renumbering (``match/exact.py:compare_keys``); a
part's numbering starts where the parts before it end (``key_part`` adds up their counts), so each
part keys its rows alone, as soon as the parts before it are parsed.
A key's partition is its CRC-32 modulo P, so equal keys land in one partition, where they are joined
as ``match/exact.py:join_left`` joins them (a target row with several golden partners pairs with each,
in golden order) and the dtype gate is applied to each pair. The keys themselves are joined, not
digests of them: a 128-bit blake2b digest a key cost the key task twice the CRC's time, and its
key fields read as three columns (``RowPart.key_fields``), not the rows (a rank of 200,200 entries a
side, thread_time: the bucketing of a part's 28,602 rows 22.1 -> 12.9 ms). A partition's rows travel as
columns too (``Bucket``, ``Found``), and where no golden key comes twice (most dumps) they are joined by
dict and map in C, not a row at a time in Python (S50k's one partition, 328,900 rows: see
``match_partition``).
"""

from __future__ import annotations

import marshal
import math
import sys
import zlib
from collections.abc import Iterable
from itertools import chain, count, repeat
from operator import itemgetter
from pathlib import Path
from typing import Any

from msprobe_dask.dump.source import DumpSource
from msprobe_dask.graph.gcpause import rare_collections_from_now
from msprobe_dask.match.dtypes import dtypes_pairable
from msprobe_dask.match.exact import column_keys
from msprobe_dask.pipeline.part_match import PlanCut, RankFacts, cut_part_plan, rank_facts
from msprobe_dask.pipeline.part_scan import PartKeys, RowPart, SideScan, rank_bytes

PARTITION_BYTES = 128 << 20
"""dump.json bytes (both sides) per hash partition: a rank of 1M entries a side (1.8 GB) has 14
partitions, whose tasks each hold the keys of about 500,000 rows; a rank under 128 MB has one."""


def partition_count(npu_src: DumpSource, bench_src: DumpSource) -> int:
    """(Sized by the dump, not by its parts: every part sends each partition its rows' keys, so
    parts x partitions edges.)"""
    return max(1, math.ceil(rank_bytes(npu_src, bench_src) / PARTITION_BYTES))


def side_facts(npu_scan: SideScan, bench_scan: SideScan, npu_parts: int, *keys: PartKeys) -> RankFacts:
    """The rank's facts (its mode: the errors of a mismatched pair of dumps are raised here)."""
    return rank_facts(npu_scan, bench_scan, keys[:npu_parts], keys[npu_parts:])


def key_part(
    part: RowPart, renumber: bool, partitions: int, own: PartKeys, *before: PartKeys
) -> tuple[bytes, ...]:
    """A part's rows by the partition of their compare key: for each partition, marshal bytes of its
    ``Bucket``.
    The part's renumbering starts where the parts ``before`` it on its side end (``own``: its keys),
    so that it waits for their parses only, not for every part's (and the rank's facts)."""
    rare_collections_from_now()
    seen: dict[str, int] = {}
    for earlier in before:
        for op, n in earlier.backward.items():
            seen[op] = seen.get(op, 0) + n
    start = {op: seen.get(op, 0) for op in own.backward}
    names, entries, dtypes = part.key_fields
    keys = column_keys(names, entries, renumber, start)
    dtypes = list(map(sys.intern, dtypes))
    if partitions == 1:
        return (marshal.dumps((None, keys, dtypes)),)
    buckets: list[tuple[list[int], list[str], list[str]]] = [([], [], []) for _ in range(partitions)]
    crc32 = zlib.crc32
    for i, (key, dtype) in enumerate(zip(keys, dtypes)):
        rows, bucket_keys, bucket_dtypes = buckets[crc32(key.encode()) % partitions]
        rows.append(i)
        bucket_keys.append(key)
        bucket_dtypes.append(dtype)
    return tuple(marshal.dumps(bucket) for bucket in buckets)


Bucket = tuple[list[int] | None, list[str], list[str]]
"""A part's rows in one partition, as columns: their rows in the part (None: every row of the part, in
order), their compare keys and their dtypes."""

Found = tuple[list[int] | None, list[int]]
"""A target part's pairs found in one partition, in target order, as columns: the rows in the part (None:
each row of the part once, in order) and each one's partner among all golden rows (-1: none)."""


class _Gate(dict[tuple[str, str | None], bool]):
    """Whether a pair of dtypes (target, golden; None: no partner) pairs, asked once a pair (a rank's
    dtype pairs are few)."""

    def __init__(self, cross_framework: bool) -> None:
        super().__init__()
        self.cross = cross_framework

    def __missing__(self, pair: tuple[str, str | None]) -> bool:
        npu, bench = pair
        paired = self[pair] = bench is not None and dtypes_pairable(npu, bench, self.cross)
        return paired


def match_partition(facts: RankFacts, npu_parts: int, *spooled: bytes | Path) -> tuple[Any, ...]:
    """Join one partition's rows (each part's ``Bucket`` from ``key_part``, or the file it is in): for
    each target part, marshal bytes of its ``Found``; last, whether a target row found no partner.
    Where no golden key comes twice, each target row has one partner at most: the golden row at its own
    place where the part's keys and dtypes are those of the golden rows there (aligned dumps: compared
    as lists), else looked up by dict and map; where one does, each of a row's partners pairs with it,
    in golden order. S50k's 328,900 rows: 0.23 -> 0.10 s of CPU (the decoding included)."""
    rare_collections_from_now()
    buckets: list[Bucket] = [
        marshal.loads(bucket if isinstance(bucket, bytes) else bucket.read_bytes()) for bucket in spooled
    ]
    bench_rows: list[int] = []  # (each golden row of the partition: its index among all golden rows)
    bench_keys: list[str] = []
    bench_dtypes: list[str | None] = []
    for offset, (rows, keys, dtypes) in zip(facts.bench_offsets, buckets[npu_parts:]):
        bench_rows += range(offset, offset + len(keys)) if rows is None else map(offset.__add__, rows)
        bench_keys += keys
        bench_dtypes += dtypes
    bench_rows.append(-1)  # (at index -1: what a target row without a partner gets)
    bench_dtypes.append(None)
    first = dict(zip(reversed(bench_keys), range(len(bench_keys) - 1, -1, -1)))  # a key's first index
    every: dict[str, list[int]] | None = None  # (each key's indexes, where a golden key comes twice)
    if len(first) < len(bench_keys):
        every = {}
        for index, key in enumerate(bench_keys):
            every.setdefault(key, []).append(index)
    gate, unpaired, found = _Gate(facts.cross_framework), False, []
    at = 0  # (the index of the part's first row among the target rows of the partition)
    for rows, keys, dtypes in buckets[:npu_parts]:
        same_place = slice(at, at + len(keys))
        at += len(keys)
        if (
            every is None
            and rows is None
            and keys == bench_keys[same_place]
            and dtypes == bench_dtypes[same_place]
            and all(gate[dtype, dtype] for dtype in set(dtypes))
        ):
            js = bench_rows[same_place]  # (aligned dumps: each row's partner at its own place)
        elif every is None:  # one partner at most
            partners = list(map(first.get, keys, repeat(-1)))
            paired = list(map(gate.__getitem__, zip(dtypes, map(bench_dtypes.__getitem__, partners))))
            js = list(map(bench_rows.__getitem__, partners))
            if not all(paired):
                unpaired = True
                js = [j if ok else -1 for j, ok in zip(js, paired)]
        else:
            pair_rows: list[int] = []
            js = []
            for i, key, dtype in zip(count() if rows is None else rows, keys, dtypes):
                for index in every.get(key, (-1,)):
                    ok = gate[dtype, bench_dtypes[index]]
                    pair_rows.append(i)
                    js.append(bench_rows[index] if ok else -1)
                    unpaired = unpaired or not ok
            rows = pair_rows
        found.append(marshal.dumps((rows, js)))
    return (*found, unpaired)


def pairs_of_part(facts: RankFacts, window: range, *found: bytes) -> PlanCut:
    """A target part's pairs gathered from every partition, in target order (a row's several partners
    all come from one partition, in golden order), cut into its plan."""
    columns: Iterable[Found] = map(marshal.loads, found)
    pairs: Iterable[tuple[int, int]] = chain.from_iterable(
        zip(count() if rows is None else rows, js) for rows, js in columns
    )
    if len(found) > 1:  # (one partition's are in target order already)
        pairs = sorted(pairs, key=itemgetter(0))
    return cut_part_plan(pairs, window, facts.bench_offsets)
