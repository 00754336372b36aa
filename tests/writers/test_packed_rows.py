"""writers/packed_rows.py: the C module packs and inserts rows exactly as the Python definition does."""

from __future__ import annotations

import math
import os
import sqlite3
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from msprobe_dask.writers import packed_rows
from msprobe_dask.writers.packed_rows import BUSY_TIMEOUT, ERRORS, PythonRowDb, python_pack_rows, unpack_rows

native = packed_rows.native
needs_native = pytest.mark.skipif(native is None, reason="msprobe_dask.writers._rowdb is not built")

VALUES = st.one_of(
    st.none(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False),
    st.text(),
)
ROWS = st.integers(min_value=1, max_value=5).flatmap(
    lambda n: st.tuples(st.just(n), st.lists(st.lists(VALUES, min_size=n, max_size=n), max_size=8))
)


def _same(a: list, b: list) -> bool:
    pairs = [(x, y) for ra, rb in zip(a, b) for x, y in zip(ra, rb)]
    return len(a) == len(b) and all(x == y and type(x) is type(y) for x, y in pairs)


def test_the_extension_is_built() -> None:
    """Where the project is installed with a C compiler and SQLite's header (as in CI), the C module
    is there and its API matches the sources."""
    if os.environ.get("MSPROBE_DASK_PURE_PYTHON"):
        pytest.skip("MSPROBE_DASK_PURE_PYTHON is set")
    assert native is not None and native.API == packed_rows.API


@given(ROWS)
@settings(max_examples=300, deadline=None)
def test_rows_pack_and_unpack_unchanged(case: tuple[int, list[list]]) -> None:
    ncols, rows = case
    packed = python_pack_rows(rows, ncols)
    assert _same(unpack_rows(packed), rows)
    if native is not None:
        assert native.pack_rows(rows, ncols) == packed


@needs_native
@pytest.mark.parametrize(
    "value", [True, False, -1, 2**63 - 1, -(2**63), 0.0, -0.0, math.inf, -math.inf, "", "é\u4e2d", "a\x00b"]
)
def test_c_packs_edge_values_as_python(value: object) -> None:
    assert native.pack_rows([[value]], 1) == python_pack_rows([[value]], 1)
    (row,) = unpack_rows(python_pack_rows([[value]], 1))
    assert row == [int(value) if isinstance(value, bool) else value]


@pytest.mark.parametrize("pack", [python_pack_rows, *([native.pack_rows] if native else [])])
@pytest.mark.parametrize(
    ("rows", "error"),
    [
        ([[2**63]], OverflowError),
        ([[b"bytes"]], TypeError),
        ([["\ud800"]], UnicodeEncodeError),
        ([[1, 2]], ValueError),
    ],
)
def test_values_that_cannot_be_packed_are_refused(pack, rows: list, error: type[Exception]) -> None:
    with pytest.raises(error):
        pack(rows, 1)


def _dbs() -> list:
    return [PythonRowDb, *([native.RowDb] if native else [])]


def _fill(cls, path: Path, packed: list[bytes], base: int) -> list[tuple]:
    db = cls(str(path), BUSY_TIMEOUT)
    db.execute("CREATE TABLE t (a TEXT PRIMARY KEY, n INTEGER, x)")
    db.execute("BEGIN")
    for p in packed:
        db.executemany("INSERT INTO t (rowid, a, n, x) VALUES (?, ?, ?, ?)", p, base, 1)
    db.execute("COMMIT")
    db.close()
    with sqlite3.connect(path) as con:
        return con.execute("SELECT rowid, a, n, x FROM t ORDER BY rowid").fetchall()


@pytest.mark.parametrize("cls", _dbs())
def test_rows_get_the_rowid_of_their_order_whatever_the_insert_order(cls, tmp_path: Path) -> None:
    rows = [[f"id{i}", i, v] for i, v in enumerate([None, 1.5, "t", -7, "é"])]
    chunks = [python_pack_rows(rows[3:], 3), python_pack_rows(rows[:3], 3)]
    got = _fill(cls, tmp_path / "t.db", chunks, 10)
    assert got == [(11 + i, *row) for i, row in enumerate(rows)]


