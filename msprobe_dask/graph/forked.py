"""Run CPU-bound jobs in this process and in forked copies of it (Linux), where threads cannot help.

Building rows and comparing nodes is pure Python: threads share one core (the GIL), and a process pool
would have to pickle the graphs, which costs more than the work (unpickling a 20,000-node graph takes
longer than building it). A forked child inherits the graphs for free and only its results are pickled
back through a pipe, each as soon as it is made.

The processes take job numbers from a shared pipe, so a process that gets less CPU (the machine is
shared) simply does fewer jobs. A child that fails for any reason (an exception, a signal, a result
that cannot be pickled) has the jobs it sent no result of rerun in this process; if one of this
process's jobs fails, all jobs without a result are rerun here in order. Either way an error is
raised here exactly as in a serial run (the jobs must be safe to run twice).
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

from msprobe_dask.graph import speedups

T = TypeVar("T")
_SIZE = 4  # bytes per job number in the pipe (reads this small are atomic)
_FRAME = 8  # bytes of a result frame's length
_lock = threading.Lock()
# held while a pipe's ends are open in this process only for a moment (a job queue being filled, a
# child being forked): a child forked by another thread meanwhile would keep them open, and the
# queue's readers would wait for that child's end to see the queue's
_fd_lock = threading.Lock()
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
    jobs: Sequence[Callable[[], T]],
    processes: int,
    made: Callable[[T], T] | None = None,
    arrived: Callable[[T], T] | None = None,
    busy_here: bool = False,
) -> list[T]:
    """``[arrived(made(job())) for job in jobs]``, the jobs run by this process and up to
    ``processes - 1`` forked children (fewer while other threads' children take the other CPUs).

    ``made`` runs in the process that made the result, before it travels (it may pack the bulk of it
    into something cheaper to send). ``arrived`` runs here on each result as soon as it is here, once
    per job, from any of this process's threads, in no particular order: a consumer can take the
    results while the jobs go on.

    ``busy_here``: this process has work of its own meanwhile (a thread writing the results as they
    arrive). The jobs are then left to ``processes`` children, unless none can be had: a job run
    here would hold the GIL from that thread, and each page it touches, shared with the children
    since the fork, is copied with a TLB flush on every CPU running one of this process's threads
    (measured on a 100,000-node build: 7% faster so)."""
    if made is not None:
        jobs = [partial(_then, job, made) for job in jobs]
    receive = arrived or _same
    processes = min(processes, len(jobs))
    if processes <= 1 or not can_fork() or len(jobs) * _SIZE > 65536:
        return [receive(job()) for job in jobs]
    extra = _reserve(processes, 0) if busy_here else _reserve(processes - 1)
    try:
        if not extra:
            return [receive(job()) for job in jobs]
        return _run(jobs, extra, receive, not busy_here)
    finally:
        _release(extra)


def _then(job: Callable[[], T], after: Callable[[T], T]) -> T:
    return after(job())


def _same(result: T) -> T:
    return result


def call_in_child(fn: Callable[[], T]) -> T | None:
    """``fn()`` run by a forked child while this thread waits for it without holding the GIL, so the
    process's other threads go on (two graphs of a compare are built at once this way). None if no
    CPU is free or the child failed: the caller then calls ``fn`` itself (and gets its error)."""
    started = start_in_child(fn)
    if started is None:
        return None
    result, child = started
    child.wait()
    return result


def start_in_child(
    fn: Callable[[], T], then: Callable[[T], object] | None = None
) -> tuple[T | None, GoingOn] | None:
    """call_in_child's ``fn()``, whose child then goes on with ``then(fn())`` once the result is here,
    holding its CPU until it ends or is stopped (``GoingOn.stop``). (result, child): the result is
    None if the child failed; None if no CPU is free."""
    if not can_fork() or not _reserve(1):
        return None
    queue_r = _job_queue(1)
    try:
        pid, fd = _fork([fn], queue_r, then)
    except OSError:  # no process to be had (EAGAIN): the caller runs it
        _release(1)
        return None
    finally:
        os.close(queue_r)
    done: dict[int, T] = {}
    _read_results(fd, done.__setitem__, [])
    return done.get(0), GoingOn(pid)


class GoingOn:
    """A forked child that may still be running, and the CPU it holds."""

    def __init__(self, pid: int) -> None:
        self._pid = pid
        self._lock = threading.Lock()

    def wait(self) -> None:
        """Wait for its end, then give its CPU back."""
        self._end(False)

    def stop(self) -> None:
        """End it now (SIGKILL: whatever it was doing stops between two instructions), then give its
        CPU back."""
        self._end(True)

    def _end(self, kill: bool) -> None:
        with self._lock:
            pid, self._pid = self._pid, 0
            if not pid:
                return
            if kill:
                _stop(pid)
            os.waitpid(pid, 0)
            _release(1)


def _reserve(wanted: int, kept: int = 1) -> int:
    """Up to ``wanted`` CPUs for children, leaving ``kept`` CPUs to this process's own threads."""
    global _children
    with _lock:
        n = max(0, min(wanted, usable_cpus() - kept - _children))
        _children += n
        return n


def _release(n: int) -> None:
    global _children
    with _lock:
        _children -= n


def _job_queue(n: int) -> int:
    """The read end of a pipe holding the job numbers 0 .. n-1 (its write end already closed)."""
    with _fd_lock:
        queue_r, queue_w = os.pipe()
        os.write(queue_w, b"".join(i.to_bytes(_SIZE, "little") for i in range(n)))
        os.close(queue_w)
    return queue_r


def _run(jobs: Sequence[Callable[[], T]], extra: int, receive: Callable[[T], T], here: bool) -> list[T]:
    """The jobs run by ``extra`` children, and by this process if ``here`` (or if no child was had)."""
    queue_r = _job_queue(len(jobs))
    done: dict[int, T] = {}
    errors: list[BaseException] = []  # raised by ``receive`` in a reader thread

    def arrive(i: int, result: T) -> None:
        done[i] = receive(result)

    pids: list[int] = []
    readers: list[threading.Thread] = []
    try:
        for _ in range(extra):
            try:
                pid, fd = _fork(jobs, queue_r)
            except OSError:  # no more processes to be had (EAGAIN): the others do the jobs
                break
            pids.append(pid)
            readers.append(threading.Thread(target=_read_results, args=(fd, arrive, errors), daemon=True))
            readers[-1].start()
        try:
            while (here or not pids) and (k := _next_job(queue_r)) is not None:
                arrive(k, jobs[k]())
        except Exception:  # rerun in order, so that the error raised is the serial run's first
            for pid in pids:
                _stop(pid)
        for reader in readers:
            reader.join()
        for pid in pids:
            os.waitpid(pid, 0)
        pids.clear()
        if errors:
            raise errors[0]
        # jobs of a failed child, or all jobs not done after one of ours failed: run here in order
        return [done[i] if i in done else receive(job()) for i, job in enumerate(jobs)]
    finally:
        os.close(queue_r)
        for pid in pids:
            _stop(pid)
            os.waitpid(pid, 0)


def _next_job(queue: int) -> int | None:
    b = os.read(queue, _SIZE)
    return int.from_bytes(b, "little") if b else None


def _fork(
    jobs: Sequence[Callable[[], Any]], queue: int, then: Callable[[Any], object] | None = None
) -> tuple[int, int]:
    """A child that runs the jobs it takes from ``queue`` and sends each (number, result) back as soon
    as it has it, as a frame: its length (8 bytes), then its pickle; then, its pipe closed, calls
    ``then`` on its last result, if it made one. Returns (pid, read end)."""
    with _fd_lock:
        r, w = os.pipe()
        try:
            pid = os.fork()
        except OSError:
            os.close(r)
            os.close(w)
            raise
        if pid != 0:
            os.close(w)
            return pid, r
    # the child: never returns
    code = 1
    try:
        os.close(r)
        last: list[Any] = []
        with os.fdopen(w, "wb") as out:
            while (i := _next_job(queue)) is not None:
                last[:] = [jobs[i]()]
                payload = pickle.dumps((i, last[0]), protocol=pickle.HIGHEST_PROTOCOL)
                out.write(len(payload).to_bytes(_FRAME, "little"))
                out.write(payload)
                out.flush()
        if then is not None and last:
            then(last[0])
        code = 0
    except BaseException:  # noqa: B036 - the parent reruns the jobs it has no result of
        pass
    finally:
        os._exit(code)


def _read_results(fd: int, arrive: Callable[[int, Any], None], errors: list[BaseException]) -> None:
    """Hand the child's results to ``arrive`` until its pipe closes (a truncated or unreadable frame
    ends it: those jobs are rerun)."""
    try:
        while len(head := _read_exact(fd, _FRAME)) == _FRAME:
            n = int.from_bytes(head, "little")
            data = _read_exact(fd, n)
            if len(data) != n:
                return
            try:
                i, result = pickle.loads(data)
            except Exception:
                return
            arrive(i, result)
    except BaseException as exc:  # noqa: B036 - raised again by the thread that waits for the jobs
        errors.append(exc)
    finally:
        os.close(fd)


def _read_exact(fd: int, n: int) -> bytes:
    """``n`` bytes of ``fd`` (fewer at its end). The C version reads without taking the GIL between
    a pipe's pieces: here each piece waits for the thread running jobs to let go of it."""
    if speedups.native is not None:
        return speedups.native.read_exact(fd, n)
    pieces = []
    while n > 0 and (piece := os.read(fd, n)):
        pieces.append(piece)
        n -= len(piece)
    return b"".join(pieces)


def _stop(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
