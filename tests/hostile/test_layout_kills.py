"""graph_visualize's layouts on ``--workers 2`` whose worker process dies while it leaves a spool file
(graph/held.py): a tree of ranks made one task a rank (run_setup.one_task_a_rank: held_rank, its
chunks' rows and its Part in spool files) and a TP/PP merge made a replica at a time (graph/merge/
plan.py: each replica's rows in a spool file for its one reader). The worker dies as the OOM killer
kills it, with the file it writes half-written, after the spool files it left before: once, the run
says so and runs the command again, and its vis.db is the one a run without kills writes (no task of
the second run reads a file of the first); every time, the run ends in one line, exit 2. Either way no
spool folder, temporary or partial result is left. The same of the worker process that builds each
rank's Bench graph of a big input in this process (run_setup.builds_apart, forced: BENCH_APART), killed
in its build."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hostile_run import BENCH_APART, ROOT, check, new_case, result_files

sys.path.insert(0, str(ROOT / "tests" / "graph"))

from graph_layouts import LAYOUTS  # noqa: E402
from visdb_diff import diff_visdb  # noqa: E402

# whether this worker is the one to die: ``once``, only the first that gets there (its mark made outside
# the case), else each
_FIRST_TO_DIE = (
    "import os, signal\n"
    "def _to_die():\n"
    "    if not {once}:\n"
    "        return True\n"
    "    try:\n"
    "        os.close(os.open({mark!r}, os.O_CREAT | os.O_EXCL | os.O_WRONLY))\n"
    "    except FileExistsError:\n"
    "        return False\n"
    "    return True\n"
)

# the worker process that writes its ``nth`` spool file (held._spool_file) writes half of it, then is
# killed
_DIES_IN_A_SPOOL_FILE = _FIRST_TO_DIE + (
    "import msprobe_dask.graph.held as held\n"
    "_spool_file, _written = held._spool_file, []\n"
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
    "    if len(_written) == {nth} and _to_die():\n"
    "        dump = _half_then_killed(dump)\n"
    "    _spool_file(path, value, dump)\n"
    "held._spool_file = _dying\n"
)


# the worker process that builds a rank's Bench graph beside its NPU graph (a big input in this process:
# BENCH_APART) killed in its build
_DIES_IN_THE_BENCH_BUILD = (
    BENCH_APART
    + _FIRST_TO_DIE
    + (
        "import msprobe_dask.graph.tasks as tasks\n"
        "_main, _build = os.getpid(), tasks.build_task\n"
        "def _dying(*args, **kwargs):\n"
        "    if os.getpid() != _main and _to_die():\n"
        "        os.kill(os.getpid(), signal.SIGKILL)\n"
        "    return _build(*args, **kwargs)\n"
        "tasks.build_task = _dying\n"
    )
)

# the spool file of a worker process during which it dies (after those it left before), by layout
DIES_IN = {"ranks": 2, "merge": 1}
# by case: where the worker dies, the layout and its flags (a layout on --workers 2; the tree of ranks in
# this process, each rank's Bench graph on a worker)
KILLS = {
    **{layout: (_DIES_IN_A_SPOOL_FILE, layout, ["--workers", "2"]) for layout in LAYOUTS},
    "bench apart": (_DIES_IN_THE_BENCH_BUILD, "ranks", []),
}


@pytest.mark.parametrize("once", [True, False], ids=["once", "every-time"])
@pytest.mark.parametrize("layout", list(KILLS))
def test_a_worker_killed_in_a_spool_file(tmp_path: Path, layout: str, once: bool) -> None:
    (tmp_path / "case").mkdir()
    case = new_case(tmp_path / "case")
    kill, dumps, flags = KILLS[layout]
    args = ["graph_visualize", "-q", *LAYOUTS[dumps](case.dumps), *flags]
    prelude = kill.format(mark=str(tmp_path / "killed"), nth=DIES_IN.get(layout, 0), once=once)
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
