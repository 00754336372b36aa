"""Pair the rows of two sides (the match stage) and list the tensor files each pair needs.

Which key a target row is joined on depends on the options, by the reference's priority
(compare.md §3): ``-am`` > ``-cm`` > ``-lm``/``-dm`` > ``-fm`` > exact names. Under the mappings the
golden side keeps its backward-renumbered keys and the target side is mapped from its own names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from msprobe_dask.dump.markers import NO_DATA_NAME
from msprobe_dask.errors import ConfigError
from msprobe_dask.match.api_mapping import ApiPair, api_keys, parse_api_pairs
from msprobe_dask.match.cell_mapping import cell_key
from msprobe_dask.match.data_mapping import data_keys
from msprobe_dask.match.dtypes import dtypes_pairable
from msprobe_dask.match.exact import compare_keys, join_left
from msprobe_dask.match.fuzzy import KeyTable, fuzzy_row_keys
from msprobe_dask.match.mapfile import load_name_map, load_yaml, warn_unused
from msprobe_dask.pipeline.sides import MatchSide, Side
from msprobe_dask.table import RowPair, TensorJob

MappingFile = bool | str | Path | None  # True: the flag without a file


@dataclass(frozen=True, slots=True)
class MatchOptions:
    """Matching options; mapping files are read and checked when the options are made."""

    fuzzy: bool = False
    api_mapping: MappingFile = None
    cell_mapping: MappingFile = None
    data_mapping: str | Path | None = None
    layer_mapping: MappingFile = None
    api_pairs: tuple[ApiPair, ...] = field(default=(), init=False, repr=False)
    cell_table: dict[str, str] = field(default_factory=dict, init=False, repr=False, compare=False)
    data_table: dict[str, str] = field(default_factory=dict, init=False, repr=False, compare=False)
    layer_table: Any = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        api_file, cell_file = _file(self.api_mapping), _file(self.cell_mapping)
        if api_file is not None:
            object.__setattr__(self, "api_pairs", parse_api_pairs(api_file, load_yaml(api_file)))
        if cell_file is not None:
            object.__setattr__(self, "cell_table", load_name_map(cell_file, "cell mapping"))
        if self.data_mapping:
            object.__setattr__(self, "data_table", load_name_map(self.data_mapping, "data mapping"))
        if self.layer_mapping:
            from msprobe_dask.match.layer_mapping import load_layer_yaml

            object.__setattr__(self, "layer_table", load_layer_yaml(_file(self.layer_mapping)))


def _is_file(value: MappingFile) -> bool:
    return isinstance(value, (str, Path)) and bool(value)


def _file(value: MappingFile) -> str | Path | None:
    return value if _is_file(value) else None  # type: ignore[return-value]


def npu_match_keys(
    npu: MatchSide, bench: MatchSide, options: MatchOptions
) -> tuple[list[str], list[str], bool]:
    """(target keys, golden keys, whether the dtype gate applies) for the chosen matching."""
    debug = npu.source.is_debug
    if options.api_mapping:
        if npu.framework == "pytorch":  # (a pytorch target has a pytorch golden: is_cross_framework)
            raise ConfigError("-am", "maps MindSpore APIs to PyTorch's: not for two PyTorch dumps")
        rows = [(r.name, r.entry, r.state) for r in npu.rows]
        bench_rows = [(r.name, r.entry, r.state) for r in bench.rows]
        keys = api_keys(
            rows, {r.entry for r in bench.rows}, bench_rows, options.api_pairs, _file(options.api_mapping)
        )
        return keys, compare_keys(bench.rows, not debug), True
    if options.cell_mapping:
        used: set[str] = set()
        keys = [cell_key(r.name, options.cell_table, used) for r in npu.rows]
        warn_unused(
            _file(options.cell_mapping),
            "cell mapping",
            [k for k in options.cell_table if k not in used],
            "any target cell name",
        )
        return keys, compare_keys(bench.rows, not debug), True
    if options.layer_mapping and npu.framework != "pytorch":
        from msprobe_dask.match.layer_mapping import layer_row_mapping

        table = {
            **options.data_table,
            **layer_row_mapping(npu, bench, options.layer_table, _file(options.layer_mapping)),
        }
        return data_keys([r.name for r in npu.rows], table), compare_keys(bench.rows, not debug), False
    if options.data_mapping:
        keys = data_keys([r.name for r in npu.rows], options.data_table, options.data_mapping)
        return keys, compare_keys(bench.rows, not debug), False
    if options.fuzzy:
        from msprobe_dask.dump.dumpjson import load_construct

        key_table = KeyTable()
        sides = []
        for side in (npu, bench):
            entries = list(dict.fromkeys(r.entry for r in side.rows))
            parents, _, _ = load_construct(side.source.construct_json)
            entry_keys = key_table.entry_keys(entries, parents)
            sides.append(fuzzy_row_keys(((r.name, r.entry) for r in side.rows), entry_keys))
        return sides[0], sides[1], True
    renumber = not debug
    return compare_keys(npu.rows, renumber), compare_keys(bench.rows, renumber), True


def pair_indices(
    npu: MatchSide, bench: MatchSide, cross_framework: bool, options: MatchOptions
) -> list[tuple[int, int | None]]:
    """(target row, golden partner or None) indices, target rows in order (compare.md §3)."""
    npu_keys, bench_keys, gate = npu_match_keys(npu, bench, options)
    pairs = join_left(npu_keys, bench_keys)
    if not gate:
        return pairs
    npu_rows, bench_rows = npu.rows, bench.rows
    return [
        (i, j)
        if j is None or dtypes_pairable(npu_rows[i].dtype, bench_rows[j].dtype, cross_framework)
        else (i, None)
        for i, j in pairs
    ]


def pair_rows(npu: Side, bench: Side, cross_framework: bool, options: MatchOptions) -> list[RowPair]:
    """Target rows in order, each with its golden partner or None (compare.md §3)."""
    npu_rows, bench_rows = npu.rows, bench.rows
    return [
        RowPair(npu_rows[i], None if j is None else bench_rows[j])
        for i, j in pair_indices(npu.keyed(), bench.keyed(), cross_framework, options)
    ]


def tensor_jobs(pairs: list[RowPair], npu: Side, bench: Side) -> list[TensorJob]:
    """The two files to measure for each pair and what dump.json says of them (``metrics/claims.py``), or
    None where the reference reports 'unsupported'.

    Every path was checked to stay inside its dump_tensor_data folder as its side was parsed
    (``Side.tensor_files``), before anything is read.
    """
    jobs: list[TensorJob] = []
    npu_files, bench_files = npu.tensor_files, bench.tensor_files
    for pair in pairs:
        if pair.bench is None or NO_DATA_NAME in (pair.npu.data_name, pair.bench.data_name):
            jobs.append(None)
            continue
        npu_row, bench_row = pair.npu, pair.bench
        claims = ((npu_row.dtype, npu_row.shape), (bench_row.dtype, bench_row.shape))
        jobs.append((npu_files[npu_row.data_name], bench_files[bench_row.data_name], claims))
    return jobs
