"""A statistics rank's xlsx written part by part by its tasks (pipeline/chunked.py, part_forms.XLSX) is
the workbook write_xlsx writes from the whole table: the same sheets' XML (so, read back with openpyxl,
the same cells, types and fills: D6), also when sheets end inside a part."""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import openpyxl
import pytest
from conftest import case_dir

from msprobe_dask.analysis.divergence import Tolerance
from msprobe_dask.pipeline import part_scan
from msprobe_dask.pipeline.compare import compare, compare_to_files
from msprobe_dask.pipeline.part_file import WrittenRank
from msprobe_dask.pipeline.scheduler import RunOptions
from msprobe_dask.writers import xlsx_package, xlsx_writer


def _cells(path: Path) -> list[tuple[str, str, Any, str, str | None]]:
    """(sheet, coordinate, value, type, solid fill) of every cell."""
    book = openpyxl.load_workbook(path)
    return [
        (sheet.title, c.coordinate, c.value, type(c.value).__name__, c.fill.fill_type and c.fill.fgColor.rgb)
        for sheet in book
        for row in sheet.iter_rows()
        for c in row
    ]


def _parts(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as package:
        return {name: package.read(name) for name in package.namelist()}


@pytest.mark.parametrize(
    ("case", "rows_per_sheet", "texts_held"),
    [
        ("transformer_big", 1000, 3),  # sheets end inside parts; the text markups made again and again
        ("stat_mix", xlsx_writer.MAX_ROWS_PER_SHEET, xlsx_package.RowWriter.TEXTS_HELD),
        ("stat_mix", 7, xlsx_package.RowWriter.TEXTS_HELD),
        ("multirank", 5, xlsx_package.RowWriter.TEXTS_HELD),
    ],
)
def test_parts_write_the_whole_tables_workbook(
    case: str, rows_per_sheet: int, texts_held: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(part_scan, "PART_BYTES", 40_000)
    monkeypatch.setattr(part_scan, "MIN_PARTS", 1)
    monkeypatch.setattr(xlsx_writer, "MAX_ROWS_PER_SHEET", rows_per_sheet)
    monkeypatch.setattr(xlsx_package.RowWriter, "TEXTS_HELD", texts_held)
    target, golden = case_dir(case) / "target", case_dir(case) / "golden"
    run = RunOptions()
    written = compare_to_files(
        target,
        golden,
        lambda label: tmp_path / f"parts{label.replace('/', '_')}.xlsx",
        run=run,
        summary_tolerance=Tolerance(),
        xlsx=True,
    )
    tables = compare(target, golden, run=run)
    assert [w.label for w in written] == [t.label for t in tables] and tables
    for rank, whole in zip(written, tables):
        assert isinstance(rank, WrittenRank) and rank.path is not None
        expected = xlsx_writer.write_xlsx(
            whole.table, tmp_path / f"whole{whole.label.replace('/', '_')}.xlsx"
        )
        assert _parts(rank.path) == _parts(expected)
        with zipfile.ZipFile(rank.path) as package:
            sheets = [name for name in package.namelist() if name.startswith("xl/worksheets/")]
        assert len(sheets) == -(-len(whole.table.rows) // rows_per_sheet)
        if case == "stat_mix":  # (the same parts read back the same: once is enough)
            cells = _cells(rank.path)
            assert cells == _cells(expected)
            assert any(fill for *_, fill in cells) and any(whole.table.highlights)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [p.name for p in tmp_path.glob("parts*.xlsx")] + [p.name for p in tmp_path.glob("whole*.xlsx")]
    )  # no temporary file left
