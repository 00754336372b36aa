"""``compare -da``: the reference's per-rank first-diff records and its diff_analyze json.

    parse(target rank N) ─┐
                          ├─ match ─> records(rank N) ─┐      (one chain of tasks per rank)
    parse(golden rank N) ─┘                            ├─> first divergence ─> diff_analyze_{ts}.json
                                      ...  rank M ... ─┘

Works on folders and, unlike the reference (D2), on two dump.json files.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from msprobe_dask.analysis.first_diff import entries_of, first_divergence
from msprobe_dask.analysis.records import Records, rank_records, statistics_only
from msprobe_dask.columns import NPU_MD5, NPU_NAME, NPU_P2P_PEER, STACK_COLUMN, STAT_COLUMNS
from msprobe_dask.dump.layouts import pair_dumps
from msprobe_dask.dump.source import DumpSource
from msprobe_dask.pipeline.scheduler import RunOptions, computing
from msprobe_dask.writers.atomic import atomic_path, prepare_output_dir
from msprobe_dask.writers.result_files import name_stamp, result_name, result_path_line

DATA_INFO_COLUMNS = (*STAT_COLUMNS[:4], NPU_MD5, NPU_P2P_PEER)  # NPU max .. l2norm, md5, peer


def _records_task(npu: DumpSource, bench: DumpSource, match: Any) -> Records:
    from msprobe_dask.pipeline.compare import match_sides
    from msprobe_dask.pipeline.sides import parse_side

    return rank_records(statistics_only(match_sides(parse_side(npu, True), parse_side(bench, False), match)))


def analyse(
    target: str | Path,
    golden: str | Path,
    *,
    match: Any = None,
    run: RunOptions | None = None,
    skip_missing_ranks: bool = False,
) -> list[tuple[str, DumpSource, Records]]:
    """(output label, target source, records) of every compared rank, computed as one Dask graph."""
    import dask

    from msprobe_dask.pipeline.pairing import MatchOptions

    match = match or MatchOptions()
    pairs = pair_dumps(target, golden, skip_missing_ranks)
    with computing(run or RunOptions()) as compute:
        tasks = [dask.delayed(_records_task)(npu, bench, match) for _, npu, bench in pairs]
        results = compute(tasks)
    return [(label, npu, records) for (label, npu, _), records in zip(pairs, results)]


def _rank_key(source: DumpSource) -> int:
    """The N of ``rank_N``: the rank folder's number; 0 for a single dump or a proc folder."""
    return max(source.rank_id, 0) if source.rank.startswith("rank") else 0


def diff_report(per_rank: Mapping[int, Records]) -> tuple[str, dict[str, list[dict[str, Any]]]]:
    """The diff_analyze json content: ``{"rank_N": [{"op_name", "data_info", "stack_info"}]}``."""
    stage, found = first_divergence({rank: entries_of(records, rank) for rank, records in per_rank.items()})
    report: dict[str, list[dict[str, Any]]] = {}
    for rank, names in found.items():
        nodes = []
        for name in names:
            items = per_rank[rank][name]["op_items"]
            data_info: dict[str, dict[str, Any]] = {"input": {}, "output": {}}
            for item in items:
                if item["state"] in data_info:
                    data_info[item["state"]][item[NPU_NAME]] = {
                        c: item[c] for c in DATA_INFO_COLUMNS if c in item
                    }
            stack = items[0].get(STACK_COLUMN) if items else None
            nodes.append(
                {
                    "op_name": name,
                    "data_info": data_info,
                    "stack_info": stack if isinstance(stack, list) else None,
                }
            )
        report[f"rank_{rank}"] = nodes
    return stage, report


def _write_json(path: Path, content: Any, indent: int) -> Path:
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        json.dump(content, f, indent=indent)
    return path


def write_diff_analyze(args: argparse.Namespace, out: Path, run_options: RunOptions) -> None:
    """The reference's ``-da`` files: one json of records per rank and, per step, diff_analyze_{ts}.json
    (or the reference's line saying there is no diff node). The csv/xlsx tables of the same run and the
    first divergence in its summary are the compare command's (D23)."""
    from msprobe_dask.pipeline.pairing import MatchOptions

    results = analyse(
        args.target_path,
        args.golden_path,
        match=MatchOptions(fuzzy=args.fuzzy_match),
        run=run_options,
        skip_missing_ranks=args.skip_missing_ranks,
    )
    stamp = name_stamp()
    by_step: dict[str, dict[int, Records]] = {}
    for label, source, records in results:
        sub, _, name = label.rpartition("/")
        folder = prepare_output_dir(out / sub) if sub else out
        if not records:
            print(
                f"warning: {source.dump_json}: no comparable entries; no result file written", file=sys.stderr
            )
            continue
        print(result_path_line(_write_json(folder / result_name(name, ".json", stamp), records, 4)))
        by_step.setdefault(sub, {})[_rank_key(source)] = records
    for sub, per_rank in by_step.items():
        _, report = diff_report(per_rank)
        if not report:
            print("Cannot find any diff node, no need to generate analyze file.")
            continue
        folder = out / sub if sub else out
        path = _write_json(folder / f"diff_analyze_{time.time_ns()}.json", report, 2)
        print(f"The analyze result is saved in: {path}")
