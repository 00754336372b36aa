"""A run stopped by a signal: the main thread removes the temporaries while a task thread may still be
writing; that thread can then neither begin a result nor publish one (the race behind a vis.db left
beside a run stopped at its write)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from msprobe_dask.errors import OutputError, RunStopped
from msprobe_dask.writers import atomic
from msprobe_dask.writers.visdb import VisdbWriter


@pytest.fixture(autouse=True)
def _new_run() -> Iterator[None]:
    atomic.begin_run()
    yield
    atomic.begin_run()


def test_a_result_begun_after_the_stop_is_refused_and_leaves_nothing(tmp_path: Path) -> None:
    atomic.remove_temporaries()  # the main thread, unwinding from SIGINT
    with pytest.raises(RunStopped), atomic.atomic_path(tmp_path / "result.csv"):
        pass
    with pytest.raises(RunStopped):
        VisdbWriter(tmp_path / "build.vis.db")
    assert list(tmp_path.iterdir()) == []


def test_a_result_written_across_the_stop_is_not_published(tmp_path: Path) -> None:
    with pytest.raises(RunStopped), atomic.atomic_path(tmp_path / "result.csv") as tmp:
        tmp.write_text("a,b\n")
        atomic.remove_temporaries()  # the stop comes while this thread writes
        tmp.write_text("a,b\n1,2\n")  # it goes on writing, then would publish
    atomic.remove_temporaries()  # the CLI's last sweep as the process leaves
    assert list(tmp_path.iterdir()) == []


def test_a_new_run_in_the_same_process_writes_again(tmp_path: Path) -> None:
    atomic.remove_temporaries()
    atomic.begin_run()
    with atomic.atomic_path(tmp_path / "result.csv") as tmp:
        tmp.write_text("a\n")
    assert [p.name for p in tmp_path.iterdir()] == ["result.csv"]


def test_a_failed_command_in_this_process_leaves_writing_allowed(tmp_path: Path) -> None:
    """``main`` called in-process (not leaving after it): its failure does not stop later writes."""
    from msprobe_dask.cli import main

    assert main(["compare", "-tp", str(tmp_path / "missing"), "-gp", str(tmp_path), "-o", str(tmp_path)]) == 2
    with atomic.atomic_path(tmp_path / "result.csv") as tmp:
        tmp.write_text("a\n")
    assert (tmp_path / "result.csv").exists()


def test_the_signal_handler_stops_writing_at_once(tmp_path: Path) -> None:
    """The scheduler may wait for its running tasks before the signal's exception reaches ``main``:
    the handler itself stops the writing, so a task finishing meanwhile publishes nothing."""
    import signal

    from msprobe_dask.cli import _raise_stopped  # the handler main installs

    with pytest.raises(KeyboardInterrupt):
        _raise_stopped(signal.SIGINT, None)
    with pytest.raises(RunStopped), atomic.atomic_path(tmp_path / "result.csv") as tmp:
        tmp.write_text("a\n")
    assert list(tmp_path.iterdir()) == []


def _fails_on_its_workers(result: Path) -> int:
    """The run then fails on its workers, which the signal (SIGTERM) stopped too."""
    from msprobe_dask.errors import ClusterError

    raise ClusterError(None, "a local worker process died (out of memory?); nothing was written")


def _ends_well(result: Path) -> int:
    """The run goes on to its end: its workers ignored the signal (SIGINT) and one publishes the result;
    the block of its results stops there (it would then print "wrote", as the commands do)."""
    import sys

    result.parent.mkdir()
    with atomic.withdrawn_if_failed(result):
        result.write_text("a\n")  # a worker process does not see the stop
    print(f"wrote {result}", file=sys.stderr)
    return 0


def _refused_on_a_later_worker(result: Path) -> int:
    """The run then fails on a worker forked after the stop, whose tasks refuse to write (RunStopped,
    sent back to this process as it is)."""
    raise RunStopped("the run was stopped")


@pytest.mark.parametrize(
    "name, then, code",
    [
        ("SIGTERM", _fails_on_its_workers, 143),
        ("SIGINT", _ends_well, 130),
        ("SIGINT", _refused_on_a_later_worker, 130),
    ],
)
def test_a_signal_whose_exception_was_lost_still_ends_the_run_as_stopped(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    name: str,
    then: Callable[[Path], int],
    code: int,
) -> None:
    """The signal's exception raised where Python only reports it to sys.unraisablehook (as in an at-fork
    hook after a worker's fork), then the run failing on its workers, or going on to its end: the run
    ends as stopped by the signal (exit 128 + signal, one line, no "Exception ignored" traceback), not as
    the failure that followed (exit 2, "a local worker process died") nor as done (exit 0: seen 2 times
    in 60 runs of tests/hostile/test_signals.py::test_signal_with_two_workers[group-SIGINT-csv-fork] on
    a loaded host, the csv written); the result it wrote is withdrawn."""
    import os
    import signal
    import sys

    from msprobe_dask import cli
    from msprobe_dask.pipeline import compare_cli

    class LosesTheSignal:
        def __del__(self) -> None:
            os.kill(os.getpid(), getattr(signal, name))
            for _ in range(1000):  # the handler runs here, its exception raised in __del__
                pass

    result = tmp_path / "out" / "compare_result.csv"

    def run(args: object) -> int:
        LosesTheSignal()  # freed at once
        return then(result)

    monkeypatch.setattr(compare_cli, "run", run)
    monkeypatch.setattr(sys, "unraisablehook", sys.__unraisablehook__)  # Python's, not pytest's
    dump = tmp_path / "dump.json"
    dump.write_text("{}")
    assert cli.main(["compare", "-tp", str(dump), "-gp", str(dump), "-o", str(tmp_path / "out")]) == code
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and f"stopped by {name}" in lines[0], lines
    assert not result.exists()


def test_a_folder_of_temporaries_is_removed_with_what_it_holds(tmp_path: Path) -> None:
    """A compare rank's spool folder (its table parts' bytes waiting for their appends) goes whole."""
    spools = tmp_path / ".compare_result.csv.parts"
    spools.mkdir()
    (spools / "0").write_bytes(b"a,b\n")
    atomic.track(spools)
    atomic.remove_temporaries()
    assert list(tmp_path.iterdir()) == []


def test_a_failed_run_withdraws_the_results_it_made_not_others(tmp_path: Path) -> None:
    """The CLI's end of a failed or stopped run: what it published (here or, named by
    withdrawn_if_failed, in a worker process) goes; a file there before the run stays."""
    before = tmp_path / "before.csv"
    before.write_text("theirs\n")
    with atomic.atomic_path(tmp_path / "result.csv") as tmp:
        tmp.write_text("a\n")
    by_worker = tmp_path / "compare_result_rank0.csv"
    with atomic.withdrawn_if_failed(by_worker, before):
        by_worker.write_text("a\n")  # (a worker process's publish, which this process does not see)
    with pytest.raises(OutputError), atomic.atomic_path(before) as tmp:
        tmp.write_text("ours\n")  # (its name is taken: not published, not ours)
    atomic.withdraw_results()
    assert [p.name for p in tmp_path.iterdir()] == ["before.csv"]
    assert before.read_text() == "theirs\n"


def test_a_failed_rank_withdraws_its_spool_folder(tmp_path: Path) -> None:
    """A rank whose run failed while a worker's table part had (re)made its spool folder: the folder
    goes with the rank's other temporaries (it was unlinked as a file: IsADirectoryError)."""
    final = tmp_path / "compare_result_rank0.csv"
    spools = tmp_path / ".compare_result_rank0.csv.parts"
    with pytest.raises(OSError), atomic.withdrawn_if_failed(final):
        spools.mkdir()
        (spools / "3").write_bytes(b"a,b\n")
        (tmp_path / ".compare_result_rank0.csv.part").write_bytes(b"h\n")
        raise OSError("No space left on device")
    assert list(tmp_path.iterdir()) == []


