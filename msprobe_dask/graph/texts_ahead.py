"""The rows' item texts made ahead, while the tree is built.

A big build alone has a forked child read the layout of dump.json's entries while this process
builds the tree (graph/api.py). The child is done long before the tree, and its CPU would idle
until the chunk jobs begin. So it goes on making the texts the jobs make first of all
(build.export_texts: each entry's exported input_data and output_data, 0.5 s of CPU per 100,000
nodes), entry after entry in file order, into memory shared with this process (csrc/ahead.c).
When the jobs begin it is stopped, wherever it is; the jobs, forked after that, take the texts it
finished from there and make the others themselves. The texts are the ones the jobs would make: the
same C code makes them from the same bytes.
"""

from __future__ import annotations

import mmap
import weakref
from typing import Any

from msprobe_dask.dump.entries import DumpEntries
from msprobe_dask.graph import speedups
from msprobe_dask.graph.forked import GoingOn

MAX_REGION = 1 << 30  # the most memory reserved for them (only what is written takes memory)


def texts_ahead(text_size: int) -> TextsAhead | None:
    """A region for the texts of a dump.json of ``text_size`` bytes; None without the C code or the
    memory to reserve (the jobs then make all the texts)."""
    if speedups.native is None:
        return None
    try:
        return TextsAhead(text_size)
    except (OSError, ValueError):
        return None


class TextsAhead:
    """The shared region the child writes the texts to, and the child once it goes on."""

    __slots__ = ("region", "_children", "_finalizer", "__weakref__")

    def __init__(self, text_size: int) -> None:
        """Room for the texts of a dump.json of ``text_size`` bytes (about as big as it, in the end)."""
        region = mmap.mmap(-1, min(2 * text_size + (1 << 20), MAX_REGION))
        self.region: mmap.mmap | None = region
        self._children: list[GoingOn] = []
        self._finalizer = weakref.finalize(self, _end, region, self._children)

    def make(self, text: bytes, scanned: tuple[dict[str, Any], tuple[Any, ...]] | None) -> None:
        """In the child, once it has sent what the scan of dump.json's ``text`` gave
        (entries.scan_dump_doc): write the entries' texts until all are made or the region is full."""
        if scanned is None:
            return
        spans = DumpEntries.with_text(scanned[1], text).spans()
        if spans is not None and self.region is not None and speedups.native is not None:
            speedups.native.make_texts_ahead(self.region, *spans)

    def going_on(self, child: GoingOn) -> None:
        """The child making them (stopped when the region is freed, at the latest)."""
        self._children.append(child)

    def stop(self) -> None:
        """Stop the child (the texts it finished stay readable in ``region``); before forking others."""
        for child in self._children:
            child.stop()

    def close(self) -> None:
        """Stop the child and free the region."""
        self._finalizer()
        self.region = None

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled (a graph sent to another process), it is none: the region is this machine's."""
        return (_none, ())


def _end(region: mmap.mmap, children: list[GoingOn]) -> None:
    for child in children:
        child.stop()
    region.close()


def _none() -> None:
    return None
