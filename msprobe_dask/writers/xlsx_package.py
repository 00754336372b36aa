"""A streaming xlsx writer: the SpreadsheetML package (zip of XML parts) with rows written as they come.

Cells are written as openpyxl writes them, so that a workbook read back with openpyxl (or pandas)
holds the same values and types as the reference's: numbers as ``%.16g`` (so ``3.0`` reads back as
the int 3, as in the reference's files), strings inline, bools as ``t="b"``, ``None`` and ``""`` as
empty cells, texts cut at 32,767 characters; no number formats, no column widths. A row may carry a
fill (``FILLS``), applied to each of its cells. Measured against openpyxl's write-only mode and
XlsxWriter's constant_memory mode in workflows/bench_xlsx.py (README, Dependencies).

The sheets' XML goes to a temporary file first (memory stays bounded by one row; a compare's rank
tasks append its parts, ``rows_xml``), and each sheet is then stored in the zip with its size known, so
that ZIP64 records appear only in sheets above 2 GiB (Excel asks to repair an xlsx that has them
without need).
"""

from __future__ import annotations

import io
import math
import os
import re
import tempfile
import zipfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

COMPRESS_LEVEL = 1  # zlib's fastest: 23% less CPU than the default 6 for a 25% bigger file (50k rows)
MAX_TEXT = 32767  # characters in one cell: Excel's limit, where openpyxl cuts a longer text
_COPY_BLOCK = 1 << 20
FILLS = {"red": "FFFF0000", "yellow": "FFFFFF00"}  # solid row fills: name -> ARGB

Row = tuple[Sequence[Any], str | None]  # (cell values, fill name or None)

_MAIN = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
_DOC_RELS = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
_PKG_RELS = "http://schemas.openxmlformats.org/package/2006/relationships"
_CT = "application/vnd.openxmlformats-officedocument.spreadsheetml"
_STYLE_OF = {None: ""} | {name: f' s="{i}"' for i, name in enumerate(FILLS, start=1)}
# what must not go into an XML text as it is: a control character (Excel's _xHHHH_ escape) or a
# literal _xHHHH_ (its _ escaped as _x005F_, so that it reads back as written)
_NEEDS_ESCAPE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]|_x[0-9A-Fa-f]{4}_")
_XML_TEXT = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})


def column_letter(index: int) -> str:
    """'A' for 0, 'AB' for 27."""
    letters = ""
    index += 1
    while index:
        index, rest = divmod(index - 1, 26)
        letters = chr(65 + rest) + letters
    return letters


def _escape_match(match: re.Match[str]) -> str:
    text = match.group(0)
    return "_x005F" + text if len(text) > 1 else f"_x{ord(text):04X}_"


def _number(value: float) -> str | None:
    if isinstance(value, float) and not math.isfinite(value):
        return None  # openpyxl writes nan/inf as an empty value
    return f"{value:.16g}"


def _text_markup(value: str) -> str:
    """A text cell's markup after its ``t`` attribute (an _xHHHH_ or a control character escaped:
    the markup around it holds neither, so a text is searched alone)."""
    if len(value) > MAX_TEXT:
        value = value[:MAX_TEXT]
    if "&" in value or "<" in value or ">" in value:
        value = value.translate(_XML_TEXT)
    if not value.isprintable() or "_x" in value:  # (both much faster than the regex)
        value = _NEEDS_ESCAPE.sub(_escape_match, value)
    if value != value.strip():
        return f'<is><t xml:space="preserve">{value}</t></is></c>'
    return f"<is><t>{value}</t></is></c>"


