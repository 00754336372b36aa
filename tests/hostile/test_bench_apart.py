"""graph_visualize of a big input in this process on two CPUs (run_setup.builds_apart: each rank's Bench
graph built on a local worker process, graph/rank_plan.py's _build_apart), forced as
tests/graph/test_visdb_reference.py forces it (hostile_run.BENCH_APART), with a golden side the worker
cannot read: one line naming the file and the problem, exit 2, no traceback, nothing written or left,
nothing read outside the dumps, within the runner's 60 s. (The worker killed in its build:
test_layout_kills.py.)"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from hostile_run import BENCH_APART, ROOT, Case, check, new_case, result_files

DATA = ROOT / "tests" / "data" / "multirank" / "target" / "step0" / "rank0"

# the run laid out as a big input in this process on two CPUs; ``[builds_apart True]`` on stderr once the
# plan takes the path
_APART = BENCH_APART + (
    "import sys\n"
    "from msprobe_dask.graph import api\n"
    "_apart = api.builds_apart\n"
    "def _recorded(*args):\n"
    "    taken = _apart(*args)\n"
    "    print(f'[builds_apart {taken}]', file=sys.stderr, flush=True)\n"
    "    return taken\n"
    "api.builds_apart = _recorded\n"
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
