"""Table rows packed into one bytes object, and a SQLite connection that inserts packed rows.

graph_visualize's chunk tasks (graph/chunks.py) make the vis.db's rows; sent to the write task as
lists and bound one value at a time, they would cost the writer ~15 us per row. Packed, a chunk of
rows travels on the task graph's edges as one bytes object (cheap to pickle to another process), and
``open_db``'s RowDb (the C module ``msprobe_dask.writers._rowdb`` where it was built) binds it in C.

The format (little-endian): ``u32`` row count, ``u32`` column count, then each value as a tag byte
and its payload: 0 NULL; 1 int64; 2 float64; 3 text (``u32`` length, UTF-8 bytes). This module's
Python functions are its definition and the path taken where the C module is not built (same rows,
slower); tests/writers/test_packed_rows.py checks that both agree.
"""

from __future__ import annotations

import sqlite3
import struct
import sys
from collections.abc import Sequence
from typing import Any

from msprobe_dask.native import load

API = 3  # ROWDB_API in csrc/rowdb.c
# seconds a RowDb waits for a lock another connection holds on its file (SQLite's busy timeout)
BUSY_TIMEOUT = 30.0

NULL, INT, FLOAT, TEXT = 0, 1, 2, 3
_HEADER = struct.Struct("<II")
_INT = struct.Struct("<Bq")
_FLOAT = struct.Struct("<Bd")
_TEXT = struct.Struct("<BI")
_NULL = bytes([NULL])


class PackedRowsError(RuntimeError):
    """A database error while running packed rows (the C module raises its own subclass)."""


native = load("msprobe_dask.writers._rowdb", API) if sys.byteorder == "little" else None
ERRORS: tuple[type[Exception], ...] = (PackedRowsError, sqlite3.Error) + ((native.Error,) if native else ())


def python_pack_rows(rows: Sequence[Sequence[Any]], ncols: int) -> bytes:
    if not 0 <= ncols < 2**31:
        raise ValueError("a column count must be between 0 and 2**31 - 1")
    out = [_HEADER.pack(len(rows), ncols)]
    for row in rows:
        if len(row) != ncols:
            raise ValueError(f"a row has {len(row)} values, not {ncols}")
        for v in row:
            if v is None:
                out.append(_NULL)
            elif isinstance(v, str):
                data = v.encode()
                out.append(_TEXT.pack(TEXT, len(data)))
                out.append(data)
            elif isinstance(v, int):
                if not -(2**63) <= v < 2**63:
                    raise OverflowError(f"{v} does not fit in a 64-bit integer")
                out.append(_INT.pack(INT, v))
            elif isinstance(v, float):
                out.append(_FLOAT.pack(FLOAT, v))
            else:
                raise TypeError(f"a row value of type {type(v).__name__} cannot be packed")
    return b"".join(out)


def unpack_rows(packed: bytes) -> list[list[Any]]:
    """The rows of ``packed``, as lists."""
    view = memoryview(packed)
    try:
        nrows, ncols = _HEADER.unpack_from(view, 0)
        pos = _HEADER.size
        rows = []
        for _ in range(nrows):
            row: list[Any] = []
            for _ in range(ncols):
                tag = view[pos]
                if tag == NULL:
                    row.append(None)
                    pos += 1
                elif tag == TEXT:
                    n = _TEXT.unpack_from(view, pos)[1]
                    pos += _TEXT.size
                    if pos + n > len(view):
                        raise struct.error("text past the end")
                    row.append(str(view[pos : pos + n], "utf-8"))
                    pos += n
                elif tag == INT:
                    row.append(_INT.unpack_from(view, pos)[1])
                    pos += _INT.size
                elif tag == FLOAT:
                    row.append(_FLOAT.unpack_from(view, pos)[1])
                    pos += _FLOAT.size
                else:
                    raise struct.error(f"tag {tag}")
            rows.append(row)
    except (struct.error, IndexError, UnicodeDecodeError) as exc:
        raise PackedRowsError("packed rows are truncated or malformed") from exc
    if pos != len(view):
        raise PackedRowsError("packed rows are truncated or malformed")
    return rows


def first_value(packed: bytes, column: int) -> Any:
    """The value in ``column`` of the first row of ``packed`` (None if it has no row)."""
    if _HEADER.unpack_from(packed, 0)[0] == 0:
        return None
    pos = _HEADER.size
    for _ in range(column):
        tag = packed[pos]
        pos += (
            1 if tag == NULL else _TEXT.size + _TEXT.unpack_from(packed, pos)[1] if tag == TEXT else _INT.size
        )
    tag = packed[pos]
    if tag == INT:
        return _INT.unpack_from(packed, pos)[1]
    if tag == FLOAT:
        return _FLOAT.unpack_from(packed, pos)[1]
    if tag == TEXT:
        n = _TEXT.unpack_from(packed, pos)[1]
        return str(packed[pos + _TEXT.size : pos + _TEXT.size + n], "utf-8")
    return None


class PythonRowDb:
    """``_rowdb.RowDb`` in Python: a connection (its busy timeout in seconds, autocommit: SQL says
    BEGIN/COMMIT)."""

    def __init__(self, path: str, busy_timeout: float) -> None:
        self._con: sqlite3.Connection | None = sqlite3.connect(
            path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
        )

    def _open(self) -> sqlite3.Connection:
        if self._con is None:
            raise PackedRowsError("the database is closed")
        return self._con

    def execute(self, sql: str) -> None:
        """Run ``sql``: one statement or more (as sqlite3_exec does), without parameters."""
        con = self._open()
        statement = ""
        for piece in sql.split(";"):
            statement += piece + ";"
            if sqlite3.complete_statement(statement):
                if statement.strip(" \t\r\n;"):
                    con.execute(statement)
                statement = ""
        if statement.strip(" \t\r\n;"):
            con.execute(statement)

    def executemany_each(self, parts: Sequence[tuple[Any, ...]]) -> None:
        for part in parts:
            self.executemany(*part)

    def has_row(self, sql: str) -> bool:
        return self._open().execute(sql).fetchone() is not None

    def executemany(self, sql: str, packed: bytes, rowid_base: int = -1, order_col: int = 0) -> None:
        con = self._open()
        rows = unpack_rows(packed)
        if rowid_base >= 0:
            if rows and not 0 <= order_col < len(rows[0]):
                raise PackedRowsError("the rowid column of packed rows is missing or not an integer")
            if any(not isinstance(row[order_col], int) for row in rows):
                raise PackedRowsError("the rowid column of packed rows is missing or not an integer")
            rows = [[rowid_base + 1 + row[order_col], *row] for row in rows]
        con.executemany(sql, rows)

    def close(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None


def pack_rows(rows: Sequence[Sequence[Any]], ncols: int) -> bytes:
    """``rows`` (each of ``ncols`` values: None, int, float or str) packed."""
    return native.pack_rows(rows, ncols) if native is not None else python_pack_rows(rows, ncols)


def open_db(path: str) -> Any:
    """A RowDb on the SQLite file ``path`` (the C one where it is built)."""
    return native.RowDb(path, BUSY_TIMEOUT) if native is not None else PythonRowDb(path, BUSY_TIMEOUT)
