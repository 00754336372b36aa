"""A statistics rank compared part by part (pipeline/chunked.py) writes the bytes the whole-table path
writes, and its summary is the whole table's, however the dumps are cut into parts."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import dask
import pytest
from conftest import case_dir, light_node, walk_view

from msprobe_dask.analysis.divergence import RankNodes, Tolerance, Walk
from msprobe_dask.dump.source import DumpSource
from msprobe_dask.errors import DumpError
from msprobe_dask.pipeline import chunked, part_file, part_keys, part_match, part_scan
from msprobe_dask.pipeline.compare import compare, compare_to_files
from msprobe_dask.pipeline.pairing import MatchOptions
from msprobe_dask.pipeline.part_file import WrittenRank
from msprobe_dask.pipeline.part_match import bench_window
from msprobe_dask.pipeline.scheduler import RunOptions
from msprobe_dask.pipeline.task_graph import GROUPED_FROM_ITEMS
from msprobe_dask.summary.divergence import WalkedPart, analyse_rank_nodes, rank_of_parts, rank_table_nodes
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


# every case whole, in parts of 20 kB and of 3 kB; transformer_big (1,932 entries a side) not in parts of
# 3 kB: 1,100 parts a side build a graph of ~40k tasks (90 s), and the one-entry parts below cut finer
PART_RUNS = [
    (case, match, part_bytes)
    for case, match in CASES
    for part_bytes in (1 << 30, 20_000, 3_000)
    if (case, part_bytes) != ("transformer_big", 3_000)
]


@pytest.mark.parametrize(
    ("case", "match", "part_bytes"), PART_RUNS, ids=[f"{c}-fm{int(m.fuzzy)}-{b}" for c, m, b in PART_RUNS]
)
def test_parts_write_the_whole_tables_bytes(
    case: str, match: MatchOptions, part_bytes: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(part_scan, "PART_BYTES", part_bytes)
    monkeypatch.setattr(part_scan, "MIN_PARTS", 1)  # (1 << 30: every dump whole)
    target, golden = case_dir(case) / "target", case_dir(case) / "golden"
    run = RunOptions(address=None)
    written = compare_to_files(
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
        _same_analysis(rank, whole.label, t, alone=len(tables) == 1)
    assert not list(tmp_path.glob(".*"))  # no part file left


@pytest.mark.parametrize(
    ("case", "suffix"), [("stat_mix", "csv"), ("multirank", "csv"), ("multirank", "xlsx")]
)
def test_each_append_and_end_run_again_write_the_same_file(
    case: str, suffix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dask worker lost while or after a rank's append wrote its part, or after the rank's end named
    its file (on a cluster the task then runs again from the same input): the part is written once, the
    file found named; the bytes are those of a run without losses."""
    monkeypatch.setattr(part_scan, "PART_BYTES", 20_000)
    monkeypatch.setattr(part_scan, "MIN_PARTS", 1)

    def run(name: str) -> list[object]:
        return _files_written(case, suffix, tmp_path, name)

    plain = run("plain")
    appends: list[Path] = []
    append, finish = chunked.append_part, chunked.finish_file

    def appended_twice(form: object, previous: part_file.PartWritten, part: object) -> part_file.PartWritten:
        appends.append(previous.path)
        with open(part_file.part_file(previous.path), "ab") as f:
            f.write(b"half a part,")  # (a first run killed in the middle of its write)
        append(form, previous, part)  # type: ignore[arg-type]
        return append(form, previous, part)  # type: ignore[arg-type]

    def finished_twice(*args: object) -> WrittenRank:
        finish(*args)  # type: ignore[arg-type]
        return finish(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(chunked, "append_part", appended_twice)
    monkeypatch.setattr(chunked, "finish_file", finished_twice)
    assert run("again") == plain
    assert len(appends) > len(set(appends))  # (ranks of more than one part)
    assert not list(tmp_path.glob(".*"))  # no part file or spool left


@pytest.mark.parametrize(("case", "suffix"), [("multirank", "csv"), ("multirank", "xlsx")])
def test_a_begin_and_an_append_run_again_after_later_appends_write_the_same_file(
    case: str, suffix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dask worker lost during the rank's end, which held the results of the rank's begin and first
    append (its other appends' results on a worker still there): those two run again before the end, after
    the later parts were written; the bytes are those of a run without losses (test_cluster_failure's
    worker killed during finish_file: a part file begun again from empty left zeros where parts were)."""
    monkeypatch.setattr(part_scan, "PART_BYTES", 20_000)
    monkeypatch.setattr(part_scan, "MIN_PARTS", 1)

    def run(name: str) -> list[object]:
        return _files_written(case, suffix, tmp_path, name)

    plain = run("plain")
    begin, append, finish = chunked.begin_file, chunked.append_part, chunked.finish_file
    calls: dict[Path, list[tuple[Any, ...]]] = {}  # each rank's begin and appends, in order

    def begun(form: Any, path: Path, head: Any) -> part_file.PartWritten:
        calls[path] = [(begin, form, path, head)]
        return begin(form, path, head)

    def appended(form: Any, previous: part_file.PartWritten, part: Any) -> part_file.PartWritten:
        calls[previous.path].append((append, form, previous, part))
        return append(form, previous, part)

    def finished(form: Any, label: str, head: part_file.PartWritten, *parts: Any) -> WrittenRank:
        for task, *args in calls[head.path][:2]:
            task(*args)
        return finish(form, label, head, *parts)

    monkeypatch.setattr(chunked, "begin_file", begun)
    monkeypatch.setattr(chunked, "append_part", appended)
    monkeypatch.setattr(chunked, "finish_file", finished)
    assert run("again") == plain
    assert max(len(c) for c in calls.values()) > 2  # (a rank with appends after the first)
    assert not list(tmp_path.glob(".*"))


def _files_written(case: str, suffix: str, tmp_path: Path, name: str) -> list[object]:
    """The contents of the files a compare of ``case`` to ``suffix`` files named ``name...`` writes."""
    target, golden = case_dir(case) / "target", case_dir(case) / "golden"
    written = compare_to_files(
        target,
        golden,
        lambda label: tmp_path / f"{name}{label.replace('/', '_')}.{suffix}",
        run=RunOptions(address=None),
        summary_tolerance=Tolerance(),
        xlsx=suffix == "xlsx",
    )
    return [_contents(w.path) for w in written if w.path is not None]


@pytest.mark.parametrize("kernel", ["none", "refused", "partly"])
def test_an_append_without_the_kernels_copy_writes_the_same_file(
    kernel: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An append copies its part's bytes from the spool into the rank's file by os.copy_file_range; where
    the system has none, refuses it (a file system that does not copy), or copies some of the bytes and
    then fails, the rest is read and written: the same file."""
    monkeypatch.setattr(part_scan, "PART_BYTES", 20_000)
    monkeypatch.setattr(part_scan, "MIN_PARTS", 1)

    def run(name: str) -> bytes:
        (written,) = compare_to_files(
            case_dir("stat_mix") / "target",
            case_dir("stat_mix") / "golden",
            lambda label: tmp_path / f"{name}.csv",
            run=RunOptions(address=None),
        )
        assert isinstance(written, WrittenRank) and written.path is not None
        return written.path.read_bytes()

    plain = run("plain")
    copy, calls = os.copy_file_range, []

    def copies_a_little(src: int, dst: int, count: int, *offsets: int) -> int:
        calls.append(count)
        if kernel == "partly" and len(calls) % 2:
            return copy(src, dst, min(count, 100), *offsets)
        raise OSError(errno.EXDEV, "no copy here")

    if kernel == "none":
        monkeypatch.delattr(os, "copy_file_range")
    else:
        monkeypatch.setattr(os, "copy_file_range", copies_a_little)
    assert run(kernel) == plain
    assert kernel == "none" or len(calls) > 1


def _contents(path: Path) -> object:
    """A csv's bytes; an xlsx's parts (its zip's entries carry the time they were written)."""
    if path.suffix != ".xlsx":
        return path.read_bytes()
    import zipfile

    with zipfile.ZipFile(path) as package:
        return {name: package.read(name) for name in package.namelist()}


def test_a_table_part_failing_after_others_were_spooled_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Table parts leave their bytes in the rank's spool folder for their appends (part_file.spooled_part):
    a run that fails after some did removes it with the part file."""
    monkeypatch.setattr(part_scan, "PART_BYTES", 20_000)
    monkeypatch.setattr(part_scan, "MIN_PARTS", 1)
    made: list[int] = []
    table_part = part_file.table_part

    def fails_late(*args: object) -> object:
        if len(made) >= 2:
            raise DumpError("dump.json", "a bad entry found late")
        made.append(1)
        return table_part(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(part_file, "table_part", fails_late)
    out = tmp_path / "out"
    out.mkdir()
    case = case_dir("transformer_big")
    with pytest.raises(DumpError, match="found late"), dask.config.set(num_workers=1):
        compare_to_files(case / "target", case / "golden", lambda label: out / "r.csv", run=RunOptions())
    assert len(made) == 2
    assert list(out.iterdir()) == []


def _same_analysis(rank: WrittenRank, label: str, table: object, alone: bool = False) -> None:
    """The divergence analysis's nodes of the rank's parts, read part by part, are the whole table's
    (a node that cannot diverge as its LightNode), and give its answer; a rank ``alone`` in its job has
    its first origin found ahead (part_file.origin_ahead) where it is in a part before its last."""
    whole = rank_table_nodes(label, table)
    assert rank.node_parts is not None
    parts = rank_of_parts(rank.node_parts)
    assert parts.count == len(whole)
    # (the parts walked ahead are kept as their counts: the nodes are those after them)
    walked = sum(part.count for part in rank.node_parts if isinstance(part, WalkedPart))
    assert walked == (0 if rank.ahead is None else parts.count - rank.node_parts[-1].count)
    read = parts.read(range(parts.count))  # (every communication node a Node: as if it received something)
    assert repr(walk_view(read)) == repr(
        walk_view([light_node(w, Tolerance().rtol) or w for w in whole[walked:]])
    )
    found = analyse_rank_nodes([(label, rank.nodes)])
    expected = analyse_rank_nodes([(label, RankNodes.of(whole))])
    assert found is not None and expected is not None
    assert repr((found.origin, found.firsts, found.path, found.nodes)) == repr(
        (expected.origin, expected.firsts, expected.path, expected.nodes)
    )
    before_last, origin = parts.count - rank.node_parts[-1].count, expected.origin
    if not alone or not any(part.exceeds for part in rank.node_parts[:-1]):
        assert rank.ahead is None
    elif origin is not None and origin.index < before_last:
        assert rank.ahead == origin
    else:
        assert isinstance(rank.ahead, Walk) and rank.ahead.count == before_last


def test_bench_window_covers_the_parts_at_the_same_place() -> None:
    for npu_parts in range(1, 9):
        for bench_parts in range(1, 9):
            windows = [bench_window(k, npu_parts, bench_parts) for k in range(npu_parts)]
            assert set().union(*windows) == set(range(bench_parts))
            assert all(0 <= w.start < w.stop <= bench_parts for w in windows)


# the -fm case under dask's sync, threaded and processes schedulers, the default match's under one each:
# its one-entry parts (3 to 9 hash partitions) make graphs of ~10k tasks (a real rank has 8 MB parts,
# ~1,000 tasks), laid out as one layer (pipeline/task_graph.py: with dask.delayed, 15-45 s a case)
ORDER_RUNS = [
    ("md5_mix", MatchOptions(), "sync"),
    ("fuzzy", MatchOptions(fuzzy=True), "sync"),
    ("fuzzy", MatchOptions(fuzzy=True), "threads"),
    ("fuzzy", MatchOptions(fuzzy=True), "processes"),
    ("multirank", MatchOptions(), "processes"),
]


def _entries(dump_json: Path) -> int:
    import json

    return len(json.loads(dump_json.read_text())["data"])


@pytest.mark.parametrize(
    ("case", "match", "scheduler"),
    ORDER_RUNS,
    ids=[f"{c}-fm{int(m.fuzzy)}-{s}" for c, m, s in ORDER_RUNS],
)
def test_parts_of_one_entry_in_any_order_write_the_whole_tables_bytes(
    case: str,
    match: MatchOptions,
    scheduler: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Parts cut as small as they go (about one per dump entry: most hold one entry, some none or two),
    the ready tasks run in a random order, under dask's sync, threaded and processes schedulers: the csv
    is the whole table's, byte for byte, and so are the summary and the divergence analysis's nodes."""
    import random

    import dask
    import dask.local

    from msprobe_dask.dump.layouts import pair_dumps

    sources = pair_dumps(case_dir(case) / "target", case_dir(case) / "golden")
    smallest = min(
        src.dump_json.stat().st_size // _entries(src.dump_json) for _, *sides in sources for src in sides
    )
    monkeypatch.setattr(part_scan, "PART_BYTES", max(1, smallest))
    monkeypatch.setattr(part_scan, "MIN_PARTS", 1)
    monkeypatch.setattr(part_keys, "PARTITION_BYTES", 50_000)  # the default match: 3 to 9 hash partitions
    shuffled = random.Random(f"{case}{scheduler}")
    monkeypatch.setattr(dask.local, "order", lambda dsk: {key: shuffled.random() for key in dsk})
    shared = scheduler != "processes"  # (as compare_to_files lays it out: RunOptions.shares_results)
    graphs = [
        chunked.rank_file(
            label,
            a,
            b,
            match,
            tmp_path / f"parts{i}.csv",
            Tolerance(),
            shared=shared,
            linked=len(sources) > 1,
        )
        for i, (label, a, b) in enumerate(sources)
    ]
    assert all(part_scan.part_count(a) >= _entries(a.dump_json) for _, a, _ in sources)
    assert all(len(graph.written.dask.layers) == 1 for graph in graphs)
    values = iter(
        dask.compute(*(output for graph in graphs for output in graph.outputs), scheduler=scheduler)
    )
    written = [graph.result([next(values) for _ in graph.outputs]) for graph in graphs]
    tables = compare(case_dir(case) / "target", case_dir(case) / "golden", match=match, run=RunOptions())
    for i, (rank, whole) in enumerate(zip(written, tables)):
        assert rank.label == whole.label and rank.path is not None
        expected = write_csv(whole.table, tmp_path / f"whole{i}.csv").read_bytes()
        assert rank.path.read_bytes() == expected
        t = whole.table
        assert repr(rank.summary) == repr(summarise_table(whole.label, t.columns, t.rows, t.entries))
        _same_analysis(rank, whole.label, t, alone=len(sources) == 1)
    assert not list(tmp_path.glob(".*"))  # (nor the nodes left in files on worker processes, once read)


@pytest.mark.parametrize(
    ("case", "match"), [("fuzzy", MatchOptions(fuzzy=True)), ("stat_mix", MatchOptions())], ids=["fm1", "fm0"]
)
def test_partners_outside_a_parts_window_come_from_their_bench_parts(
    case: str, match: MatchOptions, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With each table part given the bench parts at the mirrored place of the dump instead of its own,
    most rows' partners lie outside a part's window and come through the export tasks: the csv is the
    whole table's all the same (the match in one task, and the default match in hash partitions)."""
    import dask

    from msprobe_dask.dump.layouts import pair_dumps

    dumps = case_dir(case) / "target", case_dir(case) / "golden"
    ((label, target, golden),) = pair_dumps(*dumps)
    exported: list[int] = []
    export_rows = part_match.export_rows

    def counting(wanted: tuple[int, dict[int, list[int]]], part: part_scan.RowPart) -> object:
        exported.append(sum(map(len, wanted[1].values())))
        return export_rows(wanted, part)

    def mirrored(k: int, npu_parts: int, bench_parts: int) -> range:
        j = bench_parts - 1 - k * bench_parts // npu_parts
        return range(j, j + 1)

    monkeypatch.setattr(chunked, "export_rows", counting)
    monkeypatch.setattr(chunked, "bench_window", mirrored)
    monkeypatch.setattr(chunked, "part_count", lambda src: 40 if src == target else 30)
    monkeypatch.setattr(part_keys, "PARTITION_BYTES", 100_000)
    whole = compare(*dumps, match=match, run=RunOptions())[0].table
    expected = write_csv(whole, tmp_path / "whole.csv").read_bytes()
    path = tmp_path / "parts.csv"
    graph = chunked.rank_file(label, target, golden, match, path, None)
    assert dask.compute(graph.written, scheduler="sync")[0].path.read_bytes() == expected
    assert sum(exported) > len(whole.rows) // 2, exported


def test_a_table_part_waits_for_the_append_tables_ahead_before_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Table part k depends on the append of part k - TABLES_AHEAD (in the graph: on every scheduler),
    so at most TABLES_AHEAD table parts' results wait for their append."""
    from dask.core import get_dependencies

    from msprobe_dask.dump.layouts import pair_dumps

    ((label, target, golden),) = pair_dumps(case_dir("stat_mix") / "target", case_dir("stat_mix") / "golden")
    monkeypatch.setattr(chunked, "part_count", lambda src: 9)
    graph = chunked.rank_file(label, target, golden, MatchOptions(), Path("unused.csv"), None)
    dsk = dict(graph.written.__dask_graph__())
    deps = {key: get_dependencies(dsk, key) for key in dsk}

    def named(prefix: str) -> list[str]:
        return [key for key in dsk if str(key).startswith(prefix)]

    (written,) = named("begin_file-")
    chain: list[str] = []  # the appends in the file's order
    while nxt := [key for key in named("append_part-") if written in deps[key]]:
        (written,) = nxt
        chain.append(written)
    assert len(chain) == 9
    tables = [next(d for d in deps[key] if str(d).startswith("spooled_part-")) for key in chain]
    ahead = chunked.TABLES_AHEAD
    for k, table in enumerate(tables):
        waits = {d for d in deps[table] if str(d).startswith("append_part-")}
        assert waits == ({chain[k - ahead]} if k >= ahead else set()), k


def test_where_values_pass_through_this_process_the_spans_and_the_pairs_found_wait_in_files(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where the tasks' values pass through the process that schedules (dask's processes scheduler), a
    side's spans and a partition's pairs found wait in the rank's spool files: each part's task takes
    where its own are from the whole value, and no task takes a group of them from it (each would be sent
    the whole: part_spool.spooled_scan, spooled_found)."""
    monkeypatch.setattr(part_scan, "PART_BYTES", 3_000)
    monkeypatch.setattr(part_scan, "MIN_PARTS", 1)
    monkeypatch.setattr(part_keys, "PARTITION_BYTES", 50_000)
    target, golden = (case_dir("stat_mix") / side / "dump.json" for side in ("target", "golden"))
    graph = chunked.rank_file(
        "", DumpSource(target), DumpSource(golden), MatchOptions(), Path("unused.csv"), None, shared=False
    )
    tasks = dict(graph.written.dask)
    spooled = {key for key in tasks if str(key).startswith(("spooled_scan-", "spooled_found-"))}
    readers = [task for key, task in tasks.items() if task.dependencies & spooled]
    assert len(spooled) > 3 and part_scan.part_count(DumpSource(target)) >= GROUPED_FROM_ITEMS
    assert {str(task.key).split("-")[0] for task in readers} == {
        "getitem",  # (a side's SideScan, read by every part's parse)
        "spooled_parse",
        "spooled_stacks",
        "plan_head",
        "spooled_pairs",
    }


@pytest.mark.parametrize(
    ("match", "direct"), [(MatchOptions(), True), (MatchOptions(fuzzy=True), False)], ids=["fm0", "fm1"]
)
def test_a_parts_rows_reach_their_readers_apart_from_its_keys_where_the_keys_are_big(
    match: MatchOptions, direct: bool
) -> None:
    """On threads and on a cluster, a table part reads its rows straight from the parse's value under the
    default match (the rows are nearly all of it), through an item of their own under a matching option
    (whose keys hold every row's key fields)."""
    target, golden = (case_dir("stat_mix") / side / "dump.json" for side in ("target", "golden"))
    graph = chunked.rank_file("", DumpSource(target), DumpSource(golden), match, Path("unused.csv"), None)
    tasks = dict(graph.written.dask)
    readers = [task for key, task in tasks.items() if str(key).startswith(("spooled_part-", "export_rows-"))]
    parses = {key for key in tasks if str(key).startswith("spooled_parse-")}
    assert readers and parses
    assert all(bool(task.dependencies & parses) is direct for task in readers)
