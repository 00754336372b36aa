"""A bad-input campaign against every command: each case damages a copy of a real dump (tests/data) in a
scratch folder, runs the command line with a 60 s timeout and prints case -> verdict.

A case holds when the command ends with the expected kind of exit (2: one stderr line naming the file
(after the lines of the stages a long run finished),
no traceback; 0 or 1 where the input is readable), leaves no temporary or partial file in the output
folder, does not touch a file that was there before, and writes no row or node that says ``pass`` for
an entry whose tensor could not be read.

    python workflows/hostile_campaign.py [--scratch DIR] [--only WORD] [--keep]
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from msprobe_dask.pipeline.stages import STAGES

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
STAGE_LINE_STARTS = tuple({f"{stage.name} " for stage in STAGES.values()})


@dataclass
class Run:
    code: int | str
    stderr: str
    out: Path
    before: dict[str, float]

    @property
    def lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.strip()]

    @property
    def error_lines(self) -> list[str]:
        """The lines that are not a finished stage's (``parse and match 1/1 ranks (3.2 s)``): a run that
        fails after pipeline/stages.HOLD_SECONDS has logged the stages it finished, then its one line."""
        return [
            line for line in self.lines if not (line.startswith(STAGE_LINE_STARTS) and line.endswith(" s)"))
        ]


def run(
    argv: list[str],
    out: Path,
    cwd: Path,
    timeout: float = 60,
    stop_after: float | None = None,
    ctrl_c_after: float | None = None,
    fsize: int = 0,
    prefix: Sequence[str] = (),
) -> Run:
    before = {str(p): p.stat().st_mtime for p in out.rglob("*")} if out.is_dir() else {}
    proc = subprocess.Popen(
        [*prefix, sys.executable, "-m", "msprobe_dask", *argv],
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
        start_new_session=True,
        preexec_fn=(lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))) if fsize else None,
    )
    if stop_after is not None:  # SIGTERM to the run's process (kill PID)
        time.sleep(stop_after)
        proc.send_signal(signal.SIGTERM)
    if ctrl_c_after is not None:  # SIGINT to its whole process group, as Ctrl-C at a terminal
        time.sleep(ctrl_c_after)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=timeout)
        code: int | str = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        _, err = proc.communicate()
        code = "hang"
    for _ in range(100):  # what leaves by itself once the run is gone (multiprocessing's tracker): 2 s
        if not _alive_in_session(proc.pid):
            break
        time.sleep(0.02)
    else:
        err += "\nPROCESSES LEFT"
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    return Run(code, err, out, before)


def _alive_in_session(session: int) -> bool:
    """Whether a process of the ``session`` still runs (a zombie has exited)."""
    lines = subprocess.run(["ps", "-o", "stat=", "-s", str(session)], capture_output=True, text=True).stdout
    return any(not stat.startswith("Z") for stat in lines.split())


def faults(result: Run, codes: tuple[int, ...], word: str | None) -> list[str]:
    """What is wrong with a run that should end with one of ``codes``."""
    found = []
    if result.code not in codes:
        found.append(f"exit {result.code}")
    if "PROCESSES LEFT" in result.stderr:
        found.append("processes left")
    if "Traceback" in result.stderr:
        found.append("traceback")
    if result.code == 2 and len(result.error_lines) != 1:
        found.append(f"{len(result.error_lines)} stderr lines")
    if word and result.code == 2 and word not in result.stderr:
        found.append(f"no {word!r} in the line")
    if result.out.is_dir():
        for path in result.out.rglob("*"):
            name = path.name
            if name.startswith(".") or name.endswith((".part", ".tmp")):
                found.append(f"left {path.name}")
            elif str(path) in result.before and path.stat().st_mtime != result.before[str(path)]:
                found.append(f"overwrote {path.name}")
            elif result.code not in (0, 1) and str(path) not in result.before and path.is_file():
                found.append(f"wrote {path.name} on failure")
    return found


def pass_rows_of_unreadable(out: Path, damaged: str) -> list[str]:
    """csv rows of the ``damaged`` tensor (its file name without the suffix) that still say pass."""
    bad = []
    for path in out.rglob("*.csv"):
        with open(path, newline="", errors="replace") as f:
            rows = list(csv.reader(f))
        result = rows[0].index("Result") if rows else 0
        bad += [row[0] for row in rows[1:] if row[0] == damaged and row[result] == "pass"]
    return bad


class Campaign:
    def __init__(self, scratch: Path) -> None:
        self.scratch = scratch
        self.rows: list[tuple[str, str]] = []

    def case_dir(self, name: str) -> Path:
        folder = self.scratch / name
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        (folder / "out").mkdir()
        return folder

    def copy(self, folder: Path, data: str, side: str = "target", into: str = "target") -> Path:
        dst = folder / into
        shutil.copytree(DATA / data / side, dst, symlinks=True)
        return dst

    def record(
        self,
        name: str,
        result: Run,
        codes: tuple[int, ...] = (2,),
        word: str | None = None,
        extra: list[str] | None = None,
    ) -> None:
        found = faults(result, codes, word) + (extra or [])
        last = result.lines[-1][:110] if result.lines else ""
        verdict = "ok" if not found else "DEFECT: " + "; ".join(found)
        self.rows.append((name, f"{verdict}  [exit {result.code}] {last}"))
        print(f"{name:48s} {verdict}  [exit {result.code}] {last}", flush=True)

    def dumps(
        self,
        command: str,
        name: str,
        edit: Callable[[Path, Path], list[str] | None],
        data: str = "stat_mix",
        codes: tuple[int, ...] = (2,),
        word: str | None = None,
        damaged: str = "",
    ) -> None:
        """``command`` on copies of a tests/data case's two dumps, ``edit`` damaging them (it returns more
        arguments, or None); ``damaged``: the name of the tensor damaged, whose csv row must not pass."""
        folder = self.case_dir(name)
        target, golden = self.copy(folder, data), self.copy(folder, data, "golden", "golden")
        for side in (target, golden):
            if (side / "dump_tensor_data").is_dir():  # tensors are read where dump_data_dir names them
                save_doc(side, {**dump_doc(side), "dump_data_dir": str(side / "dump_tensor_data")})
        extra_args = edit(target, golden) or []
        if damaged:
            damaged = tensor_file(golden).name.rsplit(".", 1)[0]
        result = run(_io(target, golden, folder, *extra_args, command=command), folder / "out", folder)
        extra = (
            [f"pass row: {r}" for r in pass_rows_of_unreadable(folder / "out", damaged)] if damaged else []
        )
        self.record(name, result, codes, word, extra)

    def compare(self, name: str, edit: Callable[[Path, Path], list[str] | None], **options: Any) -> None:
        self.dumps("compare", name, edit, **options)

    def graph(self, name: str, edit: Callable[[Path, Path], list[str] | None], **options: Any) -> None:
        self.dumps("graph_visualize", name, edit, **options)

    def command(
        self,
        name: str,
        make: Callable[[Path], list[str]],
        codes: tuple[int, ...] = (2,),
        word: str | None = None,
        prefix: Sequence[str] = (),
        **options: float,
    ) -> None:
        """A case of any command line: ``make`` lays out its inputs in the case's folder and returns
        its argv (the output folder is ``out``); ``prefix``: what runs the command (``WITHOUT_DAC``)."""
        folder = self.case_dir(name)
        argv = make(folder)
        result = run(argv, folder / "out", folder, prefix=prefix, **options)  # type: ignore[arg-type]
        self.record(name, result, codes, word)


def write(path: Path, data: bytes | str) -> None:
    path.write_bytes(data.encode() if isinstance(data, str) else data)


def dump_doc(folder: Path) -> dict:
    return json.loads((folder / "dump.json").read_text())


def save_doc(folder: Path, doc: dict) -> None:
    (folder / "dump.json").write_text(json.dumps(doc, indent=1))


def tensor_file(folder: Path) -> Path:
    """The tensor the cases damage: a forward linear's input (compared by both commands)."""
    names = sorted((folder / "dump_tensor_data").iterdir())
    return next((p for p in names if ".linear.0.forward.input.0." in p.name), names[0])


