"""Write a ``*.vis.db`` (the SQLite file tb-graph-ascend opens) in one transaction.

The schema text, object creation order, WAL journal mode and index set are the reference's
(graph_visualize.md §7.3). Rows are written to a temporary file next to the target (without a
rollback journal: a failed write deletes the file), the indexes are added at the end, the file is
switched to WAL mode and renamed only when complete, so an interrupted run leaves nothing that
looks finished. An existing target is copied first and appended to, as the reference does.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from msprobe_dask.errors import OutputError
from msprobe_dask.writers.row_parts import copy_select

NODES_DDL = """CREATE TABLE tb_nodes (
    id TEXT PRIMARY KEY,
    graph_id TEXT NOT NULL,
    node_order INTEGER NOT NULL,
    node_name TEXT NOT NULL,
    node_type TEXT NOT NULL,
    up_node TEXT,
    sub_nodes TEXT,
    precision_index INTEGER,
    overflow_level TEXT,
    micro_step_id INTEGER NOT NULL,
    matched_node_link TEXT,
    stack_id TEXT,
    parallel_merge_info TEXT,
    matched_distributed TEXT,
    modified INTEGER NOT NULL,
    input_data TEXT,
    output_data TEXT,
    data_source TEXT,
    dump_data_dir TEXT,
    step INTEGER NOT NULL,
    rank INTEGER NOT NULL,
    is_distributed INTEGER
)"""
STACK_DDL = """CREATE TABLE tb_stack (
    id TEXT PRIMARY KEY,
    stack_info TEXT
)"""
CONFIG_DDL = """CREATE TABLE tb_config (
    id TEXT PRIMARY KEY,
    graph_type TEXT NOT NULL,
    task TEXT,
    tool_tip TEXT,
    micro_steps INTEGER,
    overflow_check INTEGER,
    node_colors TEXT NOT NULL,
    rank_list TEXT NOT NULL,
    step_list TEXT NOT NULL
)"""
INDEXES = (
    "CREATE INDEX index1 ON tb_nodes (step, rank, data_source, up_node, node_order)",
    "CREATE INDEX index2 ON tb_nodes (step, rank, data_source, node_name)",
    "CREATE INDEX index3 ON tb_nodes (step, rank, data_source, node_order)",
    "CREATE INDEX index4 ON tb_nodes (step, rank, node_order)",
    "CREATE INDEX index5 ON tb_nodes (step, rank, micro_step_id, node_order)",
    "CREATE INDEX index6 ON tb_nodes (step, rank, modified, matched_node_link)",
    "CREATE INDEX index7 ON tb_nodes (is_distributed)",
)
N_NODE_COLUMNS = 22
CACHE_KIB = 64 * 1024  # page cache while inserting and indexing (bounded; SQLite's default is 2 MiB)
# A node row holds ~1-3 KB of JSON: with SQLite's default 4 KiB pages a row takes a page or more, and
# each of the 7 index builds walks every page of the table. 64 KiB pages (a storage detail: same
# tables and rows; the plugin reads any page size) cut the write of a 100,000-node compare by ~25%.
# A new file only: an existing db keeps its page size.
PAGE_SIZE = 65536


ID, MATCHED_DISTRIBUTED = 0, 13  # positions of tb_nodes' columns


class GraphTables(NamedTuple):
    """One graph's rows, in write order: tb_nodes and tb_stack rows. With ``parts`` (row_parts files
    whose table ``table`` holds the tb_nodes rows), the rows are copied from there, and ``nodes`` are
    only the rows whose matched_distributed cell changed since."""

    nodes: Sequence[Sequence[Any]]
    stacks: Sequence[tuple[str, str]]
    parts: Sequence[str] = ()
    table: str = ""


def _create_schema(con: sqlite3.Connection) -> None:
    for ddl in (NODES_DDL, STACK_DDL, CONFIG_DDL):
        con.execute(ddl.replace("CREATE TABLE", "CREATE TABLE IF NOT EXISTS", 1))


def write_visdb(path: str | os.PathLike[str], graphs: Iterable[GraphTables], config: Sequence[Any]) -> str:
    """Write ``graphs`` and the tb_config row.

    Returns the final path. Everything happens on a temporary file that is renamed to ``path`` at the
    end, in one transaction (one per graph copied from part files: SQLite detaches a database only
    between transactions).
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        if path.exists():
            shutil.copyfile(path, tmp)
        con = sqlite3.connect(tmp, timeout=30, isolation_level=None)
    except OSError as exc:
        raise OutputError(path.parent, f"cannot write the vis.db: {exc.strerror or exc}") from None
    ok = False
    try:
        # the file is private until renamed: no rollback journal while filling it, WAL mode set at the end
        con.execute(f"PRAGMA page_size={PAGE_SIZE}")
        con.execute("PRAGMA journal_mode=OFF")
        con.execute("PRAGMA synchronous=OFF")
        con.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
        con.execute("BEGIN")
        _create_schema(con)
        node_sql = f"INSERT INTO tb_nodes VALUES ({','.join('?' * N_NODE_COLUMNS)})"
        for g in graphs:
            if g.parts:
                _copy_parts(con, g)
            else:
                con.executemany(node_sql, g.nodes)
            con.executemany("INSERT INTO tb_stack (id, stack_info) VALUES (?, ?)", g.stacks)
        con.execute("INSERT OR IGNORE INTO tb_config VALUES (?,?,?,?,?,?,?,?,?)", tuple(config))
        for ddl in INDEXES:
            con.execute(ddl.replace("CREATE INDEX", "CREATE INDEX IF NOT EXISTS", 1))
        con.execute("COMMIT")
        con.execute("PRAGMA journal_mode=WAL")
        ok = True
    except sqlite3.Error as exc:
        raise OutputError(path, f"cannot write the vis.db: {exc}") from None
    finally:
        con.close()
        if not ok:
            for suffix in ("", "-wal", "-shm"):
                try:
                    os.unlink(f"{tmp}{suffix}")
                except FileNotFoundError:
                    pass
    os.replace(tmp, path)
    return str(path)


def _copy_parts(con: sqlite3.Connection, g: GraphTables) -> None:
    for i, part in enumerate(g.parts):
        con.execute(f"ATTACH DATABASE ? AS p{i}", (part,))
    con.execute(f"INSERT INTO tb_nodes {copy_select(len(g.parts), g.table)}")
    con.executemany(
        "UPDATE tb_nodes SET matched_distributed = ? WHERE id = ?",
        [(row[MATCHED_DISTRIBUTED], row[ID]) for row in g.nodes],
    )
    con.execute("COMMIT")
    for i in range(len(g.parts)):
        con.execute(f"DETACH DATABASE p{i}")
    con.execute("BEGIN")
