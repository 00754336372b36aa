"""The default match (exact compare keys) of a rank cut into hash partitions, so that no task holds
every row key of the rank (at 1M entries a side, 3.5 GB in one task).

parse part (k) ──counts──> side_facts ──mode──> match_partition (p = 0..P-1)
parse parts (0..k of a side) ──backward counts──> key_part (k)
key_part (k) ──the part's rows by partition: (row, key, dtype)──> match_partition (p = 0..P-1)
match_partition (p) ──each target part's pairs found in p──> pairs_of_part (k) ──> runs, far partners

A row's compare key is its name with the backward renumbering (``match/exact.py:compare_keys``); a
part's numbering starts where the parts before it end (``key_part`` adds up their counts), so each
part keys its rows alone, as soon as the parts before it are parsed.
A key's partition is its CRC-32 modulo P, so equal keys land in one partition, where they are joined
as ``match/exact.py:join_left`` joins them (a target row with several golden partners pairs with each,
in golden order) and the dtype gate is applied to each pair. The keys themselves are joined, not
digests of them: a 128-bit blake2b digest a key cost the key task twice the CRC's time, and its
key fields read as three columns (``RowPart.key_fields``), not the rows (a rank of 200,200 entries a
side, thread_time: the bucketing of a part's 28,602 rows 22.1 -> 12.9 ms).
"""

from __future__ import annotations

import marshal
import math
import sys
import zlib
from itertools import chain, count
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
    """A part's rows by the partition of their compare key: for each partition, marshal bytes of
    [(row in the part, the key, dtype)].
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
    intern = sys.intern
    if partitions == 1:
        return (marshal.dumps(list(zip(count(), keys, map(intern, dtypes)))),)
    buckets: list[list[tuple[int, str, str]]] = [[] for _ in range(partitions)]
    crc32 = zlib.crc32
    for i, (key, dtype) in enumerate(zip(keys, dtypes)):
        buckets[crc32(key.encode()) % partitions].append((i, key, intern(dtype)))
    return tuple(marshal.dumps(bucket) for bucket in buckets)


def match_partition(facts: RankFacts, npu_parts: int, *spooled: bytes | Path) -> tuple[Any, ...]:
    """Join one partition's rows (each part's bucket of ``key_part``, or the file it is in): for each
    target part, marshal bytes of its [(row in the part, partner among all golden rows or -1)] in target
    order; last, whether a target row found no partner."""
    rare_collections_from_now()
    buckets = [bucket if isinstance(bucket, bytes) else bucket.read_bytes() for bucket in spooled]
    partners: dict[str, list[tuple[int, str]]] = {}
    for offset, bucket in zip(facts.bench_offsets, buckets[npu_parts:]):
        for j, key, dtype in marshal.loads(bucket):
            partners.setdefault(key, []).append((offset + j, dtype))
    cross, unpaired, found = facts.cross_framework, False, []
    pairable: dict[tuple[str, str], bool] = {}  # (a rank's dtype pairs are few)
    for bucket in buckets[:npu_parts]:
        pairs: list[tuple[int, int]] = []
        for i, key, dtype in marshal.loads(bucket):
            for j, bench_dtype in partners.get(key, ((-1, ""),)):
                paired = pairable.get((dtype, bench_dtype))
                if paired is None:
                    paired = pairable[dtype, bench_dtype] = dtypes_pairable(dtype, bench_dtype, cross)
                paired = paired and j >= 0
                pairs.append((i, j if paired else -1))
                unpaired = unpaired or not paired
        found.append(marshal.dumps(pairs))
    return (*found, unpaired)


def pairs_of_part(facts: RankFacts, window: range, *found: bytes) -> PlanCut:
    """A target part's pairs gathered from every partition, in target order (a row's several partners
    all come from one partition, in golden order), cut into its plan."""
    pairs = sorted(chain.from_iterable(map(marshal.loads, found)), key=itemgetter(0))
    return cut_part_plan(pairs, window, facts.bench_offsets)
