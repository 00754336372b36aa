"""The vis.db writer: storage settings of a new file, and appending to an existing one (§7.1)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from msprobe_dask.errors import OutputError
from msprobe_dask.writers import packed_rows
from msprobe_dask.writers.packed_rows import pack_rows
from msprobe_dask.writers.visdb import (
    CONFIG_DDL,
    NODES_DDL,
    PAGE_SIZE,
    STACK_DDL,
    GraphTables,
    VisdbWriter,
    write_visdb,
)


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
    write_visdb(path, [GraphTables("NPU_0_0", 1, [_row("a", 0)], [("NPU_0_0_0", "[]")])], CONFIG)
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
    write_visdb(path, [GraphTables("NPU_0_0", 1, [_row("new", 0)], [])], CONFIG)
    assert _pragma(path, "page_size") == 4096
    with sqlite3.connect(path) as con:
        assert con.execute("SELECT node_name FROM tb_nodes ORDER BY rowid").fetchall() == [("old",), ("new",)]


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
            [pack_rows(a[3:], 22), pack_rows(a[:3], 22)],
            True,
        ),
        GraphTables(
            "Bench_0_0",
            4,
            [],
            [("Bench_0_0_0", "[0]")],
            [pack_rows([b[3], b[0]], 22), pack_rows(b[1:3], 22)],
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
    truncated = pack_rows(_graph_rows("NPU_0_0", 2), 22)[:-3]
    with pytest.raises(OutputError, match=r"b\.vis\.db: cannot write the vis.db: packed rows are truncated"):
        write_visdb(tmp_path / "b.vis.db", [GraphTables("NPU_0_0", 2, [], [], [truncated], True)], CONFIG)
    assert list(tmp_path.iterdir()) == []


def test_ids_already_in_the_target_are_refused_and_the_target_kept(tmp_path: Path) -> None:
    path = tmp_path / "build_1.vis.db"
    write_visdb(path, [GraphTables("NPU_0_0", 2, _graph_rows("NPU_0_0", 2), [])], CONFIG)
    before = path.read_bytes()
    with pytest.raises(OutputError, match="UNIQUE constraint failed: tb_nodes.id"):
        write_visdb(path, [GraphTables("NPU_0_0", 2, _graph_rows("NPU_0_0", 2), [])], CONFIG)
    assert path.read_bytes() == before
    assert _leftovers(tmp_path) == []


def test_a_target_that_cannot_be_read_or_replaced_is_one_error_and_no_temporary_file(tmp_path: Path) -> None:
    path = tmp_path / "build_1.vis.db"
    path.mkdir()  # a folder where the file goes: it cannot be appended to
    (path / "x").write_text("")
    with pytest.raises(OutputError, match=r"build_1\.vis\.db: cannot write the vis.db: Is a directory"):
        write_visdb(path, [GraphTables("NPU_0_0", 1, [_row("a", 0)], [])], CONFIG)
    other = tmp_path / "build_2.vis.db"
    writer = VisdbWriter(other)
    other.mkdir()  # made meanwhile: the final rename fails
    (other / "x").write_text("")
    with pytest.raises(OutputError, match=r"build_2\.vis\.db: cannot write the vis.db"):
        writer.finish([GraphTables("NPU_0_0", 1, [_row("a", 0)], [])], CONFIG)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["build_1.vis.db", "build_2.vis.db"]


@pytest.mark.parametrize("native", [True, False], ids=["c_path", "python_path"])
def test_a_damaged_target_is_reported_as_sqlite_reports_it(
    native: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Appending to an existing vis.db whose id index is damaged: SQLite's own message, not one about
    packed rows; the target is left as it was."""
    if not native:
        monkeypatch.setattr(packed_rows, "native", None)
    path = tmp_path / "build_1.vis.db"
    with sqlite3.connect(path) as con:
        con.execute("PRAGMA page_size=4096")
        con.execute(NODES_DDL)
        con.executemany(f"INSERT INTO tb_nodes VALUES ({','.join('?' * 22)})", _graph_rows("NPU_0_0", 20_000))
        leaves = [
            p
            for (p,) in con.execute(
                "SELECT pageno FROM dbstat WHERE name = 'sqlite_autoindex_tb_nodes_1' AND pagetype = 'leaf'"
            )
        ]
    con.close()
    with open(path, "r+b") as f:  # the index's leaves only: max(rowid) still reads
        for page in leaves[len(leaves) // 10 : len(leaves) * 9 // 10]:
            f.seek((page - 1) * 4096)
            f.write(b"\xee" * 4096)
    before = path.read_bytes()
    with pytest.raises(OutputError, match="database disk image is malformed"):
        mid_index = _graph_rows("NPU_0_0_5", 3)  # ids that sort among the damaged leaves
        write_visdb(path, [GraphTables("NPU_0_0_5", 3, mid_index, [])], CONFIG)
    assert path.read_bytes() == before
    assert _leftovers(tmp_path) == []
