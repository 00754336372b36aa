"""graph_visualize's big results on dask's local processes scheduler, which pickles each task's result
into the run's own process and each task's inputs out of it: they are held in the worker process that
made them and left in the run's spool folder for the other workers, and only their names travel on the
graph's edges (graph/rank_plan.py lays the tasks out; on a cluster and in this process's threads, which share
results, the values themselves travel).

    build(NPU) --> Held --+--> summary (the pair prepared here, or found held)
    build(Bench) -> Held -+--> rows k (the pair prepared here once, or found held) --> ChunkFiles
                              finish (the ChunkFiles' lights joined) --> Held Part --> link --> Held Linked

Each worker process prepares the pair (match, orders, cut) once, from the graphs it built or loads from
the spool, and keeps it for its share of the chunk tasks: no prepared pair (about twice dump.json's
size) goes from process to process, and no graph passes through the run's own process. A (step,
rank)'s held graphs are let go in a process as the rank window moves on (``Spool.window``: a result of
the rank ``window`` places later is held there; by then its rows are written).

With more (step, rank)s than worker processes, one task makes each (held_rank: Plan.rank_alone)::

    rank --> RankMade (its summary, its chunks' rows in spool files, its Part held) --> insert --> ...
                                                                                    --> link

its graphs built, prepared once and let go in that task: no graph goes through a spool file.
"""

from __future__ import annotations

import os
import pickle
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, BinaryIO, NamedTuple

from msprobe_dask.errors import OutputError, cannot
from msprobe_dask.graph.chunks import Prepared, chunk_task, let_go
from msprobe_dask.graph.distributed import link_rows
from msprobe_dask.graph.model import Graph
from msprobe_dask.graph.rows import RowsChunk
from msprobe_dask.graph.tasks import (
    Options,
    Part,
    Summary,
    build_task,
    joined,
    link_ahead,
    prepare_task,
    summary_of,
)

_HELD: dict[tuple[str, int | None], dict[str, Any]] = {}
"""This process's held results, by (spool folder, place of their (step, rank) in write order, None: the
run's) and name."""

_HOLDING = threading.RLock()  # (the threads of a process that share its held results: tests, build_graphs)
PREPARED = "prepared"
COMM_NONE, COMM_LINK, COMM_ALL = "none", "link", "all"
"""What a chunk task's light (light_of) keeps of its communication rows: none (ranks not linked: nothing
changes them after their insert; held to the run's end, they would be 0.45 GB of one rank of 1,001,000
entries a side), those that linking across ranks may read or set, with only the cells it uses
(distributed.link_rows: held to the run's end for every rank), or all of them whole (a Part read back:
build_graphs)."""
RUN = None  # the place of a result that no rank window lets go (each rank's Part, the linked Parts)


@dataclass(frozen=True, slots=True)
class Spool:
    """The run's spool folder: ``shared`` when more than one worker process may read what another held
    (then written to a file of the folder; with one, only held)."""

    folder: str
    shared: bool
    window: int  # (step, rank)s held at a time (graph/run_setup.py: rank_window; 0: all of them)


@dataclass(frozen=True, slots=True)
class Held:
    """A task's result, held in the process that made it (and, shared, in its spool file)."""

    spool: Spool
    place: int | None
    name: str

    @property
    def path(self) -> str:
        return os.path.join(self.spool.folder, f"{'run' if self.place is None else self.place}-{self.name}")

    def value(self) -> Any:
        """The result: held in this process, or loaded from its spool file and held."""
        found = _HELD.get((self.spool.folder, self.place), {}).get(self.name)
        if found is None:
            found = self.loaded()
            _hold(self, found)
        return found

    def loaded(self) -> Any:
        """The result read from its spool file (where another process made it)."""
        with open(self.path, "rb") as f:
            return pickle.load(f)


def hold(spool: Spool, place: int | None, name: str, value: Any, one_reader: bool = False) -> Held:
    """``value`` held in this process (and written to its spool file when the spool is shared). Of a
    value whose only reader ``taken`` it (``one_reader``), a shared spool holds only the file: read by
    another process, it would stay held here to the run's end (graph/merge/plan.py: every replica's rows;
    384 + 96 ranks on two worker processes, 958 -> 553 MiB)."""
    held = Held(spool, place, name)
    if spool.shared:
        _spool_file(held.path, value, _pickled)
    if not (one_reader and spool.shared):
        _hold(held, value)
    return held


