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
unfreezes them on exit; in a dask worker process, which lives on after the run, each graph task's
``rare_collections_from_now()`` unfreezes what earlier tasks froze (a frozen object in a reference
cycle, such as a node and its parent, would never be freed).
"""

from __future__ import annotations

import gc
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

THRESHOLDS = (100_000, 50, 100)
_pauses = 0  # collections_paused contexts open, over all threads
_rare_contexts = 0  # rare_full_collections contexts open (the run's own process)
_was_enabled = False
_lock = threading.Lock()
# a process forked while another thread holds the lock would hold it for ever (the local workers of dask's
# processes scheduler are forked at its first task, where a Python caller's threads may be building a
# graph): the fork waits for it, as for Python's own locks
os.register_at_fork(before=_lock.acquire, after_in_parent=_lock.release, after_in_child=_lock.release)


@contextmanager
def rare_full_collections() -> Iterator[None]:
    global _rare_contexts
    old = gc.get_threshold()
    gc.set_threshold(*(max(a, b) for a, b in zip(old, THRESHOLDS)))
    with _lock:
        _rare_contexts += 1
    try:
        yield
    finally:
        with _lock:
            _rare_contexts -= 1
        gc.set_threshold(*old)
        gc.unfreeze()


def rare_collections_from_now() -> None:
    """What rare_full_collections gives, for the rest of this process's life: called by each graph
    task, for a dask worker process, which runs them outside that context (measured: 2 s of CPU of a
    100,000-node compare on one worker). Inside it (the tasks run in this process), nothing changes.
    Outside it, what earlier tasks froze is unfrozen (no collection is paused at that moment), so that
    the graphs of finished tasks can be collected."""
    with _lock:
        if _rare_contexts == 0 and _pauses == 0:
            gc.unfreeze()
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
