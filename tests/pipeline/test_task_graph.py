"""pipeline/task_graph.py: tasks laid out in one dict, one Delayed of one layer at the end."""

from __future__ import annotations

import math

import dask
import pytest

from msprobe_dask.pipeline.task_graph import TaskGraph


class Pair:
    def __init__(self, left: int, right: int) -> None:
        self.left, self.right = left, right


def _pair(a: int, b: int) -> Pair:
    return Pair(a, b)


def _split(n: int) -> list[int]:
    return list(range(n))


def _add(*values: int) -> int:
    return sum(values)


@pytest.mark.parametrize("scheduler", ["sync", "threads", "processes"])
def test_calls_items_and_attributes_compute_as_plain_calls(scheduler: str) -> None:
    graph = TaskGraph()
    items = graph.call_many(_split, 4, 4)
    pair = graph.call(_pair, items[1], items[3])
    total = graph.call(_add, graph.attr(pair, "left"), graph.attr(pair, "right"), 10, *items)
    (value,) = dask.compute(graph.delayed(total), scheduler=scheduler)
    assert value == 1 + 3 + 10 + 0 + 1 + 2 + 3


@pytest.mark.parametrize("scheduler", ["sync", "threads", "processes"])
def test_inlined_items_have_no_task_of_their_own_and_compute_the_same(scheduler: str) -> None:
    graph = TaskGraph()
    items = graph.call_many(_split, 4, 4, inline=(0, 2))
    (only,) = graph.call_many(_split, 1, 1)  # (the one item of a value: taken from it)
    total = graph.call(_add, *items, only, graph.attr(graph.call(_pair, items[0], items[2]), "right"))
    chain = graph.delayed(total)
    assert sum(str(key).startswith("getitem") for key in chain.dask) == 2  # items 1 and 3
    assert dask.compute(chain, scheduler=scheduler) == (0 + 1 + 2 + 3 + 0 + 2,)


@pytest.mark.parametrize("scheduler", ["sync", "threads", "processes"])
def test_a_graph_not_shared_takes_every_item_but_those_apart_from_its_whole(scheduler: str) -> None:
    graph = TaskGraph(shared=False)
    items = graph.call_many(_split, 4, 4, apart=(3,))
    pair = graph.call(_pair, items[0], items[1])
    total = graph.call(_add, *items, graph.attr(pair, "right"))
    chain = graph.delayed(total)
    assert [str(key).split("-")[0] for key in chain.dask if str(key).startswith(("getitem", "getattr"))] == [
        "getitem"
    ]
    assert dask.compute(chain, scheduler=scheduler) == (0 + 1 + 2 + 3 + 1,)


def test_a_chain_of_many_tasks_is_one_layer_and_runs() -> None:
    graph = TaskGraph()
    ref = graph.call(_add, 0)
    for i in range(10_000):  # (dask.delayed: 10,000 layers, each merged into the next: minutes)
        ref = graph.call(_add, ref, i)
    chain = graph.delayed(ref)
    assert len(chain.dask.layers) == 1 and len(chain.dask) == 10_001
    assert chain.compute(scheduler="sync") == sum(range(10_000))


def _blocks(n: int, size: int) -> tuple[bytes, ...]:
    return tuple(bytes([i % 256]) * size for i in range(n))


def _first_byte(block: bytes) -> int:
    return block[0]


@pytest.mark.parametrize("scheduler", ["sync", "threads", "processes"])
@pytest.mark.parametrize("apart", [(), (5, 6, 30)])
def test_a_graph_not_shared_reads_many_items_through_groups_and_computes_the_same(
    scheduler: str, apart: tuple[int, ...]
) -> None:
    graph = TaskGraph(shared=False)
    items = graph.call_many(_blocks, 40, 40, 3, apart=apart, inline=(39,))
    total = graph.call(_add, *(graph.call(_first_byte, item) for item in items))
    chain = graph.delayed(total)
    groups = [key for key in chain.dask if str(key).startswith("items-")]
    assert len(groups) == 6  # 40 items in groups of 7 (the inline item is read from the whole)
    assert sum(str(key).startswith("getitem") for key in chain.dask) == len(apart)
    assert dask.compute(chain, scheduler=scheduler) == (sum(range(40)),)


_SENT: list[int] = []  # (in this process: the bytes pickled into tasks)


def _counted_dumps(value: object) -> bytes:
    import cloudpickle

    data: bytes = cloudpickle.dumps(value)
    _SENT.append(len(data))
    return data


@pytest.mark.parametrize("grouped", [False, True])
def test_the_bytes_sent_to_worker_processes_grow_with_the_root_of_the_readers_of_a_whole(
    grouped: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each of n readers of one item of a whole of n items: under dask's processes scheduler, where a
    graph is not shared, each was sent the whole (n times its size); through groups, each whole
    reaches sqrt(n) group tasks and each reader its group."""
    import dask.multiprocessing

    from msprobe_dask.pipeline import task_graph

    if not grouped:
        monkeypatch.setattr(task_graph, "GROUPED_FROM_ITEMS", 10**9)
    n, size = 100, 10_000
    graph = TaskGraph(shared=False)
    items = graph.call_many(_blocks, n, n, size)
    total = graph.call(_add, *(graph.call(_first_byte, item) for item in items))
    _SENT.clear()
    (value,) = dask.compute(
        graph.delayed(total),
        scheduler=dask.multiprocessing.get,
        num_workers=2,
        func_dumps=_counted_dumps,
        chunksize=1,
    )
    assert value == sum(i % 256 for i in range(n))
    whole = n * size
    if grouped:
        assert sum(_SENT) < 3 * math.isqrt(n) * whole
    else:
        assert sum(_SENT) > n * whole
