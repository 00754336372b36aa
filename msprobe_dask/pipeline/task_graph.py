"""A graph of many tasks laid out in time linear in their number.

``dask.delayed`` gives each new Delayed a graph merged from those of its arguments, so a graph of n
tasks costs O(n^2) to lay out, and its optimization culls every one of its n layers: a rank cut into
parts of one entry each (~10k tasks) took 15-45 s of CPU before its first task ran. A ``TaskGraph``
holds plain ``dask.task_spec`` tasks in one dict and becomes one Delayed of one layer at the end.
"""

from __future__ import annotations

import operator
import uuid
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dask.typing import Key


class TaskGraph:
    """Tasks added one by one (``call``), each naming the tasks it reads by the references ``call``
    returned; ``delayed`` makes the Delayed of one task's value, with every task added so far."""

    def __init__(self, shared: bool = True) -> None:
        self.tasks: dict[Key, Any] = {}  # key -> its dask.task_spec.Task
        # whether a task's value reaches the tasks that read it without passing through the process that
        # schedules (threads of this process, a cluster's workers): RunOptions.shares_results
        self.shared = shared

    def _add(self, name: str, func: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        from dask.task_spec import Task, TaskRef

        key = f"{name}-{uuid.uuid4().hex}"  # (a task that reads files: never the same as another)
        self.tasks[key] = Task(key, func, *args)
        return TaskRef(key)

    def call(self, func: Callable[..., Any], *args: Any) -> Any:
        """The reference of ``func(*args)``'s value; an argument that is a reference is that task's value."""
        return self._add(func.__name__, func, args)

    def call_many(
        self,
        func: Callable[..., Any],
        nout: int,
        *args: Any,
        inline: Collection[int] = (),
        apart: Collection[int] = (),
    ) -> list[Any]:
        """The references of the ``nout`` items of ``func(*args)``'s value (a sequence). An item taken
        from the whole has no task of its own: each task that reads it is sent the whole value. So are
        the items in ``inline`` (nearly all of the value) and the item of a one-item value; where the
        graph is not ``shared``, every item but those in ``apart``: dask's processes scheduler pickles
        each task's inputs through the process that schedules, so an item's own task would be sent the
        whole value there, and the item back, for its reader (a rank of 50,400 entries a side: 140 such
        tasks of its 220, 94 MB pickled). An item in ``apart`` is read with the items of many other
        values, whose wholes its reader would hold all at once (each part's keys, by the match)."""
        from dask.task_spec import Task

        whole = self.call(func, *args)
        return [
            Task(None, operator.getitem, whole, i)
            if nout == 1 or i in inline or not (self.shared or i in apart)
            else self._add("getitem", operator.getitem, (whole, i))
            for i in range(nout)
        ]

    def attr(self, ref: Any, name: str) -> Any:
        """The reference of attribute ``name`` of ``ref``'s value (taken from it by each reader, where
        the graph is not ``shared``: see call_many)."""
        from dask.task_spec import Task

        return self._add("getattr", getattr, (ref, name)) if self.shared else Task(None, getattr, ref, name)

    def delayed(self, ref: Any) -> Any:
        """The Delayed of ``ref``'s value, its graph every task added so far (one layer)."""
        from dask.delayed import Delayed
        from dask.highlevelgraph import HighLevelGraph

        return Delayed(ref.key, HighLevelGraph.from_collections(ref.key, dict(self.tasks), dependencies=()))
