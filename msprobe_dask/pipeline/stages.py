"""Progress by named stage: "parse and match 3/8 ranks", "tensor metrics 12/40 batches", "write vis.db".

A dask local-scheduler callback that sorts the graph's tasks into stages by their key's name (the
function or ``dask_key_name`` that made them) and counts each stage's finished tasks. On a terminal it
keeps one line up to date; elsewhere (a log, a pipe) it writes one line per stage when the stage is
done, with its count and its time. Tasks of no named stage are not shown.

Not on a terminal, the command line's ``StageLog`` holds back the lines of its first ``HOLD_SECONDS``
until the command has succeeded (``close``): a short run that fails on a bad input ends with its one
error line alone, and a long run still logs each stage as it ends.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from dask.callbacks import Callback
from dask.utils import key_split


class Stage(NamedTuple):
    name: str
    unit: str


# the key name of a task (dask.utils.key_split) -> its stage; several names may share one stage
STAGES = {
    "match_and_finish": Stage("parse and match", "ranks"),
    "records_task": Stage("parse and match", "ranks"),
    "match_parts": Stage("parse and match", "ranks"),  # pipeline/part_match.py: a rank's parts
    "plan_head": Stage("parse and match", "ranks"),  # pipeline/part_keys.py: the match cut into partitions
    "spooled_part": Stage("judge", "parts"),  # pipeline/part_file.py: a table part, its bytes spooled
    "compare_job": Stage("kernel compare", "rank-steps"),
    "convert_files": Stage("convert", "batches"),
    "measure_batch": Stage("tensor metrics", "batches"),
    "as_batch": Stage("tensor metrics", "batches"),
    "build": Stage("build graphs", "graphs"),
    "merge": Stage("build and merge graphs", "sides"),  # graph/merge/plan.py: a side's ranks, a step
    "prepare": Stage("match graphs", "ranks"),
    "rank": Stage("build and compare graphs", "ranks"),  # graph/held.py: a (step, rank) in one task
    "rows": Stage("graph rows", "chunks"),
    "finish": Stage("compare graphs", "ranks"),
    "link-ranks": Stage("link ranks", ""),
    "insert": Stage(
        "insert rows", "batches"
    ),  # graph/write_chain.py: a turn's chunks (CHUNKS_PER_TURN) a task
    "write-visdb": Stage("write vis.db", ""),
    "write-json": Stage("write json", ""),
}
REDRAW_SECONDS = 0.1
HOLD_SECONDS = 5.0


def write_stderr(text: str) -> None:
    sys.stderr.write(text)
    sys.stderr.flush()


def stage_count(name: str, done: int, total: int, unit: str) -> str:
    return f"{name} {done:,}/{total:,}" + (f" {unit}" if unit else "")


def stage_line(name: str, done: int, total: int, unit: str, seconds: float) -> str:
    """A finished stage, as logged: ``tensor metrics 40/40 batches (1.2 s)``."""
    return f"{stage_count(name, done, total, unit)} ({seconds:.1f} s)"


def stage_of(key: Any) -> Stage | None:
    return STAGES.get(key_split(key))


class StageLog:
    """The stage lines of one command: written, or held while the command is young (see above)."""

    def __init__(
        self, write: Callable[[str], None] = write_stderr, hold_seconds: float = HOLD_SECONDS
    ) -> None:
        self.write = write
        self._hold_until = time.perf_counter() + hold_seconds
        self._held: list[str] = []

    def line(self, text: str) -> None:
        self._held.append(text)
        if time.perf_counter() >= self._hold_until:
            self.close()

    def close(self) -> None:
        """The command succeeded: write what is held."""
        for text in self._held:
            self.write(text + "\n")
        self._held = []


class StageProgress(Callback):
    """``log``: where the lines go; ``live``: one line redrawn (a terminal) or a line per stage."""

    def __init__(self, log: StageLog, live: bool) -> None:
        super().__init__()
        self._log = log
        self._live = live
        self._total: dict[Stage, int] = {}
        self._done: dict[Stage, int] = {}
        self._started: dict[Stage, float] = {}
        self._drawn = 0.0

    def _start_state(self, dsk: Any, state: dict[str, Any]) -> None:
        self._total, self._done, self._started = {}, {}, {}
        for key in dsk:
            stage = stage_of(key)
            if stage is not None:
                self._total[stage] = self._total.get(stage, 0) + 1
                self._done.setdefault(stage, 0)

    def _pretask(self, key: Any, dsk: Any, state: dict[str, Any]) -> None:
        stage = stage_of(key)
        if stage is not None:
            self._started.setdefault(stage, time.perf_counter())

    def _posttask(self, key: Any, result: Any, dsk: Any, state: dict[str, Any], worker_id: Any) -> None:
        stage = stage_of(key)
        if stage is None:
            return
        self._done[stage] += 1
        if self._live:
            now = time.perf_counter()
            if now - self._drawn >= REDRAW_SECONDS or self._done[stage] == self._total[stage]:
                self._drawn = now
                self._log.write(
                    "\r" + " | ".join(self._count(s) for s in self._total if s in self._started) + "\x1b[K"
                )
        elif self._done[stage] == self._total[stage]:
            seconds = time.perf_counter() - self._started[stage]
            self._log.line(stage_line(stage.name, self._done[stage], self._total[stage], stage.unit, seconds))

    def _finish(self, dsk: Any, state: dict[str, Any], errored: bool) -> None:
        if self._live and self._started:
            self._log.write("\r\x1b[K")

    def _count(self, stage: Stage) -> str:
        return stage_count(stage.name, self._done[stage], self._total[stage], stage.unit)
