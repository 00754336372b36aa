"""Stopping what a run started: every child process (dask workers, their nannies, forked helpers)
this process started during the run, when the run ends early (a signal, an error), so that nothing is
left running. Children it had before the run (a caller's own cluster) are spared."""

from __future__ import annotations

import contextlib
import os
import signal

# multiprocessing's resource tracker ignores SIGTERM and leaves by itself when this process is gone,
# after removing what the workers left (semaphores, shared memory): it is left to do so
_LEAVES_BY_ITSELF = "multiprocessing.resource_tracker"


def ignore_ctrl_c() -> None:
    """For a worker process: ignore SIGINT, so that a Ctrl-C at the terminal (sent to the whole
    process group) reaches only the run's own process, which stops the workers in order, instead of
    each worker printing a traceback."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


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
