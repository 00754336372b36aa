"""compare_result_*.csv: UTF-8, header row, minimal quoting, ``\\n`` line ends (pandas ``to_csv``).

A table part's lines are made column by column (a statistics table's straight from its rows where
the C kernel is built: writers/stat_lines.py, ``csrc/stat_lines.c``, handed NATIVE_RULES): a column of
texts that need no change (most names) is taken as it is; in every other column each distinct (class,
value) is printed once (a table's dtypes, shapes and markers repeat, and numbers in tiled models), its
floats in one call (``float_texts``). The quoting is that of the csv module's minimal quoting with
``\\n`` line ends: a cell holding a comma, a double quote or a LF is quoted, its double quotes doubled
(tests/writers/test_cells.py checks the lines against the csv module's).
"""

from __future__ import annotations

import csv
import io
import operator
import re
from collections.abc import Iterable, Sequence
from itertools import compress, repeat
from pathlib import Path
from typing import Any, NamedTuple

import orjson

from msprobe_dask.native import load
from msprobe_dask.table import CompareTable
from msprobe_dask.writers.atomic import atomic_path
from msprobe_dask.writers.cells import (
    FORMULA_START,
    LEADING_BLANKS,
    NEUTRALISED_INSIDE,
    cell_text,
    float_texts,
)


class CsvDialect(NamedTuple):
    """The csv's punctuation (one ASCII character each, the line end one or more)."""

    delimiter: str  # between the fields of a line
    quote: str  # around a quoted field, and doubled within it
    line_end: str  # after each line


DIALECT = CsvDialect(",", '"', "\n")
_QUOTED = frozenset(DIALECT.delimiter + DIALECT.quote + DIALECT.line_end)  # a field holding one is quoted


def _changed_inside(quoted: frozenset[str]) -> re.Pattern[str]:
    """A character of a text that the csv changes: one of ``quoted``, or one that neutralise changes."""
    return re.compile("[" + re.escape("".join(quoted) + NEUTRALISED_INSIDE) + "]")


_CHANGED_INSIDE = _changed_inside(_QUOTED)
_CHANGED_START = frozenset(FORMULA_START + LEADING_BLANKS)
_FIRST = operator.itemgetter(slice(0, 1))

API = 7  # CSV_TEXT_API in csrc/csv_text.c
native = load("msprobe_dask.writers._csv_text", API)
NATIVE_RULES = (
    FORMULA_START + LEADING_BLANKS,
    NEUTRALISED_INSIDE,
    "".join(sorted(_QUOTED)),
    orjson.dumps,
    *DIALECT,
)
"""What the C kernel reads (writers/stat_lines.py's RULES): a text whose first character is none of
the first and none of whose characters is one of the second is left as it is by ``neutralise``, and
quoted where it holds one of the third; a finite float's text is repr's, which it writes from orjson's
shortest digits (the same digits) for all floats at once; every other cell it hands to ``field``; the
fields and lines are put together by DIALECT."""


def quoted(text: str) -> str:
    """``text`` as a csv field."""
    if _QUOTED.isdisjoint(text):
        return text
    q = DIALECT.quote
    return q + text.replace(q, q + q) + q


def field(value: Any) -> str:
    return quoted(cell_text(value))


def _unchanged(column: Sequence[Any]) -> bool:
    """Whether every cell of ``column`` is a text that the csv holds as it is: none to quote, none that
    ``neutralise`` changes."""
    return (
        set(map(type, column)) == {str}
        and _CHANGED_START.isdisjoint(map(_FIRST, column))
        and _CHANGED_INSIDE.search("".join(column)) is None
    )


def _column_texts(column: Sequence[Any]) -> Sequence[str]:
    if _unchanged(column):
        return column
    # each distinct cell printed once; the class is in the key because 1, 1.0 and True are equal keys
    # but print differently
    keys = list(zip(map(type, column), column))
    try:
        texts = dict.fromkeys(keys, "")
    except TypeError:  # an unhashable cell
        return list(map(field, column))
    floats = [v for t, v in texts if t is float]
    strs = [v for t, v in texts if t is str]
    texts.update(zip(zip(repeat(float), floats), float_texts(floats)))
    texts.update(zip(zip(repeat(str), strs), strs if _unchanged(strs) else map(field, strs)))
    if len(floats) + len(strs) < len(texts):
        texts.update((k, field(k[1])) for k in texts if k[0] is not float and k[0] is not str)
    fields = list(map(texts.__getitem__, keys))
    for zero in [k for k in texts if k[1] == 0 and k[0] is not int and k[0] is not bool]:
        # 0.0 and -0.0 are equal keys: their cells printed one by one
        for i in compress(range(len(keys)), map(zero.__eq__, keys)):
            fields[i] = field(column[i])
    return fields


def csv_text(rows: Sequence[Sequence[Any]]) -> str:
    """The csv lines of ``rows`` (each as long as the first) as write_csv writes them."""
    if not rows:
        return ""
    if len(rows[0]) < 2:  # the csv module quotes a line of one empty field
        text = io.StringIO(newline="")
        _csv_writer(text).writerows([[cell_text(v) for v in row] for row in rows])
        return text.getvalue()
    columns = [_column_texts(column) for column in zip(*rows)]
    line_end = DIALECT.line_end
    return line_end.join(map(DIALECT.delimiter.join, zip(*columns))) + line_end


def write_csv(table: CompareTable, path: Path) -> Path:
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        f.write(header_line(table.columns))
        f.write(csv_lines(table.rows))
    return path


def csv_lines(rows: Iterable[Sequence[Any]]) -> bytes:
    """The csv lines of ``rows`` as write_csv writes them, UTF-8: a part of the file, made by a task."""
    return csv_text(list(rows)).encode("utf-8")


def header_line(columns: Sequence[str]) -> bytes:
    text = io.StringIO(newline="")
    _csv_writer(text).writerow(columns)
    return text.getvalue().encode("utf-8")


def _csv_writer(text: io.StringIO) -> Any:
    """The csv module's writer of DIALECT (its minimal quoting) into ``text``."""
    return csv.writer(
        text, delimiter=DIALECT.delimiter, quotechar=DIALECT.quote, lineterminator=DIALECT.line_end
    )