def campaign_cases(c: Campaign) -> None:
    # dump.json damage, on both commands
    damages: dict[str, Callable[[Path, Path], None]] = {
        "dump-empty": lambda t, g: write(t / "dump.json", b""),
        "dump-truncated-half": lambda t, g: write(
            t / "dump.json", (t / "dump.json").read_bytes()[: (t / "dump.json").stat().st_size // 2]
        ),
        "dump-bom": lambda t, g: write(t / "dump.json", b"\xef\xbb\xbf" + (t / "dump.json").read_bytes()),
        "dump-non-utf8": lambda t, g: write(
            t / "dump.json", (t / "dump.json").read_bytes().replace(b"Functional", b"Func\xff\xfeional", 1)
        ),
        "dump-list-top": lambda t, g: write(t / "dump.json", "[1, 2]"),
        "dump-data-list": lambda t, g: save_doc(t, {**dump_doc(t), "data": [1]}),
        "dump-data-null": lambda t, g: save_doc(t, {**dump_doc(t), "data": None}),
        "dump-task-number": lambda t, g: save_doc(t, {**dump_doc(t), "task": 7}),
        "dump-framework-list": lambda t, g: save_doc(t, {**dump_doc(t), "framework": ["pytorch"]}),
        "dump-shape-string": lambda t, g: _edit_leaf(t, "shape", "2,3"),
        "dump-shape-huge": lambda t, g: _edit_leaf(t, "shape", [2**40, 2**40]),
        "dump-dtype-list": lambda t, g: _edit_leaf(t, "dtype", ["x"]),
        "dump-max-string": lambda t, g: _edit_leaf(t, "Max", "big"),
        "dump-max-dict": lambda t, g: _edit_leaf(t, "Max", {"a": 1}),
        "dump-max-1e400": lambda t, g: write(
            t / "dump.json", (t / "dump.json").read_text().replace('"Max": ', '"Max": 1e400 , "x": ', 1)
        ),
        "dump-dup-keys": lambda t, g: write(
            t / "dump.json",
            (t / "dump.json")
            .read_text()
            .replace(
                '"data": {',
                '"data": {"A.b.0.forward": {"input_args": []}, "A.b.0.forward": {"input_args": []},',
                1,
            ),
        ),
        "dump-deep-10000": lambda t, g: write(
            t / "dump.json",
            (t / "dump.json")
            .read_text()
            .replace('"data": {', '"deep": ' + "[" * 10000 + "]" * 10000 + ', "data": {', 1),
        ),
        "dump-deep-in-entry": lambda t, g: _edit_leaf(t, "Max", json.loads("[" * 500 + "]" * 500)),
        "dump-output-string": lambda t, g: _edit_entry(t, "output", "oops"),
        "dump-output-dict": lambda t, g: _edit_entry(t, "output", {"a": 1}),
        "dump-leaf-number": lambda t, g: _edit_entry(t, "output", [7]),
        "dump-leaf-nested-list-str": lambda t, g: _edit_entry(t, "output", [["x", None, 1.5]]),
        "dump-name-newline": lambda t, g: _rename_first(t, "Functional.li\nnear.0.forward"),
        "dump-name-empty": lambda t, g: _rename_first(t, ""),
        "dump-name-no-dots": lambda t, g: _rename_first(t, "nodots"),
        "dump-zero-entries": lambda t, g: save_doc(t, {**dump_doc(t), "data": {}}),
        "stack-empty": lambda t, g: write(t / "stack.json", b""),
        "stack-truncated": lambda t, g: write(t / "stack.json", (t / "stack.json").read_bytes()[:50]),
        "stack-list": lambda t, g: write(t / "stack.json", "[1,2,3]"),
        "stack-group-number": lambda t, g: write(t / "stack.json", '{"0": 5}'),
        "stack-group-dict": lambda t, g: write(t / "stack.json", '{"0": {"a": 1}}'),
        "stack-lines-numbers": lambda t, g: write(
            t / "stack.json", json.dumps({"0": [list(dump_doc(t)["data"]), [1, 2]]})
        ),
        "stack-names-number": lambda t, g: write(t / "stack.json", json.dumps({"0": [5, ["x"]]})),
        "stack-non-utf8": lambda t, g: write(t / "stack.json", b'{"0": [["a"], ["\xff\xfe"]]}'),
        "construct-empty": lambda t, g: write(t / "construct.json", b""),
        "construct-truncated": lambda t, g: write(
            t / "construct.json", (t / "construct.json").read_bytes()[:30]
        ),
        "construct-list": lambda t, g: write(t / "construct.json", "[1]"),
        "construct-cycle": lambda t, g: _construct_cycle(t),
        "construct-self-parent": lambda t, g: _construct_self(t),
        "construct-deep-chain": lambda t, g: _construct_chain(t, 5000),
    }
    for name, damage in damages.items():
        c.compare(f"compare/{name}", lambda t, g, d=damage: d(t, g), codes=(0, 2))
        c.graph(f"graph/{name}", lambda t, g, d=damage: d(t, g), codes=(0, 2))
    for name in ("dump-truncated-half", "dump-output-string", "dump-shape-string", "stack-list"):
        c.compare(
            f"compare-w2/{name}", lambda t, g, d=damages[name]: (d(t, g), ["--workers", "2"])[1], codes=(0, 2)
        )
        c.compare(
            f"compare-xlsx/{name}", lambda t, g, d=damages[name]: (d(t, g), ["--xlsx"])[1], codes=(0, 2)
        )
        c.compare(f"compare-da/{name}", lambda t, g, d=damages[name]: (d(t, g), ["-da"])[1], codes=(0, 2))
        c.compare(f"compare-fm/{name}", lambda t, g, d=damages[name]: (d(t, g), ["-fm"])[1], codes=(0, 2))
        c.graph(
            f"graph-w2/{name}", lambda t, g, d=damages[name]: (d(t, g), ["--workers", "2"])[1], codes=(0, 2)
        )

    # tensors
    tdamages: dict[str, Callable[[Path], None]] = {
        "pt-missing": lambda p: p.unlink(),
        "pt-empty": lambda p: write(p, b""),
        "pt-truncated": lambda p: write(p, p.read_bytes()[: p.stat().st_size // 2]),
        "pt-zip-bomb": lambda p: _zip_bomb(p),
        "pt-pickle-os-system": lambda p: _evil_pt(p),
        "pt-is-npy-object": lambda p: _npy_object(p),
        "pt-storage-short": lambda p: _short_storage(p),
        "pt-is-folder": lambda p: _file_to_folder(p),
    }
    for name, damage in tdamages.items():

        def edit(t: Path, g: Path, d=damage) -> None:
            d(tensor_file(t))

        c.compare(f"compare-tensor/{name}", edit, data="tensor_mix", codes=(1, 2), damaged="x")
        c.graph(f"graph-tensor/{name}", edit, data="tensor_mix", codes=(1, 2))

    # paths, outputs
    c.compare("compare/out-is-file", lambda t, g: _out_is_file(t.parent / "out"), codes=(2,))
    read_only = (0, 2) if os.geteuid() == 0 else (2,)  # (root writes into a read-only folder)
    c.compare("compare/out-read-only", lambda t, g: os.chmod(t.parent / "out", 0o500), codes=read_only)
    c.graph("graph/out-read-only", lambda t, g: os.chmod(t.parent / "out", 0o500), codes=read_only)
    c.compare("compare/target-missing", lambda t, g: shutil.rmtree(t), codes=(2,))
    c.compare("compare/golden-is-fifo", lambda t, g: _fifo(g / "dump.json"), codes=(2,))

    more_cases(c)
    link_and_npy_cases(c)
    output_and_access_cases(c)


def _multirank(folder: Path, data: str = "multirank") -> tuple[Path, Path]:
    target, golden = folder / "target", folder / "golden"
    shutil.copytree(DATA / data / "target", target)
    shutil.copytree(DATA / data / "golden", golden)
    return target, golden


def _io(target: Path, golden: Path, folder: Path, *more: str, command: str = "compare") -> list[str]:
    return [command, "-tp", str(target), "-gp", str(golden), "-o", str(folder / "out"), *more]


def _ranks_case(
    damage: Callable[[Path, Path], None], *more: str, command: str = "compare"
) -> Callable[[Path], list[str]]:
    def make(folder: Path) -> list[str]:
        target, golden = _multirank(folder)
        damage(target / "step0", golden / "step0")
        return _io(target / "step0", golden / "step0", folder, *more, command=command)

    return make


def _yaml_case(flag: str, text: str, data: str = "stat_mix") -> Callable[[Path], list[str]]:
    def make(folder: Path) -> list[str]:
        target, golden = folder / "target", folder / "golden"
        shutil.copytree(DATA / data / "target", target)
        shutil.copytree(DATA / data / "golden", golden)
        write(folder / "map.yaml", text.replace("MARKER", str(folder / "PWNED")))
        return _io(target, golden, folder, flag, str(folder / "map.yaml"))

    return make


def _named_case(name: str, command: str = "compare") -> Callable[[Path], list[str]]:
    def make(folder: Path) -> list[str]:
        base = folder / name
        shutil.copytree(DATA / "stat_mix" / "target", base / "t")
        shutil.copytree(DATA / "stat_mix" / "golden", base / "g")
        return _io(base / "t", base / "g", folder, command=command)

    return make


def _merge_case(damage: Callable[[Path], object], *more: str) -> Callable[[Path], list[str]]:
    def make(folder: Path) -> list[str]:
        target = folder / "target"
        shutil.copytree(DATA / "tp_merge" / "target", target)
        damage(target)
        return ["graph_visualize", "-tp", str(target), "-o", str(folder / "out"), *more]

    return make


def _convert_case(damage: Callable[[Path], None]) -> Callable[[Path], list[str]]:
    def make(folder: Path) -> list[str]:
        target = folder / "target"
        shutil.copytree(DATA / "tensor_mix" / "target", target)
        save_doc(target, {**dump_doc(target), "dump_data_dir": str(target / "dump_tensor_data")})
        damage(target)
        return ["convert", str(target), "-o", str(folder / "out" / "run.zarr")]

    return make


def _store_case(damage: Callable[[Path], None]) -> Callable[[Path], list[str]]:
    """compare of a converted (zarr) dump damaged after its conversion."""

    def make(folder: Path) -> list[str]:
        target, golden = folder / "target", folder / "golden"
        for side, into in (("target", target), ("golden", golden)):
            shutil.copytree(DATA / "tensor_mix" / side, into)
            save_doc(into, {**dump_doc(into), "dump_data_dir": str(into / "dump_tensor_data")})
        store = folder / "run.zarr"
        subprocess.run(
            [sys.executable, "-m", "msprobe_dask", "convert", str(target), "-o", str(store), "-q"],
            check=True,
            capture_output=True,
        )
        damage(store)
        return _io(store, golden, folder)

    return make


def _report_case(damage: Callable[[Path], None]) -> Callable[[Path], list[str]]:
    def make(folder: Path) -> list[str]:
        out = folder / "out"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "msprobe_dask",
                *_io(DATA / "stat_mix" / "target", DATA / "stat_mix" / "golden", folder),
                "-q",
            ],
            check=True,
            capture_output=True,
        )
        damage(next(out.glob("compare_result_*.csv")))
        return ["report", str(out)]

    return make


def _merge_result_case(config: str, truncate: bool = False) -> Callable[[Path], list[str]]:
    """merge_result of a multi-rank compare's workbooks."""

    def make(folder: Path) -> list[str]:
        xlsx = folder / "xlsx"
        target, golden = _multirank(folder)
        compare = _io(target / "step0", golden / "step0", folder, "--xlsx", "-q")
        compare[compare.index("-o") + 1] = str(xlsx)
        subprocess.run([sys.executable, "-m", "msprobe_dask", *compare], check=True, capture_output=True)
        if truncate:
            _truncate(sorted(xlsx.glob("*.xlsx"))[1])
        write(folder / "config.yaml", config.replace("MARKER", str(folder / "PWNED")))
        return [
            "merge_result",
            "-i",
            str(xlsx),
            "-o",
            str(folder / "out"),
            "-config",
            str(folder / "config.yaml"),
        ]

    return make


def _truncate(path: Path, keep: float = 0.5) -> None:
    write(path, path.read_bytes()[: int(path.stat().st_size * keep)])


def _rename_rank(step: Path, old: str, new: str) -> None:
    (step / old).rename(step / new)


def more_cases(c: Campaign) -> None:
    # rank and step trees that disagree
    c.command("ranks/rank3-target-only", _ranks_case(lambda t, g: shutil.rmtree(g / "rank3")), codes=(2,))
    c.command(
        "ranks/rank3-target-only-skip",
        _ranks_case(lambda t, g: shutil.rmtree(g / "rank3"), "--skip-missing-ranks"),
        codes=(0,),
    )
    c.command(
        "ranks/rank-name-not-number",
        _ranks_case(
            lambda t, g: (_rename_rank(t, "rank3", "rankX"), _rename_rank(g, "rank3", "rankX")) and None
        ),
        codes=(0, 2),
    )
    c.command(
        "ranks/rank-without-dump", _ranks_case(lambda t, g: os.unlink(t / "rank2" / "dump.json")), codes=(2,)
    )
    c.command(
        "ranks/rank2-truncated-w2",
        _ranks_case(lambda t, g: _truncate(t / "rank2" / "dump.json"), "--workers", "2"),
        codes=(2,),
    )
    c.command(
        "ranks/rank2-truncated-xlsx",
        _ranks_case(lambda t, g: _truncate(t / "rank2" / "dump.json"), "--xlsx"),
        codes=(2,),
    )
    c.command(
        "ranks/rank2-truncated-da",
        _ranks_case(lambda t, g: _truncate(t / "rank2" / "dump.json"), "-da"),
        codes=(2,),
    )
    c.command(
        "ranks/graph-rank2-truncated",
        _ranks_case(lambda t, g: _truncate(t / "rank2" / "dump.json"), command="graph_visualize"),
        codes=(2,),
    )
    c.command(
        "ranks/graph-rank1-construct-list-w2",
        _ranks_case(
            lambda t, g: write(t / "rank1" / "construct.json", "[]"),
            "--workers",
            "2",
            command="graph_visualize",
        ),
        codes=(2,),
    )
    c.command(
        "ranks/graph-rank3-target-only",
        _ranks_case(lambda t, g: shutil.rmtree(g / "rank3"), command="graph_visualize"),
        codes=(0, 2),
    )

    def step_missing(folder: Path) -> list[str]:
        target, golden = _multirank(folder)
        shutil.rmtree(golden / "step1")
        return _io(target, golden, folder)

    c.command("steps/step1-golden-missing", step_missing, codes=(0, 2))

    # yaml mapping files
    tag = "!!python/object/apply:os.system ['touch MARKER']\n"
    for flag in ("-dm", "-lm", "-am", "-cm"):
        c.command(f"yaml{flag}/python-tag", _yaml_case(flag, tag), codes=(2,))
        c.command(
            f"yaml{flag}/python-tag-in-value",
            _yaml_case(flag, "a: !!python/object/apply:os.system ['touch MARKER']\n"),
            codes=(2,),
        )
        c.command(f"yaml{flag}/malformed", _yaml_case(flag, "a: [1, 2\n  b: {"), codes=(2,))
        c.command(f"yaml{flag}/a-list", _yaml_case(flag, "- 1\n- 2\n"), codes=(0, 2))
        c.command(f"yaml{flag}/empty", _yaml_case(flag, ""), codes=(0, 2))
    # paths
    for label, name in (
        ("spaces", "a dir with spaces"),
        ("newline", "new\nline"),
        ("non-ascii", "données_ü_日本"),
    ):
        c.command(f"paths/compare-{label}", _named_case(name), codes=(0,))
        c.command(f"paths/graph-{label}", _named_case(name, "graph_visualize"), codes=(0,))
    # a file size limit while writing
    c.command("outputs/compare-fsize", _named_case("f"), codes=(2,), fsize=200_000)
    c.command(
        "outputs/compare-xlsx-fsize", lambda f: [*_named_case("f")(f), "--xlsx"], codes=(2,), fsize=200_000
    )
    c.command("outputs/graph-fsize", _named_case("f", "graph_visualize"), codes=(2,), fsize=200_000)
    c.command(
        "outputs/compare-w2-fsize",
        lambda f: [*_named_case("f")(f), "--workers", "2"],
        codes=(2,),
        fsize=200_000,
    )
    c.command(
        "outputs/graph-w2-fsize",
        lambda f: [*_named_case("f", "graph_visualize")(f), "--workers", "2"],
        codes=(2,),
        fsize=200_000,
    )
    # SIGTERM to the run's process, Ctrl-C to its group, at a few moments (multi-rank, with workers)
    stops = [("term", "stop_after", 143, at, ()) for at in (0.3, 0.9, 1.6, 2.4)]
    stops += [("ctrl-c", "ctrl_c_after", 130, at, ("--workers", "2")) for at in (0.2, 0.6, 1.0, 1.4, 2.0)]
    for how, option, code, at, graph_flags in stops:
        for command, flags in (("compare", ("--workers", "2")), ("graph_visualize", graph_flags)):
            name = f"signals/{command.split('_')[0]}{'-w2' if flags else ''}-{how}-{at}"
            c.command(
                name, _ranks_case(lambda t, g: None, *flags, command=command), codes=(0, code), **{option: at}
            )
    # parallel merges (the target's two ranks are one tp group)
    tp2 = ("--rank_size", "2", "--tp", "2", "--pp", "1")
    merges: list[tuple[str, Callable[[Path], object], tuple[str, ...], tuple[int, ...]]] = [
        ("rank1-truncated", lambda t: _truncate(t / "rank1" / "dump.json"), tp2, (2,)),
        ("rank1-missing", lambda t: shutil.rmtree(t / "rank1"), tp2, (2,)),
        ("rank-size-3", lambda t: None, ("--rank_size", "3", "--tp", "2", "--pp", "1"), (2,)),
        ("tp-0", lambda t: None, ("--rank_size", "2", "--tp", "0", "--pp", "1"), (2,)),
        ("vpp-huge", lambda t: None, (*tp2, "--vpp", "100000000"), (0, 2)),
        ("order-bad", lambda t: None, (*tp2, "--order", "tp-xx"), (0, 1, 2)),
        ("construct-list", lambda t: write(t / "rank1" / "construct.json", "[]"), tp2, (2,)),
        (
            "stack-truncated-json",
            lambda t: _truncate(t / "rank0" / "stack.json"),
            (*tp2, "--file_type", "json"),
            (2,),
        ),
        (
            "shape-string-json",
            lambda t: _edit_leaf(t / "rank1", "shape", "x"),
            (*tp2, "--file_type", "json"),
            (0, 2),
        ),
        ("max-string", lambda t: _edit_leaf(t / "rank1", "Max", "big"), tp2, (0, 2)),
    ]
    for name, damage, flags, codes in merges:
        c.command(f"merge/{name}", _merge_case(damage, *flags), codes=codes)
    # convert, and compare of a damaged store
    c.command("convert/pt-truncated", _convert_case(lambda t: _truncate(tensor_file(t))), codes=(0, 1, 2))
    c.command("convert/pt-evil", _convert_case(lambda t: _evil_pt(tensor_file(t))), codes=(0, 1, 2))
    c.command(
        "convert/out-exists",
        lambda f: (_convert_case(lambda t: None)(f), (f / "out" / "run.zarr").mkdir(parents=True))[0],
        codes=(2,),
    )
    c.command("convert/dump-truncated", _convert_case(lambda t: _truncate(t / "dump.json")), codes=(0, 1, 2))
    c.command("store/chunk-deleted", _store_case(lambda s: _remove_a_chunk(s)), codes=(1, 2))
    c.command("store/chunk-truncated", _store_case(lambda s: _truncate(_a_chunk(s))), codes=(1, 2))
    c.command("store/zarr-json-garbage", _store_case(lambda s: write(_a_meta(s), "{{{")), codes=(1, 2))
    c.command(
        "store/dump-json-removed", _store_case(lambda s: os.unlink(next(s.rglob("dump.json")))), codes=(2,)
    )
    # merge_result, view
    c.command(
        "merge_result/config-python-tag",
        _merge_result_case("api: !!python/object/apply:os.system ['touch MARKER']\n"),
    )
    c.command("merge_result/config-list", _merge_result_case("- api\n"))
    c.command("merge_result/xlsx-truncated", _merge_result_case("api:\n- Functional\n", truncate=True))
    c.command("view/missing-folder", lambda f: ["view", str(f / "nothing")], codes=(2,))
    c.command("view/a-file", lambda f: (write(f / "file", "x"), ["view", str(f / "file")])[1], codes=(2,))
    # report
    c.command("report/csv-truncated", _report_case(lambda p: _truncate(p, 0.3)), codes=(0, 2))
    c.command(
        "report/csv-garbage", _report_case(lambda p: write(p, b"\xff\xfe garbage\n1,2,3\n")), codes=(0, 2)
    )
    c.command(
        "report/csv-header-only",
        _report_case(lambda p: write(p, p.read_text().splitlines()[0] + "\n")),
        codes=(0, 2),
    )
    c.command("report/csv-fifo", _report_case(lambda p: _fifo(p)), codes=(0, 2))


def _outside(side: Path) -> Path:
    """A file outside the dumps, in the case's folder."""
    secret = side.parent / "outside" / "secret.json"
    secret.parent.mkdir(exist_ok=True)
    secret.write_text('{"0": [["x"], ["File secret.py, line 1, in f"]]}')
    return secret


def _symlink(path: Path, to: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)
    path.symlink_to(to)


def _npy(path: Path, array: np.ndarray) -> None:
    with open(path, "wb") as f:  # (np.save would add .npy to a .pt name)
        np.save(f, array)


def _npy_claiming(path: Path, shape: tuple[int, ...], size: int = 0) -> None:
    """A .npy whose header claims ``shape`` over a few bytes of data (or ``size`` bytes of file, sparse)."""
    header = f"{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}, }}".encode()
    header += b" " * (63 - (len(header) + 10) % 64) + b"\n"
    write(path, b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header + b"\x00" * 16)
    if size:
        os.truncate(path, size)


VALID_TENSORS = ("npy-fortran",)
"""Damages that leave a readable tensor of the dtype and shape dump.json says (a Fortran-ordered .npy of
ones): compared as it is, its row may pass (the reference checks only the outputs' cosines)."""


def link_and_npy_cases(c: Campaign) -> None:
    links: dict[str, Callable[[Path, Path], None]] = {
        "stack-symlink-out": lambda t, g: _symlink(t / "stack.json", _outside(t)),
        "construct-symlink-out": lambda t, g: _symlink(t / "construct.json", _outside(t)),
        "dump-symlink-etc": lambda t, g: _symlink(t / "dump.json", Path("/etc/hostname")),
        "stack-hardlink-out": lambda t, g: (
            (os.unlink(t / "stack.json"), os.link(_outside(t), t / "stack.json")) and None
        ),
    }
    for name, damage in links.items():
        c.compare(f"links/compare-{name}", lambda t, g, d=damage: d(t, g), codes=(0, 2))
        c.graph(f"links/graph-{name}", lambda t, g, d=damage: d(t, g), codes=(0, 2))
    tensors: dict[str, Callable[[Path], None]] = {
        "npy-claims-2g": lambda p: _npy_claiming(p, (1 << 29,)),
        "npy-claims-huge": lambda p: _npy_claiming(p, (1 << 40, 1 << 40)),
        "npy-big-claims-more": lambda p: _npy_claiming(p, (1 << 24,), 16 << 20),  # (read in chunks: over 8M)
        "npy-float64": lambda p: _npy(p, np.ones((2, 8, 32), np.float64)),
        "npy-other-shape": lambda p: _npy(p, np.ones((7,), np.float32)),
        "npy-object": lambda p: _npy_object(p),
        "npy-zero-size": lambda p: _npy(p, np.ones((0,), np.float32)),
        "npy-fortran": lambda p: _npy(p, np.asfortranarray(np.ones((2, 8, 32), np.float32))),
        "npy-strings": lambda p: _npy(p, np.full((2, 8, 32), "1.5")),
        "npy-records": lambda p: _npy(p, np.zeros((2, 8, 32), [("x", "<f4")])),
        "tensor-fifo": _fifo,
        "pt-expanded-huge": _expanded_pt,
        "pt-zip-sizes-lie": _lying_zip_sizes,
        "pt-compressed-storage-lies": _lying_compressed_storage,
        "pt-legacy": lambda p: shutil.copyfile(_LEGACY, p),
        "pt-legacy-truncated": lambda p: write(p, _LEGACY.read_bytes()[:300]),
        "pt-legacy-count-lies": lambda p: write(
            p, (raw := _LEGACY.read_bytes())[:-104] + (1 << 62).to_bytes(8, "little") + raw[-96:]
        ),
        "pt-legacy-evil": lambda p: write(p, _LEGACY.read_bytes()[:21] + _os_system_pickle(p)),
        "symlink-to-sibling": lambda p: _symlink(p, sorted(p.parent.iterdir())[0]),
        "rank-symlink-out": lambda p: _symlink(
            p.parent, p.parent.parent.parent / "golden" / "dump_tensor_data"
        ),
    }
    if os.geteuid() != 0:  # (root reads it all the same)
        tensors["tensor-unreadable"] = lambda p: os.chmod(p, 0)
    for name, damage in tensors.items():

        def edit(t: Path, g: Path, d: Callable[[Path], None] = damage) -> None:
            d(tensor_file(t))

        damaged = "" if name in VALID_TENSORS else "x"
        c.compare(f"tensors/compare-{name}", edit, data="tensor_mix", codes=(0, 1, 2), damaged=damaged)
        c.graph(f"tensors/graph-{name}", edit, data="tensor_mix", codes=(0, 1, 2))


def _big_case(
    big: Path, damage: Callable[[Path], None], *more: str, command: str = "compare"
) -> Callable[[Path], list[str]]:
    """A big rank's target copied and damaged, its golden linked."""

    def make(folder: Path) -> list[str]:
        target, golden = folder / "target", folder / "golden"
        shutil.copytree(big / "target", target)
        shutil.copytree(big / "golden", golden, copy_function=os.link)
        damage(target)
        return _io(target, golden, folder, *more, command=command)

    return make


def _garble_middle(path: Path, old: bytes, new: bytes) -> None:
    data = path.read_bytes()
    at = data.index(old, len(data) // 2)
    write(path, data[:at] + new + data[at + len(old) :])


def big_cases(c: Campaign, big: Path) -> None:
    damages: dict[str, Callable[[Path], None]] = {
        "truncated": lambda t: _truncate(t / "dump.json", 0.6),
        "garbled-middle": lambda t: _garble_middle(t / "dump.json", b'"input_args": [', b'"input_args": [}'),
        "args-mapping-middle": lambda t: _garble_middle(
            t / "dump.json", b'"input_args": [', b'"input_args": {"a": 1}, "x": ['
        ),
        "deep-stat-middle": lambda t: _garble_middle(
            t / "dump.json", b'"Max": ', b'"Max": ' + b"[" * 500 + b"]" * 500 + b', "y": '
        ),
        "stack-truncated": lambda t: _truncate(t / "stack.json", 0.6),
        "construct-number-middle": lambda t: _garble_middle(t / "construct.json", b'": "', b'": 5, "zz": "'),
        "no-damage": lambda t: None,
    }
    for name, damage in damages.items():
        codes = (0,) if name == "no-damage" else (0, 2)
        c.command(f"big/compare-{name}", _big_case(big, damage), codes=codes)
        c.command(f"big/graph-{name}", _big_case(big, damage, command="graph_visualize"), codes=codes)
    c.command("big/compare-w2-truncated", _big_case(big, damages["truncated"], "--workers", "2"))
    c.command("big/compare-xlsx-garbled", _big_case(big, damages["garbled-middle"], "--xlsx"))
    big_access_cases(c, big, damages["truncated"])
    for at in (1.0, 2.5, 4.0):
        c.command(f"big/compare-term-{at}", _big_case(big, lambda t: None), codes=(0, 143), stop_after=at)
        c.command(
            f"big/graph-ctrl-c-{at}",
            _big_case(big, lambda t: None, command="graph_visualize"),
            codes=(0, 130),
            ctrl_c_after=at,
        )
    for limit in (2 << 20, 20 << 20):
        c.command(
            f"big/compare-fsize-{limit >> 20}M", _big_case(big, lambda t: None), codes=(2,), fsize=limit
        )
        c.command(
            f"big/graph-fsize-{limit >> 20}M",
            _big_case(big, lambda t: None, command="graph_visualize"),
            codes=(2,),
            fsize=limit,
        )


WITHOUT_DAC = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search"] if os.geteuid() == 0 else []
"""Runs a command whose files' permissions hold (root reads and writes anything, but not without these
capabilities: a mode 000 file it owns is then refused it)."""


def _unreadable(path: Path) -> None:
    path.chmod(0)


def _cut_mid_entry(path: Path) -> None:
    """dump.json cut after an entry's opening in its second half."""
    data = path.read_bytes()
    at = data.index(b'"input_args": [', len(data) // 2)
    write(path, data[: at + 15])


def _result_as_out(command: str) -> Callable[[Path], list[str]]:
    """-o naming an existing result file of the command (made by a first run)."""

    def make(folder: Path) -> list[str]:
        target, golden = (folder / side for side in ("target", "golden"))
        for side in (target, golden):
            shutil.copytree(DATA / "stat_mix" / side.name, side)
        subprocess.run(
            [sys.executable, "-m", "msprobe_dask", *_io(target, golden, folder, "-q", command=command)],
            check=True,
            capture_output=True,
        )
        (result,) = [p for p in (folder / "out").iterdir() if p.is_file()]
        return _io(target, golden, folder, command=command)[:-1] + [str(result)]

    return make


def _out_in_dump(command: str, twice: bool, ranks: bool = True) -> Callable[[Path], list[str]]:
    """-o inside the target's rank folder of a rank tree (``ranks`` False: inside the target's dump
    folder; ``twice``: a first run's results already there)."""

    def make(folder: Path) -> list[str]:
        if ranks:
            target, golden = (side / "step0" for side in _multirank(folder))
            out = target / "rank0" / "out"
        else:
            target, golden = (
                shutil.copytree(DATA / "stat_mix" / s, folder / s) for s in ("target", "golden")
            )
            out = target / "out"
        argv = [command, "-tp", str(target), "-gp", str(golden), "-o", str(out)]
        if twice:
            subprocess.run(
                [sys.executable, "-m", "msprobe_dask", *argv, "-q"], check=True, capture_output=True
            )
            time.sleep(1.1)  # (a result of the same second is refused, D30/D32)
        return argv

    return make


def _reads(command: str, name: str) -> tuple[int, ...]:
    """The exit codes of ``command`` whose dump's file ``name`` cannot be read: compare reads no
    construct.json."""
    return (0,) if (command, name) == ("compare", "construct.json") else (2,)


def output_and_access_cases(c: Campaign) -> None:
    """Output folders that are a file, not writable, inside the dump or an existing result; inputs that
    are FIFOs or cannot be read (permission denied); --workers and --scheduler that cannot be used."""
    for command, short in (("compare", "compare"), ("graph_visualize", "graph")):
        if command == "graph_visualize":
            c.graph("graph/out-is-file", lambda t, g: _out_is_file(t.parent / "out"), codes=(2,))
        c.command(
            f"out/{short}-read-only-no-dac",
            _access_case(lambda f: (f / "out").chmod(0o500), command),
            codes=(2,),
            prefix=WITHOUT_DAC,
        )
        c.command(f"out/{short}-existing-result", _result_as_out(command), codes=(2,))
        c.command(f"out/{short}-in-dump", _out_in_dump(command, twice=False), codes=(0,))
        c.command(f"out/{short}-in-dump-twice", _out_in_dump(command, twice=True), codes=(0,))
        # (graph_visualize, as the reference: a dump folder holding a folder mixes folders and files)
        c.command(
            f"out/{short}-in-one-dump-twice",
            _out_in_dump(command, twice=True, ranks=False),
            codes=(0,) if command == "compare" else (2,),
        )
        c.command(
            f"fifo/{short}-target-is-fifo",
            _access_case(lambda f: _fifo_folder(f / "target"), command),
            codes=(2,),
        )
        for name in ("dump.json", "stack.json", "construct.json"):
            c.command(
                f"fifo/{short}-{name}",
                _access_case(lambda f, n=name: _fifo(f / "target" / n), command),
                codes=_reads(command, name),
            )
        c.command(
            f"fifo/{short}-rank1-dump.json",
            _ranks_case(lambda t, g: _fifo(t / "rank1" / "dump.json"), command=command),
            codes=(2,),
        )
        for name in ("dump.json", "stack.json", "construct.json"):
            c.command(
                f"unreadable/{short}-rank1-{name}",
                _ranks_case(lambda t, g, n=name: _unreadable(t / "rank1" / n), command=command),
                codes=_reads(command, name),
                word=name,
                prefix=WITHOUT_DAC,
            )
        c.command(
            f"unreadable/{short}-golden-folder",
            _access_case(lambda f: (f / "golden").chmod(0), command),
            codes=(2,),
            prefix=WITHOUT_DAC,
        )
        for workers, codes in (("0", (0,)), ("-1", (2,)), ("999", (2,))):
            c.command(
                f"workers/{short}-{workers}",
                _access_case(lambda f: None, command, "--workers", workers),
                codes=codes,
            )
        for label, address in no_scheduler_addresses().items():
            c.command(
                f"scheduler/{short}-{label}",
                _access_case(lambda f: None, command, "--scheduler", address),
                codes=(2,),
            )


def _access_case(damage: Callable[[Path], object], command: str, *more: str) -> Callable[[Path], list[str]]:
    """``command`` on stat_mix's two dumps in the case's folder, ``damage`` done to that folder."""

    def make(folder: Path) -> list[str]:
        target, golden = folder / "target", folder / "golden"
        shutil.copytree(DATA / "stat_mix" / "target", target)
        shutil.copytree(DATA / "stat_mix" / "golden", golden)
        damage(folder)
        return _io(target, golden, folder, *more, command=command)

    return make


def _fifo_folder(path: Path) -> None:
    shutil.rmtree(path)
    os.mkfifo(path)


_SERVERS: dict[str, str] = {}


def no_scheduler_addresses() -> dict[str, str]:
    """Addresses where no dask scheduler answers: nothing listening, a server that takes the connection
    and says nothing, one that answers as an HTTP server (threads of this process, kept to its end)."""
    if not _SERVERS:
        _SERVERS["nothing-there"] = "tcp://127.0.0.1:1"
        for label, answer in (("silent", b""), ("http", b"HTTP/1.1 400 Bad Request\r\n\r\n")):
            listener = socket.create_server(("127.0.0.1", 0))
            threading.Thread(target=_serve, args=(listener, answer), daemon=True).start()
            _SERVERS[label] = f"tcp://127.0.0.1:{listener.getsockname()[1]}"
        _SERVERS["tls-unconfigured"] = "tls://127.0.0.1:1"
    return _SERVERS


def _serve(listener: socket.socket, answer: bytes) -> None:
    taken = []
    while True:
        connection, _ = listener.accept()
        taken.append(connection)
        connection.sendall(answer)


def _rank_tree_of(big: Path, folder: Path, damage: Callable[[Path], None]) -> tuple[Path, Path]:
    """Two ranks of the big rank's copies (files linked), rank1's target damaged through ``damage`` of
    its folder (a file it changes is copied first, so that the big rank's own stays whole)."""
    sides = []
    for side in ("target", "golden"):
        source = next((big / side).rglob("dump.json")).parent
        for rank in ("rank0", "rank1"):
            shutil.copytree(source, folder / side / "step0" / rank, copy_function=os.link)
        sides.append(folder / side / "step0")
    rank1 = sides[0] / "rank1"
    for path in rank1.iterdir():
        shutil.copyfile(path, path.with_suffix(".copy"))
        path.with_suffix(".copy").replace(path)
    damage(rank1)
    return sides[0], sides[1]


def big_access_cases(c: Campaign, big: Path, truncate: Callable[[Path], None]) -> None:
    """The big rank's chunked parse on worker processes (default flags and --workers 2), both commands:
    dump.json cut mid-entry, stack.json and construct.json wrong; a tree of two such ranks whose rank1's
    dump.json is a FIFO or cannot be read."""
    damages: dict[str, Callable[[Path], None]] = {
        "cut-mid-entry": lambda t: _cut_mid_entry(t / "dump.json"),
        "stack-list": lambda t: write(t / "stack.json", "[1]"),
        "construct-list": lambda t: write(t / "construct.json", "[1]"),
        "construct-truncated": lambda t: _truncate(t / "construct.json", 0.6),
    }
    rank_damages: dict[str, Callable[[Path], None]] = {
        "rank1-fifo": lambda r: _fifo(r / "dump.json"),
        "rank1-unreadable": lambda r: _unreadable(r / "dump.json"),
    }
    c.command("big/graph-w2-truncated", _big_case(big, truncate, "--workers", "2", command="graph_visualize"))
    for command, short in (("compare", "compare"), ("graph_visualize", "graph")):
        for flags in ((), ("--workers", "2")):
            label = f"{short}{'-w2' if flags else ''}"
            for name, damage in damages.items():
                c.command(
                    f"big/{label}-{name}",
                    _big_case(
                        big, lambda t, d=damage: d(next(t.rglob("dump.json")).parent), *flags, command=command
                    ),
                    codes=(0, 2) if "construct" in name and short == "compare" else (2,),
                )
            for name, damage in rank_damages.items():

                def make(
                    folder: Path, d: Callable[[Path], None] = damage, f: tuple = flags, cmd: str = command
                ) -> list[str]:
                    target, golden = _rank_tree_of(big, folder, d)
                    return _io(target, golden, folder, *f, command=cmd)

                c.command(f"big/{label}-{name}", make, codes=(2,), word="rank1", prefix=WITHOUT_DAC)


def cluster_cases(c: Campaign, address: str) -> None:
    """The same damage on a running cluster (``dask scheduler`` and ``dask worker``)."""
    on = ("--scheduler", address)

    def tensor_damage(t: Path, g: Path) -> list[str]:
        write(tensor_file(t), b"")
        return list(on)

    c.compare("cluster/compare-truncated", lambda t, g: (_truncate(t / "dump.json"), [*on])[1], codes=(2,))
    c.compare(
        "cluster/compare-deep-stat",
        lambda t, g: (_edit_leaf(t, "Max", json.loads("[" * 500 + "]" * 500)), [*on])[1],
        codes=(0,),
    )
    c.compare("cluster/compare-tensor-empty", tensor_damage, data="tensor_mix", codes=(1,), damaged="x")
    c.graph("cluster/graph-tensor-empty", tensor_damage, data="tensor_mix", codes=(1,))
    c.graph("cluster/graph-stack-list", lambda t, g: (write(t / "stack.json", "[1]"), [*on])[1], codes=(2,))
    c.graph(
        "cluster/graph-stack-numbers",
        lambda t, g: (write(t / "stack.json", json.dumps({"0": [list(dump_doc(t)["data"]), [1, 2]]})), [*on])[
            1
        ],
        codes=(0,),
    )
    c.compare("cluster/scheduler-not-an-address", lambda t, g: ["--scheduler", "nonsense"], codes=(2,))


def _a_chunk(store: Path) -> Path:
    """The first chunk of the tensor the cases damage (``tensor_file``'s, converted)."""
    array = store / "dump_tensor_data" / tensor_file(store).name
    return sorted((array / "c").rglob("*"))[-1]


def _remove_a_chunk(store: Path) -> None:
    _a_chunk(store).unlink()


def _a_meta(store: Path) -> Path:
    return sorted(p for p in store.rglob("zarr.json") if p.parent != store)[0]


def _leaves(doc: dict) -> list[dict]:
    out = []
    for body in doc["data"].values():
        for key in ("input_args", "output"):
            for item in body.get(key) or []:
                if isinstance(item, dict) and "dtype" in item:
                    out.append(item)
    return out


def _edit_leaf(folder: Path, key: str, value: object) -> None:
    doc = dump_doc(folder)
    _leaves(doc)[0][key] = value
    save_doc(folder, doc)


def _edit_entry(folder: Path, key: str, value: object) -> None:
    doc = dump_doc(folder)
    name = [n for n in doc["data"] if not n.startswith("Module")][0]
    doc["data"][name][key] = value
    save_doc(folder, doc)


def _rename_first(folder: Path, new: str) -> None:
    doc = dump_doc(folder)
    name = [n for n in doc["data"] if not n.startswith("Module")][0]
    doc["data"] = {(new if n == name else n): v for n, v in doc["data"].items()}
    save_doc(folder, doc)


def _construct_cycle(folder: Path) -> None:
    construct = json.loads((folder / "construct.json").read_text())
    names = [n for n in construct if n.startswith("Module")][:2]
    if len(names) == 2:
        construct[names[0]], construct[names[1]] = names[1], names[0]
    (folder / "construct.json").write_text(json.dumps(construct))


def _construct_self(folder: Path) -> None:
    construct = json.loads((folder / "construct.json").read_text())
    name = next(iter(construct))
    construct[name] = name
    (folder / "construct.json").write_text(json.dumps(construct))


def _construct_chain(folder: Path, depth: int) -> None:
    construct = json.loads((folder / "construct.json").read_text())
    chain = {
        f"Module.c{i}.Linear.forward.0": (f"Module.c{i - 1}.Linear.forward.0" if i else None)
        for i in range(depth)
    }
    construct.update(chain)
    doc = dump_doc(folder)
    for name in chain:
        doc["data"][name] = {"input_args": [], "output": []}
    save_doc(folder, doc)
    (folder / "construct.json").write_text(json.dumps(construct))


def _out_is_file(path: Path) -> None:
    shutil.rmtree(path)
    write(path, "x")


def _file_to_folder(path: Path) -> None:
    path.unlink()
    path.mkdir()


def _fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def _zip_bomb(path: Path) -> None:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("archive/data.pkl", b"\x00" * (200 << 20))
        zf.writestr("archive/data/0", b"\x00" * (200 << 20))


def _os_system_pickle(path: Path) -> bytes:
    """A pickle that would run ``touch PWNED`` beside the dumps of ``path``'s tensor."""
    text = f"touch {path.parent.parent.parent / 'PWNED'}".encode()
    return b"\x80\x02cos\nsystem\n(X" + len(text).to_bytes(4, "little") + text + b"tR."


def _evil_pt(path: Path) -> None:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("archive/data.pkl", _os_system_pickle(path))
        zf.writestr("archive/version", "3\n")


_LEGACY = DATA / "tensor_legacy" / "pt" / "target" / "dump_tensor_data" / "Torch.f32.0.forward.input.0.pt"
"""A legacy .pt (torch.save's format before the zip) of a float32 [2, 3, 4]: its last 96 bytes are the
storage's, the 8 before them its element count; its first 21 the magic number's and the version's pickles."""


def _expanded_pt(path: Path) -> None:
    """A .pt of one float seen as 2**40 elements (strides of 0, as torch.save keeps an expanded view)."""
    storage = b"(X\x07\x00\x00\x00storagectorch\nFloatStorage\nX\x01\x00\x00\x000X\x03\x00\x00\x00cpuK\x01tQ"
    geometry = b"K\x00(J\x00\x00\x10\x00J\x00\x00\x10\x00t(K\x00K\x00t\x89ccollections\nOrderedDict\n)R"
    pickle = b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\n(" + storage + geometry + b"tR."
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("archive/data.pkl", pickle)
        zf.writestr("archive/byteorder", "little")
        zf.writestr("archive/data/0", b"\x00\x00\x80\x3f")


def _lying_compressed_storage(path: Path) -> None:
    """The .pt with its storage deflated, its central directory saying 1 GiB once decompressed, and 10 MB
    of padding (so that compare takes it for a big tensor)."""
    with zipfile.ZipFile(path) as zf:
        items = {info.filename: zf.read(info) for info in zf.infolist()}
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in items.items():
            zf.writestr(name, data, zipfile.ZIP_DEFLATED if "/data/" in name else zipfile.ZIP_STORED)
        zf.writestr("archive/pad", os.urandom(10 << 20))
    raw = bytearray(path.read_bytes())
    at = raw.find(b"PK\x01\x02")
    while at >= 0:
        name = raw[at + 46 : at + 46 + int.from_bytes(raw[at + 28 : at + 30], "little")]
        if b"/data/" in name:
            raw[at + 24 : at + 28] = (1 << 30).to_bytes(4, "little")
        at = raw.find(b"PK\x01\x02", at + 4)
    write(path, bytes(raw))


def _lying_zip_sizes(path: Path) -> None:
    """The .pt with its central directory saying each member is 1 GiB (compressed and not)."""
    raw = bytearray(path.read_bytes())
    at = raw.find(b"PK\x01\x02")
    while at >= 0:
        raw[at + 20 : at + 28] = (1 << 30).to_bytes(4, "little") * 2
        at = raw.find(b"PK\x01\x02", at + 4)
    write(path, bytes(raw))


def _npy_object(path: Path) -> None:
    np.save(path.with_suffix(".tmp.npy"), np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
    os.replace(path.with_suffix(".tmp.npy"), path)


def _short_storage(path: Path) -> None:
    with zipfile.ZipFile(path) as zf:
        items = {info.filename: zf.read(info) for info in zf.infolist()}
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in items.items():
            zf.writestr(name, data[:4] if "/data/" in name else data)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scratch", type=Path, default=Path("/tmp/hostile_campaign"))
    parser.add_argument("--only", default="", help="a regular expression: the cases whose name it finds")
    parser.add_argument("--keep", action="store_true")
    parser.add_argument(
        "--big",
        type=Path,
        help="also the cases of a big rank (its target/ and golden/ folders, e.g. 50,050 entries a side: the"
        " worker processes, spool files and hash partitions of compare, graph_visualize's held graphs)",
    )
    parser.add_argument(
        "--scheduler", default="", help="also the cases on this running dask scheduler (tcp://HOST:PORT)"
    )
    args = parser.parse_args()
    campaign = Campaign(args.scratch)
    if args.only:
        original = campaign.compare, campaign.graph, campaign.command

        def only(method: Callable[..., None]) -> Callable[..., None]:
            return lambda name, *a, **k: method(name, *a, **k) if re.search(args.only, name) else None

        campaign.compare, campaign.graph, campaign.command = map(only, original)  # type: ignore[method-assign]
    campaign_cases(campaign)
    if args.scheduler:
        cluster_cases(campaign, args.scheduler)
    if args.big:
        big_cases(campaign, args.big)
    defects = [name for name, verdict in campaign.rows if not verdict.startswith("ok")]
    print(f"\n{len(campaign.rows)} cases, {len(defects)} defects")
    if not args.keep:
        for name, _ in campaign.rows:
            shutil.rmtree(args.scratch / name, ignore_errors=True)
    return 1 if defects else 0


if __name__ == "__main__":
    sys.exit(main())
