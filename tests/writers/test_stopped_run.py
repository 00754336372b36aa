"""A run stopped by a signal: the main thread removes the temporaries while a task thread may still be
writing; that thread can then neither begin a result nor publish one (the race behind a vis.db left
beside a run stopped at its write)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from msprobe_dask.errors import RunStopped
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
