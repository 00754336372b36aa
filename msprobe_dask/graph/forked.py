"""Run CPU-bound jobs in this process and in forked copies of it (Linux), where threads cannot help.

Building rows and comparing nodes is pure Python: threads share one core (the GIL), and a process pool
would have to pickle the graphs, which costs more than the work (unpickling a 20,000-node graph takes
longer than building it). A forked child inherits the graphs for free and only its results, lists of
strings and numbers, are pickled back through a pipe.

The processes take job numbers from a shared pipe, so a process that gets less CPU (the machine is
shared) simply does fewer jobs. A child that fails for any reason (an exception, a signal, a result
that cannot be pickled) has its jobs rerun in this process; if one of this process's jobs fails, all
jobs are rerun here in order. Either way an error is raised here exactly as in a serial run (the jobs
must be safe to run twice).
"""

from __future__ import annotations

import os
import pickle
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, TypeVar

T = TypeVar("T")
_SIZE = 4  # bytes per job number in the pipe (reads this small are atomic)
_lock = threading.Lock()
_children = 0  # forked children running, over all threads (ranks are finished in parallel threads)


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def can_fork() -> bool:
    return sys.platform == "linux" and hasattr(os, "fork") and not _in_dask_worker()


def _in_dask_worker() -> bool:
    """On a dask cluster the workers are the parallelism: a task does not fork CPUs it was not given."""
    distributed = sys.modules.get("distributed")
    if distributed is None:
        return False
    try:
        distributed.get_worker()
    except ValueError:
        return False
    return True


def run_jobs(
    jobs: Sequence[Callable[[], T]], processes: int, spill: Callable[[T], T] | None = None
) -> list[T]:
    """``[job() for job in jobs]``, run by this process and up to ``processes - 1`` forked children
    (fewer while other threads' children take the other CPUs).

    ``spill``: when the jobs do run in several processes, applied to each result in the process that
    made it, before the result travels (it may park the bulk of it somewhere cheaper than the pipe)."""
    processes = min(processes, len(jobs))
    if processes <= 1 or not can_fork() or len(jobs) * _SIZE > 65536:
        return [job() for job in jobs]
    extra = _reserve(processes - 1)
    try:
        if not extra:
            return [job() for job in jobs]
        return _run([partial(_then, job, spill) for job in jobs] if spill else jobs, extra)
    finally:
        _release(extra)


def _then(job: Callable[[], T], after: Callable[[T], T]) -> T:
    return after(job())


def call_in_child(fn: Callable[[], T]) -> T | None:
    """``fn()`` run by a forked child while this thread waits for it without holding the GIL, so the
    process's other threads go on (two graphs of a compare are built at once this way). None if no
    CPU is free or the child failed: the caller then calls ``fn`` itself (and gets its error)."""
    if not can_fork():
        return None
    extra = _reserve(1)
    try:
        if not extra:
            return None
        queue_r, queue_w = os.pipe()
        os.write(queue_w, (0).to_bytes(_SIZE, "little"))
        os.close(queue_w)
        try:
            pid, fd = _fork([fn], queue_r)
        finally:
            os.close(queue_r)
        done = _collect(pid, fd)
        return done[0][1] if done else None
    finally:
        _release(extra)


def _reserve(wanted: int) -> int:
    global _children
    with _lock:
        n = max(0, min(wanted, usable_cpus() - 1 - _children))
        _children += n
        return n


def _release(n: int) -> None:
    global _children
    with _lock:
        _children -= n


def _run(jobs: Sequence[Callable[[], T]], extra: int) -> list[T]:
    queue_r, queue_w = os.pipe()
    for i in range(len(jobs)):
        os.write(queue_w, i.to_bytes(_SIZE, "little"))
    os.close(queue_w)
    children: list[tuple[int, int]] = []  # (pid, read fd of its results)
    try:
        for _ in range(extra):
            children.append(_fork(jobs, queue_r))
        try:
            done = dict(_take(jobs, queue_r))
        except Exception:  # rerun in order, so that the error raised is the serial run's first
            for pid, fd in children:
                _stop(pid, fd)
            children.clear()
            return [job() for job in jobs]
        while children:
            pid, fd = children[0]
            part = _collect(pid, fd)
            children.pop(0)
            done.update(part or ())
        # jobs of a failed child, rerun here in order
        return [done[i] if i in done else job() for i, job in enumerate(jobs)]
    finally:
        os.close(queue_r)
        for pid, fd in children:
            _stop(pid, fd)


def _take(jobs: Sequence[Callable[[], Any]], queue: int) -> list[tuple[int, Any]]:
    out: list[tuple[int, Any]] = []
    while True:
        b = os.read(queue, _SIZE)
        if not b:
            return out
        i = int.from_bytes(b, "little")
        out.append((i, jobs[i]()))


def _fork(jobs: Sequence[Callable[[], Any]], queue: int) -> tuple[int, int]:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 1
        try:
            os.close(r)
            payload = pickle.dumps(_take(jobs, queue), protocol=pickle.HIGHEST_PROTOCOL)
            with os.fdopen(w, "wb") as f:
                f.write(payload)
            code = 0
        except BaseException:  # noqa: B036 - the parent reruns these jobs and raises their error
            pass
        finally:
            os._exit(code)
    os.close(w)
    return pid, r


def _collect(pid: int, fd: int) -> list[tuple[int, Any]] | None:
    """The child's (job number, result) pairs, or None if it failed."""
    with os.fdopen(fd, "rb") as f:
        data = f.read()
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0 or not data:
        return None
    try:
        return pickle.loads(data)
    except Exception:
        return None


def _stop(pid: int, fd: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    os.close(fd)
    os.waitpid(pid, 0)
