"""Mapping yaml files that are bombs or not files, and what an internal bug looks like."""

from __future__ import annotations

from pathlib import Path

import pytest
from hostile_dumps import write_dump
from hostile_run import check, new_case, result_files

# nine levels of nine aliases: 9**9 leaves once expanded, a few hundred bytes of text
BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]\n" for i in range(8)
)


@pytest.mark.parametrize(
    "command, flag",
    [
        ("graph_visualize", "-lm"),
        ("compare", "-lm"),
        ("compare", "-dm"),
        ("compare", "-am"),
        ("compare", "-cm"),
    ],
)
def test_yaml_alias_bomb(tmp_path: Path, command: str, flag: str) -> None:
    case = new_case(tmp_path)
    target, golden = write_dump(case.dumps / "target"), write_dump(case.dumps / "golden")
    bomb = case.root / "cfg" / "mapping.yaml"
    bomb.write_text(BOMB)
    args = ("-tp", str(target), "-gp", str(golden), "-o", str(case.out), "-q", flag, str(bomb))
    if command == "compare":
        check(case.run(command, *args), 2, "mapping.yaml", "alias")
        assert not result_files(case.out)
    else:  # graph_visualize goes on without a mapping file it cannot use, as the reference does
        outcome = check(case.run(command, *args), 0, lines=None)
        assert "mapping.yaml" in outcome.lines[0] and "alias" in outcome.lines[0], outcome.stderr


def test_mapping_file_that_is_a_fifo(tmp_path: Path) -> None:
    import os

    case = new_case(tmp_path)
    target, golden = write_dump(case.dumps / "target"), write_dump(case.dumps / "golden")
    fifo = case.root / "cfg" / "mapping.yaml"
    os.mkfifo(fifo)
    args = ("-tp", str(target), "-gp", str(golden), "-o", str(case.out), "-q", "-dm", str(fifo))
    check(case.run("compare", *args), 2, "mapping.yaml", "FIFO")


BUG = (
    "import msprobe_dask.pipeline.compare_cli as c\n"
    "def broken(*a, **k): raise KeyError('oops')\n"
    "c.open_dump = broken\n"
)


def test_an_internal_bug_is_one_line_asking_for_a_report(tmp_path: Path) -> None:
    case = new_case(tmp_path)
    target, golden = write_dump(case.dumps / "target"), write_dump(case.dumps / "golden")
    outcome = case.run("compare", "-tp", str(target), "-gp", str(golden), "-o", str(case.out), prelude=BUG)
    check(outcome, 1, "internal error (KeyError: 'oops')", "--debug")
    assert not case.out.exists()


def test_debug_shows_the_traceback_of_an_internal_bug(tmp_path: Path) -> None:
    case = new_case(tmp_path)
    target, golden = write_dump(case.dumps / "target"), write_dump(case.dumps / "golden")
    argv = ("--debug", "compare", "-tp", str(target), "-gp", str(golden), "-o", str(case.out))
    outcome = case.run(*argv, prelude=BUG)
    assert outcome.code == 1 and "Traceback" in outcome.stderr and "KeyError: 'oops'" in outcome.stderr
    assert outcome.lines[-1].startswith("msprobe-dask: internal error")
