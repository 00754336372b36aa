"""A run whose every dask worker dies ends with one line and exit 2, leaving no output (a real
``dask scheduler`` and a ``dask worker`` without nanny, killed with SIGKILL while it runs the compare or
graph_visualize)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_cluster import DASK, scheduler_command

from msprobe_dask.pipeline.cluster import WORKERLESS_SECONDS

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "graph"))

from graph_layouts import LAYOUTS  # noqa: E402
from visdb_diff import diff_visdb  # noqa: E402


def _tensor(value: float) -> dict:
    return {
        "type": "torch.Tensor",
        "dtype": "torch.float32",
        "shape": [8, 64],
        "Max": value + 1,
        "Min": value - 1,
        "Mean": value,
        "Norm": 3 * value,
        "requires_grad": True,
    }


def write_dump(folder: Path, entries: int) -> Path:
    """A statistics dump.json of ``entries`` linear calls, indented as msProbe writes it."""
    data = {
        f"Functional.linear.{i}.forward": {
            "input_args": [_tensor(i * 0.5), _tensor(0.25), _tensor(0.125)],
            "input_kwargs": {},
            "output": [_tensor(i * 0.75)],
        }
        for i in range(entries)
    }
    folder.mkdir(parents=True)
    doc = {"task": "statistics", "level": "L1", "framework": "pytorch", "dump_data_dir": None, "data": data}
    (folder / "dump.json").write_text(json.dumps(doc, indent=1))
    return folder


def _start(command: list[str]) -> subprocess.Popen:
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _stop(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait()


ALONE = [
    "--nthreads",
    "1",
    "--no-nanny",
    "--no-dashboard",
    "--host",
    "127.0.0.1",
]  # a worker that dies when killed


def _scheduler(tmp_path: Path, procs: list[subprocess.Popen]) -> tuple[str, float]:
    """Start a ``dask scheduler`` (into ``procs``); (its address, a deadline a minute from its start)."""
    scheduler_file = tmp_path / "scheduler.json"
    procs.append(_start(scheduler_command(scheduler_file)))
    deadline = time.monotonic() + 60
    while not scheduler_file.exists() or not scheduler_file.read_text().strip():
        assert time.monotonic() < deadline, "the dask scheduler did not start"
        time.sleep(0.2)
    return json.loads(scheduler_file.read_text())["address"], deadline


@pytest.mark.parametrize(
    "command, layout",
    [("compare", ""), ("graph_visualize", ""), ("graph_visualize", "ranks"), ("graph_visualize", "merge")],
)
def test_every_worker_killed_ends_the_run_with_exit_2(tmp_path: Path, command: str, layout: str) -> None:
    """(``layout``: graph_visualize of a tree of ranks or of a TP/PP merge, else of one big rank.)"""
    from distributed import Client

    if layout:
        inputs = LAYOUTS[layout](tmp_path / "dumps")
    else:
        target, golden = write_dump(tmp_path / "t", 30_000), write_dump(tmp_path / "g", 30_000)
        for folder in (target, golden):  # (graph_visualize reads them too)
            (folder / "construct.json").write_text("{}")
            (folder / "stack.json").write_text("{}")
        inputs = ["-tp", str(target), "-gp", str(golden)]
    procs: list[subprocess.Popen] = []
    try:
        address, deadline = _scheduler(tmp_path, procs)
        worker = _start([*DASK, "worker", address, *ALONE])
        procs.insert(0, worker)
        with Client(address, timeout="20s") as client:
            client.wait_for_workers(1, timeout=60)
            out = tmp_path / "out"
            started = time.monotonic()
            flags = ["-q", *inputs, "-o", str(out), "--scheduler", address]
            run = subprocess.Popen(
                [sys.executable, "-m", "msprobe_dask", command, *flags],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            procs.insert(0, run)
            while not any(client.processing().values()):  # the compare's tasks are on the worker
                assert run.poll() is None and time.monotonic() < deadline + 60, run.communicate()
                time.sleep(0.05)
            os.kill(worker.pid, signal.SIGKILL)
            _, stderr = run.communicate(timeout=WORKERLESS_SECONDS + 40)
        assert time.monotonic() - started < 60
        assert run.returncode == 2, stderr
        lines = stderr.strip().splitlines()
        assert len(lines) == 1 and "no dask worker left" in lines[0] and address in lines[0], lines
        assert not out.exists() or not any(out.iterdir())
    finally:
        _stop(procs)


ATTEMPTS = 5  # runs of the compare in which to catch ``running`` on a worker (a short task can end unseen)


@pytest.mark.parametrize("running", ["", "append_part", "finish_file"])
def test_a_worker_killed_mid_run_changes_nothing(tmp_path: Path, running: str) -> None:
    """One of two workers killed while it runs a task of the compare (``running``: one of these, its key's
    name): the scheduler gives its tasks to the other, some of them run again (a part appended, the
    rank's end), and the csv is the one a run in this process writes."""
    target, golden = write_dump(tmp_path / "t", 30_000), write_dump(tmp_path / "g", 30_000)
    local = tmp_path / "local"
    flags = ["-q", "-tp", str(target), "-gp", str(golden)]
    subprocess.run([sys.executable, "-m", "msprobe_dask", "compare", *flags, "-o", str(local)], check=True)
    procs: list[subprocess.Popen] = []
    try:
        out = _run_until_a_worker_is_killed(tmp_path, procs, ["compare", *flags], running)
        (ours,), (theirs,) = out.glob("*.csv"), local.glob("*.csv")
        assert ours.read_bytes() == theirs.read_bytes()
        assert sorted(p.name for p in out.iterdir()) == [ours.name]  # no temporary left
    finally:
        _stop(procs)


@pytest.mark.parametrize(
    "layout, running",
    [("ranks", "rows-"), ("ranks", "insert-"), ("merge", "replica-"), ("merge", "write-")],
)
def test_a_worker_killed_mid_graph_changes_nothing(tmp_path: Path, layout: str, running: str) -> None:
    """graph_visualize's layouts of a tree of ranks and of a TP/PP merge, one of two workers killed while
    it runs a task whose key holds ``running`` (a rank's chunk or insert, a replica's merge or its rows'
    write): its tasks run again on the other, and the vis.db holds the rows a run in this process
    writes."""
    flags = ["graph_visualize", "-q", *LAYOUTS[layout](tmp_path / "dumps")]
    local = tmp_path / "local"
    subprocess.run([sys.executable, "-m", "msprobe_dask", *flags, "-o", str(local)], check=True)
    procs: list[subprocess.Popen] = []
    try:
        out = _run_until_a_worker_is_killed(tmp_path, procs, flags, running)
        (ours,), (theirs,) = out.glob("*.vis.db"), local.glob("*.vis.db")
        assert diff_visdb(str(ours), str(theirs)) == []
        assert sorted(p.name for p in out.iterdir()) == [ours.name]  # no temporary left
    finally:
        _stop(procs)


def _run_until_a_worker_is_killed(
    tmp_path: Path, procs: list[subprocess.Popen], args: list[str], running: str
) -> Path:
    """Run ``msprobe_dask ARGS -o OUT`` on a new ``dask scheduler`` (into ``procs``) until one of its two
    workers is killed while it runs a task whose key holds ``running`` (_run_killing_a_worker; at most
    ATTEMPTS runs); that run ended well: its output folder."""
    address, _ = _scheduler(tmp_path, procs)
    for attempt in range(ATTEMPTS):
        out = tmp_path / f"out{attempt}"
        command = [sys.executable, "-m", "msprobe_dask", *args, "-o", str(out), "--scheduler", address]
        killed, stderr, returncode = _run_killing_a_worker(address, procs, command, running)
        if killed:
            break
    assert killed, f"no worker seen running {running!r} in {ATTEMPTS} runs"
    assert returncode == 0, stderr
    return out


def _run_killing_a_worker(
    address: str, procs: list[subprocess.Popen], command: list[str], running: str
) -> tuple[bool, str, int]:
    """Run ``command`` on two new workers of ``address`` and SIGKILL the one that runs a task whose key
    holds ``running``; (whether one was killed, the run's stderr, its exit code). Not killed: the run
    ended before a worker was seen with such a task."""
    from distributed import Client

    workers = [_start([*DASK, "worker", address, *ALONE]) for _ in range(2)]
    procs[:0] = workers
    with Client(address, timeout="20s") as client:
        client.wait_for_workers(2, timeout=60)
        pids = client.run(os.getpid)
        run = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        procs.insert(0, run)
        deadline = time.monotonic() + 120
        busy: list[str] = []
        while not busy and run.poll() is None:
            assert time.monotonic() < deadline, "the compare did not end"
            busy = [w for w, keys in client.processing().items() if any(running in str(k) for k in keys)]
            time.sleep(0.005)
        if busy:
            os.kill(pids[busy[0]], signal.SIGKILL)
        _, stderr = run.communicate(timeout=120)
        _stop(workers)  # the survivor too: the next attempt starts two fresh workers
        while client.scheduler_info()["workers"]:
            assert time.monotonic() < deadline, "the scheduler kept its dead workers"
            time.sleep(0.05)
    return bool(busy), stderr, run.returncode


class _Client:
    def __init__(self, services: dict) -> None:
        self.services = services
        self.dashboard_link = "http://127.0.0.1:8787/status"

    def scheduler_info(self) -> dict:
        return {"services": self.services}


def test_dashboard_link_shown_when_the_scheduler_serves_one(capsys: pytest.CaptureFixture[str]) -> None:
    from msprobe_dask.pipeline.cluster import announce_dashboard

    announce_dashboard(_Client({"dashboard": 8787}))
    assert capsys.readouterr().err == "dask dashboard: http://127.0.0.1:8787/status\n"
    announce_dashboard(_Client({}))  # dask scheduler --no-dashboard, or no bokeh installed
    assert capsys.readouterr().err == ""


# a worker's preload (run twice by dask) that stands for other sources: its digest differs, or it has
# no code_digest at all
OTHER_SOURCES = {
    "other": "import msprobe_dask.pipeline.code_digest as m\nm.code_digest = lambda: 'other sources'\n",
    "older": "import msprobe_dask.pipeline.code_digest as m\nvars(m).pop('code_digest', None)\n",
}


@pytest.mark.parametrize("sources", list(OTHER_SOURCES))
def test_workers_of_other_sources_are_refused(tmp_path: Path, sources: str) -> None:
    """A cluster whose worker runs other msprobe_dask sources than the command's (started from another
    checkout, or before an update) is refused before any task: one line naming the scheduler, exit 2,
    no output."""
    from distributed import Client

    target, golden = write_dump(tmp_path / "t", 20), write_dump(tmp_path / "g", 20)
    preload = tmp_path / "preload.py"
    preload.write_text(OTHER_SOURCES[sources])
    procs: list[subprocess.Popen] = []
    try:
        address, _ = _scheduler(tmp_path, procs)
        procs.insert(0, _start([*DASK, "worker", address, *ALONE, "--preload", str(preload)]))
        with Client(address, timeout="20s") as client:
            client.wait_for_workers(1, timeout=60)
        out = tmp_path / "out"
        flags = ["-q", "-tp", str(target), "-gp", str(golden), "-o", str(out), "--scheduler", address]
        run = subprocess.run(
            [sys.executable, "-m", "msprobe_dask", "compare", *flags],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert run.returncode == 2, run.stderr
        lines = run.stderr.strip().splitlines()
        words = (
            "runs other msprobe_dask sources" if sources == "other" else "cannot run this msprobe_dask's code"
        )
        assert len(lines) == 1 and words in lines[0] and address in lines[0], lines
        assert not out.exists() or not any(out.iterdir())
    finally:
        _stop(procs)


def test_sources_digest_follows_every_python_file(tmp_path: Path) -> None:
    from msprobe_dask.pipeline.code_digest import PACKAGE, code_digest, sources_digest

    assert code_digest() == sources_digest(PACKAGE)
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    module = tmp_path / "pkg" / "sub" / "m.py"
    module.write_text("x = 1\n")
    before = sources_digest(tmp_path / "pkg")
    module.write_text("x = 2\n")
    assert sources_digest(tmp_path / "pkg") != before
    module.rename(tmp_path / "pkg" / "m.py")  # the same bytes at another path
    assert sources_digest(tmp_path / "pkg") not in (before, sources_digest(tmp_path / "pkg" / "sub"))