def _spool_file(path: str, value: Any, dump: Callable[..., None]) -> None:
    """``value`` pickled by ``dump`` into spool file ``path``; a file that cannot be written (a full
    disk, a file size limit) is the run's output error, naming it."""
    try:
        with open(path, "wb") as f:
            dump(value, f, pickle.HIGHEST_PROTOCOL)
    except OSError as exc:
        raise OutputError(path, cannot("be written", exc)) from None


def _pickled(value: Any, f: BinaryIO, protocol: int) -> None:
    """``value`` pickled into ``f`` as dask pickles a task's result: by pickle, and by cloudpickle where
    pickle cannot (a function or class made at run time, which cloudpickle takes by value). Where pickle
    can, cloudpickle writes the same bytes, slower (R8's held Parts, 1.28 MB each: 0.030 -> 0.016 s of
    thread CPU; S50k's graphs, 12 MB: 0.068-0.071 -> 0.060-0.063 s)."""
    try:
        pickle.dump(value, f, protocol)
    except (pickle.PicklingError, AttributeError, TypeError):
        import cloudpickle

        f.seek(0)
        f.truncate()
        cloudpickle.dump(value, f, protocol)


def _hold(held: Held, value: Any) -> None:
    with _HOLDING:
        if held.place is not None and held.spool.window:
            _let_go_before(held.spool, held.place - held.spool.window + 1)
        _HELD.setdefault((held.spool.folder, held.place), {})[held.name] = value


def _let_go_before(spool: Spool, place: int) -> None:
    """The results of the ranks before ``place`` (and of other runs) let go in this process."""
    for key in [k for k in _HELD if k[0] != spool.folder or (k[1] is not None and k[1] < place)]:
        for value in _HELD.pop(key).values():
            if isinstance(value, Prepared):
                value.release()
            elif isinstance(value, Graph):
                let_go([value])


def value_of(result: Any) -> Any:
    """A task's result as the task that reads it needs it: the value of a Held, else itself."""
    return result.value() if isinstance(result, Held) else result


def taken(result: Any) -> Any:
    """``value_of`` for a result's only reader: no longer held in this process (loaded from its spool
    file where another process made it), so that it is let go once read (graph/merge/plan.py: a merged
    replica, a finish task's rows)."""
    if not isinstance(result, Held):
        return result
    with _HOLDING:
        found = _HELD.get((result.spool.folder, result.place), {}).pop(result.name, None)
    return result.loaded() if found is None else found


def held_build(spool: Spool, place: int, side: str, folder: str, step: int, rank: int, *after: Any) -> Held:
    """A (step, rank)'s graph of ``side`` built without its items (the chunk tasks parse them), held;
    once ``after`` is done (graph/write_chain.py: the rank window)."""
    return hold(spool, place, side, build_task(folder, step, rank, False))


class PairOf(NamedTuple):
    """What a worker process needs to prepare a (step, rank)'s pair for its chunk tasks."""

    opts: Options
    where: str  # the NPU dump folder (its errors name it)
    n: int  # chunk tasks


def _prepared(pair: PairOf, spool: Spool, place: int, graphs: tuple[Held, ...], whole: bool) -> Prepared:
    """The pair held in this process, or prepared here from its graphs (``whole``: rows of a pair
    compared whole made too, tasks.prepare_compare_task; a pair prepared without them has done == [])."""
    with _HOLDING:  # (one pair for the chunk tasks of the process's threads: they take turns on it)
        found = _HELD.get((spool.folder, place), {}).get(PREPARED)
        if found is not None and (not whole or found.done is None or found.done):
            return found
        p = prepare_task(pair.opts, pair.where, pair.n, whole, *(g.value() for g in graphs))
        _hold(Held(spool, place, PREPARED), p)
        return p


def held_summary(pair: PairOf, spool: Spool, place: int, *graphs: Held) -> Summary:
    """The (step, rank)'s Summary, the pair prepared whole where it is not held yet (tensor mode: its
    rows made here)."""
    return summary_of(_prepared(pair, spool, place, graphs, True))


class ChunkFiles(NamedTuple):
    """A chunk task's result in two spool files: the rows and stacks its insert writes, and the rest
    (light_of) that joining the rank's chunks needs."""

    rows: str
    light: str


def held_chunk(
    pair: PairOf, spool: Spool, place: int, k: int, graphs: tuple[Held, ...], comm: str, *after: Any
) -> ChunkFiles:
    """chunks.chunk_task of the pair prepared in this process, its result left in two spool files.
    ``after``: what the task waits for and does not read (graph/write_chain.py: the write chain's turn
    some turns before, _chain_lag)."""
    result = chunk_task(_prepared(pair, spool, place, graphs, False), k)
    return ChunkFiles(
        _rows_file(spool, place, k, result), _left(spool, place, "light", k, light_of(result, comm))
    )


