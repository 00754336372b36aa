"""A run in this process's threads that fails tells it only once the tasks already started have ended: a
task still running in another thread after the failure is told could write into a folder the failed run
has just removed (a table part's spool), leaving it behind."""

from __future__ import annotations

import threading
import time

import dask
import pytest

from msprobe_dask.pipeline.scheduler import RunOptions, computing


def test_a_failure_is_told_after_the_started_tasks_end() -> None:
    started, ended = threading.Event(), threading.Event()

    def slow() -> int:
        started.set()
        time.sleep(0.5)
        ended.set()
        return 1

    def failing() -> int:
        started.wait(5)  # the slow task is running in the other thread
        raise OSError("disk full")

    with computing(RunOptions(workers=0)) as compute:
        with pytest.raises(OSError, match="disk full"):
            compute([dask.delayed(slow)(), dask.delayed(failing)()])
        assert ended.is_set()
