"""graph_visualize's layouts on ``--workers 2`` whose worker process dies while it leaves a spool file
(graph/held.py): a tree of ranks made one task a rank (run_setup.one_task_a_rank: held_rank, its
chunks' rows and its Part in spool files) and a TP/PP merge made a replica at a time (graph/merge/
plan.py: each replica's rows in a spool file for its one reader). The worker dies as the OOM killer
kills it, with the file it writes half-written, after the spool files it left before: once, the run
says so and runs the command again, and its vis.db is the one a run without kills writes (no task of
the second run reads a file of the first); every time, the run ends in one line, exit 2. Either way no
spool folder, temporary or partial result is left."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hostile_run import ROOT, check, new_case, result_files

sys.path.insert(0, str(ROOT / "tests" / "graph"))

from graph_layouts import LAYOUTS  # noqa: E402
from visdb_diff import diff_visdb  # noqa: E402

# the worker process that writes its ``nth`` spool file (held._spool_file) writes half of it, then is
# killed; ``once``: only the first worker that gets there (its mark made outside the case), else each
_DIES_IN_A_SPOOL_FILE = (
    "import os, signal\n"
    "import msprobe_dask.graph.held as held\n"
    "_spool_file, _written = held._spool_file, []\n"
    "def _first_to_die():\n"
    "    try:\n"
    "        os.close(os.open({mark!r}, os.O_CREAT | os.O_EXCL | os.O_WRONLY))\n"
    "    except FileExistsError:\n"
    "        return False\n"
    "    return True\n"
    "def _half_then_killed(dump):\n"
    "    def half(value, f, protocol):\n"
    "        dump(value, f, protocol)\n"
    "        f.flush()\n"
    "        f.truncate(f.tell() // 2)\n"
    "        f.flush()\n"
    "        os.kill(os.getpid(), signal.SIGKILL)\n"
    "    return half\n"
    "def _dying(path, value, dump):\n"
    "    _written.append(path)\n"
    "    if len(_written) == {nth} and (not {once} or _first_to_die()):\n"
    "        dump = _half_then_killed(dump)\n"
    "    _spool_file(path, value, dump)\n"
    "held._spool_file = _dying\n"
)


# the spool file of a worker process during which it dies (after those it left before), by layout
DIES_IN = {"ranks": 2, "merge": 1}


@pytest.mark.parametrize("once", [True, False], ids=["once", "every-time"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_a_worker_killed_in_a_spool_file(tmp_path: Path, layout: str, once: bool) -> None:
    (tmp_path / "case").mkdir()
    case = new_case(tmp_path / "case")
    args = ["graph_visualize", "-q", *LAYOUTS[layout](case.dumps), "--workers", "2"]
    prelude = _DIES_IN_A_SPOOL_FILE.format(mark=str(tmp_path / "killed"), nth=DIES_IN[layout], once=once)
    outcome = case.run(*args, "-o", str(case.out), prelude=prelude)
    assert (tmp_path / "killed").exists() or not once, outcome.stderr  # (the kill happened)
    assert "a local worker process died" in outcome.lines[0], outcome.stderr
    assert "running the command again" in outcome.lines[0], outcome.stderr
    if not once:
        check(outcome, 2, "a local worker process died", lines=2)
        assert not result_files(case.out)
        return
    check(outcome, 0, "wrote", lines=2)
    check(case.run(*args, "-o", str(case.out / "plain")), 0, "wrote", lines=1)
    (ours,), (theirs,) = case.out.glob("*.vis.db"), (case.out / "plain").glob("*.vis.db")
    assert diff_visdb(str(ours), str(theirs)) == []