class RowWriter:
    """The ``<row>`` elements of a sheet of ``columns`` columns. The markup of each distinct text is
    made once (most texts of a compare table come again and again: dtypes, shapes, stacks), up to
    ``TEXTS_HELD`` texts at a time."""

    TEXTS_HELD = 1 << 14

    def __init__(self, columns: int) -> None:
        self._letters = [column_letter(i) for i in range(columns)]
        self._texts: dict[str, str] = {}

    def row(self, number: int, values: Sequence[Any], fill: str | None) -> str:
        """Row ``number`` holding ``values``, filled with ``fill`` (a FILLS name, or None)."""
        at = f'{number}"{_STYLE_OF[fill]}'  # what follows a cell's column letter in its r attribute
        texts = self._texts
        cells = []
        for letter, value in zip(self._letters, values):
            kind = value.__class__
            if kind is str and value:
                markup = texts.get(value)
                if markup is None:
                    if len(texts) >= self.TEXTS_HELD:
                        texts.clear()
                    markup = texts[value] = _text_markup(value)
                cells.append(f'<c r="{letter}{at} t="inlineStr">{markup}')
            elif kind is float and value - value == 0:  # (finite)
                cells.append(f'<c r="{letter}{at} t="n"><v>{value:.16g}</v></c>')
            elif kind is bool:
                cells.append(f'<c r="{letter}{at} t="b"><v>{int(value)}</v></c>')
            elif value is None or value == "":
                if fill:
                    cells.append(f'<c r="{letter}{at}/>')
            elif isinstance(value, (int, float)):
                text = _number(value)
                if text is None:
                    cells.append(f'<c r="{letter}{at} t="n"/>')
                else:
                    cells.append(f'<c r="{letter}{at} t="n"><v>{text}</v></c>')
            else:
                raise TypeError(f"an xlsx cell cannot hold {kind.__name__}")
        return f'<row r="{number}">{"".join(cells)}</row>'


def sheet_head() -> str:
    """A sheet's XML up to its first row."""
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<worksheet xmlns="{_MAIN}"><sheetData>'


SHEET_TAIL = "</sheetData></worksheet>"


def rows_xml(first: int, columns: int, rows: Iterable[Row]) -> str:
    """The ``<row>`` elements of ``rows``, numbered from ``first``."""
    row = RowWriter(columns).row
    return "".join(row(number, values, fill) for number, (values, fill) in enumerate(rows, first))


def _write_sheet(xml: Any, columns: int, rows: Iterable[Row]) -> None:
    row = RowWriter(columns).row
    xml.write(sheet_head())
    for number, (values, fill) in enumerate(rows, start=1):
        xml.write(row(number, values, fill))
    xml.write(SHEET_TAIL)


def _escape_attribute(text: str) -> str:
    return text.translate(_XML_TEXT).replace('"', "&quot;")


def _styles() -> str:
    fills = "".join(
        f'<fill><patternFill patternType="solid"><fgColor rgb="{rgb}"/><bgColor rgb="{rgb}"/>'
        "</patternFill></fill>"
        for rgb in FILLS.values()
    )
    xfs = "".join(
        f'<xf numFmtId="0" fontId="0" fillId="{i}" borderId="0" applyFill="1" xfId="0"/>'
        for i in range(2, 2 + len(FILLS))
    )
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<styleSheet xmlns="{_MAIN}">'
        '<fonts count="1"><font><sz val="11"/><name val="Calibri"/><family val="2"/></font></fonts>'
        f'<fills count="{2 + len(FILLS)}"><fill><patternFill patternType="none"/></fill>'
        f'<fill><patternFill patternType="gray125"/></fill>{fills}</fills>'
        '<borders count="1"><border><left/><right/><top/><bottom/><diagonal/></border></borders>'
        '<cellStyleXfs count="1"><xf numFmtId="0" fontId="0" fillId="0" borderId="0"/></cellStyleXfs>'
        f'<cellXfs count="{1 + len(FILLS)}"><xf numFmtId="0" fontId="0" fillId="0" borderId="0" xfId="0"/>'
        f"{xfs}</cellXfs>"
        '<cellStyles count="1"><cellStyle name="Normal" xfId="0" builtinId="0"/></cellStyles></styleSheet>'
    )


