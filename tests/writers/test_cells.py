"""Cell formatting of the csv writer, including D9 (formula-looking cells are neutralised)."""

from __future__ import annotations

import csv
import io
import random
from pathlib import Path

import numpy
import pytest

from msprobe_dask.table import CompareTable
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
