"""``rare_full_collections()``: a context in which Python's cyclic garbage collector seldom runs
(``rare_collections_from_now()``: the same for the rest of a worker process's life);
``collections_paused()``: one in which it does not run, for making objects that all live on.

A dump parses into millions of long-lived dicts and lists. With the default thresholds the collector
walks all of them again each time the heap has grown by a quarter: seven full passes that free nothing
and take a fifth of a 20,000-node compare (measured: 1.0 s of 6.8 s). Young-generation passes stay,
only less often; the old thresholds come back on exit.

A graph's nodes are such objects: six per node, which each young-generation pass would walk once
and each middle-generation pass again (0.07 s of a 100,000-node build). Made with the collector
paused, they are then frozen (``gc.freeze``): no later pass walks them. rare_full_collections
unfreezes them on exit.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

THRESHOLDS = (100_000, 50, 100)
_pauses = 0  # collections_paused contexts open, over all threads
_was_enabled = False
_lock = threading.Lock()


@contextmanager
def rare_full_collections() -> Iterator[None]:
    old = gc.get_threshold()
    gc.set_threshold(*(max(a, b) for a, b in zip(old, THRESHOLDS)))
    try:
        yield
    finally:
        gc.set_threshold(*old)
        gc.unfreeze()


def rare_collections_from_now() -> None:
    """What rare_full_collections gives, for the rest of this process's life: called by each graph
    task, for a dask worker process, which runs them outside that context (measured: 2 s of CPU of a
    100,000-node compare on one worker). Inside it (the tasks run in this process), nothing changes."""
    old = gc.get_threshold()
    new = tuple(max(a, b) for a, b in zip(old, THRESHOLDS))
    if new != old:
        gc.set_threshold(*new)


@contextmanager
def collections_paused() -> Iterator[None]:
    """No collection inside (contexts may nest and overlap in threads); what was made inside is frozen
    when the last one ends."""
    global _pauses, _was_enabled
    with _lock:
        if _pauses == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _pauses += 1
    try:
        yield
    finally:
        with _lock:
            _pauses -= 1
            if _pauses == 0:
                gc.freeze()
                if _was_enabled:
                    gc.enable()
