"""A streaming xlsx writer: the SpreadsheetML package (zip of XML parts) with rows written as they come.

Cells are written as openpyxl writes them, so that a workbook read back with openpyxl (or pandas)
holds the same values and types as the reference's: numbers as ``%.16g`` (so ``3.0`` reads back as
the int 3, as in the reference's files), strings inline, bools as ``t="b"``, ``None`` and ``""`` as
empty cells, texts cut at 32,767 characters; no number formats, no column widths. A row may carry a
fill (``FILLS``), applied to each of its cells. Measured against openpyxl's write-only mode and
XlsxWriter's constant_memory mode in workflows/bench_xlsx.py (README, Dependencies).

Each sheet's XML goes to a temporary file first (memory stays bounded by one row) and is then
stored in the zip with its size known, so that ZIP64 records appear only in sheets above 2 GiB
(Excel asks to repair an xlsx that has them without need).
"""

from __future__ import annotations

import math
import re
import tempfile
import zipfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

COMPRESS_LEVEL = 1  # zlib's fastest: 23% less CPU than the default 6 for a 25% bigger file (50k rows)
MAX_TEXT = 32767  # characters in one cell: Excel's limit, where openpyxl cuts a longer text
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


def row_xml(number: int, letters: Sequence[str], values: Sequence[Any], style: str) -> str:
    """One ``<row>`` element; ``style`` is the cells' ``s`` attribute ('' for none)."""
    cells = []
    for letter, value in zip(letters, values):
        kind = value.__class__
        if kind is str and value:
            if len(value) > MAX_TEXT:
                value = value[:MAX_TEXT]
            if "&" in value or "<" in value or ">" in value:
                value = value.translate(_XML_TEXT)
            if value != value.strip():
                cells.append(f'<c r="{letter}{number}"{style} t="inlineStr"><is><t xml:space="preserve">')
            else:
                cells.append(f'<c r="{letter}{number}"{style} t="inlineStr"><is><t>')
            cells.append(value)
            cells.append("</t></is></c>")
        elif kind is bool:
            cells.append(f'<c r="{letter}{number}"{style} t="b"><v>{int(value)}</v></c>')
        elif value is None or value == "":
            if style:
                cells.append(f'<c r="{letter}{number}"{style}/>')
        elif isinstance(value, (int, float)):
            text = _number(value)
            if text is None:
                cells.append(f'<c r="{letter}{number}"{style} t="n"/>')
            else:
                cells.append(f'<c r="{letter}{number}"{style} t="n"><v>{text}</v></c>')
        else:
            raise TypeError(f"an xlsx cell cannot hold {kind.__name__}")
    xml = f'<row r="{number}">{"".join(cells)}</row>'
    # the markup holds neither a control character nor an _xHHHH_, so the row is searched whole
    # (isprintable and `in`, much faster than the regex, let the common row through)
    if xml.isprintable() and "_x" not in xml:
        return xml
    return _NEEDS_ESCAPE.sub(_escape_match, xml)


def _write_sheet(xml: Any, columns: int, rows: Iterable[Row]) -> None:
    letters = [column_letter(i) for i in range(columns)]
    xml.write(f'<?xml version="1.0" encoding="UTF-8"?>\n<worksheet xmlns="{_MAIN}"><sheetData>')
    for number, (values, fill) in enumerate(rows, start=1):
        xml.write(row_xml(number, letters, values, _STYLE_OF[fill]))
    xml.write("</sheetData></worksheet>")


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
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=COMPRESS_LEVEL) as package:
        for part, text in _package_parts([name for name, _, _ in sheets]).items():
            package.writestr(part, text)
        for number, (_, columns, rows) in enumerate(sheets, start=1):
            with tempfile.NamedTemporaryFile(
                "w", encoding="utf-8", dir=path.parent, prefix=".sheet", suffix=".xml"
            ) as xml:
                _write_sheet(xml, columns, rows)
                xml.flush()
                package.write(xml.name, f"xl/worksheets/sheet{number}.xml")
    return path
