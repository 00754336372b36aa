"""Cell formatting of the csv writer, including D9 (formula-looking cells are neutralised)."""

from __future__ import annotations

import csv
import io
import math
import random
import struct
from pathlib import Path

import numpy
import pytest

from msprobe_dask.table import CompareTable
from msprobe_dask.writers import csv_writer
from msprobe_dask.writers.cells import cell_text
from msprobe_dask.writers.csv_writer import csv_lines, write_csv


def test_floats_print_as_the_reference_prints_them() -> None:
    assert cell_text(float("nan")) == "Nan"
    assert cell_text(float("inf")) == " inf"
    assert cell_text(float("-inf")) == " -inf"
    assert cell_text(-0.11319565773010254) == "-0.11319565773010254"
    assert cell_text(True) == "True"
    assert cell_text("-0.5") == "-0.5"


def test_d9_formula_cells_are_neutralised_and_the_write_completes(tmp_path: Path) -> None:
    """The reference aborts the whole write with 'Malicious value'; we prefix a quote and go on."""
    table = CompareTable(
        mode="md5",
        columns=["NPU Name", "Err_message"],
        rows=[["=cmd|' /C calc'!A0", "[]"], ["a;@SUM(1)", "[]"], ["plain", "-1"]],
    )
    path = write_csv(table, tmp_path / "r.csv")
    rows = list(csv.reader(open(path, encoding="utf-8")))
    assert rows[1][0] == "'=cmd|' /C calc'!A0"
    assert rows[2][0] == "'a;@SUM(1)"
    assert rows[3] == ["plain", "-1"]


def _csv_module_lines(rows: list[list[object]]) -> bytes:
    text = io.StringIO(newline="")
    csv.writer(text, lineterminator="\n").writerows([[cell_text(v) for v in row] for row in rows])
    return text.getvalue().encode("utf-8")


TRICKY = [
    "plain",
    "",
    "a,b",
    'say "hi"',
    "two\nlines",
    "cr\rhere",
    "=1+2",
    " =1",
    "\t@x",
    "a;@SUM(1)",
    "-0.5",
    "+",
    "N/A",
    "[1, 2]",
    '["error: x"]',
    "ü,é",
    "＝x",
    1,
    1.0,
    True,
    False,
    0,
    -0.0,
    0.0,
    None,
    1e-5,
    1e-4,
    9.99e15,
    1e16,
    -1e300,
    5e-324,
    0.1 + 0.2,
    float("nan"),
    float("inf"),
    float("-inf"),
    -12.5,
    3,
    numpy.float64(2.5),
    numpy.float32(0.1),
    numpy.float64("nan"),
    [1, 2],
]


@pytest.mark.parametrize("seed", range(20))
def test_csv_lines_are_the_csv_modules_lines_of_the_cells_texts(seed: int) -> None:
    """csv_lines prints column by column, each distinct cell once: the lines are those of the csv
    module's minimal quoting of each cell's cell_text, whatever the mix of classes in a column."""
    rng = random.Random(seed)
    width = rng.choice([2, 3, 7])
    rows = [[rng.choice(TRICKY) for _ in range(width)] for _ in range(rng.randrange(1, 60))]
    if seed % 4 == 0:  # columns of one class: texts that need no change, floats only
        rows = [
            [f"name.{i}", rng.random() * 10 ** rng.randrange(-6, 18)] + row[2:] for i, row in enumerate(rows)
        ]
    assert csv_lines(rows) == _csv_module_lines(rows)


def test_csv_lines_of_one_column_and_of_no_row() -> None:
    rows: list[list[object]] = [[""], ["a,b"], [None], [1.5]]
    assert csv_lines(rows) == _csv_module_lines(rows) == b'""\n"a,b"\n""\n1.5\n'
    assert csv_lines([]) == b""


@pytest.mark.parametrize("seed", range(20))
def test_the_c_kernel_prints_what_the_python_path_prints(seed: int) -> None:
    """csv_lines in C (writers/csrc/csv_text.c) gives the Python path's bytes, floats of every
    magnitude, texts of every class of character (quoted, neutralised, non-ASCII) and cells it hands
    back to the Python path alike."""
    if csv_writer.native is None:
        pytest.skip("the C kernel is not built")
    rng = random.Random(seed)
    texts = ["a", ",", '"', ";", "\r", "\n", " ", "=", "＋", "é", "€", "\U0001f600", "x.y", "[]", "%"]
    cells = (
        TRICKY
        + ["".join(rng.choice(texts) for _ in range(rng.randrange(6))) for _ in range(30)]
        + [rng.choice([-1, 1]) * rng.random() * 10.0 ** rng.randrange(-330, 308) for _ in range(30)]
    )
    width = rng.choice([2, 5])
    rows = [[rng.choice(cells) for _ in range(width)] for _ in range(rng.randrange(1, 200))]
    kernel = csv_writer.native.csv_lines(rows, csv_writer.NATIVE_RULES, csv_writer.field)
    assert kernel == csv_writer.csv_text(rows).encode("utf-8") == _csv_module_lines(rows)


