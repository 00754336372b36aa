"""Pair the rows of two sides (the match stage) and list the tensor files each pair needs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from msprobe_dask.dump.rows import NO_DATA
from msprobe_dask.match.dtypes import dtypes_pairable
from msprobe_dask.match.exact import compare_keys, join_left
from msprobe_dask.pipeline.sides import Side
from msprobe_dask.pipeline.table import RowPair


@dataclass(frozen=True, slots=True)
class MatchOptions:
    fuzzy: bool = False


def pair_rows(npu: Side, bench: Side, cross_framework: bool, options: MatchOptions) -> list[RowPair]:
    """Target rows in order, each with its golden partner or None (compare.md §3.1)."""
    renumber = not (options.fuzzy or npu.source.is_debug)
    npu_keys = compare_keys(npu.rows, renumber)
    bench_keys = compare_keys(bench.rows, renumber)
    pairs = []
    for i, j in join_left(npu_keys, bench_keys):
        a, b = npu.rows[i], bench.rows[j] if j is not None else None
        if b is not None and not dtypes_pairable(a.dtype, b.dtype, cross_framework):
            b = None
        pairs.append(RowPair(a, b))
    return pairs


TensorJob = tuple[Path, Path] | None


def tensor_jobs(pairs: list[RowPair], npu: Side, bench: Side) -> list[TensorJob]:
    """The two files to measure for each pair, or None where the reference reports 'unsupported'.

    Every path is checked to stay inside its dump_tensor_data folder before anything is read.
    """
    from msprobe_dask.dump.tensor_file import resolve_data_file

    jobs: list[TensorJob] = []
    for pair in pairs:
        if pair.bench is None or NO_DATA in (pair.npu.data_name, pair.bench.data_name):
            jobs.append(None)
            continue
        jobs.append((resolve_data_file(npu.source.tensor_dir, pair.npu.data_name),
                     resolve_data_file(bench.source.tensor_dir, pair.bench.data_name)))
    return jobs
