"""Lines in msprobe's own log format, for the flags that ask for msprobe's log lines
(``-progress_log``, ``-tensor_log``): ``2026-12-06 05:45:46 (3374) [INFO] MESSAGE`` on stderr."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable
from typing import Any


def log_info(message: str) -> None:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    print(f"{stamp} ({os.getpid()}) [INFO] {message}", file=sys.stderr, flush=True)


def log_tensor_compare(name: object, metrics: Iterable[tuple[str, Any]], message: str = "") -> None:
    """``-tensor_log``'s two lines for one row, as msprobe's compare engine logs them (compare.md,
    graph_visualize.md §3.3): ``start compare: NAME`` and ``[NAME] Compare result: Cosine x, ..., MSG``."""
    cells = "".join(f"{column} {value}, " for column, value in metrics)
    log_info(f"start compare: {name}")
    log_info(f"[{name}] Compare result: {cells}{message}")
