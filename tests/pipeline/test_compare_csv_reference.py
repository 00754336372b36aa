"""Our compare csv equals the reference's csv cell for cell on the real dumps in tests/data."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import case_dir, read_csv, reference_file

from msprobe_dask.cli import main

SAME_CASES = [
    "stat_mix",
    "tensor_mix",
    "fuzzy_tensor",
    "md5_mix",
    "xor_mix",
    "L0_only",
    "L1_only",
    "transformer_big",
    "fuzzy",
]


def run_compare(case: str, out: Path, *extra: str) -> Path:
    target, golden = case_dir(case) / "target" / "dump.json", case_dir(case) / "golden" / "dump.json"
    assert main(["compare", "-q", "-tp", str(target), "-gp", str(golden), "-o", str(out), *extra]) == 0
    files = [p for p in out.iterdir() if not p.name.startswith(".")]
    assert len(files) == 1, files
    return files[0]


def assert_same_cells(ours: list[list[str]], ref: list[list[str]]) -> None:
    assert ours[0] == ref[0], "header differs"
    assert len(ours) == len(ref), f"{len(ours) - 1} rows, the reference has {len(ref) - 1}"
    for i, (a, b) in enumerate(zip(ours, ref)):
        for column, x, y in zip(ref[0], a, b):
            assert x == y, f"row {i} ({b[0]}), column {column!r}: ours {x!r}, reference {y!r}"


@pytest.mark.parametrize("case", SAME_CASES)
def test_csv_equals_reference(case: str, tmp_path: Path) -> None:
    ours = read_csv(run_compare(case, tmp_path))
    assert_same_cells(ours, read_csv(reference_file(case, "compare_csv")))


STATISTICS_CASES = ["stat_mix", "md5_mix", "xor_mix", "L0_only", "L1_only", "transformer_big", "fuzzy"]


@pytest.mark.parametrize("case", STATISTICS_CASES)
def test_csv_on_local_worker_processes_with_many_parts_equals_reference(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--workers 2`` (dask's processes scheduler, whose values pass through this process) with each
    side cut into at least 12 parts, so that the parts' spans, stacks and pairs found are read through
    group tasks (pipeline/task_graph.py: TaskGraph._groups): the reference's cells."""
    from msprobe_dask.pipeline import part_scan, task_graph

    sizes = [(case_dir(case) / side / "dump.json").stat().st_size for side in ("target", "golden")]
    monkeypatch.setattr(part_scan, "PART_BYTES", min(sizes) // 12)
    monkeypatch.setattr(part_scan, "MIN_PARTS", 1)
    grouped: list[int] = []
    groups = task_graph.TaskGraph._groups
    monkeypatch.setattr(
        task_graph.TaskGraph, "_groups", lambda self, whole, n: grouped.append(n) or groups(self, whole, n)
    )
    ours = read_csv(run_compare(case, tmp_path, "--workers", "2"))
    assert grouped and max(grouped) >= 13  # (a side's scan: its header and 12 parts or more)
    assert_same_cells(ours, read_csv(reference_file(case, "compare_csv")))


@pytest.mark.parametrize("flags", [["--workers", "2"], []], ids=["spooled", "in_this_process_zlib"])
@pytest.mark.parametrize("case", ["stat_mix", "fuzzy", "transformer_big"])
def test_csv_with_the_match_in_hash_partitions_equals_reference(
    case: str, flags: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A big rank's layout on a small dump: the default match cut into hash partitions (a key's
    partition by its CRC-32, the keys joined, their items read inline from the parts' key files on local
    worker processes), the parts' rows left uncompressed in the spool files (``--workers 2``) or
    zlib-compressed where a process holds them (in this process, ``ROWS_ZLIB_FROM_BYTES`` at 0): the
    reference's cells."""
    from msprobe_dask.pipeline import chunked, part_keys, part_scan

    sizes = [(case_dir(case) / side / "dump.json").stat().st_size for side in ("target", "golden")]
    monkeypatch.setattr(part_scan, "PART_BYTES", min(sizes) // 6)
    monkeypatch.setattr(part_scan, "MIN_PARTS", 1)
    monkeypatch.setattr(part_scan, "ROWS_ZLIB_FROM_BYTES", 0)
    monkeypatch.setattr(part_keys, "PARTITION_BYTES", sum(sizes) // 4)
    partitions: list[int] = []
    zlib_packed: list[bool] = []
    count, zlib_of = chunked.partition_count, chunked.rows_zlib
    monkeypatch.setattr(chunked, "partition_count", lambda *a: partitions.append(count(*a)) or partitions[-1])
    monkeypatch.setattr(chunked, "rows_zlib", lambda *a: zlib_packed.append(zlib_of(*a)) or zlib_packed[-1])
    ours = read_csv(run_compare(case, tmp_path, *flags))
    assert partitions and min(partitions) >= 4, partitions
    assert zlib_packed == ([] if flags else [True])  # (spooled rows: never compressed, not even asked)
    assert_same_cells(ours, read_csv(reference_file(case, "compare_csv")))
