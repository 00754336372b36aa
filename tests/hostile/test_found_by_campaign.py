"""Defects found by workflows/hostile_campaign.py, each pinned: runs without ``-q`` (the stage lines and
the dashboard link held back, so that a failed run's one line is alone and a run's count of unreadable
rows is its last line), and values of the wrong shape where a dumper writes numbers or strings."""

from __future__ import annotations

import csv
import json
import time
from pathlib import Path

import pytest
from hostile_dumps import APIS, edited, entries, nested, write_dump
from hostile_run import Case, check, new_case, result_files

VICTIM = f"{APIS[1]}.output.0.npy"


def test_unreadable_count_is_the_last_line_with_the_stage_lines(tmp_path: Path) -> None:
    """compare without -q: the stage lines held while the run was young come before the count."""
    case = new_case(tmp_path)
    target = write_dump(case.dumps / "target", task="tensor")
    golden = write_dump(case.dumps / "golden", task="tensor")
    (target / "dump_tensor_data" / VICTIM).write_bytes(b"")
    outcome = case.run("compare", "-tp", str(target), "-gp", str(golden), "-o", str(case.out))
    check(outcome, 1, "1 row(s) could not be read", VICTIM, lines=None)
    assert any(line.startswith("write csv") for line in outcome.lines), outcome.stderr


def test_bad_input_with_workers_is_one_line(tmp_path: Path) -> None:
    """graph_visualize --workers 2 without -q: the dashboard link is held like a stage line, so a bad
    stack.json ends with its one error line alone."""
    case = new_case(tmp_path)
    target = write_dump(case.dumps / "target")
    (target / "stack.json").write_text("[1, 2, 3]")
    golden = write_dump(case.dumps / "golden")
    argv = ("-tp", str(target), "-gp", str(golden), "-o", str(case.out), "--workers", "2")
    check(case.run("graph_visualize", *argv), 2, "stack.json", "must be a JSON object")


@pytest.mark.parametrize("command", ["compare", "graph_visualize"])
def test_stack_lines_that_are_numbers(tmp_path: Path, command: str) -> None:
    """A stack.json group whose stack lines are numbers (graph_visualize: a TypeError, internal error)
    is kept as the stack it says, as the reference's graph_visualize keeps it (exit 0)."""
    case = new_case(tmp_path)
    target = write_dump(case.dumps / "target")
    (target / "stack.json").write_text(json.dumps({"0": [list(entries()), [1, 2]]}))
    golden = write_dump(case.dumps / "golden")
    outcome = case.run(command, "-tp", str(target), "-gp", str(golden), "-o", str(case.out), "-q")
    check(outcome, 0, lines=None)
    assert len(result_files(case.out)) == 1


def test_tensor_statistic_nested_500_levels(tmp_path: Path) -> None:
    """D34: a tensor's Max that is a list 500 levels deep (within the JSON parser's bound): compare wrote it
    as its text but a table part's result could not be pickled (RecursionError, internal error)."""
    case = new_case(tmp_path)
    data = edited({})
    data[APIS[0]]["output"][0]["Max"] = json.loads(nested(500))
    target = write_dump(case.dumps / "target", data)
    golden = write_dump(case.dumps / "golden")
    # (without -q: the first-divergence analysis's nodes of a table part are pickled)
    outcome = case.run("compare", "-tp", str(target), "-gp", str(golden), "-o", str(case.out))
    check(outcome, 0, lines=None)
    (result,) = result_files(case.out)
    rows = {row["NPU Name"]: row for row in csv.DictReader(result.open(encoding="utf-8"))}
    assert rows[f"{APIS[0]}.output.0"]["NPU max"] == nested(500)


def test_converted_store_missing_a_chunk(tmp_path: Path) -> None:
    """A store copied in part (a chunk file missing) was read as zeros, the row judged on them; the
    arrays convert writes have every chunk, so a missing one is a damaged store: one line, exit 2."""
    case = new_case(tmp_path)
    target = write_dump(case.dumps / "target", task="tensor")
    golden = write_dump(case.dumps / "golden", task="tensor")
    store = case.dumps / "run.zarr"
    check(case.run("convert", str(target), "-o", str(store), "-q"), 0, lines=None)
    (store / "dump_tensor_data" / VICTIM / "c" / "0").unlink()
    outcome = case.run("compare", "-tp", str(store), "-gp", str(golden), "-o", str(case.out), "-q")
    check(outcome, 2, VICTIM, "chunk c/0 is missing")
    assert not result_files(case.out)


def _compared(case: Case) -> Path:
    target = write_dump(case.dumps / "target")
    golden = write_dump(case.dumps / "golden")
    outcome = case.run("compare", "-tp", str(target), "-gp", str(golden), "-o", str(case.out), "-q")
    check(outcome, 0, lines=None)
    (result,) = result_files(case.out)
    return result


def test_report_of_a_result_that_is_not_utf8(tmp_path: Path) -> None:
    case = new_case(tmp_path)
    _compared(case).write_bytes(b"\xff\xfe garbage\n1,2,3\n")
    check(case.run("report", str(case.out), "-q"), 2, "compare_result_", "cannot be read as a compare result")


def test_report_of_a_result_with_a_long_cell(tmp_path: Path) -> None:
    """A cell of more than csv's 128 KiB field limit (a stack of thousands of lines, as compare writes
    it) was an internal error of the report."""
    case = new_case(tmp_path)
    target = write_dump(case.dumps / "target")
    frames = [f"File /a/long/path/module_{i}.py, line {i}, in function_{i}, \n x = y" for i in range(3000)]
    (target / "stack.json").write_text(json.dumps({"0": [list(entries()), frames]}))
    golden = write_dump(case.dumps / "golden")
    outcome = case.run("compare", "-tp", str(target), "-gp", str(golden), "-o", str(case.out), "-q")
    check(outcome, 0, lines=None)
    outcome = check(case.run("report", str(case.out), "-q"), 0, lines=None)
    assert "report_" in outcome.stdout


def test_da_json_of_the_same_second_is_kept_in_one_line(tmp_path: Path) -> None:
    """-da's compare_result_{ts}.json of the same name as an existing file: a warning said it was
    replaced, then the error that it is not (two lines that disagree); now the error alone."""
    case = new_case(tmp_path)
    target = write_dump(case.dumps / "target")
    golden = write_dump(case.dumps / "golden")
    case.out.mkdir()
    now = time.time()
    kept = [
        case.out / f"compare_result_{time.strftime('%Y%m%d%H%M%S', time.localtime(now + k))}.json"
        for k in range(30)
    ]
    for path in kept:
        path.write_text("kept")
    outcome = case.run("compare", "-tp", str(target), "-gp", str(golden), "-o", str(case.out), "-q", "-da")
    check(outcome, 2, "compare_result_", "already exists and is not replaced")
    assert all(path.read_text() == "kept" for path in kept)
    assert sorted(case.out.iterdir()) == sorted(kept)


def test_workers_beyond_the_machine_are_refused() -> None:
    """--workers 100000 started processes until the host stopped (a typo's fork bomb): refused now, in
    one line (checked without the command line: were the check gone, a test of it would start them all)."""
    from msprobe_dask.errors import ConfigError
    from msprobe_dask.pipeline.scheduler import RunOptions, max_workers

    assert RunOptions(workers=max_workers()).workers == max_workers()
    with pytest.raises(ConfigError, match="at most"):
        RunOptions(workers=max_workers() + 1)
    with pytest.raises(ConfigError, match="at most"):
        RunOptions(workers=100_000)