@pytest.mark.parametrize("cls", _dbs())
def test_parts_inserted_in_one_call_are_those_of_a_call_each(cls, tmp_path: Path) -> None:
    rows = [[f"id{i}", i, v] for i, v in enumerate([None, 1.5, "t", -7, "é"])]
    chunks = [python_pack_rows(rows[3:], 3), python_pack_rows([], 3), python_pack_rows(rows[:3], 3)]
    sql = "INSERT INTO t (rowid, a, n, x) VALUES (?, ?, ?, ?)"
    db = cls(str(tmp_path / "t.db"), BUSY_TIMEOUT)
    db.execute("CREATE TABLE t (a TEXT PRIMARY KEY, n INTEGER, x); BEGIN")
    db.executemany_each([(sql, p, 10, 1) for p in chunks])
    with pytest.raises(ERRORS, match="UNIQUE constraint failed: t.a"):  # the parts before it go in
        db.executemany_each([(sql, python_pack_rows([["new", 9, None]], 3), 10, 1), (sql, chunks[0], 20, 1)])
    assert db.has_row("SELECT 1 FROM t WHERE a = 'new'")
    assert not db.has_row("SELECT 1 FROM t WHERE rowid = 16")
    db.execute("COMMIT")
    db.close()
    with sqlite3.connect(tmp_path / "t.db") as con:
        got = con.execute("SELECT rowid, a, n, x FROM t ORDER BY rowid").fetchall()
    assert got == [(11 + i, *row) for i, row in enumerate(rows)] + [(20, "new", 9, None)]


@pytest.mark.parametrize("cls", _dbs())
def test_execute_runs_each_statement_of_its_text(cls, tmp_path: Path) -> None:
    db = cls(str(tmp_path / "t.db"), BUSY_TIMEOUT)
    db.execute("CREATE TABLE t (a);\nINSERT INTO t VALUES ('x;y');; INSERT INTO t VALUES ('z')")
    db.close()
    with sqlite3.connect(tmp_path / "t.db") as con:
        assert con.execute("SELECT a FROM t ORDER BY rowid").fetchall() == [("x;y",), ("z",)]


@pytest.mark.parametrize("cls", _dbs())
def test_database_errors_are_raised_as_one_of_errors(cls, tmp_path: Path) -> None:
    db = cls(str(tmp_path / "t.db"), BUSY_TIMEOUT)
    db.execute("CREATE TABLE t (a TEXT PRIMARY KEY)")
    twice = python_pack_rows([["x"], ["x"]], 1)
    with pytest.raises(ERRORS, match="UNIQUE constraint failed: t.a"):
        db.executemany("INSERT INTO t VALUES (?)", twice)
    with pytest.raises(ERRORS, match="no such table"):
        db.execute("SELECT * FROM missing")
    with pytest.raises(ERRORS, match="not an integer"):
        db.executemany("INSERT INTO t (rowid, a) VALUES (?, ?)", python_pack_rows([["y"]], 1), 0, 0)
    db.close()
    with pytest.raises(ERRORS, match="closed"):
        db.execute("SELECT 1")


@pytest.mark.parametrize("cls", _dbs())
def test_malformed_packed_rows_are_refused(cls, tmp_path: Path) -> None:
    db = cls(str(tmp_path / "t.db"), BUSY_TIMEOUT)
    db.execute("CREATE TABLE t (a, b)")
    good = python_pack_rows([["abc", 1], [None, 2.5]], 2)
    for bad in (good[:-1], good + b"\x00", good[:9] + b"\x07" + good[10:], b"", b"\x01"):
        with pytest.raises(ERRORS, match="truncated or malformed"):
            db.executemany("INSERT INTO t VALUES (?, ?)", bad)
    db.close()
    with sqlite3.connect(tmp_path / "t.db") as con:  # a bad chunk inserts none of its rows
        assert con.execute("SELECT count(*) FROM t").fetchone() == (0,)


