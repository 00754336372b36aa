"""graph/forked.py: jobs spread over forked children come back in order, and any failure in a child
ends with the serial run's result or error."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from msprobe_dask.graph import forked, speedups
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
            if fail_in_child == "kill" or (fail_in_child == "kill late" and i >= 6):
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


@pytest.mark.parametrize("failure", ["", "raise", "kill late", "unpicklable"])
def test_each_result_arrives_once_as_soon_as_it_is_made(failure: str) -> None:
    """``made`` runs where the job ran, ``arrived`` here, once per job, while other jobs still run;
    a child that fails after sending some results has only the others rerun."""
    arrivals: list[tuple[int, int, str, float]] = []
    runs: list[int] = []

    def made(result: tuple[int, int]) -> tuple[int, int, int]:
        return (*result, os.getpid())

    def arrived(result: tuple[int, int, int]) -> tuple[int, int]:
        arrivals.append((result[0], result[2], threading.current_thread().name, time.monotonic()))
        return result[0], result[1]

    def counted(i: int):
        job = _job(i, failure)
        return lambda: runs.append(i) or job()

    out = run_jobs([counted(i) for i in range(12)], 3, made, arrived)
    assert [i for i, _ in out] == list(range(12))
    assert sorted(i for i, *_ in arrivals) == list(range(12))
    assert all(pid == made_in for (_, pid), (_, made_in, _, _) in zip(out, sorted(arrivals)))
    here = [i for i, pid, *_ in arrivals if pid == os.getpid()]
    assert sorted(runs) == sorted(here)  # jobs run here: ours, and those no child sent a result of
    if failure in ("", "kill late"):
        from_children = [(name, t) for _, pid, name, t in arrivals if pid != os.getpid()]
        last_here = max(t for _, pid, _, t in arrivals if pid == os.getpid())
        assert from_children and all(name != threading.current_thread().name for name, _ in from_children)
        assert min(t for _, t in from_children) < last_here


@pytest.mark.skipif(speedups.native is None, reason="the Python reader waits for the GIL: slow, not stuck")
def test_a_big_result_comes_back_while_this_process_is_busy() -> None:
    """A child's 32 MB result arrives while this process's job (which holds the GIL) still runs."""
    parent = os.getpid()
    start = time.monotonic()

    def job():
        if os.getpid() != parent:
            return b"x" * (32 << 20)
        while time.monotonic() < start + 1.5:  # busy in Python
            pass
        return b""

    arrivals: list[tuple[int, float]] = []
    out = run_jobs([job, job], 2, None, lambda r: arrivals.append((len(r), time.monotonic() - start)) or r)
    assert sorted(map(len, out)) == [0, 32 << 20]
    assert [t for n, t in arrivals if n][0] < 1.2


def test_read_exact_reads_across_pipe_pieces_and_stops_at_the_end() -> None:
    r, w = os.pipe()
    data = bytes(range(256)) * 1024  # more than a pipe holds
    writer = threading.Thread(target=lambda: (os.write(w, data[:100]), os.write(w, data[100:]), os.close(w)))
    writer.start()
    try:
        assert forked._read_exact(r, 10) == data[:10]
        assert forked._read_exact(r, len(data)) == data[10:]  # fewer: the end came first
        assert forked._read_exact(r, 5) == b""
    finally:
        writer.join()
        os.close(r)


def test_no_process_to_be_had_leaves_the_jobs_here(monkeypatch: pytest.MonkeyPatch) -> None:
    """fork() failing (EAGAIN at the process limit): the jobs run here and no descriptor is left open."""

    def no_fork() -> int:
        raise BlockingIOError(11, "Resource temporarily unavailable")

    before = set(os.listdir("/proc/self/fd"))
    monkeypatch.setattr(os, "fork", no_fork)
    assert run_jobs([_job(i) for i in range(4)], 3) == [(i, os.getpid()) for i in range(4)]
    assert forked.call_in_child(lambda: 1) is None
    assert set(os.listdir("/proc/self/fd")) == before


@pytest.mark.parametrize("failure", ["", "raise", "kill"])
def test_busy_here_leaves_the_jobs_to_the_children(monkeypatch: pytest.MonkeyPatch, failure: str) -> None:
    """``busy_here``: as many children as processes asked for, and no job run here, unless a child
    fails (its jobs are rerun here) or no child can be had."""
    monkeypatch.setattr(forked, "usable_cpus", lambda: 2)
    out = run_jobs([_job(i, failure) for i in range(8)], 2, busy_here=True)
    assert [i for i, _ in out] == list(range(8))
    pids = {pid for _, pid in out}
    if failure:
        assert pids == {os.getpid()}
    else:
        assert len(pids) == 2 and os.getpid() not in pids
    assert forked._children == 0
    monkeypatch.setattr(forked, "_children", 2)  # the CPUs are other threads' children's
    assert run_jobs([_job(i) for i in range(3)], 2, busy_here=True) == [(i, os.getpid()) for i in range(3)]


def test_a_child_going_on_after_its_result_holds_its_cpu_until_stopped(tmp_path) -> None:
    """start_in_child: the result is here while the child goes on with ``then``; stop() ends it
    (SIGKILL) and gives its CPU back; wait() waits for it to end."""
    mark = tmp_path / "mark"

    def then(result: int) -> None:
        mark.write_text(str(result))
        time.sleep(60)

    started = forked.start_in_child(lambda: 41 + 1, then)
    assert started is not None
    result, child = started
    assert result == 42 and forked._children == 1
    deadline = time.monotonic() + 10
    while not mark.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert mark.read_text() == "42"
    begun = time.monotonic()
    child.stop()
    assert time.monotonic() - begun < 5 and forked._children == 0
    child.stop()  # once only
    assert forked._children == 0

    started = forked.start_in_child(lambda: 1, lambda r: time.sleep(0.2))
    assert started is not None
    begun = time.monotonic()
    started[1].wait()
    assert time.monotonic() - begun >= 0.1 and forked._children == 0