def test_a_stop_that_comes_as_the_result_is_named_takes_the_name_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    link = os.link

    def linking_as_the_stop_comes(source: str, target: str) -> None:
        link(source, target)
        atomic.stop_writing()  # (the signal's handler, in the main thread, while a task thread names it)

    monkeypatch.setattr(os, "link", linking_as_the_stop_comes)
    with pytest.raises(RunStopped), atomic.atomic_path(tmp_path / "result.csv") as tmp:
        tmp.write_text("a\n")
    assert list(tmp_path.iterdir()) == []


def test_a_task_whose_write_fails_leaves_the_other_tasks_spools(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A table part that cannot be written (a file size limit) names the rank's result and removes
    nothing: another worker's task may be reading its spool file meanwhile (removed under it, its
    FileNotFoundError reached the run's end first once: an internal error, exit 1); the run's process
    removes the rank's temporaries once no task runs (compare_to_files)."""
    from msprobe_dask.pipeline import part_spool
    from msprobe_dask.pipeline.part_file import remove_temporaries_of
    from msprobe_dask.pipeline.part_spool import spool_folder, spooled_keys

    monkeypatch.setattr(part_spool, "key_part", lambda: (b"a", b"b"))  # (a part's keys, two partitions)

    final = tmp_path / "compare_result_rank0.csv"
    read_meanwhile = spool_folder(final) / "rows-bench-6"
    read_meanwhile.parent.mkdir()
    read_meanwhile.write_bytes(b"rows")
    (spool_folder(final) / "keys-0").mkdir()  # (the write fails: IsADirectoryError, as EFBIG would)
    with pytest.raises(OutputError, match="compare_result_rank0.csv: cannot be written"):
        spooled_keys(final, "keys")
    assert read_meanwhile.read_bytes() == b"rows"
    remove_temporaries_of(final)
    assert list(tmp_path.iterdir()) == []
