"""Broken and hostile dump.json files, for compare and graph_visualize: one line naming the file (and
the entry), exit 2."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hostile_dumps import APIS, dump_text_with, edited, mkfifo, nested, write_dump
from hostile_run import Case, check, new_case, result_files

COMMANDS = ("compare", "graph_visualize")


def run(case: Case, command: str, target: Path, golden: Path | None = None) -> object:
    golden = golden or write_dump(case.dumps / "golden")
    return case.run(command, "-tp", str(target), "-gp", str(golden), "-o", str(case.out), "-q")


def bad_target(case: Case, text: str) -> Path:
    return write_dump(case.dumps / "target", text=text)


@pytest.mark.parametrize("command", COMMANDS)
def test_nested_5000_levels(tmp_path: Path, command: str) -> None:
    """D25: one line naming dump.json and the entry, exit 2."""
    case = new_case(tmp_path)
    target = bad_target(case, dump_text_with(f'{{"input_args": {nested(5000)}, "output": []}}'))
    outcome = run(case, command, target)
    check(outcome, 2, "dump.json", APIS[1], "nested")
    assert not result_files(case.out)


@pytest.mark.parametrize("command", COMMANDS)
def test_integer_of_5000_digits(tmp_path: Path, command: str) -> None:
    """D25: one line naming dump.json and the entry, exit 2."""
    case = new_case(tmp_path)
    big = "7" * 5000
    body = f'{{"input_args": [{{"type": "int", "value": {big}}}], "input_kwargs": {{}}, "output": []}}'
    outcome = run(case, command, bad_target(case, dump_text_with(body)))
    check(outcome, 2, "dump.json", APIS[1], "digits")


@pytest.mark.parametrize("command", COMMANDS)
def test_entry_that_is_a_string(tmp_path: Path, command: str) -> None:
    """D25: one line naming dump.json and the entry, exit 2."""
    case = new_case(tmp_path)
    target = write_dump(case.dumps / "target", edited({APIS[1]: "not an entry"}))
    check(run(case, command, target), 2, "dump.json", APIS[1])


@pytest.mark.parametrize("command", COMMANDS)
def test_input_args_that_is_a_mapping(tmp_path: Path, command: str) -> None:
    """D26: refused, not compared as the arguments."""
    case = new_case(tmp_path)
    bad = {"input_args": {"0": {"type": "int", "value": 1}}, "input_kwargs": {}, "output": []}
    target = write_dump(case.dumps / "target", edited({APIS[1]: bad}))
    check(run(case, command, target), 2, "dump.json", APIS[1], "input_args")


@pytest.mark.parametrize("command", COMMANDS)
def test_dump_json_is_a_fifo(tmp_path: Path, command: str) -> None:
    case = new_case(tmp_path)
    target = write_dump(case.dumps / "target")
    mkfifo(target / "dump.json")
    check(run(case, command, target), 2, "dump.json", "not a regular file")


@pytest.mark.parametrize("command", COMMANDS)
def test_dump_json_symlink_loop(tmp_path: Path, command: str) -> None:
    case = new_case(tmp_path)
    target = write_dump(case.dumps / "target")
    (target / "dump.json").unlink()
    (target / "loop.json").symlink_to(target / "dump.json")
    (target / "dump.json").symlink_to(target / "loop.json")
    check(run(case, command, target), 2, "dump.json")


@pytest.mark.parametrize("command", COMMANDS)
def test_dump_json_symlink_out_of_the_dump(tmp_path: Path, command: str) -> None:
    case = new_case(tmp_path)
    target = write_dump(case.dumps / "target")
    outside = case.root / "outside" / "dump.json"
    os.replace(target / "dump.json", outside)
    (target / "dump.json").symlink_to(outside)
    check(run(case, command, target), 2, "dump.json", "outside")


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize(
    "text, words",
    [
        ("", ("empty",)),
        ('{"task": "statistics", "data": {"a": [', ("not valid JSON",)),
        ("\x00\xff\xfe garbage", ("dump.json",)),
        ('{"task": "statistics", "level": "mix", "data": {"Tensor.add.0.forward": 7}}', ("Tensor.add",)),
        ("[" * 200 + "]" * 200, ("dump.json",)),
        ('{"task": "statistics", "level": "mix", "data": 7}', ("'data'",)),
    ],
    ids=["empty", "truncated", "binary", "int-entry", "top-level-list", "data-number"],
)
def test_malformed(tmp_path: Path, command: str, text: str, words: tuple[str, ...]) -> None:
    case = new_case(tmp_path)
    check(run(case, command, bad_target(case, text)), 2, "dump.json", *words)


@pytest.mark.parametrize("command", COMMANDS)
def test_dump_json_is_a_folder(tmp_path: Path, command: str) -> None:
    case = new_case(tmp_path)
    target = write_dump(case.dumps / "target")
    (target / "dump.json").unlink()
    (target / "dump.json").mkdir()
    check(run(case, command, target), 2, str(target / "dump.json"), "is a folder")


@pytest.mark.parametrize("command", COMMANDS)
def test_huge_float_exponent_and_long_name(tmp_path: Path, command: str) -> None:
    """Our own: a float written as 1e999999 and an entry name of 100,000 characters are no mistake."""
    case = new_case(tmp_path)
    data = edited({"Functional." + "x" * 100_000 + ".0.forward": {"input_args": [], "output": []}})
    text = json.dumps({"task": "statistics", "level": "mix", "data": data}).replace("2.0", "1e999999", 1)
    target = bad_target(case, text)
    (target / "construct.json").write_text(json.dumps({name: None for name in data}))
    outcome = run(case, command, target)
    check(outcome, 0, lines=None)
