"""The tables of a ``*.vis.db`` as the reference declares them (graph_visualize.md §7.3: their schema
text, creation order and index set), the statements that fill them, and the storage settings of the
connections that write one (writers/visdb.py)."""

from __future__ import annotations

from msprobe_dask.columns import VISDB_NODE_COLUMNS, VISDB_NODE_TABLE

NODES_DDL = "CREATE TABLE tb_nodes (\n" + ",\n".join(f"    {n} {t}" for n, t in VISDB_NODE_TABLE) + "\n)"
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
N_NODE_COLUMNS = len(VISDB_NODE_COLUMNS)
CACHE_KIB = 64 * 1024  # page cache while inserting and indexing (bounded; SQLite's default is 2 MiB)
# A shared writer's (VisdbWriter): its one transaction's pages are written when the cache is full, by the
# inserts beside the chunk tasks, rather than all by the last task's commit (T: that task 13 -> 6 ms of
# CPU, the last two inserts +2.5 ms, 3 runs each; with 8 MiB, 4 ms and +4 ms).
SHARED_CACHE_KIB = 16 * 1024
# Each of the 7 index builds reads the whole table: through a memory map of the file instead of copies
# into the page cache, building them takes ~30% less time (the mapped pages are the OS's file cache,
# counted in the process's resident set while mapped, not memory of its own). The map covers the file's
# first 256 MiB only, so that a big vis.db does not add its size to the run's resident set (one rank of
# 1,001,000 entries a side writes 3.0 GB): the 7 index builds of a 600 MB vis.db (200,200 entries a
# side) took 1.56-1.71 s of CPU and 359 MiB of peak RSS with it, against 1.44-1.49 s and 571 MiB mapped
# whole, 1.84-1.86 s and 127 MiB without a map.
MMAP_BYTES = 256 << 20
# A node row holds ~1-3 KB of JSON: with SQLite's default 4 KiB pages a row takes a page or more, and
# each of the 7 index builds walks every page of the table. 64 KiB pages (a storage detail: same
# tables and rows; the plugin reads any page size) cut the write of a 100,000-node compare by ~25%.
PAGE_SIZE = 65536
# The index builds at the end of a run (not indexed early) sort the table's keys: SQLite's sorter then
# works with this many helper threads of its own (PRAGMA threads), on the CPU the run leaves idle by
# then. The same file, byte for byte; the 7 index builds of a 600 MB vis.db (200,200 entries a side)
# 2.57 / 2.72 -> 2.13 / 1.64 s, the same CPU (load 7).
INDEX_SORT_THREADS = 1


NODE_COLUMNS_SQL = ", ".join(VISDB_NODE_COLUMNS)
INSERT_NODES = (
    f"INSERT INTO tb_nodes (rowid, {NODE_COLUMNS_SQL}) VALUES ({','.join('?' * (N_NODE_COLUMNS + 1))})"
)
# packed tb_stack rows are (number, id, stack_info): ?2, the number, gives the rowid (?1)
INSERT_STACKS = "INSERT INTO tb_stack (rowid, id, stack_info) VALUES (?1, ?3, ?4)"
NODES, STACKS = "tb_nodes", "tb_stack"
INSERT_CONFIG = "INSERT INTO tb_config VALUES (?,?,?,?,?,?,?,?,?)"
UPDATE_DISTRIBUTED = "UPDATE tb_nodes SET matched_distributed = ? WHERE id = ?"
ID, ORDER, MATCHED_DISTRIBUTED, DISTRIBUTED = map(
    VISDB_NODE_COLUMNS.index, ("id", "node_order", "matched_distributed", "is_distributed")
)


TABLES = (NODES_DDL, STACK_DDL, CONFIG_DDL)
# the settings of each connection that writes the file (private until named; WAL is set at the end).
# The rollback journal is for a writer's process killed in the middle of a transaction (see the module):
# without one, the pages SQLite had written (a commit's, or a big insert's spilled from its cache) stay
# in the file, and the task run again found some of its rows there and left out the rest. Appended
# rows go to new pages, which need no journal: +0.03% of the instructions of a 7,716-entry compare, an
# insert task ~5% more CPU where the indexes are kept up to date by the inserts (2026-12-05).
SESSION = (
    "PRAGMA journal_mode=TRUNCATE",
    "PRAGMA synchronous=OFF",
    f"PRAGMA cache_size=-{CACHE_KIB}",
    f"PRAGMA mmap_size={MMAP_BYTES}",
)
