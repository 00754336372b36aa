"""The command line's polish: --version, examples in every --help, the same names and metavars on every
command, graph_visualize taking a dump.json, a hint when --tp is given a path, every flag of msprobe compare
read (tests/pipeline/test_compare_modes.py: what is done with them), the long forms in the usage line."""

from __future__ import annotations

import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import case_dir

from msprobe_dask import __version__
from msprobe_dask.cli import COMMAND_MODULES, build_parser, main

SHARED = {  # option -> metavar, on every command that has it
    "--target_path": "TARGET",
    "--golden_path": "GOLDEN",
    "--output_path": "OUT",
    "--output_dir": "OUT",
    "--scheduler": "tcp://HOST:PORT",
    "--workers": "N",
    "--layer_mapping": "YAML",
}

# msprobe compare -h (26.2.0): every flag, in its order
MSPROBE_COMPARE_FLAGS = [
    ("-tp", "--target_path"),
    ("-gp", "--golden_path"),
    ("-h", "--help"),
    ("-m", "--mode"),
    ("-o", "--output_path"),
    ("--xlsx",),
    ("-fm", "--fuzzy_match"),
    ("-cm", "--cell_mapping"),
    ("-am", "--api_mapping"),
    ("-dm", "--data_mapping"),
    ("-lm", "--layer_mapping"),
    ("-da", "--diff_analyze"),
    ("-tensor_log", "--is_print_compare_log"),
    ("-fr", "--fusion_rule_file"),
    ("-qfr", "--quant_fusion_rule_file"),
    ("-cfr", "--close_fusion_rule_file"),
    ("--rank",),
    ("--step",),
    ("--input_data",),
    ("--input_shape",),
    ("--output_size",),
    ("--dym_shape_range",),
    ("-ofs", "--onnx_fusion_switch"),
    ("--consistent_check",),
    ("--backend",),
    ("--config",),
]


def _help(*args: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "msprobe_dask", *args, "--help"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_version() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "msprobe_dask", "--version"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0 and proc.stdout.strip() == f"msprobe-dask {__version__}"


@pytest.mark.parametrize("command", [None, *COMMAND_MODULES])
def test_every_help_has_examples(command: str | None) -> None:
    text = _help(*([command] if command else []))
    examples = text.split("examples:\n", 1)[1]
    lines = [line.strip() for line in examples.splitlines() if line.strip()]
    assert lines and all(line.startswith("msprobe-dask ") for line in lines)
    if command:
        assert any(line.startswith(f"msprobe-dask {command} ") for line in lines)


def test_shared_options_have_the_same_metavar_everywhere() -> None:
    parser = build_parser()
    (subparsers,) = [a for a in parser._actions if a.choices and isinstance(a.choices, dict)]
    seen = set()
    for name, sub in subparsers.choices.items():
        for action in sub._actions:
            for option in action.option_strings:
                if option in SHARED:
                    assert action.metavar == SHARED[option], (name, option, action.metavar)
                    seen.add(option)
        options = {o for a in sub._actions for o in a.option_strings}
        assert "--debug" in options, name
        if "--scheduler" in options:
            assert "--workers" in options, name
    assert seen == set(SHARED)


def test_tp_given_a_path_says_that_the_path_is_dash_tp(capsys: pytest.CaptureFixture[str]) -> None:
    target = str(case_dir("stat_mix") / "target")
    with pytest.raises(SystemExit) as exit_info:
        main(["graph_visualize", "-tp", target, "--tp", target, "-o", "unused"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "--tp is the tensor-parallel size" in err and "the target path is -tp (one dash)" in err


def test_graph_visualize_takes_a_dump_json_as_its_folder(tmp_path: Path) -> None:
    """D31: a dump.json given to graph_visualize stands for the folder holding it."""
    data = case_dir("stat_mix")

    def rows(out: Path, target: Path, golden: Path) -> list[tuple]:
        assert main(["graph_visualize", "-q", "-tp", str(target), "-gp", str(golden), "-o", str(out)]) == 0
        (db,) = out.glob("*.vis.db")
        with sqlite3.connect(db) as c:
            return c.execute("SELECT * FROM tb_nodes ORDER BY rowid").fetchall()

    files = rows(tmp_path / "files", data / "target" / "dump.json", data / "golden" / "dump.json")
    assert files == rows(tmp_path / "folders", data / "target", data / "golden")


def test_help_names_the_sides_alike() -> None:
    texts = [_help(command) for command in ("compare", "graph_visualize")]
    for text in texts:
        assert re.search(r"-tp TARGET, --target_path TARGET\s+target side \(NPU\)", text)
        assert re.search(r"-gp GOLDEN, --golden_path GOLDEN\s+golden side \(Bench\)", text)


@pytest.mark.parametrize(("given", "seen"), [(None, "1"), ("3", "3")], ids=["unset", "user's"])
def test_the_command_line_runs_openblas_on_one_thread_unless_told_otherwise(
    given: str | None, seen: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(Set before numpy is first imported: --help imports no numpy, test_imports.py.)"""
    from msprobe_dask import cli

    environ = {} if given is None else {"OPENBLAS_NUM_THREADS": given}
    monkeypatch.setattr(cli.os, "environ", environ)  # (restored after: the test's own stays as it was)
    values: list[str | None] = []

    def leave(code: int) -> None:
        raise SystemExit(code)

    monkeypatch.setattr(
        cli, "main", lambda exiting: values.append(cli.os.environ.get("OPENBLAS_NUM_THREADS")) or 0
    )
    monkeypatch.setattr(cli.os, "_exit", leave)
    with pytest.raises(SystemExit):
        cli.console_main()
    assert values == [seen]


def test_every_flag_of_msprobe_compare_is_read() -> None:
    parser = build_parser(["compare"])
    (subparsers,) = [a for a in parser._actions if a.choices and isinstance(a.choices, dict)]
    ours = {tuple(action.option_strings) for action in subparsers.choices["compare"]._actions}
    assert set(MSPROBE_COMPARE_FLAGS) <= ours


@pytest.mark.parametrize(
    ("command", "usage"),
    [
        ("compare", "-tp/--target_path TARGET -gp/--golden_path GOLDEN [-o/--output_path OUT] [options]"),
        (
            "graph_visualize",
            "-tp/--target_path TARGET [-gp/--golden_path GOLDEN] -o/--output_path OUT [options]",
        ),
    ],
)
def test_usage_names_the_long_forms(command: str, usage: str) -> None:
    assert _help(command).startswith(f"usage: msprobe-dask {command} {usage}\n")

