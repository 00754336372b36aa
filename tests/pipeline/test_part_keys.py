"""The default match cut into hash partitions (pipeline/part_keys.py) pairs the rows the match of the
whole side pairs (pipeline/pairing.py:pair_indices), however the rows are cut into parts and
partitions: backward entries of one op in several parts (renumbered across them), golden keys
that come twice, dtypes the gate refuses, rows with no partner."""

from __future__ import annotations

import marshal
import random
from pathlib import Path

import pytest

from msprobe_dask.dump.rows import DTYPE, ENTRY, NAME, LeafRow, row_key
from msprobe_dask.dump.source import DumpSource
from msprobe_dask.match.exact import backward_counts, compare_keys
from msprobe_dask.pipeline.pairing import MatchOptions, pair_indices
from msprobe_dask.pipeline.part_keys import key_part, match_partition, pairs_of_part, side_facts
from msprobe_dask.pipeline.part_scan import PartKeys, RowPart, SideScan
from msprobe_dask.pipeline.sides import MatchSide

OPS = ["Functional.linear", "Torch.add", "Module.fc.Linear", "Tensor.mul"]
DTYPES = ["torch.float32", "torch.float32", "torch.float16", "torch.int64"]


def _entries(rng: random.Random, count: int) -> list[list[LeafRow]]:
    """Entries (each its rows) of random ops, forward and backward, numbered as msProbe numbers them
    (some numbers skipped, so the renumbering changes them); a few rows named twice."""
    entries = []
    numbers: dict[tuple[str, str], int] = {}
    for _ in range(count):
        op = rng.choice(OPS)
        direction = rng.choice(["forward", "backward", "backward"])
        number = numbers[op, direction] = numbers.get((op, direction), -1) + rng.choice([1, 1, 2])
        entry = f"{op}.{direction}.{number}" if op.startswith("Module") else f"{op}.{number}.{direction}"
        leaves = rng.choice([["input.0", "output.0"], ["input.0", "input.0", "output.0"], ["output.0"]])
        entries.append(
            [
                LeafRow(
                    f"{entry}.{leaf}",
                    entry,
                    leaf.split(".")[0],
                    rng.choice(DTYPES),
                    "[2]",
                    "False",
                    (1.0, 0.0, 0.5, 1.0),
                    "N/A",
                    "-1",
                )
                for leaf in leaves
            ]
        )
    return entries


def _cut(rng: random.Random, entries: list[list[LeafRow]], parts: int) -> list[tuple[LeafRow, ...]]:
    bounds = sorted(rng.randrange(len(entries) + 1) for _ in range(parts - 1))
    return [
        tuple(r for e in entries[lo:hi] for r in e) for lo, hi in zip([0, *bounds], [*bounds, len(entries)])
    ]


def _scan(tmp_path: Path, name: str) -> SideScan:
    return SideScan(DumpSource(tmp_path / name / "dump.json"), "statistics", "pytorch", False, whole=False)


def test_a_rows_key_fields_are_at_one_place_in_a_leaf_row_a_row_key_and_their_tuples() -> None:
    row = _entries(random.Random(0), 1)[0][0]
    for form in (row, row_key(row), tuple(row), tuple(row_key(row))):
        assert (form[NAME], form[ENTRY], form[DTYPE]) == (row.name, row.entry, row.dtype)


def test_keys_of_parts_renumbered_from_their_starts_are_the_whole_sides_keys() -> None:
    rng = random.Random(1)
    entries = _entries(rng, 300)
    rows = [r for e in entries for r in e]
    whole = compare_keys(rows)
    seen: dict[str, int] = {}
    keys = []
    for part in _cut(rng, entries, 7):
        keys += compare_keys(part, True, dict(seen))
        for op, n in backward_counts(part).items():
            seen[op] = seen.get(op, 0) + n
    assert keys == whole and whole != [r.name for r in rows]  # (the renumbering changed some)


@pytest.mark.parametrize("seed", range(6))
def test_partitions_pair_the_rows_the_whole_match_pairs(seed: int, tmp_path: Path) -> None:
    rng = random.Random(seed)
    npu_parts = _cut(rng, _entries(rng, 200), rng.randrange(1, 9))
    bench_parts = _cut(rng, _entries(rng, 200), rng.randrange(1, 9))
    whole = _check_partitions(rng, npu_parts, bench_parts, rng.randrange(1, 6), tmp_path)
    assert len(whole) > sum(map(len, npu_parts))  # (some rows paired twice)


