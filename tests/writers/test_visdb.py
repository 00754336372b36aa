"""The vis.db writer: storage settings of a new file; an existing one is never changed (§7.1, D32)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from msprobe_dask.columns import VISDB_NODE_COLUMNS
from msprobe_dask.errors import OutputError
from msprobe_dask.writers.packed_rows import pack_rows
from msprobe_dask.writers.visdb import GraphTables, VisdbWriter, write_visdb
from msprobe_dask.writers.visdb_schema import CONFIG_DDL, NODES_DDL, PAGE_SIZE, STACK_DDL

N = len(VISDB_NODE_COLUMNS)  # (a column added to the table is added to these rows too)
_ZEROS = [VISDB_NODE_COLUMNS.index(c) for c in ("micro_step_id", "modified", "step", "rank")]


def _row(node_id: str, order: int) -> list:
    row: list = [None] * N
    row[:5] = [f"NPU_0_0_{node_id}", "NPU_0_0", order, node_id, "1"]
    for at in _ZEROS:
        row[at] = 0
    return row


CONFIG = ("1", "build", "", None, 1, False, "null", "[0]", "[0]")


def _pragma(path: Path, name: str):
    with sqlite3.connect(path) as con:
        return con.execute(f"PRAGMA {name}").fetchone()[0]


def test_a_new_file_has_big_pages_wal_and_the_reference_schema(tmp_path: Path) -> None:
    path = tmp_path / "build_1.vis.db"
    write_visdb(path, [GraphTables("NPU_0_0", 1, [_row("a", 0)], [("NPU_0_0_0", "[]")])], CONFIG)
    assert _pragma(path, "page_size") == PAGE_SIZE
    assert _pragma(path, "journal_mode") == "wal"
    with sqlite3.connect(path) as con:
        tables = con.execute("SELECT sql FROM sqlite_master WHERE type='table' ORDER BY rowid").fetchall()
        assert [t[0] for t in tables] == [NODES_DDL, STACK_DDL, CONFIG_DDL]
        assert con.execute(
            "SELECT count(*) FROM sqlite_master WHERE type='index' AND sql IS NOT NULL"
        ).fetchone() == (7,)


def test_an_existing_file_is_neither_replaced_nor_changed(tmp_path: Path) -> None:
    """The reference adds the rows to a vis.db of the same name (D32); we refuse, at the start and again
    when the result is named (one made meanwhile)."""
    path = tmp_path / "build_1.vis.db"
    with sqlite3.connect(path) as con:
        for ddl in (NODES_DDL, STACK_DDL, CONFIG_DDL):
            con.execute(ddl)
        con.execute(f"INSERT INTO tb_nodes VALUES ({','.join('?' * N)})", _row("old", 0))
    con.close()
    before = path.read_bytes()
    with pytest.raises(OutputError, match=r"build_1\.vis\.db: already exists and is not replaced"):
        write_visdb(path, [GraphTables("NPU_0_0", 1, [_row("new", 0)], [])], CONFIG)
    other = tmp_path / "build_2.vis.db"
    writer = VisdbWriter(other)
    other.write_bytes(before)  # made meanwhile
    with pytest.raises(OutputError, match=r"build_2\.vis\.db: already exists and is not replaced"):
        writer.finish([GraphTables("NPU_0_0", 1, [_row("new", 0)], [])], CONFIG)
    assert path.read_bytes() == before and other.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["build_1.vis.db", "build_2.vis.db"]


def _graph_rows(graph: str, n: int) -> list[list]:
    rows = []
    for i in range(n):
        row = _row(f"{graph}_{i}", i)
        row[0], row[1] = f"{graph}_{i}", graph
        rows.append(row)
    return rows


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith((".tmp", "-wal", "-shm", "-journal")))


def test_chunks_given_out_of_node_order_are_written_in_graph_and_node_order(tmp_path: Path) -> None:
    """The write task gets each graph's chunks as the chunk tasks made them (a compare's Bench chunks
    out of node order): the tables read back as if written graph after graph, node after node."""
    a, b = _graph_rows("NPU_0_0", 5), _graph_rows("Bench_0_0", 4)
    graphs = [
        GraphTables(
            "NPU_0_0",
            5,
            [],
            [(f"NPU_0_0_{n}", f"[{n}]") for n in range(3)],
            [pack_rows(a[3:], N), pack_rows(a[:3], N)],
            True,
        ),
        GraphTables(
            "Bench_0_0",
            4,
            [],
            [("Bench_0_0_0", "[0]")],
            [pack_rows([b[3], b[0]], N), pack_rows(b[1:3], N)],
            True,
        ),
    ]
    path = write_visdb(tmp_path / "c.vis.db", graphs, CONFIG)
    assert _leftovers(tmp_path) == []
    with sqlite3.connect(path) as con:
        got = con.execute("SELECT rowid, id FROM tb_nodes ORDER BY rowid").fetchall()
        stacks = con.execute("SELECT rowid, id, stack_info FROM tb_stack ORDER BY rowid").fetchall()
    assert got == [(i + 1, row[0]) for i, row in enumerate(a + b)]
    expected = [(g, n) for g, k in (("NPU_0_0", 3), ("Bench_0_0", 1)) for n in range(k)]
    assert stacks == [(i + 1, f"{g}_{n}", f"[{n}]") for i, (g, n) in enumerate(expected)]


def test_a_graph_missing_rows_is_not_written(tmp_path: Path) -> None:
    writer = VisdbWriter(tmp_path / "b.vis.db")
    with pytest.raises(RuntimeError, match="3 rows written to tb_nodes, 4 expected"):
        writer.finish([GraphTables("NPU_0_0", 4, _graph_rows("NPU_0_0", 3), [])], CONFIG)
    assert list(tmp_path.iterdir()) == []


def test_a_truncated_chunk_is_one_error_and_nothing_is_left(tmp_path: Path) -> None:
    truncated = pack_rows(_graph_rows("NPU_0_0", 2), N)[:-3]
    with pytest.raises(OutputError, match=r"b\.vis\.db: cannot write the vis.db: packed rows are truncated"):
        write_visdb(tmp_path / "b.vis.db", [GraphTables("NPU_0_0", 2, [], [], [truncated], True)], CONFIG)
    assert list(tmp_path.iterdir()) == []


def test_ids_twice_in_one_write_are_one_error_and_nothing_is_left(tmp_path: Path) -> None:
    path = tmp_path / "build_1.vis.db"
    twice = [GraphTables(graph, 2, _graph_rows("NPU_0_0", 2), []) for graph in ("NPU_0_0", "NPU_0_1")]
    with pytest.raises(OutputError, match="UNIQUE constraint failed: tb_nodes.id"):
        write_visdb(path, twice, CONFIG)
    assert list(tmp_path.iterdir()) == []


def test_a_folder_that_cannot_hold_it_is_one_error_and_no_temporary_file(tmp_path: Path) -> None:
    (tmp_path / "a_file").write_text("")
    with pytest.raises(OutputError, match="cannot write the vis.db"):
        write_visdb(
            tmp_path / "a_file" / "build_1.vis.db", [GraphTables("NPU_0_0", 1, [_row("a", 0)], [])], CONFIG
        )
    assert [p.name for p in tmp_path.iterdir()] == ["a_file"]
