"""Stopping what a run started: every child process (dask workers, their nannies, forked helpers) of
this process, when a run ends early (a signal, an error), so that nothing is left running."""

from __future__ import annotations

import contextlib


def stop_children(grace: float = 3.0) -> None:
    """SIGTERM to every descendant of this process, SIGKILL to those still there after ``grace`` s."""
    import psutil

    with contextlib.suppress(psutil.Error):
        children = psutil.Process().children(recursive=True)
        for child in children:
            with contextlib.suppress(psutil.Error):
                child.terminate()
        _, alive = psutil.wait_procs(children, timeout=grace)
        for child in alive:
            with contextlib.suppress(psutil.Error):
                child.kill()
        psutil.wait_procs(alive, timeout=grace)
