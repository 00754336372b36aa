"""graph_visualize of a big input in this process on two CPUs (run_setup.builds_apart: each rank's Bench
graph built on a local worker process, graph/rank_plan.py's _build_apart), forced as
tests/graph/test_visdb_reference.py forces it, with a golden side the worker cannot read or a worker
that dies as it builds: one line naming the file and the problem (a death: the run says so and runs the
command again, then the line), exit 2, no traceback, nothing written or left, nothing read outside the
dumps, within the runner's 60 s."""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from hostile_run import ROOT, Case, check, new_case, result_files

sys.path.insert(0, str(ROOT / "tests" / "graph"))

from visdb_diff import diff_visdb  # noqa: E402

DATA = ROOT / "tests" / "data" / "multirank" / "target" / "step0" / "rank0"

# the run laid out as a big input in this process on two CPUs; ``[builds_apart True]`` on stderr once the
# plan takes the path
_APART = (
    "import sys\n"
    "from msprobe_dask.graph import api, run_setup\n"
    "from msprobe_dask.pipeline.scheduler import RunOptions\n"
    "run_setup.IN_TURN_FROM_BYTES = 0\n"
    "RunOptions.threads = property(lambda self: 2)\n"
    "_apart = api.builds_apart\n"
    "def _recorded(*args):\n"
    "    taken = _apart(*args)\n"
    "    print(f'[builds_apart {taken}]', file=sys.stderr, flush=True)\n"
    "    return taken\n"
    "api.builds_apart = _recorded\n"
)

# and the worker process that builds a Bench graph killed in its build (``once``: only the first worker
# that gets there, its mark made outside the case; else each)
_DIES_IN_ITS_BUILD = (
    "import os, signal\n"
    "import msprobe_dask.graph.tasks as tasks\n"
    "_main, _build = os.getpid(), tasks.build_task\n"
    "def _first_to_die():\n"
    "    try:\n"
    "        os.close(os.open({mark!r}, os.O_CREAT | os.O_EXCL | os.O_WRONLY))\n"
    "    except FileExistsError:\n"
    "        return False\n"
    "    return True\n"
    "def _dying(*args, **kwargs):\n"
    "    if os.getpid() != _main and (not {once} or _first_to_die()):\n"
    "        os.kill(os.getpid(), signal.SIGKILL)\n"
    "    return _build(*args, **kwargs)\n"
    "tasks.build_task = _dying\n"
)


def _sides(case: Case) -> tuple[Path, Path]:
    sides = []
    for side in ("target", "golden"):
        folder = case.dumps / side
        folder.mkdir()
        for name in ("construct.json", "dump.json", "stack.json"):
            shutil.copyfile(DATA / name, folder / name)
        sides.append(folder)
    return sides[0], sides[1]


def _truncated(golden: Path) -> str:
    text = (golden / "dump.json").read_bytes()
    (golden / "dump.json").write_bytes(text[: len(text) * 2 // 3])
    return "not valid JSON"


def _stack_not_json(golden: Path) -> str:
    (golden / "stack.json").write_text('{"0": [["a"], ["b"]] ,,, ')
    return "not valid JSON"


def _stack_not_an_object(golden: Path) -> str:
    (golden / "stack.json").write_text(json.dumps([1, 2, 3]))
    return "must be a JSON object"


def _name_not_utf8(golden: Path) -> str:
    text = (golden / "dump.json").read_bytes()
    at = text.index(b'"Module.', text.index(b'"data"')) + 1
    (golden / "dump.json").write_bytes(text[:at] + b"\xff" + text[at:])
    return "utf-8"


def _dangling_link(golden: Path) -> str:
    (golden / "dump.json").unlink()
    os.symlink("missing.json", golden / "dump.json")
    return "does not exist"


def _link_outside(golden: Path) -> str:
    (golden / "stack.json").unlink()
    os.symlink(golden.parent.parent / "outside" / "secret.npy", golden / "stack.json")
    return "outside the dump folder"


BAD_GOLDEN: dict[str, tuple[Callable[[Path], str], str]] = {
    "dump.json truncated": (_truncated, "dump.json"),
    "stack.json not JSON": (_stack_not_json, "stack.json"),
    "stack.json not an object": (_stack_not_an_object, "stack.json"),
    "a name not UTF-8": (_name_not_utf8, "dump.json"),
    "dump.json a dangling link": (_dangling_link, "dump.json"),
    "stack.json a link outside the dump": (_link_outside, "stack.json"),
}


@pytest.mark.parametrize("bad", list(BAD_GOLDEN))
def test_a_golden_side_the_bench_graphs_worker_cannot_read(tmp_path: Path, bad: str) -> None:
    case = new_case(tmp_path)
    target, golden = _sides(case)
    spoil, name = BAD_GOLDEN[bad]
    problem = spoil(golden)
    args = ["graph_visualize", "-q", "-tp", str(target), "-gp", str(golden), "-o", str(case.out)]
    outcome = case.run(*args, prelude=_APART)
    assert outcome.lines[0] == "[builds_apart True]", outcome.stderr  # (the path taken)
    check(outcome, 2, str(golden / name), problem, lines=2)
    assert not result_files(case.out)


@pytest.mark.parametrize("once", [True, False], ids=["once", "every-time"])
def test_the_bench_graphs_worker_killed_in_its_build(tmp_path: Path, once: bool) -> None:
    (tmp_path / "case").mkdir()
    case = new_case(tmp_path / "case")
    target, golden = _sides(case)
    args = ["graph_visualize", "-q", "-tp", str(target), "-gp", str(golden)]
    prelude = _APART + _DIES_IN_ITS_BUILD.format(mark=str(tmp_path / "killed"), once=once)
    outcome = case.run(*args, "-o", str(case.out), prelude=prelude)
    said = [line for line in outcome.lines if not line.startswith("[builds_apart")]
    assert (tmp_path / "killed").exists() or not once, outcome.stderr  # (the kill happened)
    assert "a local worker process died" in said[0] and "running the command again" in said[0], outcome.stderr
    if not once:
        # (the lines: the path taken by each of the two runs, and what each says)
        check(outcome, 2, "a local worker process died", lines=4)
        assert not result_files(case.out)
        return
    check(outcome, 0, "wrote", lines=4)
    check(case.run(*args, "-o", str(case.out / "plain")), 0, "wrote", lines=1)
    (ours,), (theirs,) = case.out.glob("*.vis.db"), (case.out / "plain").glob("*.vis.db")
    assert diff_visdb(str(ours), str(theirs)) == []
