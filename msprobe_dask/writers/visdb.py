"""Write a ``*.vis.db`` (the SQLite file tb-graph-ascend opens).

The schema text, object creation order and index set are the reference's (writers/visdb_schema.py), and
so is the WAL journal mode. Rows are written to a temporary file next to the target (a failed write
deletes the file); the file is switched to WAL mode and renamed only when complete, so an interrupted
run leaves nothing that looks finished. An existing target is never changed: the reference adds the
rows to it, we refuse (D32).

tb_nodes and tb_stack rows arrive packed (writers/packed_rows.py), in chunks, in any order: each graph
gets a range of rowids of each table in write order (``place``) and a row's rowid is its graph's base
plus its number (a tb_nodes row's node_order, a tb_stack row's stack number), so the tables read back,
in rowid order, exactly as if the graphs had been written one after the other.

The rows may be added by one task or by a chain of tasks, each adding the rows of one chunk as soon
as it is made (VisdbWriter.suspend / resume): the rowids, and so the file's rows, are the same. A task
of the chain whose dask worker is lost runs again from the writer it was given, on the file as the
tasks before it left it: each task's rows go in with a rollback journal (a process killed in the
middle of its transaction leaves the file as last committed, and the next connection rolls it back),
rows already committed are counted, not added twice (``add_once``), and a last task that had
completed and named the file finds it named (``resume``: the same file, by its inode).
"""

from __future__ import annotations

import contextlib
import copy
import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from msprobe_dask.columns import UNLINKED
from msprobe_dask.errors import OutputError, cannot
from msprobe_dask.writers.atomic import check_running, not_replaced, publish, set_result_mode, track, untrack
from msprobe_dask.writers.packed_rows import ERRORS, first_value, open_db, pack_rows
from msprobe_dask.writers.visdb_schema import (
    DISTRIBUTED,
    ID,
    INDEX_SORT_THREADS,
    INDEXES,
    INSERT_CONFIG,
    INSERT_NODES,
    INSERT_STACKS,
    MATCHED_DISTRIBUTED,
    N_NODE_COLUMNS,
    NODES,
    ORDER,
    PAGE_SIZE,
    SESSION,
    SHARED_CACHE_KIB,
    STACKS,
    TABLES,
    UPDATE_DISTRIBUTED,
)


class GraphTables(NamedTuple):
    """One graph's rows: tb_nodes rows as lists (``nodes``) and packed (``packed``), and tb_stack
    rows. With ``apart``, its tb_nodes rows are in ``packed`` or were added to the writer before, and
    ``nodes`` are only rows whose matched_distributed cell may have changed since."""

    graph_id: str
    n_rows: int  # tb_nodes rows of the graph
    nodes: Sequence[Sequence[Any]]
    stacks: Sequence[tuple[str, str]]
    packed: Sequence[bytes] = ()
    apart: bool = False


def linked_cells(rows: Iterable[Sequence[Any]]) -> list[tuple[Any, Any]]:
    """The (matched_distributed, id) cells of the communication rows among ``rows`` that linking across
    ranks set, after their rows were added (VisdbWriter.complete); a cell left as made (UNLINKED) is the
    row's already (one rank of 50,050 entries a side: none of its 14,300 is set)."""
    return [
        (row[MATCHED_DISTRIBUTED], row[ID])
        for row in rows
        if row[DISTRIBUTED] == 1 and row[MATCHED_DISTRIBUTED] != UNLINKED
    ]


def write_visdb(path: str | os.PathLike[str], graphs: Iterable[GraphTables], config: Sequence[Any]) -> str:
    """Write ``graphs`` and the tb_config row into ``path``; return it."""
    return VisdbWriter(path).finish(graphs, config)


class _Placed:
    """One table's rows, placed graph by graph (see the module)."""

    def __init__(self, sql: str, number: int) -> None:
        self.sql = sql
        self.number = number  # the packed rows' column holding a row's number in its graph
        self.next = 0
        self.bases: dict[str, int] = {}  # graph id -> the rowid of its number -1
        self.counts: dict[str, tuple[int, int]] = {}  # graph id -> (rows placed, rows inserted)


