"""A file's bytes read straight into a caller's buffer with ``os.preadv``: no bytes object, no memory map.

A file cut while it is read gives a short count, which its reader turns into an error naming the file;
a memory map's missing pages would fault (SIGBUS) and kill the process instead."""

from __future__ import annotations

import os


def read_into(fd: int, view: memoryview, offset: int) -> int:
    """The bytes of open file ``fd`` from ``offset`` into ``view``: how many there were (fewer than
    ``len(view)`` where the file ends first)."""
    got = 0
    while got < len(view) and (n := os.preadv(fd, [view[got:]], offset + got)):
        got += n
    return got
