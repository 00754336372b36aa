"""Stopping what a run started: every child process (dask workers, forked helpers)
this process started during the run, when the run ends early (a signal, an error), so that nothing is
left running. Children it had before the run (a caller's own cluster) are spared."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator

# multiprocessing's resource tracker ignores SIGTERM and leaves by itself when this process is gone,
# after removing what the workers left (semaphores, shared memory): it is left to do so
_LEAVES_BY_ITSELF = "multiprocessing.resource_tracker"


_STOPPING = (signal.SIGINT, signal.SIGTERM)


def _worker_signals() -> None:
    """A worker process's signals: SIGINT ignored, so that a Ctrl-C at the terminal (sent to the whole
    process group) reaches only the run's own process, which stops the workers, instead of each worker
    printing a traceback; SIGTERM at its default, so that a worker told to stop ends at once, quietly
    (not through the handlers of the process it was forked from)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


class _Forks:
    """Whether the processes forked now are a run's workers, and the signal mask to restore after each
    fork (os.register_at_fork's hooks cannot be removed, so they look here)."""

    workers = False
    mask: set[int | signal.Signals] | None = None


def _before_fork() -> None:
    if _Forks.workers:
        _Forks.mask = signal.pthread_sigmask(signal.SIG_BLOCK, _STOPPING)


def _after_fork(child: bool) -> None:
    mask, _Forks.mask = _Forks.mask, None
    if mask is not None:
        if child:
            _worker_signals()  # a signal that came meanwhile stays pending, and now is ignored or ends it
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


os.register_at_fork(
    before=_before_fork,
    after_in_parent=lambda: _after_fork(False),
    after_in_child=lambda: _after_fork(True),
)


@contextlib.contextmanager
def forking_workers() -> Iterator[None]:
    """Processes forked by this one in this block (dask's processes scheduler's workers) have their
    worker signals from their first instruction: SIGINT and SIGTERM are blocked across each fork, so
    that neither can run this process's handlers in the child."""
    _Forks.workers = True
    try:
        yield
    finally:
        _Forks.workers = False


def alone_in_process() -> bool:
    """Whether this process runs no thread but the calling one (Linux: its tasks in /proc, C libraries'
    threads included): only then may it fork a worker (pipeline/scheduler.py: forked_worker), since a lock
    another thread held at the fork instant would be held for ever in the child. False elsewhere: without
    /proc a C library's threads cannot be counted, and the local workers are spawned there (a spawned
    worker runs an unguarded caller's main module again)."""
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:  # not Linux
        return False


def direct_children() -> set[int]:
    """The process ids of this process's children (Linux's /proc; empty elsewhere)."""
    pids: set[int] = set()
    with contextlib.suppress(OSError):
        for tid in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{tid}/children") as f:
                pids.update(map(int, f.read().split()))
    return pids


def stop_children(spared: set[int], grace: float = 1.0) -> None:
    """SIGTERM to every descendant of this process but ``spared`` children and theirs, SIGKILL to those
    still there after ``grace`` s."""
    import psutil

    victims = []
    for pid in direct_children() - spared:
        with contextlib.suppress(psutil.Error):
            child = psutil.Process(pid)
            victims += [child, *child.children(recursive=True)]
    victims = [v for v in victims if not _leaves_by_itself(v)]
    for victim in victims:
        with contextlib.suppress(psutil.Error):
            victim.terminate()
    _, alive = psutil.wait_procs(victims, timeout=grace)
    for victim in alive:
        with contextlib.suppress(psutil.Error):
            victim.kill()
    psutil.wait_procs(alive, timeout=grace)


def _leaves_by_itself(process: object) -> bool:
    import psutil

    try:
        return any(_LEAVES_BY_ITSELF in part for part in process.cmdline())  # type: ignore[attr-defined]
    except psutil.Error:
        return False
