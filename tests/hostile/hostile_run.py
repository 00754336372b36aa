"""The hostile suite's runner, imported by each test module (a conftest.py here would be a second
module named conftest beside tests/conftest.py). Each case runs the real CLI in a forked child of a
preloaded process (``forkserver.py``) and is checked the same way: exit code, one stderr line naming
the file, no traceback, no temporary or partial file, no process left, nothing opened outside the
case's dumps, config files and output folder."""

from __future__ import annotations

import atexit
import json
import os
import sqlite3
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
ROOT = HERE.parents[1]


@dataclass
class Outcome:
    code: int | str
    stdout: str
    stderr: str
    opened: list[Path]
    left: list[str]
    case: Case = field(repr=False)

    @property
    def lines(self) -> list[str]:
        return self.stderr.strip().splitlines()


@dataclass
class Case:
    """One case's folders: ``dumps/`` (inputs), ``cfg/`` (yaml), ``out/`` (output), ``outside/`` (a
    file no run may open), ``work/`` (the current folder, where only the interpreter's own import
    machinery may look, as it looks in every folder of ``sys.path``)."""

    root: Path
    server: subprocess.Popen[str]

    def __post_init__(self) -> None:
        for name in ("dumps", "cfg", "outside", "work"):
            (self.root / name).mkdir()
        (self.root / "outside" / "secret.npy").write_bytes(b"secret")

    @property
    def dumps(self) -> Path:
        return self.root / "dumps"

    @property
    def out(self) -> Path:
        return self.root / "out"

    def run(
        self, *argv: str, fsize: int | None = None, umask: int | None = None, prelude: str = ""
    ) -> Outcome:
        logs = self.root / "logs"
        logs.mkdir(exist_ok=True)
        request = {
            "argv": list(argv),
            "cwd": str(self.root / "work"),
            "root": str(self.root),
            "stdout": str(logs / "stdout"),
            "stderr": str(logs / "stderr"),
            "opened": str(logs / "opened"),
            "fsize": fsize,
            "umask": umask,
            "prelude": prelude,
            "timeout": 60,
        }
        (logs / "opened").write_text("")
        assert self.server.stdin is not None and self.server.stdout is not None
        self.server.stdin.write(json.dumps(request) + "\n")
        self.server.stdin.flush()
        answer = json.loads(self.server.stdout.readline())
        return Outcome(
            code=answer["code"],
            stdout=(logs / "stdout").read_text(errors="replace"),
            stderr=(logs / "stderr").read_text(errors="replace"),
            opened=[Path(p) for p in (logs / "opened").read_text().splitlines()],
            left=answer["left"],
            case=self,
        )


def check(outcome: Outcome, code: int, *words: str, lines: int | None = 1) -> Outcome:
    """The guarantees every case holds, and its exit code and the words of its one stderr line
    (``lines`` None: of its last stderr line, whatever came before)."""
    case = outcome.case
    assert outcome.code == code, outcome.stderr
    assert "Traceback" not in outcome.stderr, outcome.stderr
    if lines is not None:
        assert len(outcome.lines) == lines, outcome.stderr
    last = outcome.lines[-1] if outcome.lines else ""
    for word in words:
        assert word in last, (word, outcome.stderr)
    assert not outcome.left, f"processes left behind: {outcome.left}"
    allowed = [(case.root / name).resolve() for name in ("dumps", "cfg", "out", "logs")]
    base, work = case.root.resolve(), (case.root / "work").resolve()
    for path in outcome.opened:
        if path.parent == work and path.name.startswith("__editable__"):
            continue  # an import of the spawned worker processes, looking in sys.path's current folder
        if path.is_relative_to(work) and not path.exists():
            continue  # a name relative to another folder's descriptor (shutil.rmtree's os.open(dir_fd=))
        if path.is_relative_to(base):
            assert any(path.is_relative_to(a) for a in allowed), f"opened outside the dump: {path}"
    assert_no_temporaries(case.out)
    return outcome


def assert_no_temporaries(out: Path) -> None:
    if not out.exists():
        return
    for path in out.rglob("*"):
        name = path.name
        assert not (name.startswith(".") or name.endswith((".part", ".tmp"))), f"left behind: {path}"


def result_files(out: Path, pattern: str = "*") -> list[Path]:
    return sorted(p for p in out.rglob(pattern) if p.is_file()) if out.exists() else []


_server: list[subprocess.Popen[str]] = []


def _forkserver() -> subprocess.Popen[str]:
    """The preloaded process, started by the first case of the session and ended with it."""
    if not _server or _server[0].poll() is not None:
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        _server[:] = [
            subprocess.Popen(
                [sys.executable, str(HERE / "forkserver.py")],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                env=env,
                cwd=ROOT,
            )
        ]
        atexit.register(_stop, _server[0])
    return _server[0]


def _stop(server: subprocess.Popen[str]) -> None:
    assert server.stdin is not None
    server.stdin.close()
    server.wait(timeout=30)


# a prelude: graph_visualize's run laid out as a big input in this process on two CPUs, whatever the input
# and the host (run_setup.builds_apart: each rank's Bench graph built on a local worker process, graph/
# rank_plan.py's _build_apart), as tests/graph/test_visdb_reference.py forces it
BENCH_APART = (
    "from msprobe_dask.graph import run_setup\n"
    "from msprobe_dask.pipeline.scheduler import RunOptions\n"
    "run_setup.IN_TURN_FROM_BYTES = 0\n"
    "RunOptions.threads = property(lambda self: 2)\n"
)


def new_case(tmp_path: Path) -> Case:
    return Case(tmp_path, _forkserver())


def visdb_npu_nodes(path: Path) -> dict[str, tuple[Any, dict[str, Any], dict[str, Any]]]:
    """node name -> (precision_index, input_data, output_data) of a vis.db's NPU nodes."""
    connection = sqlite3.connect(path.resolve().as_uri() + "?mode=ro&immutable=1", uri=True)
    try:
        rows = connection.execute(
            "SELECT node_name, precision_index, input_data, output_data FROM tb_nodes"
            " WHERE data_source = 'NPU'"
        ).fetchall()
    finally:
        connection.close()
    return {name: (i, json.loads(ins or "{}"), json.loads(outs or "{}")) for name, i, ins, outs in rows}
