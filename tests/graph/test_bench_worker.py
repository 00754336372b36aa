"""A big rank's Bench graph built on a local worker process beside its NPU graph (graph/rank_plan.py's
BenchBuilds, run_setup.builds_apart), run as a Python caller runs it: a script without a ``__main__``
guard, in a process of its own. The worker is forked at the run's setup, while the process runs no other
thread (scheduler.forked_worker), and the script's body does not run again in it (a spawned or
forkserver worker runs the caller's main module again); with another thread running the builds are made
in turn, no worker forked. A worker killed mid-build, or a bad Bench dump.json, ends the run in one line,
exit 2, nothing written."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[1] / "data"
SIDES = [str(DATA / "multirank" / side / "step0" / "rank0") for side in ("target", "golden")]

UNGUARDED = """
import os
import signal
import sys
import threading

from msprobe_dask.cli import main
from msprobe_dask.graph import api, rank_plan, run_setup
from msprobe_dask.pipeline.scheduler import RunOptions

print("main body", flush=True)  # (no __main__ guard: a worker running this module would print it again)
run_setup.IN_TURN_FROM_BYTES = 0  # (laid out as a big input)
RunOptions.threads = property(lambda self: 2)  # (two CPUs whatever the host's)
forked = rank_plan.forked_worker


def recorded():
    print("forked", flush=True)
    return forked()


rank_plan.forked_worker = recorded
target, golden, out, mode = sys.argv[1:]
if mode == "killed":  # (the worker killed in the middle of its build)
    def killed(*args):
        os.kill(os.getpid(), signal.SIGKILL)

    rank_plan.pickled_build_task = killed
if mode == "thread":  # (a caller's thread running: an instant's write to stderr, then a wait)
    done = threading.Event()
    other = threading.Thread(target=lambda: (sys.stderr.write(""), done.wait()))
    other.start()
if mode == "killed" or mode.startswith("bad"):
    sys.exit(main(["graph_visualize", "-q", "-tp", target, "-gp", golden, "-o", out]))
print(os.path.basename(api.graph_visualize(target, golden, output_path=out)), flush=True)
if mode == "thread":
    done.set()
    other.join()
"""


def _run(tmp_path: Path, mode: str, golden: str = SIDES[1]) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "unguarded.py"
    script.write_text(UNGUARDED)
    out = tmp_path / mode
    return subprocess.run(
        [sys.executable, str(script), SIDES[0], golden, str(out), mode],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )


def test_an_unguarded_callers_bench_worker_is_forked_before_the_run_and_runs_no_main(tmp_path: Path) -> None:
    """The worker forked once, at the run's setup; the script's body ran once; the vis.db the same as with
    the builds in turn (another thread running: no worker forked)."""
    apart, in_turn = _run(tmp_path, "apart"), _run(tmp_path, "thread")
    assert apart.returncode == 0 and in_turn.returncode == 0, apart.stderr[-2000:] + in_turn.stderr[-2000:]
    assert apart.stdout.split("\n")[:2] == ["main body", "forked"] and apart.stdout.count("main body") == 1
    assert in_turn.stdout.split("\n")[0] == "main body" and "forked" not in in_turn.stdout
    assert in_turn.stdout.count("main body") == 1
    runs = (("apart", apart), ("thread", in_turn))
    visdbs = [(tmp_path / mode / run.stdout.split()[-1]).read_bytes() for mode, run in runs]
    assert visdbs[0] == visdbs[1] and len(visdbs[0]) > 0


BAD = {
    "bad-dump": ("dump.json", '{"task": "statistics", "data": {"a": '),
    "bad-stack": ("stack.json", '{"0": ['),
}


@pytest.mark.parametrize("mode", ["killed", *BAD])
def test_a_bench_worker_killed_or_a_bad_bench_dump_ends_in_one_line(mode: str, tmp_path: Path) -> None:
    """The worker killed mid-build (SIGKILL; again in the run made once more), or the Bench side's
    dump.json or stack.json not JSON: one line naming it, exit 2, nothing written, no hang."""
    golden = SIDES[1]
    if mode in BAD:
        golden = str(tmp_path / "golden")
        shutil.copytree(SIDES[1], golden)
        name, text = BAD[mode]
        (Path(golden) / name).write_text(text)
    proc = _run(tmp_path, mode, golden)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stdout.split("\n")[:2] == ["main body", "forked"]
    lines = proc.stderr.strip().splitlines()
    if mode == "killed":  # (cli: a run whose worker died runs once more, after a line saying so)
        assert len(lines) == 2 and lines[0].endswith("running the command again"), proc.stderr
        assert "worker process died" in lines[1]
    else:
        assert len(lines) == 1 and f"golden/{BAD[mode][0]}" in lines[0], proc.stderr
    assert not (tmp_path / mode).exists() or not any((tmp_path / mode).iterdir())