@pytest.mark.parametrize("cls", _dbs())
def test_a_path_of_any_bytes_is_opened(cls, tmp_path: Path) -> None:
    """A folder name that is not UTF-8 (a str with surrogate escapes, as os.fsdecode gives it)."""
    folder = tmp_path / os.fsdecode(b"caf\xe9")
    folder.mkdir()
    db = cls(str(folder / "t.db"), BUSY_TIMEOUT)
    db.execute("CREATE TABLE t (a)")
    db.close()
    assert os.listdir(os.fsencode(folder)) == [b"t.db"]


@pytest.mark.parametrize("cls", _dbs())
@pytest.mark.parametrize(
    ("sql", "packed", "base", "message"),
    [
        ("INSERT INTO t VALUES (?,?)", python_pack_rows([["x"]], 1), -1, "bindings|value for each parameter"),
        ("INSERT INTO t (rowid, a, b) VALUES (?,?,?)", python_pack_rows([[2**63 - 1, 1]], 2), 5, "rowid|int"),
        ("INSERT INTO t VALUES (?, ?); SELECT 1", python_pack_rows([[1, 2]], 2), -1, "one statement"),
    ],
    ids=["too_few_values", "rowid_overflow", "two_statements"],
)
def test_misused_statements_are_refused(
    cls, sql: str, packed: bytes, base: int, message: str, tmp_path: Path
) -> None:
    db = cls(str(tmp_path / "t.db"), BUSY_TIMEOUT)
    db.execute("CREATE TABLE t (a, b)")
    with pytest.raises((*ERRORS, OverflowError), match=message):
        db.executemany(sql, packed, base, 0)
    db.close()
    with sqlite3.connect(tmp_path / "t.db") as con:
        assert con.execute("SELECT count(*) FROM t").fetchone() == (0,)


@needs_native
def test_threads_sharing_a_connection_take_turns(tmp_path: Path) -> None:
    """The C connection runs without SQLite's own mutex: its lock lets one thread use it at a time.
    Four threads insert at once, one closes meanwhile: every insert either lands whole or is refused
    as closed, and nothing else happens (no crash, no other error)."""
    assert native is not None
    db = native.RowDb(str(tmp_path / "t.db"), BUSY_TIMEOUT)
    for sql in (
        "PRAGMA synchronous=OFF",
        "PRAGMA journal_mode=OFF",
        "CREATE TABLE t (a TEXT PRIMARY KEY, n)",
    ):
        db.execute(sql)
    errors: list[str] = []
    done: list[int] = []

    def insert(k: int) -> None:
        for i in range(200):
            try:
                db.executemany(
                    "INSERT INTO t VALUES (?, ?)",
                    python_pack_rows([[f"{k}.{i}.{j}", j] for j in range(20)], 2),
                )
                done.append(1)
            except ERRORS as exc:
                errors.append(str(exc))

    threads = [threading.Thread(target=insert, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    threads[0].join()
    db.close()
    for t in threads[1:]:
        t.join()
    assert set(errors) <= {"the database is closed"}
    with sqlite3.connect(tmp_path / "t.db") as con:
        assert con.execute("SELECT count(*) FROM t").fetchone() == (20 * len(done),)
    uninitialised = native.RowDb.__new__(native.RowDb)
    with pytest.raises(ERRORS, match="closed"):
        uninitialised.execute("SELECT 1")
    uninitialised.close()


@pytest.mark.parametrize("native_module", [True, False], ids=["c", "python"])
def test_a_locked_file_is_waited_for_as_long_as_busy_timeout_says(
    native_module: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """open_db's RowDb, the C one and the Python one, waits for another connection's lock as long as
    packed_rows.BUSY_TIMEOUT (seconds) says, then refuses."""
    if native_module and native is None:
        pytest.skip("the C module is not built")
    if not native_module:
        monkeypatch.setattr(packed_rows, "native", None)
    monkeypatch.setattr(packed_rows, "BUSY_TIMEOUT", 0.4)
    path = str(tmp_path / "t.db")
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE t (a)")
    holder.execute("BEGIN EXCLUSIVE")
    db = packed_rows.open_db(path)
    try:
        started = time.monotonic()
        with pytest.raises(ERRORS):
            db.execute("BEGIN IMMEDIATE")
        waited = time.monotonic() - started
    finally:
        db.close()
        holder.close()
    assert 0.35 <= waited < 10, waited
