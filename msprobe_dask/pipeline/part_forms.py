"""What a rank's result file is made of when its table parts write it (pipeline/chunked.py): csv or xlsx.

A form says whether the rows carry the D6 highlights, gives each table part's bytes by section (the
csv has one; an xlsx has a section per sheet, the sheet's XML), the bytes that open and close a
section, and how the complete temporary file becomes the result: the csv is renamed, the xlsx's
sheets are stored in a zip (``writers/xlsx_package.py``'s streaming writer, the bytes
``write_xlsx`` writes for the whole table).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

from msprobe_dask.columns import STACK_COLUMN
from msprobe_dask.table import ColumnTable, CompareTable, Sides, column_table, stack_cells
from msprobe_dask.writers.atomic import publish, set_result_mode
from msprobe_dask.writers.csv_writer import csv_lines, header_line
from msprobe_dask.writers.stat_lines import statistics_lines, statistics_part
from msprobe_dask.writers.xlsx_package import SHEET_TAIL, package_spool
from msprobe_dask.writers.xlsx_writer import header_xml, part_xml, sheet_names

Sections = tuple[tuple[int, bytes], ...]
"""A table part's bytes: (section, bytes) in the file's order; sections are numbered from 0."""


class CsvForm:
    """compare_result_*.csv: one section, its header line first."""

    highlight = False
    tail = b""  # what closes a section

    def head(self, columns: list[str]) -> bytes:
        """What opens a section."""
        return header_line(columns)

    def render(self, table: CompareTable, first: int) -> Sections:
        """A table part's bytes; ``first``: the index of its first row among the rank's rows."""
        return ((0, csv_lines(table.rows)),)

    def render_sides(
        self, sides: Sides, mode: str, stacks: Mapping[str, list[str]] | None, float_stats: Sequence[bool]
    ) -> Sections | None:
        """``render`` of the table of these rows (``build_table``'s arguments), made without the table
        (a statistics table by ``writers/stat_lines.py``'s kernel); None where it is not (nor in a form
        that highlights: the D6 highlights are made from the table's rows)."""
        if mode != "statistics" or self.highlight:
            return None
        lines = statistics_lines(sides, stacks, float_stats)
        return None if lines is None else ((0, lines),)

    def render_cells(
        self,
        sides: Sides,
        mode: str,
        stacks: Mapping[str, list[str]] | None,
        float_stats: Sequence[bool],
        read: Collection[str],
    ) -> tuple[Sections, ColumnTable] | None:
        """``render_sides``, and the table's cells (``table.column_table``) of the columns its readers
        ``read`` at least, where the form makes both without the table (a statistics table: its bytes
        and judged cells by one pass of ``writers/stat_lines.py``'s kernel); None where it does not."""
        if mode != "statistics" or self.highlight:
            return None
        stack_column = None if stacks is None else stack_cells([row.entry for row in sides.npus], stacks)
        made = statistics_part(sides, stack_column, float_stats, read)
        if made is None:
            return None
        lines, judged = made
        if stack_column is not None:
            judged[STACK_COLUMN] = stack_column
        return ((0, lines),), column_table(sides, mode, stacks, None, float_stats, judged=judged)

    def package(self, spool: Path, path: Path, starts: Sequence[int], rows: int) -> None:
        """Make the complete ``spool`` (its sections beginning at ``starts``, ``rows`` rows) the
        result ``path``; ``spool`` is left for the caller to remove."""
        set_result_mode(spool)
        publish(spool, path)


class XlsxForm(CsvForm):
    """compare_result_*.xlsx: a section per sheet (its XML), the D6 fills and reasons in the rows."""

    highlight = True
    tail = SHEET_TAIL.encode("utf-8")

    def head(self, columns: list[str]) -> bytes:
        return header_xml(columns)

    def render(self, table: CompareTable, first: int) -> Sections:
        return part_xml(table, first)

    def package(self, spool: Path, path: Path, starts: Sequence[int], rows: int) -> None:
        zipped = packed(spool)
        try:
            package_spool(zipped, sheet_names(rows), spool, starts)
            set_result_mode(zipped)
            publish(zipped, path)
        finally:
            zipped.unlink(missing_ok=True)


def packed(spool: Path) -> Path:
    """Where an xlsx is zipped from its sheets' ``spool`` before it gets its name (a name the process
    that runs the compare knows, to remove it if the run is stopped while a worker writes it)."""
    return spool.with_name(f"{spool.name}.zip")


CSV, XLSX = CsvForm(), XlsxForm()