class VisdbWriter:
    """A vis.db being written (see the module). The indexes are built at the end, unless made
    ``indexed_early``: with the tables, kept up to date by each insert, which costs more CPU but leaves
    the last task only its commit (the 16 inserts of one rank of 50,050 entries a side, one thread: built
    at the end, inserts 0.36-0.37 s of CPU and the last task 0.40-0.43 s; early, 0.77-0.87 s and
    0.08-0.09 s). Early for graph_visualize's chain of a (step, rank) at a time in every layout
    (graph/api.py), so that its file's bytes do not depend on the layout: the index pages built as the
    rows come are not those a build at the end makes (the 1,001,000-entry rank in this process, its
    inserts beside the chunk tasks, docs/performance.md section 6).

    One task may write it all (``finish``), or a chain of tasks (graph/write_chain.py): ``suspend`` commits
    what was added and closes the file, the writer (small: no rows) then goes to the next task, which
    ``resume``s it, adds its rows, and so on until ``complete``. A ``shared`` writer is for a chain whose
    tasks are threads of this process: it stays open from task to task (``suspend`` and ``resume`` give
    it back as it is; it does not pickle), all its rows in one transaction, which ``complete`` commits:
    no connection opened again, no page written twice (with the indexes kept up to date, each task's
    commit wrote their pages again: T, 7,716 entries a side, 57 MB written and 22 MB of rollback journal
    for a 35 MB file; pages new to the file need no journal)."""

    def __init__(
        self, path: str | os.PathLike[str], indexed_early: bool = False, shared: bool = False
    ) -> None:
        self.path = Path(path)
        self._indexed = indexed_early
        self._shared = shared
        if os.path.lexists(self.path):  # checked again when it is named (publish)
            raise not_replaced(self.path)
        self._tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        self._tables = {NODES: _Placed(INSERT_NODES, ORDER), STACKS: _Placed(INSERT_STACKS, 0)}
        self._named = False  # the chain's last task named the file already (resume)
        track(self._tmp)
        try:
            self._db = open_db(str(self._tmp))
            self._inode = _inode(self._tmp)
        except OSError as exc:  # the folder unwritable
            self._remove()
            where = exc.filename or self.path.parent
            raise OutputError(where, cannot("write the vis.db", exc)) from None
        except ERRORS as exc:
            self._remove()
            raise OutputError(self.path, f"cannot write the vis.db: {exc}") from None
        with _failing(self):
            early = INDEXES if indexed_early else ()
            cache = (f"PRAGMA cache_size=-{SHARED_CACHE_KIB}",) if shared else ()
            for sql in (f"PRAGMA page_size={PAGE_SIZE}", *SESSION, *cache, "BEGIN", *TABLES, *early):
                self._db.execute(sql)

    def __getstate__(self) -> tuple[Path, Path, dict[str, _Placed], bool, tuple[int, int] | None, bool]:
        if self._db is not None:
            raise RuntimeError("a vis.db writer is sent to another task only when suspended")
        return self.path, self._tmp, self._tables, self._indexed, self._inode, self._named

    def __setstate__(
        self, state: tuple[Path, Path, dict[str, _Placed], bool, tuple[int, int] | None, bool]
    ) -> None:
        self.path, self._tmp, self._tables, self._indexed, self._inode, self._named = state
        self._db = None
        self._shared = False  # (a shared writer does not pickle: __getstate__)

    @property
    def temporary(self) -> Path:
        return self._tmp

    def suspend(self) -> VisdbWriter:
        """Commit the rows added so far and close the file (see the class); a ``shared`` writer stays as
        it is."""
        if self._named or self._shared:
            return self
        with _failing(self):
            self._db.execute("COMMIT")
        self._close()
        return self

    def resume(self) -> VisdbWriter:
        """A writer on the suspended file, open again to add rows (in this task, in any process that sees
        it). This one stays suspended: it is the result of the task before, which dask may still send to
        another task meanwhile (a writer is pickled only when suspended; resuming it in place made such
        a send fail, and the worker that asked for it waited for ever). A ``shared`` writer: itself,
        still open."""
        check_running()
        if self._shared:
            return self
        writer = copy.deepcopy(self)
        if (
            writer._inode is not None
            and not os.path.lexists(writer._tmp)
            and _inode(writer.path) == writer._inode
        ):
            writer._named = True  # (the last task ran, then its worker was lost: it runs again)
            return writer
        try:
            writer._db = open_db(str(writer._tmp))
        except ERRORS as exc:
            writer._remove()
            raise OutputError(writer.path, f"cannot write the vis.db: {exc}") from None
        try:
            begun = os.stat(writer._tmp).st_size > 0
        except OSError:
            begun = False
        if not begun:  # removed (a failed or stopped run), and SQLite has just made a new empty file
            writer.abort()
            raise OutputError(
                writer.path,
                "cannot write the vis.db: its temporary file is gone (the run failed, or the dask workers "
                "do not share the output folder)",
            )
        with _failing(writer):
            writer._db.execute(";\n".join((*SESSION, "BEGIN")))
        return writer

    def place(self, graph_id: str, count: int, table: str = NODES) -> None:
        """Give the graph the next ``count`` rowids of ``table`` (graphs are placed in write order)."""
        t = self._tables[table]
        if graph_id in t.bases:
            raise RuntimeError(f"graph {graph_id} placed twice in {table}")
        t.bases[graph_id] = t.next
        t.counts[graph_id] = (count, 0)
        t.next += count

    def _add_each(self, parts: Sequence[tuple[str, bytes, str]]) -> None:
        """Insert each of these (graph id, packed rows, table) of placed graphs in one call of the
        connection, which releases the GIL once: a task thread waits to take it back for up to the
        switch interval of the thread holding it (on T an insert task beside the chunk tasks, with a
        call a part and a connection of its own to check the file, took ~0.05 s of wall time; alone,
        0.01 s)."""
        calls = []
        for graph_id, packed, table in parts:
            t = self._tables[table]
            calls.append((t.sql, packed, t.bases[graph_id], t.number))
        with _failing(self):
            self._db.executemany_each(calls)
        self._count(parts)

    def _count(self, parts: Sequence[tuple[str, bytes, str]]) -> None:
        for graph_id, packed, table in parts:
            placed, inserted = self._tables[table].counts[graph_id]
            self._tables[table].counts[graph_id] = (placed, inserted + int.from_bytes(packed[:4], "little"))

    def add_graphs(self, graphs: Iterable[GraphTables]) -> None:
        """Place ``graphs`` (in write order) and insert their rows and stacks (``add_once``), except the
        tb_nodes rows of a graph held ``apart`` that are not in its ``packed`` (another task adds them)."""
        with _failing(self):
            for g in graphs:
                self.place(g.graph_id, g.n_rows)
                parts = [(g.graph_id, packed, NODES) for packed in g.packed]
                if g.nodes and not g.apart:
                    parts.append((g.graph_id, pack_rows(g.nodes, N_NODE_COLUMNS), NODES))
                self.place(g.graph_id, len(g.stacks), STACKS)
                rows = [(n, sid, text) for n, (sid, text) in enumerate(g.stacks)]
                parts.append((g.graph_id, pack_rows(rows, 3), STACKS))
                self.add_once(parts)

    def finish(self, graphs: Iterable[GraphTables], config: Sequence[Any]) -> str:
        """Add ``graphs`` (in write order) and complete the file. Returns the final path."""
        graphs = list(graphs)
        self.add_graphs(graphs)
        return self.complete(linked_cells(row for g in graphs for row in g.nodes), config)

    def complete(self, cells: Sequence[tuple[Any, Any]], config: Sequence[Any]) -> str:
        """Check that every placed row was added; set the communication rows' ``matched_distributed``
        cells to ``cells`` ((matched_distributed, id): linked_cells, as linking across ranks left them
        after their rows were made); add tb_config; index (unless indexed early), commit and name the
        file. Returns the final path.
        (Run again after it committed, or named the file: only what is left is done.)"""
        if self._named:
            return str(self.path)
        with _failing(self):
            for table, t in self._tables.items():
                for graph_id in t.counts:
                    self._check_count(graph_id, table)
            if not self._db.has_row("SELECT 1 FROM tb_config"):
                if cells:
                    self._db.executemany(UPDATE_DISTRIBUTED, pack_rows(cells, 2))
                self._db.executemany(INSERT_CONFIG, pack_rows([config], len(config)))
                for sql in () if self._indexed else (f"PRAGMA threads={INDEX_SORT_THREADS}", *INDEXES):
                    self._db.execute(sql)
            for sql in ("COMMIT", "PRAGMA journal_mode=WAL"):
                self._db.execute(sql)
        self._close()
        try:
            _count_as_one_transaction(self._tmp)
            set_result_mode(self._tmp)
            publish(self._tmp, self.path)
        except OSError as exc:
            raise OutputError(self.path, cannot("write the vis.db", exc)) from None
        finally:
            self._remove()  # named now (a hard link), or not to be
        return str(self.path)

    def add_once(self, parts: Sequence[tuple[str, bytes, str]]) -> None:
        """Insert these packed rows (graph id, rows, table) of placed graphs, which the caller commits
        together; if their first row is in the file already (the task adding them ran before and was
        committed, then its dask worker was lost: the task runs again), only count them."""
        if self._named or self._in_file(parts):
            self._count(parts)
            return
        self._add_each(parts)

    def _in_file(self, parts: Sequence[tuple[str, bytes, str]]) -> bool:
        for graph_id, packed, table in parts:
            t = self._tables[table]
            number = first_value(packed, t.number)
            if number is not None:
                with _failing(self):
                    return bool(
                        self._db.has_row(
                            f"SELECT 1 FROM {table} WHERE rowid = {t.bases[graph_id] + 1 + number}"
                        )
                    )
        return False

    def _check_count(self, graph_id: str, table: str) -> None:
        placed, inserted = self._tables[table].counts[graph_id]
        if placed != inserted:
            raise RuntimeError(f"graph {graph_id}: {inserted} rows written to {table}, {placed} expected")

    def abort(self) -> None:
        """Give up: close and delete the temporary file."""
        self._close()
        self._remove()

    def _close(self) -> None:
        db, self._db = getattr(self, "_db", None), None
        if db is not None:
            db.close()

    def _remove(self) -> None:
        remove_temporary(self._tmp)


