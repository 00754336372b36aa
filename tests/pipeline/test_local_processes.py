"""Tasks on local worker processes (pipeline/scheduler.py, dask's processes scheduler): each task, its
inputs and its result pickled by cloudpickle, as dask pickles them, so that what pickle cannot name (a
function made in a function) runs there too."""

from __future__ import annotations

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
