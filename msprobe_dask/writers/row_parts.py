"""tb_nodes rows parked in SQLite part files by the processes that made them, for the vis.db writer
to copy.

Forked jobs (graph/forked.py) would otherwise pickle their rows back to the parent, which would then
unpickle them and bind them into the vis.db one value at a time, alone (~15 us per row, serial: a
fifth of a 100,000-node compare). Here every process binds its own rows into its own part file, in
parallel, and the writer copies each graph's rows with one INSERT ... SELECT in SQLite's C code.

A part file holds one table per graph (named by its graph id) with tb_nodes' columns, node_order as
the rowid, so a table reads back in node order, and a job run twice (forked.py reruns a failed
child's jobs) replaces its rows instead of adding them again. A part file is private to one process
and thread; it is only read once its writer has committed.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from msprobe_dask.errors import OutputError

N_COLUMNS = 22  # tb_nodes' columns
ORDER_COLUMN = 2  # node_order's position among them

# SQLite's own mutexes (its allocator's, for one) are not reset in a forked child: a fork while
# another thread is inside SQLite leaves the child stuck on a mutex nobody will release. So the
# process forks only while no thread is in a RowParts call (the runs of several ranks share it).
_IN_SQLITE = threading.Lock()
os.register_at_fork(
    before=_IN_SQLITE.acquire, after_in_parent=_IN_SQLITE.release, after_in_child=_IN_SQLITE.release
)


def part_table_ddl(table: str) -> str:
    columns = [f"c{i}" for i in range(N_COLUMNS)]
    columns[ORDER_COLUMN] += " INTEGER PRIMARY KEY"
    return f"CREATE TABLE IF NOT EXISTS {quoted(table)} ({', '.join(columns)})"


def quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class RowParts:
    """The part files of one run, in ``folder`` (which the caller creates and removes)."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)
        self._name = f"rows-{id(self):x}"  # distinct from other RowParts' files in the same process
        self._connections: dict[tuple[int, int], tuple[str, sqlite3.Connection]] = {}
        self._tables: set[tuple[int, int, str]] = set()

    def put(self, table: str, rows: Sequence[Sequence[Any]]) -> str:
        """Store ``rows`` (tb_nodes rows of the graph ``table``); return the part file's path."""
        key = (os.getpid(), threading.get_ident())
        values = ",".join("?" * N_COLUMNS)
        with _IN_SQLITE:
            try:
                path, con = self._connections.get(key) or self._open(key)
                if (*key, table) not in self._tables:
                    con.execute(part_table_ddl(table))
                    self._tables.add((*key, table))
                con.executemany(f"INSERT OR REPLACE INTO {quoted(table)} VALUES ({values})", rows)
                con.commit()
            except sqlite3.Error as exc:
                raise OutputError(self.folder, f"cannot store rows on the way to the vis.db: {exc}") from None
        return path

    def _open(self, key: tuple[int, int]) -> tuple[str, sqlite3.Connection]:
        path = str(self.folder / f"{self._name}-{key[0]}-{key[1]}.db")
        con = sqlite3.connect(path, check_same_thread=False)
        # private scratch: no journal, no syncs (the run fails as a whole if the machine does)
        con.execute("PRAGMA journal_mode=OFF")
        con.execute("PRAGMA synchronous=OFF")
        self._connections[key] = (path, con)
        return path, con

    def close(self) -> None:
        """Close this process's connections (forked children never close theirs: they exit)."""
        pid = os.getpid()
        with _IN_SQLITE:
            for key, (_, con) in list(self._connections.items()):
                if key[0] == pid:
                    con.close()
                    del self._connections[key]


def read_rows(parts: Sequence[str], table: str) -> list[list[Any]]:
    """The rows of graph ``table`` from its part files, in node order."""
    con = sqlite3.connect(":memory:")
    try:
        for i, path in enumerate(parts):
            con.execute(f"ATTACH DATABASE ? AS p{i}", (path,))
        return [list(row) for row in con.execute(copy_select(len(parts), table))]
    finally:
        con.close()


def copy_select(n_parts: int, table: str) -> str:
    """A SELECT of the table's rows from the part files attached as p0, p1 ..., in node order (a merge
    of tables already in that order: no sort)."""
    arms = [f"SELECT * FROM p{i}.{quoted(table)}" for i in range(n_parts)]
    if len(arms) == 1:
        return f"{arms[0]} ORDER BY c{ORDER_COLUMN}"
    return f"{' UNION ALL '.join(arms)} ORDER BY {ORDER_COLUMN + 1}"
