"""A statistics rank compared part by part (pipeline/chunked.py) writes the bytes the whole-table path
writes, and its summary is the whole table's, however the dumps are cut into parts."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import case_dir

from msprobe_dask.analysis.divergence import Tolerance
from msprobe_dask.pipeline import chunked
from msprobe_dask.pipeline.chunked import WrittenRank, bench_window
from msprobe_dask.pipeline.compare import compare, compare_to_csv
from msprobe_dask.pipeline.pairing import MatchOptions
from msprobe_dask.pipeline.scheduler import RunOptions
from msprobe_dask.summary.divergence import rank_table_nodes
from msprobe_dask.summary.table import summarise_table
from msprobe_dask.writers.csv_writer import write_csv

CASES = [
    ("stat_mix", MatchOptions()),
    ("md5_mix", MatchOptions()),
    ("xor_mix", MatchOptions()),
    ("L0_only", MatchOptions()),
    ("L1_only", MatchOptions()),
    ("transformer_big", MatchOptions()),
    ("fuzzy", MatchOptions(fuzzy=True)),
    ("stat_mix", MatchOptions(fuzzy=True)),
    ("multirank", MatchOptions()),
    ("multistep", MatchOptions()),
]


@pytest.mark.parametrize("part_bytes", [1 << 30, 20_000, 3_000])
@pytest.mark.parametrize(("case", "match"), CASES, ids=[f"{c}-fm{int(m.fuzzy)}" for c, m in CASES])
def test_parts_write_the_whole_tables_bytes(
    case: str, match: MatchOptions, part_bytes: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(chunked, "PART_BYTES", part_bytes)
    monkeypatch.setattr(chunked, "MIN_PARTS", 1)  # (1 << 30: every dump whole)
    target, golden = case_dir(case) / "target", case_dir(case) / "golden"
    run = RunOptions(address=None)
    written = compare_to_csv(
        target,
        golden,
        lambda label: tmp_path / f"result{label.replace('/', '_')}.csv",
        match=match,
        run=run,
        summary_tolerance=Tolerance(),
    )
    tables = compare(target, golden, match=match, run=run)
    assert [w.label for w in written] == [t.label for t in tables] and tables
    for rank, whole in zip(written, tables):
        assert isinstance(rank, WrittenRank) and rank.path is not None
        expected = write_csv(whole.table, tmp_path / f"whole{whole.label.replace('/', '_')}.csv").read_bytes()
        assert rank.path.read_bytes() == expected
        t = whole.table
        whole_summary = summarise_table(whole.label, t.columns, t.rows, t.entries)
        assert repr(rank.summary) == repr(whole_summary)  # repr: a NaN metric equals itself
        assert repr(rank.nodes) == repr(rank_table_nodes(whole.label, t))  # the divergence analysis's input
    assert not list(tmp_path.glob(".*"))  # no part file left


def test_bench_window_covers_the_parts_at_the_same_place() -> None:
    for npu_parts in range(1, 9):
        for bench_parts in range(1, 9):
            windows = [bench_window(k, npu_parts, bench_parts) for k in range(npu_parts)]
            assert set().union(*windows) == set(range(bench_parts))
            assert all(0 <= w.start < w.stop <= bench_parts for w in windows)
