"""A dask local-scheduler callback that reports progress as a number, for logs rather than a bar."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dask.callbacks import Callback


class TaskProgress(Callback):
    """Call ``report(percent)`` each time the share of finished tasks grows by a whole percent."""

    def __init__(self, report: Callable[[float], None]):
        super().__init__()
        self._report = report
        self._last = -1

    def _posttask(self, key: Any, result: Any, dsk: Any, state: dict[str, Any], worker_id: Any) -> None:
        done = len(state["finished"])
        total = done + sum(len(state[k]) for k in ("ready", "waiting", "running"))
        percent = 100 * done // total if total else 100
        if percent > self._last:
            self._last = percent
            self._report(float(percent))