def _rows_file(spool: Spool, place: int, k: int, result: tuple[RowsChunk | None, ...]) -> str:
    """Chunk ``k``'s rows and stacks left in a spool file, for its insert (rows_of)."""
    rows = tuple(None if c is None else replace(c, nodes=[], summary=None) for c in result)
    return _left(spool, place, "rows", k, rows)


def _left(spool: Spool, place: int, kind: str, k: int, value: Any) -> str:
    path = os.path.join(spool.folder, f"{place}-{kind}-{k}")
    _spool_file(path, value, pickle.dump)
    return path


class RankMade(NamedTuple):
    """A (step, rank) made by one task (held_rank): what placing its rows needs, its chunks' rows and
    stacks in spool files (in chunk order, for the write chain's inserts) and its Part, held."""

    summary: Summary
    rows: tuple[str, ...]
    part: Held


def held_rank(
    pair: PairOf,
    spool: Spool,
    place: int,
    folders: tuple[str, ...],
    step: int,
    rank: int,
    comm: str,
    *after: Any,
) -> RankMade:
    """A (step, rank) made in this task, from its builds to its chunks' rows: its graphs built, the pair
    prepared once, each chunk's rows left in a spool file as it is made, its Part joined from the
    chunks' lights (with what ``comm`` says of their communication rows; ranks linked: with the
    communication nodes of the first divergence's links, tasks.link_ahead) and held to the run's end;
    its graphs let go before it returns. ``after``: see held_build."""
    p = prepare_task(
        pair.opts, pair.where, pair.n, True, *(build_task(f, step, rank, False) for f in folders)
    )
    try:
        summary = summary_of(p)
        rows, lights = [], []
        for k in range(pair.n):
            result = chunk_task(p, k)
            rows.append(_rows_file(spool, place, k, result))
            lights.append(light_of(result, comm))
    finally:
        p.release()
    part = joined(summary, *lights)
    if comm == COMM_LINK:
        link_ahead(part)
    return RankMade(summary, tuple(rows), _held_part(spool, place, part))


def rows_of(result: tuple[RowsChunk | None, ...] | ChunkFiles | str) -> tuple[RowsChunk | None, ...]:
    """A chunk task's rows and stacks, for its insert (ChunkFiles, or its rows' spool file: RankMade)."""
    if isinstance(result, ChunkFiles):
        result = result.rows
    if not isinstance(result, str):
        return result
    with open(result, "rb") as f:
        rows: tuple[RowsChunk | None, ...] = pickle.load(f)
    return rows


def light_of(result: tuple[RowsChunk | None, ...] | ChunkFiles, comm: str) -> tuple[RowsChunk | None, ...]:
    """A chunk task's result without its rows and stacks (what joining the chunks needs: made where
    the chunk is, so that its rows go only to their insert), and with what ``comm`` says of its
    communication rows (COMM_NONE, COMM_LINK, COMM_ALL; ChunkFiles: as they were made)."""
    if isinstance(result, ChunkFiles):
        with open(result.light, "rb") as f:
            light: tuple[RowsChunk | None, ...] = pickle.load(f)
        return light
    return tuple(
        None if c is None else replace(c, packed=None, stacks=[], nodes=_comm_rows(c, comm)) for c in result
    )


def _comm_rows(chunk: RowsChunk, comm: str) -> list[list[Any]]:
    if comm == COMM_ALL:
        return chunk.nodes
    return link_rows(chunk.nodes, chunk.p2p) if comm == COMM_LINK else []


def whole_of(result: tuple[RowsChunk | None, ...] | ChunkFiles) -> tuple[RowsChunk | None, ...]:
    """A chunk task's whole result (of ChunkFiles: from its two spool files, made with COMM_ALL, its
    communication rows kept), for a Part read back in the run's own process (graph/api.py:
    build_graphs)."""
    if not isinstance(result, ChunkFiles):
        return result
    return tuple(
        None if c is None or light is None else replace(c, nodes=light.nodes, summary=light.summary)
        for c, light in zip(rows_of(result), light_of(result, COMM_ALL))
    )


def held_finish(spool: Spool, place: int, summary: Summary, *chunks: ChunkFiles) -> Held:
    """The (step, rank)'s Part joined from its chunks' lights (made as their ``comm`` said), held to the
    run's end."""
    return _held_part(spool, place, joined(summary, *(light_of(c, COMM_ALL) for c in chunks)))


def _held_part(spool: Spool, place: int, part: Part) -> Held:
    return hold(spool, RUN, f"part-{place}", part)
