"""graph/forked.py: jobs spread over forked children come back in order, and any failure in a child
ends with the serial run's result or error."""

from __future__ import annotations

import os
import signal
import time

import pytest

from msprobe_dask.graph import forked
from msprobe_dask.graph.forked import can_fork, run_jobs

pytestmark = pytest.mark.skipif(not can_fork(), reason="forked children are used on Linux only")


@pytest.fixture(autouse=True)
def eight_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(forked, "usable_cpus", lambda: 8)


def _job(i: int, fail_in_child: str = ""):
    parent = os.getpid()

    def run():
        time.sleep(0.05)  # long enough for every process to take some jobs
        if os.getpid() != parent:
            if fail_in_child == "raise":
                raise RuntimeError("only in the child")
            if fail_in_child == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            if fail_in_child == "unpicklable":
                return lambda: i
        return (i, os.getpid())

    return run


@pytest.mark.parametrize("processes", [1, 2, 3])
def test_results_in_job_order(processes: int) -> None:
    out = run_jobs([_job(i) for i in range(16)], processes)
    assert [i for i, _ in out] == list(range(16))
    pids = {pid for _, pid in out}
    assert os.getpid() in pids and (len(pids) > 1) == (processes > 1) and len(pids) <= processes


@pytest.mark.parametrize("failure", ["raise", "kill", "unpicklable"])
def test_a_failed_childs_jobs_are_rerun_here(failure: str) -> None:
    out = run_jobs([_job(i, failure) for i in range(8)], 2)
    assert out == [(i, os.getpid()) for i in range(8)]


def test_children_share_the_cpus_between_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(forked, "_children", 6)  # other threads' children hold 6 of the 7 spare CPUs
    out = run_jobs([_job(i) for i in range(12)], 4)
    assert len({pid for _, pid in out}) == 2
    assert forked._children == 6
    monkeypatch.setattr(forked, "_children", 7)
    assert {pid for _, pid in run_jobs([_job(i) for i in range(3)], 4)} == {os.getpid()}


def test_the_first_error_in_job_order_is_raised() -> None:
    def bad(k: int):
        def run():
            time.sleep(0.02)
            raise ValueError(f"job {k}")

        return run

    jobs = [_job(0), _job(1), bad(2), _job(3), bad(4), _job(5)]
    with pytest.raises(ValueError, match="job 2"):
        run_jobs(jobs, 2)