@pytest.mark.parametrize("dialect", [csv_writer.CsvDialect(";", "'", "\r\n"), csv_writer.DIALECT])
def test_the_c_kernel_takes_the_csv_dialect_from_python(
    dialect: csv_writer.CsvDialect, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The csv's punctuation (csv_writer.DIALECT: the delimiter, the quote and the line end, handed to
    the C kernels in NATIVE_RULES): under another dialect csv_lines in C gives the Python path's bytes
    and the csv module's; a delimiter of two characters is refused."""
    if csv_writer.native is None:
        pytest.skip("the C kernel is not built")
    quoted = frozenset("".join(dialect))
    monkeypatch.setattr(csv_writer, "DIALECT", dialect)
    monkeypatch.setattr(csv_writer, "_QUOTED", quoted)
    monkeypatch.setattr(csv_writer, "_CHANGED_INSIDE", csv_writer._changed_inside(quoted))
    rules = (*csv_writer.NATIVE_RULES[:2], "".join(sorted(quoted)), csv_writer.NATIVE_RULES[3], *dialect)
    rows = [["a;b", "it's", 'x"y,z', 1.5, "plain"], ["\r", "", None, -0.0, True], ["a\nb", "''", "1", 2, "x"]]
    kernel = csv_writer.native.csv_lines(rows, rules, csv_writer.field)
    module = io.StringIO(newline="")
    writer = csv.writer(
        module, delimiter=dialect.delimiter, quotechar=dialect.quote, lineterminator=dialect.line_end
    )
    writer.writerows([[cell_text(v) for v in row] for row in rows])
    assert kernel == csv_writer.csv_text(rows).encode("utf-8") == module.getvalue().encode("utf-8")
    with pytest.raises(ValueError, match="csv rules"):
        csv_writer.native.csv_lines(rows, (*rules[:4], ";;", *rules[5:]), csv_writer.field)


def test_the_c_kernel_asks_python_for_a_bools_text() -> None:
    """A bool cell's text is the Python path's (cell_text: str of the bool), asked of the function handed
    in, not written in C: another function's texts are the ones the lines get, kept apart from the ints
    equal to the bools (1 == True)."""
    if csv_writer.native is None:
        pytest.skip("the C kernel is not built")

    def field(value: object) -> str:
        return ("yes" if value else "no") if isinstance(value, bool) else csv_writer.field(value)

    rows = [[True, 1, False, 0], [0, False, 1, True]]
    assert csv_writer.native.csv_lines(rows, csv_writer.NATIVE_RULES, field) == b"yes,1,no,0\n0,no,1,yes\n"
    usual = csv_writer.native.csv_lines(rows, csv_writer.NATIVE_RULES, csv_writer.field)
    assert usual == _csv_module_lines(rows)


def test_the_c_kernel_prints_every_finite_float_as_repr() -> None:
    """The C kernel writes every finite float from orjson's shortest digits in repr's notation
    (msprobe_dask/csrc/deferred_floats.h): repr's text for 40,000 random bit patterns, each power of
    ten and its neighbours, and the notations' edges."""
    if csv_writer.native is None:
        pytest.skip("the C kernel is not built")
    rng = random.Random(16)
    floats = [struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0] for _ in range(40_000)]
    for e in range(-324, 309):
        x = float(f"1e{e}")
        floats += [x, math.nextafter(x, 0.0), math.nextafter(x, math.inf), 1.5 * x, 9.999999999999999 * x]
    floats += [0.0, -0.0, 5e-324, 1e-4, 9.999999999999999e-05, 1e16, 9999999999999998.0, 0.1 + 0.2]
    finite = [x for x in floats if math.isfinite(x)]
    rows = [["r", x, -x] for x in finite]
    kernel = csv_writer.native.csv_lines(rows, csv_writer.NATIVE_RULES, csv_writer.field)
    assert kernel == "".join(f"r,{x!r},{-x!r}\n" for x in finite).encode()