def _package_parts(names: Sequence[str]) -> dict[str, str]:
    head = '<?xml version="1.0" encoding="UTF-8"?>\n'
    sheets = range(1, len(names) + 1)
    overrides = "".join(
        f'<Override PartName="/xl/worksheets/sheet{i}.xml" ContentType="{_CT}.worksheet+xml"/>'
        for i in sheets
    )
    sheet_rels = "".join(
        f'<Relationship Id="rId{i}" Type="{_DOC_RELS}/worksheet" Target="worksheets/sheet{i}.xml"/>'
        for i in sheets
    )
    sheet_list = "".join(
        f'<sheet name="{_escape_attribute(name)}" sheetId="{i}" r:id="rId{i}"/>'
        for i, name in zip(sheets, names)
    )
    return {
        "[Content_Types].xml": (
            f'{head}<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
            '<Default Extension="rels" '
            'ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
            '<Default Extension="xml" ContentType="application/xml"/>'
            f'<Override PartName="/xl/workbook.xml" ContentType="{_CT}.sheet.main+xml"/>'
            f'<Override PartName="/xl/styles.xml" ContentType="{_CT}.styles+xml"/>{overrides}</Types>'
        ),
        "_rels/.rels": (
            f'{head}<Relationships xmlns="{_PKG_RELS}"><Relationship Id="rId1" '
            f'Type="{_DOC_RELS}/officeDocument" Target="xl/workbook.xml"/></Relationships>'
        ),
        "xl/workbook.xml": (
            f'{head}<workbook xmlns="{_MAIN}" xmlns:r="{_DOC_RELS}"><sheets>{sheet_list}</sheets></workbook>'
        ),
        "xl/_rels/workbook.xml.rels": (
            f'{head}<Relationships xmlns="{_PKG_RELS}">{sheet_rels}'
            f'<Relationship Id="rId{len(names) + 1}" Type="{_DOC_RELS}/styles" Target="styles.xml"/>'
            "</Relationships>"
        ),
        "xl/styles.xml": _styles(),
    }


def write_workbook(path: Path, sheets: Sequence[tuple[str, int, Iterable[Row]]]) -> Path:
    """Write ``sheets`` (name, number of columns, rows) to ``path``, each sheet streamed row by row.

    Sheet names are used as given (at most 31 characters, unique: Excel's rules, the caller's job).
    """
    with tempfile.NamedTemporaryFile("w+b", dir=path.parent, prefix=".sheets", suffix=".xml") as spool:
        starts = []
        text = io.TextIOWrapper(spool, encoding="utf-8", write_through=True)
        for _, columns, rows in sheets:
            text.flush()
            starts.append(spool.tell())
            _write_sheet(text, columns, rows)
        text.flush()
        text.detach()
        package_spool(path, [name for name, _, _ in sheets], Path(spool.name), starts)
    return path


def package_spool(path: Path, names: Sequence[str], spool: Path, starts: Sequence[int]) -> Path:
    """Write the workbook ``path`` whose sheets' XML (``names[i]``'s from ``starts[i]`` to the next
    start) is the file ``spool``, each stored in the zip with its size known."""
    end = os.path.getsize(spool)
    with (
        zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=COMPRESS_LEVEL) as package,
        open(spool, "rb") as xml,
    ):
        for part, text in _package_parts(names).items():
            package.writestr(part, text)
        for number, (start, stop) in enumerate(zip(starts, [*starts[1:], end]), start=1):
            size = stop - start
            xml.seek(start)
            name = f"xl/worksheets/sheet{number}.xml"
            with package.open(name, "w", force_zip64=size * 1.05 > zipfile.ZIP64_LIMIT) as sheet:
                while size:
                    block = xml.read(min(size, _COPY_BLOCK))
                    sheet.write(block)
                    size -= len(block)
    return path
