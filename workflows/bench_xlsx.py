"""Benchmark: xlsx writers on the same compare rows (ours, openpyxl write-only with and without lxml,
XlsxWriter constant_memory), with csv as the yardstick.

    python workflows/bench_xlsx.py [--case transformer_big] [--rows 50000] [--repeat 3]

The rows are the compare table of a case in tests/data (its statistics compare, D6 fills included),
tiled to ``--rows`` with renamed entries when more are asked for. Each writer runs in a fresh process
per run, runs are interleaved, and the medians of wall time, CPU time (user + system) and the growth
of the process's peak RSS while the writer runs (above the loaded rows) are printed. Every workbook is
read back with openpyxl and compared with ours: values, types and fills of every cell, and sheet
names. openpyxl with lxml and XlsxWriter are measured only when importable (``pip install lxml
xlsxwriter`` into a separate folder on PYTHONPATH is enough).
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent.parent / "tests" / "data"
WRITERS = ("ours", "openpyxl", "openpyxl+lxml", "xlsxwriter", "csv")


def make_table(case: str, rows: int) -> Any:
    from msprobe_dask.pipeline.compare import compare

    [result] = compare(DATA / case / "target" / "dump.json", DATA / case / "golden" / "dump.json")
    table = result.table
    if rows > len(table.rows):
        copies = -(-rows // len(table.rows))
        table.rows = [[f"{r[0]}.copy{k}", *r[1:]] for k in range(copies) for r in table.rows][:rows]
        table.highlights = (table.highlights * copies)[:rows]
        table.highlight_reasons = (table.highlight_reasons * copies)[:rows]
        table.entries = (table.entries * copies)[:rows]
    return table


def _openpyxl(table: Any, path: Path) -> None:
    from openpyxl import Workbook
    from openpyxl.cell import WriteOnlyCell
    from openpyxl.styles import PatternFill

    from msprobe_dask.writers.xlsx_package import FILLS
    from msprobe_dask.writers.xlsx_writer import sheet_rows

    fills = {
        name: PatternFill(start_color=rgb, end_color=rgb, fill_type="solid") for name, rgb in FILLS.items()
    }
    book = Workbook(write_only=True)
    sheet = book.create_sheet("Sheet1")
    for values, fill in sheet_rows(table, 0, len(table.rows)):
        cells = []
        for value in values:
            cell = WriteOnlyCell(sheet, value=value)
            if fill:
                cell.fill = fills[fill]
            cells.append(cell)
        sheet.append(cells)
    book.save(path)


def _xlsxwriter(table: Any, path: Path) -> None:
    import xlsxwriter

    from msprobe_dask.writers.xlsx_package import FILLS
    from msprobe_dask.writers.xlsx_writer import sheet_rows

    book = xlsxwriter.Workbook(str(path), {"constant_memory": True})
    formats = {
        name: book.add_format({"bg_color": f"#{rgb[2:]}", "pattern": 1}) for name, rgb in FILLS.items()
    }
    sheet = book.add_worksheet("Sheet1")
    for row, (values, fill) in enumerate(sheet_rows(table, 0, len(table.rows))):
        style = formats[fill] if fill else None
        for column, value in enumerate(values):
            if value is None or value == "":
                if style:
                    sheet.write_blank(row, column, None, style)
            elif isinstance(value, bool):
                sheet.write_boolean(row, column, value, style)
            elif isinstance(value, (int, float)):
                sheet.write_number(row, column, value, style)
            else:
                sheet.write_string(row, column, value, style)
    book.close()


def _run_one(writer: str, table_file: Path, out: Path) -> None:
    """In a child process: load the rows, write them with ``writer``, print the figures as json."""
    with open(table_file, "rb") as f:
        table = pickle.load(f)
    before = _peak_mib()
    wall, cpu = time.perf_counter(), time.process_time()
    if writer == "ours":
        from msprobe_dask.writers.xlsx_writer import write_xlsx

        write_xlsx(table, out)
    elif writer == "csv":
        from msprobe_dask.writers.csv_writer import write_csv

        write_csv(table, out)
    elif writer == "xlsxwriter":
        _xlsxwriter(table, out)
    else:
        _openpyxl(table, out)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(json.dumps({"wall": wall, "cpu": cpu, "rss_mib": _peak_mib() - before}))


def _peak_mib() -> float:
    """This process's peak RSS so far (the writer's own peak is the growth while it runs)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _available(writer: str) -> bool:
    module = {"openpyxl+lxml": "lxml", "xlsxwriter": "xlsxwriter"}.get(writer)
    if module is None:
        return True
    probe = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True)
    return probe.returncode == 0


def _measure(writer: str, table_file: Path, out: Path) -> dict[str, float]:
    env = dict(os.environ, OPENPYXL_LXML="True" if writer == "openpyxl+lxml" else "False")
    done = subprocess.run(
        [sys.executable, __file__, "--child", writer, str(table_file), str(out)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    return json.loads(done.stdout)


def _cells(path: Path) -> list[tuple[str, list[list[tuple[Any, str, str | None]]]]]:
    import openpyxl

    book = openpyxl.load_workbook(path)
    return [
        (
            sheet.title,
            [
                [
                    (
                        c.value,
                        type(c.value).__name__,
                        c.fill.fgColor.rgb if c.fill.fill_type == "solid" else None,
                    )
                    for c in row
                ]
                for row in sheet.iter_rows()
            ],
        )
        for sheet in book
    ]


def main() -> int:
    if sys.argv[1:2] == ["--child"]:
        _run_one(sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", default="transformer_big", help="a case folder in tests/data")
    parser.add_argument("--rows", type=int, default=0, help="tile the case's rows to this many")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    writers = [w for w in WRITERS if _available(w)]
    with tempfile.TemporaryDirectory() as tmp:
        table_file = Path(tmp) / "table.pickle"
        table = make_table(args.case, args.rows)
        with open(table_file, "wb") as f:
            pickle.dump(table, f)
        print(f"{args.case}: {len(table.rows)} rows x {len(table.columns)} columns")
        runs: dict[str, list[dict[str, float]]] = {w: [] for w in writers}
        outputs = {w: Path(tmp) / f"{w}.{'csv' if w == 'csv' else 'xlsx'}" for w in writers}
        for _ in range(args.repeat):  # interleaved: one run of each writer per round
            for writer in writers:
                runs[writer].append(_measure(writer, table_file, outputs[writer]))
        reference = _cells(outputs["ours"])
        for writer in writers:
            figures = {k: statistics.median(r[k] for r in runs[writer]) for k in ("wall", "cpu", "rss_mib")}
            same = "-" if writer == "csv" else ("yes" if _cells(outputs[writer]) == reference else "NO")
            print(
                f"{writer:>14}: wall {figures['wall']:6.2f} s  cpu {figures['cpu']:6.2f} s  "
                f"peak +{figures['rss_mib']:4.0f} MiB  size {outputs[writer].stat().st_size / 2**20:6.1f} MiB"
                f"  same cells as ours: {same}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
