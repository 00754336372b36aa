"""A graph of many tasks laid out in time linear in their number.

``dask.delayed`` gives each new Delayed a graph merged from those of its arguments, so a graph of n
tasks costs O(n^2) to lay out, and its optimization culls every one of its n layers: a rank cut into
parts of one entry each (~10k tasks) took 15-45 s of CPU before its first task ran. A ``TaskGraph``
holds plain ``dask.task_spec`` tasks in one dict and becomes one Delayed of one layer at the end.
"""

from __future__ import annotations

import math
import operator
import uuid
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dask.typing import Key


GROUPED_FROM_ITEMS = 9
"""Where a graph's task values pass through the process that schedules (not ``shared``), the items of a
value of at least this many (besides those read from the whole: ``inline``) are read through groups
(``TaskGraph._groups``): 3 groups of 3 and more."""


def _slice(value: Sequence[Any], lo: int, hi: int) -> tuple[Any, ...]:
    return tuple(value[lo:hi])


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
        values, whose wholes its reader would hold all at once (each part's keys, by the match).
        Where the graph is not ``shared`` and the items are many (``GROUPED_FROM_ITEMS``), they are
        taken from groups of consecutive items (``_groups``), not from the whole."""
        from dask.task_spec import Task

        whole = self.call(func, *args)
        grouped = not self.shared and nout - len(inline) >= GROUPED_FROM_ITEMS
        groups = self._groups(whole, nout) if grouped else None
        items = []
        for i in range(nout):
            source, at = (whole, i) if groups is None or i in inline else groups(i)
            if nout == 1 or i in inline or not (self.shared or i in apart):
                items.append(Task(None, operator.getitem, source, at))
            else:
                items.append(self._add("getitem", operator.getitem, (source, at)))
        return items

    def _groups(self, whole: Any, nout: int) -> Callable[[int], tuple[Any, int]]:
        """``(group, place)`` of each item of ``whole``'s ``nout``: the items cut into about sqrt(nout)
        groups of consecutive items, each group a task of its own. Each of n readers of one item would
        be sent the whole value, n times its size, and the wholes cut into n items grow with the input
        (a part's spans, stacks, pairs found): a rank's traffic grew as its square (1M entries a side,
        105 parts: 24 GB pickled through the process that schedules, 1.4 GB at 200,000). Through
        groups each whole is sent to sqrt(n) group tasks and each reader gets its group: 2 sqrt(n)
        times the whole's size."""
        size = math.isqrt(nout - 1) + 1
        refs = [self._add("items", _slice, (whole, lo, lo + size)) for lo in range(0, nout, size)]
        return lambda i: (refs[i // size], i % size)

    def attr(self, ref: Any, name: str) -> Any:
        """The reference of attribute ``name`` of ``ref``'s value (taken from it by each reader, where
        the graph is not ``shared``: see call_many)."""
        from dask.task_spec import Task

        return self._add("getattr", getattr, (ref, name)) if self.shared else Task(None, getattr, ref, name)

    def delayed(self, ref: Any) -> Any:
        """The Delayed of ``ref``'s value, its graph every task added so far (one layer)."""
        return self.delayeds(ref)[0]

    def delayeds(self, first: Any, *refs: Any) -> list[Any]:
        """The Delayeds of these references' values, all of one graph (``delayed``'s): computed together,
        each task runs once and each value comes back as it is (a task that gathered them would be sent
        them all)."""
        from dask.delayed import Delayed
        from dask.highlevelgraph import HighLevelGraph

        graph = HighLevelGraph.from_collections(first.key, dict(self.tasks), dependencies=())
        return [Delayed(ref.key, graph, layer=first.key) for ref in (first, *refs)]
