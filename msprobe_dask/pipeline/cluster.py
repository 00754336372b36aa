"""A run on a running dask cluster (``--scheduler ADDRESS``; ``scheduler.computing`` chooses it): its
address checked to answer as a dask scheduler, its workers to run this install's code, and the run
ended in one line when the cluster has no worker left or a task's error cannot come back."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from msprobe_dask.errors import ClusterError, ConfigError, Terminated

if TYPE_CHECKING:  # (stages imports dask: only when a run shows progress)
    from msprobe_dask.pipeline.stages import StageLog

SCHEDULER_ANSWER_SECONDS = 10
"""A ``--scheduler`` address is refused when its connection is not made in this many seconds, or its
handshake not read in 1.5 times as many."""

WORKERLESS_SECONDS = 20.0
"""On a cluster, a run that has had no worker for this long ends (the scheduler would wait forever)."""
_POLL_SECONDS = 1.0


@contextlib.contextmanager
def client_quiet() -> Iterator[None]:
    """distributed says nothing in the log while a run on a running cluster lasts: its client's
    connection to the scheduler lost or refused when the run's last worker was killed (an ERROR with
    its reconnect's traceback, or "Batched Comm Closed" with one, seen under load) ends the run, which
    says why in its one line."""
    import logging

    distributed_log = logging.getLogger("distributed")
    level = distributed_log.level
    distributed_log.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        distributed_log.setLevel(level)


@contextlib.contextmanager
def on_cluster(
    address: str,
    progress: bool,
    stage_log: StageLog | None,
    on_progress: Callable[[float], None] | None,
) -> Iterator[Callable[[Sequence[Any]], list[Any]]]:
    """Yield ``compute(delayed_objects) -> results`` on the dask scheduler at ``address`` (``RunOptions``'
    address, progress, stage_log and on_progress)."""
    from distributed import Client, KilledWorker

    _answers_as_a_scheduler(address)
    try:
        client = Client(address, timeout=f"{SCHEDULER_ANSWER_SECONDS}s")
    except (OSError, ValueError) as exc:  # ValueError: not an address (no port...)
        raise ConfigError(address, f"cannot reach the dask scheduler: {exc}") from None
    try:
        _check_workers_code(client, address)
        if progress:
            announce_dashboard(client, stage_log)

        def compute_distributed(objs: Sequence[Any]) -> list[Any]:
            futures = client.compute(list(objs))
            try:
                if progress and sys.stderr.isatty():  # (a bar, on a terminal only)
                    from distributed import progress as progress_bar

                    progress_bar(futures)
                _wait_while_workers(client, futures, address)
                results = client.gather(futures)
            except (KeyboardInterrupt, Terminated):
                raise  # closing the client releases them; a cancel now would have each worker log it
            except KilledWorker as exc:
                client.cancel(futures)
                raise ClusterError(
                    address, f"worker processes died running one task, each time (out of memory?): {exc}"
                ) from None
            except BaseException:
                client.cancel(futures)
                raise
            if on_progress is not None:
                on_progress(100.0)
            return results

        yield compute_distributed
    finally:
        with contextlib.suppress(Exception):
            client.close(timeout=5)


def _answers_as_a_scheduler(address: str) -> None:
    """Refuse in one line an ``address`` where no dask scheduler answers within SCHEDULER_ANSWER_SECONDS.
    distributed's Client waits without end for the handshake of a server that takes the connection and
    says nothing, and reads another server's answer as the lengths of dask's frames (an HTTP server's:
    an allocation of exabytes, a MemoryError); so the handshake is tried first, under a deadline."""
    from distributed.comm import connect
    from distributed.comm.addressing import parse_address, parse_host_port
    from distributed.security import Security
    from distributed.utils import LoopRunner, sync

    try:
        scheme, location = parse_address(address)
        if scheme in ("tcp", "tls"):
            parse_host_port(location)
    except ValueError as exc:  # no port...
        raise ConfigError(address, f"cannot reach the dask scheduler: {exc}") from None

    async def handshake() -> None:
        options = Security().get_connection_args("client")
        comm = await connect(address, timeout=SCHEDULER_ANSWER_SECONDS, **options)
        await comm.close()

    runner = LoopRunner()
    runner.start()
    try:
        sync(runner.loop, handshake, callback_timeout=1.5 * SCHEDULER_ANSWER_SECONDS)
    except TimeoutError:  # the deadline, over the handshake
        problem = f"no dask scheduler answered in {1.5 * SCHEDULER_ANSWER_SECONDS:g} s"
        raise ConfigError(address, problem) from None
    except (OSError, TypeError) as exc:  # refused, closed, TLS without its configuration...
        raise ConfigError(address, f"cannot reach the dask scheduler: {exc}") from None
    except Exception as exc:  # an answer that is not dask's protocol
        problem = f"the server there does not answer as a dask scheduler ({type(exc).__name__})"
        raise ConfigError(address, problem) from None
    finally:
        runner.stop()


RESTART = "start the workers from this install (or run the command from theirs)"


def _check_workers_code(client: Any, address: str) -> None:
    """Refuse a cluster whose workers run other msprobe_dask sources than this command's (started from
    another checkout or release, or before it was updated): their answers could differ. Workers that
    join after the start are not checked."""
    from msprobe_dask.pipeline.code_digest import code_digest

    try:
        digests = client.run(code_digest)
    except Exception as exc:  # a worker without this module or function: older sources
        problem = f"{type(exc).__name__}: {exc}".splitlines()[0]
        raise ClusterError(
            address, f"a dask worker cannot run this msprobe_dask's code ({problem}): {RESTART}"
        ) from None
    other = sorted(worker for worker, digest in digests.items() if digest != code_digest())
    if other:
        raise ClusterError(
            address, f"dask worker {other[0]} runs other msprobe_dask sources than this command: {RESTART}"
        )


def announce_dashboard(client: Any, log: StageLog | None = None) -> None:
    """Print the cluster's dashboard link on stderr, if its scheduler serves one (bokeh installed): as
    a line of the command's stage ``log``, if given (held while the command is young, so that a bad
    input still ends with its one error line alone)."""
    try:
        link = "dashboard" in client.scheduler_info().get("services", {}) and client.dashboard_link
    except Exception:  # a scheduler too old or gone: nothing to show
        link = None
    if not link:
        return
    if log is not None:
        log.line(f"dask dashboard: {link}")
    else:
        print(f"dask dashboard: {link}", file=sys.stderr)


def _wait_while_workers(client: Any, futures: list[Any], address: str) -> None:
    """Wait for ``futures``; raise ClusterError once the cluster has had no worker (or no scheduler)
    for WORKERLESS_SECONDS (a worker counts once seen on two polls in a row). A worker lost while others
    remain costs only its tasks, run again."""
    from distributed import wait

    workerless_since: float | None = None
    erred_before = False
    polled: set[str] = set()
    while True:
        try:
            wait(futures, timeout=_POLL_SECONDS)
            return
        except TimeoutError:
            pass
        # a task's error the client could not take (a traceback too deep to pickle, as a RecursionError's):
        # its future would wait for ever; seen on two polls in a row, so that an error on its way is not
        erred = _erred_unseen(client, futures)
        if erred and erred_before:
            raise RuntimeError(f"task {erred} failed, and its error could not be sent back")
        erred_before = bool(erred)
        try:
            workers = set(client.nthreads())
        except Exception:  # the scheduler is gone too
            workers = set()
        # a worker counts once it has lived from one poll to the next: a nanny's successors, each killed
        # as it starts (out of memory at once), would otherwise keep the run waiting for ever
        steady, polled = workers & polled, workers
        now = time.monotonic()
        if steady:
            workerless_since = None
        elif workerless_since is None:
            workerless_since = now
        elif now - workerless_since >= WORKERLESS_SECONDS:
            raise ClusterError(
                address, f"no dask worker left for {WORKERLESS_SECONDS:.0f} s; the run is abandoned"
            )


def _erred_tasks(dask_scheduler: Any, keys: list[Any]) -> list[Any]:
    """(Run on the scheduler.) The keys among ``keys`` whose task ended in an error."""
    return [key for key in keys if getattr(dask_scheduler.tasks.get(key), "state", None) == "erred"]


def _erred_unseen(client: Any, futures: list[Any]) -> str:
    """The first future whose task the scheduler says failed while the client still waits for it."""
    pending = [f.key for f in futures if f.status == "pending"]
    try:
        erred = client.run_on_scheduler(_erred_tasks, keys=pending) if pending else []
    except Exception:  # a scheduler gone, or one that refuses to run functions: not this check's news
        return ""
    return str(erred[0]) if erred else ""