@contextlib.contextmanager
def _failing(writer: VisdbWriter) -> Iterator[None]:
    """A failure inside aborts the writer; a database error becomes an OutputError naming the target."""
    try:
        yield
    except ERRORS as exc:
        writer.abort()
        raise OutputError(writer.path, f"cannot write the vis.db: {exc}") from None
    except BaseException:
        writer.abort()
        raise


def remove_temporary(tmp: str | Path) -> None:
    """Remove a vis.db's temporary file and SQLite's companion files (a run that failed)."""
    untrack(tmp)
    for suffix in ("", "-wal", "-shm", "-journal"):
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            os.unlink(f"{tmp}{suffix}")


_TRANSACTION_COUNTERS = (24, 92)
"""Where a SQLite file's header counts the write transactions that changed it: the file change counter
and the version-valid-for number (the header's database size is read only where the two agree)."""


def _count_as_one_transaction(path: Path) -> None:
    """Set the closed file's transaction counters to 1, as if one transaction had written it: they count
    the chain's commits, one in this process (a ``shared`` writer) but one a task on worker processes,
    and so the file's bytes would depend on the layout (multirank's compare: these two fields alone).
    A file in WAL mode, as the vis.db is named, does not use them."""
    one = (1).to_bytes(4, "big")
    with open(path, "r+b") as f:
        for offset in _TRANSACTION_COUNTERS:
            f.seek(offset)
            f.write(one)


def _inode(path: Path) -> tuple[int, int] | None:
    """The file's identity (device, inode), or None if there is none of that name."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino
