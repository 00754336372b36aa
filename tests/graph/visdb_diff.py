"""Diff two ``*.vis.db`` files: schema text, indexes, row sets, row order and every cell.

Usage from a test::

    problems = diff_visdb(ours, ref, normalize={("tb_nodes", "dump_data_dir"): fix_path})
    assert not problems, "\\n".join(problems[:20])

or from the shell: ``python tests/graph/visdb_diff.py OURS.vis.db REF.vis.db``.

Cells are compared with their SQLite storage class (``typeof``), so ``'0'`` vs ``0`` and ``0`` vs
``0.0`` are differences. ``normalize`` maps ``(table, column)`` to a function applied to the values of
both sides before comparison (for example to rewrite an absolute path); ``skip`` lists columns that
are not compared at all.
"""

from __future__ import annotations

import os
import sqlite3
import sys
from collections.abc import Callable, Iterable
from typing import Any

Normalizer = Callable[[Any], Any]


def _schema(con: sqlite3.Connection) -> list[tuple[str, str, str, str | None]]:
    rows = con.execute("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY rowid").fetchall()
    return [tuple(r) for r in rows]


def _columns(con: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in con.execute(f"PRAGMA table_info({table})")]


def _rows(con: sqlite3.Connection, table: str, cols: list[str]) -> list[tuple[Any, ...]]:
    sel = ", ".join(f'"{c}", typeof("{c}")' for c in cols)
    out = []
    for r in con.execute(f"SELECT {sel} FROM {table} ORDER BY rowid"):
        out.append(tuple((r[2 * i], r[2 * i + 1]) for i in range(len(cols))))
    return out


def _short(v: Any, n: int = 300) -> str:
    s = repr(v)
    return s if len(s) <= n else s[:n] + f"...({len(s)} chars)"


def _first_text_diff(a: str, b: str) -> str:
    i = next((k for k in range(min(len(a), len(b))) if a[k] != b[k]), min(len(a), len(b)))
    lo = max(0, i - 60)
    return f"first difference at char {i}: ours ...{a[lo : i + 80]!r} vs ref ...{b[lo : i + 80]!r}"


def diff_visdb(
    ours: str,
    ref: str,
    normalize: dict[tuple[str, str], Normalizer] | None = None,
    skip: Iterable[tuple[str, str]] = (),
    max_cells: int = 20,
    check_order: bool = True,
) -> list[str]:
    """Return a list of human-readable differences (empty when the files are equal)."""
    normalize = normalize or {}
    skip = set(skip)
    problems: list[str] = []
    a = sqlite3.connect(f"file:{ours}?mode=ro&immutable=1", uri=True)
    b = sqlite3.connect(f"file:{ref}?mode=ro&immutable=1", uri=True)
    try:
        sa, sb = _schema(a), _schema(b)
        if sa != sb:
            problems.append("sqlite_master differs:")
            for x, y in zip(sa, sb):
                if x != y:
                    problems.append(f"  ours {x!r}\n  ref  {y!r}")
            if len(sa) != len(sb):
                problems.append(f"  ours has {len(sa)} objects, ref has {len(sb)}")
        tables = [r[1] for r in sb if r[0] == "table"]
        for table in tables:
            if table not in {r[1] for r in sa if r[0] == "table"}:
                continue
            cols = _columns(b, table)
            if _columns(a, table) != cols:
                problems.append(f"{table}: columns differ {_columns(a, table)} vs {cols}")
                continue
            ra, rb = _rows(a, table, cols), _rows(b, table, cols)

            def norm(row: tuple[Any, ...], table: str = table, cols: list[str] = cols) -> tuple[Any, ...]:
                out = []
                for c, (v, t) in zip(cols, row):
                    if (table, c) in skip:
                        out.append(None)
                    elif (table, c) in normalize:
                        out.append((normalize[(table, c)](v), t))
                    else:
                        out.append((v, t))
                return tuple(out)

            ra, rb = [norm(r) for r in ra], [norm(r) for r in rb]
            if len(ra) != len(rb):
                problems.append(f"{table}: ours has {len(ra)} rows, ref has {len(rb)}")
            ka = {r[0]: r for r in ra}
            kb = {r[0]: r for r in rb}
            only_a = [k for k in ka if k not in kb]
            only_b = [k for k in kb if k not in ka]
            if only_a:
                problems.append(
                    f"{table}: {len(only_a)} rows only in ours, e.g. {[k[0] for k in only_a[:5]]}"
                )
            if only_b:
                problems.append(f"{table}: {len(only_b)} rows only in ref, e.g. {[k[0] for k in only_b[:5]]}")
            cells = 0
            for k, row_b in kb.items():
                row_a = ka.get(k)
                if row_a is None:
                    continue
                for c, x, y in zip(cols, row_a, row_b):
                    if x != y:
                        cells += 1
                        if cells <= max_cells:
                            msg = f"{table} id={k[0]!r} column {c}: ours {_short(x)} vs ref {_short(y)}"
                            if x and y and isinstance(x[0], str) and isinstance(y[0], str):
                                msg += "\n    " + _first_text_diff(x[0], y[0])
                            problems.append(msg)
            if cells > max_cells:
                problems.append(f"{table}: {cells} differing cells in all ({max_cells} shown)")
            if check_order and not only_a and not only_b and [r[0] for r in ra] != [r[0] for r in rb]:
                i = next(i for i, (x, y) in enumerate(zip(ra, rb)) if x[0] != y[0])
                problems.append(
                    f"{table}: row order differs at row {i}: ours {ra[i][0]!r} vs ref {rb[i][0]!r}"
                )
    finally:
        a.close()
        b.close()
    return problems


def rowids(path: str | os.PathLike[str]) -> list[list[tuple[int, str]]]:
    """(rowid, id) of every row of tb_nodes and tb_stack, in rowid order (diff_visdb compares rows in
    their order, not their rowids)."""
    con = sqlite3.connect(path)
    try:
        return [
            con.execute(f"SELECT rowid, id FROM {t} ORDER BY rowid").fetchall()
            for t in ("tb_nodes", "tb_stack")
        ]
    finally:
        con.close()


def path_normalizer(data_root: str, ref_root: str = "/workspace") -> Normalizer:
    """Rewrite ``data_root/...`` to ``ref_root/...`` (the corpus's reference outputs use /workspace)."""
    data_root = os.path.realpath(data_root).rstrip("/") + "/"
    ref_root = ref_root.rstrip("/") + "/"

    def fix(v: Any) -> Any:
        return ref_root + v[len(data_root) :] if isinstance(v, str) and v.startswith(data_root) else v

    return fix


def main(argv: list[str]) -> int:
    import argparse

    p = argparse.ArgumentParser(description="diff two vis.db files cell by cell")
    p.add_argument("ours")
    p.add_argument("ref")
    p.add_argument("--data-root", help="our input folder that the reference saw as /workspace")
    p.add_argument("--max-cells", type=int, default=20)
    a = p.parse_args(argv)
    normalize = {("tb_nodes", "dump_data_dir"): path_normalizer(a.data_root)} if a.data_root else None
    problems = diff_visdb(a.ours, a.ref, normalize=normalize, max_cells=a.max_cells)
    for line in problems:
        print(line)
    print("equal" if not problems else f"{len(problems)} difference(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
