"""Tasks on local worker processes (pipeline/scheduler.py, dask's processes scheduler): each task, its
inputs and its result pickled by cloudpickle, as dask pickles them, so that what pickle cannot name (a
function made in a function) runs there too."""

from __future__ import annotations

import subprocess
import sys

import dask

from msprobe_dask.pipeline import scheduler
from msprobe_dask.pipeline.scheduler import RunOptions


def test_a_function_made_in_a_function_runs_on_local_worker_processes() -> None:
    offset = 40

    def add(x: int) -> int:
        return x + offset

    def made_here(x: int) -> object:  # (a result pickle cannot name either)
        return lambda: x

    values = scheduler._local(RunOptions(workers=2))([dask.delayed(add)(2), dask.delayed(made_here)(7)])
    assert values[0] == 42
    assert values[1]() == 7


def _started(*after: object) -> int:
    import time

    return time.monotonic_ns()


def test_by_priority_a_local_worker_runs_the_ready_tasks_highest_priority_first() -> None:
    """(RunOptions.by_priority: as a cluster sends them; dask's local scheduler follows its own order,
    and queues tasks ahead of a worker's next.) One worker process, six tasks ready at once: they start
    in the order of their priority annotations, a task without one at 0."""
    first = dask.delayed(_started)(dask_key_name="first")
    priorities = {"p-3": -3, "p5": 5, "none": None, "p-1": -1, "p2": 2}
    tasks = []
    for key, priority in priorities.items():
        if priority is None:
            tasks.append(dask.delayed(_started)(first, dask_key_name=key))
            continue
        with dask.annotate(priority=priority):
            tasks.append(dask.delayed(_started)(first, dask_key_name=key))
    starts = scheduler._local(RunOptions(workers=1, by_priority=True))(tasks)
    assert [key for _, key in sorted(zip(starts, priorities))] == ["p5", "p2", "none", "p-1", "p-3"]


COLLECTOR_LOCK_HELD = """
import threading
import time

import dask

from msprobe_dask.graph import gcpause
from msprobe_dask.pipeline.scheduler import RunOptions, computing


def paused() -> bool:
    with gcpause.collections_paused():
        return True


def other_thread() -> None:  # (a build beside the worker's start, inside the lock a moment)
    with gcpause._lock:
        held.set()
        time.sleep(0.5)


held = threading.Event()
t = threading.Thread(target=other_thread)
t.start()
held.wait()
with computing(RunOptions(workers=1)) as compute:
    print(compute([dask.delayed(paused)()]))
t.join()
"""


def test_a_worker_forked_beside_a_build_does_not_wait_on_the_collector_pause_lock() -> None:
    """A worker forked while this process's other threads run (``--workers``: dask's processes scheduler
    forks at its first task, a Python caller's threads running): the collector pause's lock, held by one
    of them at the fork, would be held in the worker for ever; the fork waits for it (gcpause)."""
    proc = subprocess.run(
        [sys.executable, "-c", COLLECTOR_LOCK_HELD], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["[True]"], proc.stdout
