"""The vis.db writer: storage settings of a new file, and appending to an existing one (§7.1)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from msprobe_dask.writers.visdb import CONFIG_DDL, NODES_DDL, PAGE_SIZE, STACK_DDL, GraphTables, write_visdb


def _row(node_id: str, order: int) -> list:
    row: list = [None] * 22
    row[:5] = [f"NPU_0_0_{node_id}", "NPU_0_0", order, node_id, "1"]
    row[9], row[14], row[19], row[20] = 0, 0, 0, 0
    return row


CONFIG = ("1", "build", "", None, 1, False, "null", "[0]", "[0]")


def _pragma(path: Path, name: str):
    with sqlite3.connect(path) as con:
        return con.execute(f"PRAGMA {name}").fetchone()[0]


def test_a_new_file_has_big_pages_wal_and_the_reference_schema(tmp_path: Path) -> None:
    path = tmp_path / "build_1.vis.db"
    write_visdb(path, [GraphTables([_row("a", 0)], [("NPU_0_0_0", "[]")])], CONFIG)
    assert _pragma(path, "page_size") == PAGE_SIZE
    assert _pragma(path, "journal_mode") == "wal"
    with sqlite3.connect(path) as con:
        tables = con.execute("SELECT sql FROM sqlite_master WHERE type='table' ORDER BY rowid").fetchall()
        assert [t[0] for t in tables] == [NODES_DDL, STACK_DDL, CONFIG_DDL]
        assert con.execute(
            "SELECT count(*) FROM sqlite_master WHERE type='index' AND sql IS NOT NULL"
        ).fetchone() == (7,)


def test_an_existing_file_keeps_its_rows_and_page_size(tmp_path: Path) -> None:
    path = tmp_path / "build_1.vis.db"
    with sqlite3.connect(path) as con:  # as the reference leaves one: default 4 KiB pages
        for ddl in (NODES_DDL, STACK_DDL, CONFIG_DDL):
            con.execute(ddl)
        con.execute(f"INSERT INTO tb_nodes VALUES ({','.join('?' * 22)})", _row("old", 0))
    write_visdb(path, [GraphTables([_row("new", 1)], [])], CONFIG)
    assert _pragma(path, "page_size") == 4096
    with sqlite3.connect(path) as con:
        assert con.execute("SELECT node_name FROM tb_nodes ORDER BY rowid").fetchall() == [("old",), ("new",)]
