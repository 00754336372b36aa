"""Where the graph runs: the local threaded scheduler by default, a LocalCluster of worker processes
with ``workers``, or a running cluster with ``address`` (``tcp://host:8786``)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from msprobe_dask.errors import ConfigError

if TYPE_CHECKING:  # (stages imports dask: only when a run shows progress)
    from msprobe_dask.pipeline.stages import StageLog

Compute = Callable[[Sequence[Any]], list[Any]]


@dataclass(frozen=True, slots=True)
class RunOptions:
    address: str | None = None  # a running dask scheduler
    workers: int = 0  # >0: start a LocalCluster with that many worker processes
    progress: bool = False  # show progress: named stages (a bar on a cluster, on a terminal only)
    # called with the percentage of finished tasks (local schedulers: as tasks finish; on a cluster:
    # at the end only) - for progress logs that are not a bar
    on_progress: Callable[[float], None] | None = None
    stage_log: StageLog | None = None  # the command's stage lines (pipeline/stages.py)

    @property
    def in_this_process(self) -> bool:
        """Tasks run in threads of this process (no cluster)."""
        return not (self.address or self.workers)

    def __post_init__(self) -> None:
        if self.workers < 0:  # distributed's LocalCluster would wait forever for them
            raise ConfigError(
                "--workers", f"must be 0 (no cluster) or a number of processes, got {self.workers}"
            )


def _show_progress(options: RunOptions) -> bool:
    return options.progress and sys.stderr.isatty()


@contextlib.contextmanager
def computing(options: RunOptions) -> Iterator[Compute]:
    """Yield ``compute(delayed_objects) -> results`` bound to the chosen scheduler."""
    import dask

    if options.address or options.workers:
        from distributed import Client, LocalCluster

        cluster = None
        try:
            if options.address:
                client = Client(options.address, timeout="10s")
            else:
                cluster = LocalCluster(
                    n_workers=options.workers, threads_per_worker=1, dashboard_address=None, processes=True
                )
                client = Client(cluster)
        except (OSError, ValueError) as exc:  # ValueError: not an address (no port...)
            raise ConfigError(options.address, f"cannot reach the dask scheduler: {exc}") from None
        try:

            def compute_distributed(objs: Sequence[Any]) -> list[Any]:
                futures = client.compute(list(objs))
                if _show_progress(options):
                    from distributed import progress

                    progress(futures)
                results = client.gather(futures)
                if options.on_progress is not None:
                    options.on_progress(100.0)
                return results

            yield compute_distributed
        finally:
            client.close()
            if cluster is not None:
                cluster.close()
        return

    from dask.threaded import get as threaded_get  # a callable: dask then skips importing distributed

    def compute_local(objs: Sequence[Any]) -> list[Any]:
        with contextlib.ExitStack() as watchers:
            if options.progress:  # named stages: a live line on a terminal, else a line per stage
                from msprobe_dask.pipeline.stages import StageLog, StageProgress

                log = options.stage_log or StageLog(hold_seconds=0)
                watchers.enter_context(StageProgress(log, live=sys.stderr.isatty()))
            if options.on_progress is not None:
                from msprobe_dask.pipeline.task_progress import TaskProgress

                watchers.enter_context(TaskProgress(options.on_progress))
            return list(dask.compute(*objs, scheduler=threaded_get))

    yield compute_local
