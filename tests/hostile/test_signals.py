"""SIGINT and SIGTERM at start-up, while parsing and while writing, in this process and with
``--workers 2``: exit 130 / 143 with one line, no temporary or result file, no process left. And
``--workers 2`` runs whose worker processes are killed: one lost worker costs nothing, all of them lost
for good end the run in one line within the 60 s the runner allows.

Each signal is sent by the run to itself at a precise moment (an audit event or a call), so the
cases are exact, not timed."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hostile_dumps import write_dump
from hostile_run import ROOT, Case, Outcome, check, new_case, result_files, visdb_npu_nodes

SIGNALS = {"SIGINT": 130, "SIGTERM": 143}

# sent to the main thread, as the kernel delivers a Ctrl-C or a kill from another process: sent to the
# process from a task thread, it would be taken by that thread, and Python would run its handler only
# once the main thread wakes (when that task is done: a vis.db already published)
_KILL = (
    "import signal, threading\n"
    "def _kill():\n"
    "    signal.pthread_kill(threading.main_thread().ident, signal.{sig})\n"
)
# a Ctrl-C at the terminal, or a kill of the process group: the signal to every process of the group,
# to this one's main thread
_KILL_GROUP = (
    "import os, signal, threading\n"
    "def _kill_others():\n"
    "    group = os.getpgid(0)\n"
    "    for entry in os.listdir('/proc'):\n"
    "        if entry.isdigit() and int(entry) != os.getpid():\n"
    "            try:\n"
    "                if os.getpgid(int(entry)) == group:\n"
    "                    os.kill(int(entry), signal.{sig})\n"
    "            except OSError:\n"
    "                pass\n"
    "def _kill_me():\n"
    "    signal.pthread_kill(threading.main_thread().ident, signal.{sig})\n"
    "def _kill():\n"
    "    _kill_others()\n"
    "    _kill_me()\n"
)


def _worker_write(action: str) -> str:
    """The moment a worker process is completing the vis.db (its last task: indexes, then the file
    named), where it runs ``action`` (``SIG``: the case's signal): the workers are forked from the run's
    process, which patches VisdbWriter.complete first."""
    return (
        "import os, signal, time\n"
        "from msprobe_dask.writers.visdb import VisdbWriter\n"
        "SIG = _SIG if '_SIG' in globals() else None\n"
        "_complete = VisdbWriter.complete\n"
        "def _completing(self, *args):\n"
        f"    {action}\n"
        "    return _complete(self, *args)\n"
        "VisdbWriter.complete = _completing\n"
    )


SIGNAL_GROUP = "os.killpg(os.getpgid(0), getattr(signal, SIG))"


# the moment, as a prelude run in the case's process before the command
MOMENTS = {
    # an audit hook: the first open of a dump.json (by a task thread or a worker's parse)
    "parse": (
        "import sys\n"
        "_fired = []\n"
        "def _hook(event, args):\n"
        "    if event == 'open' and str(args[0]).endswith('dump.json') and not _fired:\n"
        "        _fired.append(1)\n"
        "        _kill()\n"
        "sys.addaudithook(_hook)\n"
    ),
    # the result's temporary file exists (csv, xlsx, vis.db)
    "write": (
        "import msprobe_dask.writers.atomic as atomic, msprobe_dask.writers.visdb as visdb\n"
        "import msprobe_dask.pipeline.part_forms as forms\n"
        "_track = atomic.track\n"
        "def _tracking(path):\n"
        "    _track(path)\n"
        "    _kill()\n"
        "def _killing(head):\n"  # the statistics csv or xlsx written part by part by its tasks
        "    def heading(*args):\n"
        "        _kill()\n"
        "        return head(*args)\n"
        "    return heading\n"
        "atomic.track = visdb.track = _tracking\n"
        "forms.header_line, forms.header_xml = _killing(forms.header_line), _killing(forms.header_xml)\n"
    ),
    # a result has just been named (by this process, or by a worker process of dask's processes
    # scheduler, which has this prelude by its fork): the run is stopped before it ends
    "published": (
        "import os\n"
        "import msprobe_dask.writers.atomic as atomic, msprobe_dask.writers.visdb as visdb\n"
        "import msprobe_dask.pipeline.part_forms as forms\n"
        "_main = os.getpid()\n"
        "_publish = atomic.publish\n"
        "def _publishing(tmp, final):\n"
        "    _publish(tmp, final)\n"
        "    if os.getpid() == _main:\n"
        "        _kill()\n"
        "    else:\n"
        "        os.kill(_main, getattr(signal, _SIG))\n"
        "atomic.publish = visdb.publish = forms.publish = _publishing\n"
    ),
    # the worker processes are running the graph's tasks
    "workers": (
        "import concurrent.futures.process as pool\n"
        "_submit = pool.ProcessPoolExecutor.submit\n"
        "_sent = []\n"
        "def _submitting(self, *args, **kwargs):\n"
        "    future = _submit(self, *args, **kwargs)\n"
        "    if not _sent:\n"
        "        _sent.append(1)\n"
        "        _kill()\n"
        "    return future\n"
        "pool.ProcessPoolExecutor.submit = _submitting\n"
    ),
    # a worker process has just been forked (dask's processes scheduler): its first instants; this
    # process from a thread (a handler run inside an at-fork hook could not stop the run), and each
    # worker waits in its own at-fork hook until that is sent (a byte a worker, in a pipe), so that no
    # task runs before it and the run cannot end first, however late the thread runs
    "fork": (
        "import os\n"
        "_forked = []\n"
        "_gate, _gate_in = os.pipe()\n"
        "def _signal_me_then_open():\n"
        "    _kill_me()\n"
        "    os.write(_gate_in, bytes(1024))\n"
        "def _after_fork():\n"
        "    if not _forked:\n"
        "        _forked.append(1)\n"
        "        _kill_others()\n"
        "        threading.Thread(target=_signal_me_then_open).start()\n"
        "def _in_worker():\n"
        "    os.read(_gate, 1)\n"
        "os.register_at_fork(after_in_parent=_after_fork, after_in_child=_in_worker)\n"
    ),
    # a worker process has begun completing the vis.db: it goes on and publishes it, or (slow) is still
    # writing it when the run's process stops it
    "worker-write": _worker_write(SIGNAL_GROUP),
    "worker-write-slow": _worker_write(f"{SIGNAL_GROUP}; time.sleep(30)"),
    # ... and dies there (the OOM killer's way)
    "worker-crash": _worker_write("os._exit(1)"),
    # the worker processes are starting
    "pool": (
        "import concurrent.futures.process as pool\n"
        "_start = pool.ProcessPoolExecutor._start_executor_manager_thread\n"
        "def _starting(self):\n"
        "    _start(self)\n"
        "    _kill()\n"
        "pool.ProcessPoolExecutor._start_executor_manager_thread = _starting\n"
    ),
}
COMMANDS = {"csv": ("compare",), "xlsx": ("compare", "--xlsx"), "vis.db": ("graph_visualize",)}


def _dumps(case: Case) -> tuple[Path, Path]:
    return write_dump(case.dumps / "target"), write_dump(case.dumps / "golden")


def _assert_stopped(outcome: Outcome, code: int, name: str) -> None:
    check(outcome, code, f"stopped by {name}")


@pytest.mark.parametrize("name", list(SIGNALS))
@pytest.mark.parametrize("kind", list(COMMANDS))
@pytest.mark.parametrize("moment", ["parse", "write", "published"])
def test_signal_in_this_process(tmp_path: Path, name: str, kind: str, moment: str) -> None:
    case = new_case(tmp_path)
    target, golden = _dumps(case)
    command, *flags = COMMANDS[kind]
    prelude = f"_SIG = {name!r}\n" + _KILL.format(sig=name) + MOMENTS[moment]
    outcome = case.run(
        command, "-tp", str(target), "-gp", str(golden), "-o", str(case.out), "-q", *flags, prelude=prelude
    )
    _assert_stopped(outcome, SIGNALS[name], name)
    assert not result_files(case.out)


TO = {"main": _KILL, "group": _KILL_GROUP}  # this process's main thread, or every process of the group
WITH_WORKERS = [
    ("main", "SIGTERM", "csv", "pool"),
    ("main", "SIGINT", "csv", "workers"),
    ("group", "SIGTERM", "xlsx", "write"),  # (written by the workers, as the csv)
    ("main", "SIGTERM", "vis.db", "workers"),
    *(
        ("group", name, kind, moment)
        for name in SIGNALS
        for kind, moment in (
            ("csv", "fork"),
            ("csv", "pool"),
            ("csv", "parse"),
            ("csv", "write"),
            ("csv", "published"),
            ("xlsx", "published"),
            ("xlsx", "workers"),
            ("vis.db", "fork"),
            ("vis.db", "pool"),
            ("vis.db", "workers"),
            ("vis.db", "published"),
            ("vis.db", "worker-write"),
            ("vis.db", "worker-write-slow"),
        )
    ),
]


@pytest.mark.parametrize("to, name, kind, moment", WITH_WORKERS)
def test_signal_with_two_workers(tmp_path: Path, to: str, name: str, kind: str, moment: str) -> None:
    """Sent to the group (a Ctrl-C, a kill of the group), the signal reaches the workers too, at the
    moment named (a worker's first instants included): the workers ignore it and this process stops
    them."""
    case = new_case(tmp_path)
    target, golden = _dumps(case)
    command, *flags = COMMANDS[kind]
    prelude = f"_SIG = {name!r}\n" + TO[to].format(sig=name) + MOMENTS[moment]
    args = ("-tp", str(target), "-gp", str(golden), "-o", str(case.out), "-q", "--workers", "2", *flags)
    outcome = case.run(command, *args, prelude=prelude)
    _assert_stopped(outcome, SIGNALS[name], name)
    assert not result_files(case.out)


# a table part's task that signals the run and then takes 30 s (a big part on a loaded host): as its
# worker process begins it, the run's process is stopped
_SLOW_PART = (
    "import os, signal, time\n"
    "import msprobe_dask.pipeline.part_file as part_file\n"
    "_main = os.getpid()\n"
    "def _slow_part(*args):\n"
    "    os.kill(_main, getattr(signal, _SIG))\n"
    "    time.sleep(30)\n"
    "part_file.table_part = _slow_part\n"
)


@pytest.mark.parametrize("name", list(SIGNALS))
def test_stopped_run_does_not_wait_for_its_workers(tmp_path: Path, name: str) -> None:
    """A run stopped while its worker processes run (and have queued) tasks stops them at once, not
    waiting for what they run (scheduler._in_processes): it ends in a few seconds, not the 30 s of the
    running task, in one line and with no file left."""
    case = new_case(tmp_path)
    target, golden = _dumps(case)
    args = ("-tp", str(target), "-gp", str(golden), "-o", str(case.out), "-q", "--workers", "2")
    started = time.monotonic()
    outcome = case.run("compare", *args, prelude=f"_SIG = {name!r}\n" + _SLOW_PART)
    assert time.monotonic() - started < 15
    _assert_stopped(outcome, SIGNALS[name], name)
    assert not result_files(case.out)


# SIGKILL to the run's worker processes (not multiprocessing's resource tracker), as the OOM killer
# sends it: once, or every 0.02 s until the run ends
_KILL_WORKERS = (
    "import contextlib, threading, time, psutil\n"
    "def _kill_workers():\n"
    "    for child in psutil.Process().children(recursive=True):\n"
    "        with contextlib.suppress(psutil.Error):\n"
    "            if 'resource_tracker' not in ' '.join(child.cmdline()):\n"
    "                child.kill()\n"
    "def _kill_forever():\n"
    "    while True:\n"
    "        _kill_workers()\n"
    "        time.sleep(0.02)\n"
    "def _kill():\n"
    "    {how}\n"
)
ONCE, FOREVER = "_kill_workers()", "threading.Thread(target=_kill_forever, daemon=True).start()"
ATTEMPTS = 5  # runs in which to catch the workers with the kills (a small run may end between two)
LOST = [
    # (the processes scheduler does not make a lost worker's tasks again: the command is run again once,
    # after a line that says so; killed again, it ends)
    ("csv", "workers", ONCE, 0, "a local worker process died", False),
    ("csv", "workers", FOREVER, 2, "a local worker process died", False),
    # (graph_visualize's the same way; its worker that completes the vis.db dies there each time)
    ("vis.db", "workers", ONCE, 0, "a local worker process died", False),
    ("vis.db", "workers", FOREVER, 2, "a local worker process died", False),
    ("vis.db", "worker-crash", ONCE, 2, "a local worker process died", False),
]


@pytest.mark.parametrize("kind, moment, how, code, words, may_end_well", LOST)
def test_workers_killed(
    tmp_path: Path,
    kind: str,
    moment: str,
    how: str,
    code: int,
    words: str | tuple[str, ...],
    may_end_well: bool,
) -> None:
    """(``words``: the last line's, or one of the alternatives given; ``may_end_well``: a run the kills
    did not stop ends well, its result the one a run without kills writes. A lost worker's run says
    once that it runs the command again (graph_visualize's last line then says what it wrote). A case
    that must end in an error whose run the kills missed -- its workers done between two kills on a
    loaded host -- ends well, as without kills, and is run again, up to ATTEMPTS times, until they are
    caught.)"""
    command, *flags = COMMANDS[kind]
    prelude = _KILL_WORKERS.format(how=how) + MOMENTS[moment]
    alternatives = (words,) if isinstance(words, str) else words
    again = "running the command again"
    for attempt in range(ATTEMPTS):
        (tmp_path / str(attempt)).mkdir()
        case = new_case(tmp_path / str(attempt))
        target, golden = _dumps(case)
        args = ("-tp", str(target), "-gp", str(golden), "-q", "--workers", "2", *flags)
        outcome = case.run(command, *args, "-o", str(case.out), prelude=prelude)
        assert again in outcome.lines[0], outcome.stderr  # (the first line, then the last attempt's)
        if outcome.code != 0:
            break
        check(outcome, 0, "wrote" if kind == "vis.db" else again, lines=2 if kind == "vis.db" else 1)
        _assert_as_without_kills(case, command, args, kind)
        if code == 0 or may_end_well:
            return
    outcome = check(outcome, code, lines=None)
    assert len(outcome.lines) == 2, outcome.stderr
    assert any(w in outcome.lines[-1] for w in alternatives), outcome.stderr
    assert not result_files(case.out)


def _assert_as_without_kills(case: Case, command: str, args: tuple[str, ...], kind: str) -> None:
    """The run's vis.db holds the nodes a run without kills writes, its csv the same bytes (that run's
    output in out/plain)."""
    plain = case.out / "plain"
    check(case.run(command, *args, "-o", str(plain)), 0, *(["wrote"] if kind == "vis.db" else []), lines=None)
    (ours,), (theirs,) = case.out.glob(f"*.{kind}"), plain.glob(f"*.{kind}")
    if kind == "vis.db":
        assert visdb_npu_nodes(ours) == visdb_npu_nodes(theirs)
    else:
        assert ours.read_bytes() == theirs.read_bytes()


@pytest.mark.parametrize("workers", [(), ("--workers", "2")], ids=["local", "workers"])
@pytest.mark.parametrize("name", list(SIGNALS))
@pytest.mark.parametrize("command", ["compare", "graph_visualize"])
def test_signal_at_start_up(tmp_path: Path, name: str, command: str, workers: tuple[str, ...]) -> None:
    """A fresh interpreter, signalled while it imports the command's modules."""
    target, golden = write_dump(tmp_path / "target"), write_dump(tmp_path / "golden")
    module = "msprobe_dask.graph.api" if command == "graph_visualize" else "msprobe_dask.dump.layouts"
    script = (
        "import os, signal, sys\n"
        "def hook(event, args):\n"
        f"    if event == 'import' and args[0] == {module!r}:\n"
        f"        os.kill(os.getpid(), signal.{name})\n"
        "sys.addaudithook(hook)\n"
        "from msprobe_dask.cli import console_main\n"
        "console_main()\n"
    )
    out = tmp_path / "out"
    argv = [command, "-tp", str(target), "-gp", str(golden), "-o", str(out), *workers]
    proc = subprocess.Popen(
        [sys.executable, "-c", script, *argv],
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == SIGNALS[name], stderr
    assert stderr.strip().splitlines() == [f"msprobe-dask: stopped by {name}"]
    time.sleep(0.05)
    assert not _session_members(proc.pid)
    assert not out.exists() or not any(out.iterdir())


def _session_members(sid: int) -> list[int]:
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.getsid(int(entry)) == sid:
                    members.append(int(entry))
            except OSError:
                continue
    return members


def test_worker_error_too_deep_to_send_back(tmp_path: Path) -> None:
    """A task whose error cannot be pickled back from its worker process (a RecursionError's traceback):
    the run ends with the one line of an internal error, exit 1, no traceback, nothing written."""
    case = new_case(tmp_path)
    target, golden = _dumps(case)
    prelude = _worker_write("(lambda f: f(f))(lambda f: f(f))")
    args = ("-tp", str(target), "-gp", str(golden), "-q", "--workers", "2")
    outcome = case.run("graph_visualize", *args, "-o", str(case.out), prelude=prelude)
    check(outcome, 1, "could not be sent back")
    assert "Traceback" not in outcome.stderr, outcome.stderr
    assert not result_files(case.out)