@pytest.mark.parametrize("changed", [0, 1, 5])
def test_aligned_sides_pair_the_rows_the_whole_match_pairs(changed: int, tmp_path: Path) -> None:
    """Both sides the same entries, cut alike (their rows at the same places: matched part by part), or
    with ``changed`` rows of the golden side given another dtype (some the gate refuses), or renamed."""
    rng = random.Random(changed)
    entries = _entries(rng, 300)
    entries = [list({r.name: r for r in reversed(e)}.values())[::-1] for e in entries]  # (no name twice)
    npu_parts = _cut(random.Random(7), entries, 5)
    bench_rows = [r for p in npu_parts for r in p]
    for i in rng.sample(range(len(bench_rows)), changed):
        other = "torch.int64" if bench_rows[i].dtype != "torch.int64" else "torch.float16"
        bench_rows[i] = (
            bench_rows[i]._replace(dtype=other) if i % 2 else bench_rows[i]._replace(name="renamed")
        )
    bench_parts, at = [], 0
    for part in npu_parts:
        bench_parts.append(tuple(bench_rows[at : at + len(part)]))
        at += len(part)
    _check_partitions(rng, npu_parts, bench_parts, 1, tmp_path)


def _check_partitions(
    rng: random.Random,
    npu_parts: list[tuple[LeafRow, ...]],
    bench_parts: list[tuple[LeafRow, ...]],
    partitions: int,
    tmp_path: Path,
) -> list[tuple[int, int | None]]:
    """The pairs of ``part_keys`` (in ``partitions``), part by part, are those of the whole side's match
    (returned)."""
    npu_rows = [r for p in npu_parts for r in p]
    bench_rows = [r for p in bench_parts for r in p]
    scans = _scan(tmp_path, "npu"), _scan(tmp_path, "bench")
    sides = [
        MatchSide(s.source, "statistics", "pytorch", False, [row_key(r) for r in rows])
        for s, rows in zip(scans, (npu_rows, bench_rows))
    ]
    whole = pair_indices(*sides, False, MatchOptions())
    assert len({j for _, j in whole if j is not None}) > 50

    parts = [*npu_parts, *bench_parts]
    keys = [PartKeys.of(p, False, False) for p in parts]
    facts = side_facts(*scans, len(npu_parts), *keys)
    side = [0 if i < len(npu_parts) else len(npu_parts) for i in range(len(parts))]  # (where its side begins)
    held = [RowPart.of(p, False) for p in parts]
    # (held, packed as it travels between processes, or left in a spool file with its key fields beside)
    received = [
        (part, RowPart(part.packed), part.spooled(tmp_path / f"rows-{i}"))[i % 3]
        for i, part in enumerate(held)
    ]
    buckets = [
        key_part(part, True, partitions, keys[i], *keys[side[i] : i]) for i, part in enumerate(received)
    ]
    found = [match_partition(facts, len(npu_parts), *(b[p] for b in buckets)) for p in range(partitions)]
    assert any(f[-1] for f in found) == any(j is None for _, j in whole)
    window = range(len(bench_parts) // 2, len(bench_parts) // 2 + 1)  # the other parts' partners: far
    paired, start = [], 0
    for k, part in enumerate(npu_parts):
        runs, far = pairs_of_part(facts, window, *(f[k] for f in found))
        own = [(start + i, None if j < 0 else j) for i, j in _run_pairs(marshal.loads(runs))]
        lo, hi = facts.bench_offsets[window.start], facts.bench_offsets[window.stop]
        assert sorted(r for rows in far.values() for r in rows) == sorted(
            j for _, j in own if j is not None and not lo <= j < hi
        )
        paired += own
        start += len(part)
    assert paired == whole
    return whole


def _run_pairs(runs: list[tuple[int, int, int]]) -> list[tuple[int, int]]:
    """(npu row, partner or -1) of each row of a plan's runs."""
    return [(i + t, j + t if j >= 0 else -1) for i, j, n in runs for t in range(n)]
