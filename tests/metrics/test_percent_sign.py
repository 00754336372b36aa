"""The sign after a relative error's number is defined once (metrics/stats.PERCENT) and every cell that
holds one takes it there: the Python paths, and the C kernels it is handed to (the statistics csv's,
writers/csrc/stat_lines.c; the graph's relative errors and exported texts, graph/csrc/compare.c and
text.c through item_text.TEXT_RULES). Changed before anything else is imported, a statistics compare's
csv and summary and a graph_visualize's vis.db are those of ``%`` with the other sign, cell for cell."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "data" / "stat_mix"
OTHER_SIGN = "pct"

RUN = """
import sys
from msprobe_dask.metrics import stats
stats.PERCENT = sys.argv[1]
import msprobe_dask as mp
from msprobe_dask.cli import main
target, golden, out = sys.argv[2:5]
print(mp.compare(target + "/dump.json", golden + "/dump.json").summary())
from msprobe_dask.graph import item_text  # (a long decimal's text, rounded with its sign kept)
item = {"Max": "12.34567891" + stats.PERCENT, "Min": "1.5" + stats.PERCENT}
print(item_text.items_json({"x": item}, False, False))
assert main(["compare", "-tp", target + "/dump.json", "-gp", golden + "/dump.json", "-o", out, "-q"]) == 0
assert main(["graph_visualize", "-tp", target, "-gp", golden, "-o", out, "-q"]) == 0
"""


def _run(sign: str, out: Path) -> tuple[str, str, list[str]]:
    """(the summary and the items text RUN prints, the compare csv, every vis.db row) of stat_mix with
    ``sign`` as the percent."""
    out.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", RUN, sign, str(DATA / "target"), str(DATA / "golden"), str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    (csv,) = out.glob("*.csv")
    (db,) = out.glob("*.vis.db")
    with sqlite3.connect(db) as connection:
        rows = list(connection.iterdump())
    return "\n".join(done.stdout.splitlines()[:2]), csv.read_text(encoding="utf-8"), rows


def test_every_relative_error_cell_takes_its_percent_sign_from_stats(tmp_path: Path) -> None:
    printed, csv, rows = _run("%", tmp_path / "percent")
    other_printed, other_csv, other_rows = _run(OTHER_SIGN, tmp_path / "other")
    assert '"12.345679%"' in printed and "%" in csv and any("%" in row for row in rows)
    assert OTHER_SIGN not in printed + csv and not any(OTHER_SIGN in row for row in rows)
    assert other_csv == csv.replace("%", OTHER_SIGN)
    assert other_rows == [row.replace("%", OTHER_SIGN) for row in rows]
    # (the summary reads the cells back as numbers)
    assert other_printed == printed.replace("%", OTHER_SIGN)
