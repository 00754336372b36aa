"""Matching cost: -fm and -lm on two synthetic dumps of N entries each (default 200,000).

Builds, in memory, a target and a golden dump of a layered model (PyTorch names on both sides for -fm,
MindSpore target names for -lm):
each layer is a Cell/Module with linear calls inside, the target makes one extra top-level call per
layer (so every later call count is shifted), and every entry has three rows. Times the pure matching
functions only (keys + join), at N/4, N/2 and N to show that the cost is linear.

    python workflows/bench_matching.py [N]
"""

from __future__ import annotations

import sys
import time

from msprobe_dask.match.exact import compare_keys, join_left
from msprobe_dask.match.fuzzy import KeyTable, fuzzy_row_keys
from msprobe_dask.match.layer_mapping import entry_pairs, row_mapping

ROW_SUFFIXES = (".input.0", ".input.1", ".output.0")
CALLS_PER_LAYER = 8


def synthetic(n_entries: int, mindspore: bool, extra_call: bool) -> tuple[list[str], dict[str, str | None]]:
    """Entry names in dump order and construct.json parents."""
    cell, api, block, dense = (
        ("Cell", "MintFunctional", "Block", "dense"),
        ("Module", "Functional", "Block", "fc"),
    )[0 if mindspore else 1]
    entries: list[str] = []
    parents: dict[str, str | None] = {}
    count = 0
    layer = 0
    while len(entries) < n_entries:
        owner = f"{cell}.layers.{layer}.{block}.forward.0"
        if extra_call:  # the extra call: shifts every later count on the target side
            extra = f"{api}.relu.{layer}.forward"
            entries.append(extra)
            parents[extra] = None
        for i in range(CALLS_PER_LAYER):
            sub = f"{cell}.layers.{layer}.{dense}{i}.Linear.forward.0"
            name = f"{api}.linear.{count}.forward"
            count += 1
            entries += [name, sub]
            parents[name], parents[sub] = sub, owner
        entries.append(owner)
        parents[owner] = None
        layer += 1
    return entries[:n_entries], parents


def rows_of(entries: list[str]) -> list[tuple[str, str]]:
    return [(entry + suffix, entry) for entry in entries for suffix in ROW_SUFFIXES]


class _Row:
    __slots__ = ("name", "entry")

    def __init__(self, name: str, entry: str) -> None:
        self.name, self.entry = name, entry


def time_fuzzy(npu: tuple[list[str], dict], bench: tuple[list[str], dict]) -> tuple[float, int]:
    start = time.perf_counter()
    table = KeyTable()
    keys = [
        fuzzy_row_keys(rows_of(entries), table.entry_keys(entries, parents))
        for entries, parents in (npu, bench)
    ]
    pairs = join_left(keys[0], keys[1])
    return time.perf_counter() - start, sum(j is not None for _, j in pairs)


def time_layer(npu: tuple[list[str], dict], bench: tuple[list[str], dict]) -> tuple[float, int]:
    start = time.perf_counter()
    entry_map = entry_pairs(
        npu[0], npu[1], bench[0], bench[1], {"Block": {f"dense{i}": f"fc{i}" for i in range(8)}}
    )
    mapping = row_mapping(rows_of(npu[0]), rows_of(bench[0]), entry_map)
    bench_rows = [_Row(name, entry) for name, entry in rows_of(bench[0])]
    npu_keys = [mapping.get(name, name) for name, _ in rows_of(npu[0])]
    pairs = join_left(npu_keys, compare_keys(bench_rows))  # type: ignore[arg-type]
    return time.perf_counter() - start, sum(j is not None for _, j in pairs)


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    print(f"{'entries':>9} {'rows':>9} {'-fm s':>7} {'paired':>9} {'-lm s':>7} {'paired':>9}")
    for size in (n // 4, n // 2, n):
        golden = synthetic(size, False, False)
        fm, fm_pairs = time_fuzzy(synthetic(size, False, True), golden)  # same framework, shifted counts
        lm, lm_pairs = time_layer(synthetic(size, True, True), golden)  # MindSpore names vs PyTorch names
        print(f"{size:>9} {3 * size:>9} {fm:>7.2f} {fm_pairs:>9} {lm:>7.2f} {lm_pairs:>9}")


if __name__ == "__main__":
    main()
