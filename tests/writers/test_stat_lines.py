"""A statistics table part's csv lines made by the C kernel (msprobe_dask/writers/csrc/stat_lines.c) are
the Python definition's, ``csv_text(build_table(...).rows)``, and so is the table built from its judged
cells: on every table part of the test dumps, on drawn rows of every kind of cell, and with other
rules handed to it."""

from __future__ import annotations

import csv
import io
import math
import random
import struct
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from conftest import DATA, walk_view
from hypothesis import given, settings
from hypothesis import strategies as st

from msprobe_dask.analysis.divergence import Tolerance
from msprobe_dask.cli import main
from msprobe_dask.columns import NA
from msprobe_dask.dump.rows import LeafRow
from msprobe_dask.judge import rules
from msprobe_dask.pipeline import part_forms, part_table
from msprobe_dask.summary.divergence import rank_of_parts
from msprobe_dask.table import ColumnTable, Sides, build_table, float_stat_columns
from msprobe_dask.writers import csv_writer, stat_lines
from msprobe_dask.writers.cells import cell_text

pytestmark = pytest.mark.skipif(csv_writer.native is None, reason="the C kernel is not built")


def python_lines(sides: Sides, stacks: Mapping[str, list[str]] | None, float_stats: Sequence[bool]) -> bytes:
    table = build_table(
        sides, "statistics", dict(stacks) if stacks else stacks, None, float_stats, highlight=False
    )
    return csv_writer.csv_text(table.rows).encode("utf-8")


def assert_same_table(sides: Sides, float_stats: Sequence[bool]) -> None:
    """The table made with the kernel's judged cells (``statistics_cells``) is the Python path's: the
    same cells of the same classes (NaN and signed zeros compared by repr), the same highlights."""
    judged = stat_lines.statistics_cells(sides, float_stats)
    assert judged is not None
    ours = build_table(sides, "statistics", None, None, float_stats, judged=judged)
    theirs = build_table(sides, "statistics", None, None, float_stats)
    assert repr(ours.rows) == repr(theirs.rows)
    assert (ours.highlights, ours.highlight_reasons) == (theirs.highlights, theirs.highlight_reasons)


def assert_same_part(
    sides: Sides, stacks: Mapping[str, list[str]] | None, float_stats: Sequence[bool]
) -> tuple[part_forms.Sections, ColumnTable] | None:
    """A table part made by the kernel's one pass for the default run (``CsvForm.render_cells``: its
    bytes and the cells the summary and the divergence analysis read) is the Python path's table's:
    the same bytes, the same cells of the same classes, the same summary and nodes."""
    made = ORIGINAL_RENDER_CELLS(
        part_forms.CSV, sides, "statistics", stacks, float_stats, part_table.read_columns()
    )
    assert made is not None
    sections, ours = made
    table = build_table(
        sides, "statistics", None if stacks is None else dict(stacks), None, float_stats, highlight=False
    )
    assert sections == ((0, csv_writer.csv_text(table.rows).encode("utf-8")),)
    assert ours.columns == table.columns and ours.entries == table.entries and ours.p2p == table.p2p
    for column in part_table.read_columns() & set(table.columns):
        assert repr(ours.cells[column]) == repr(table.column(column)), column
    tol = Tolerance()
    (summary, kinds), nodes = part_table._summary_and_nodes("rank0", ours, tol)
    (their_summary, their_kinds), their_nodes = part_table._summary_and_nodes("rank0", table, tol)
    assert repr(summary) == repr(their_summary)
    assert repr(kinds.most_common()) == repr(their_kinds.most_common())
    ours_nodes, theirs_nodes = rank_of_parts([nodes]), rank_of_parts([their_nodes])
    assert repr(walk_view(ours_nodes.read(()))) == repr(walk_view(theirs_nodes.read(())))
    assert repr(ours_nodes.comms()) == repr(theirs_nodes.comms())
    return made


ORIGINAL_RENDER_CELLS = part_forms.CsvForm.render_cells


CASES = sorted(p.parent.parent.name for p in DATA.glob("*/target/**/dump.json"))


@pytest.mark.parametrize("case", sorted(set(CASES)))
def test_every_table_part_of_the_test_dumps(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every statistics table part a compare of the case makes (its target and golden trees, default
    flags; the ms_vs_pt case with its mappings too): the kernel's bytes are the Python path's."""
    seen: list[int] = []

    def checked(
        sides: Sides, stacks: Mapping[str, list[str]] | None, float_stats: Sequence[bool]
    ) -> bytes | None:
        lines = stat_lines.statistics_lines(sides, stacks, float_stats)
        assert lines is not None
        assert lines == python_lines(sides, stacks, float_stats)
        assert_same_table(sides, float_stats)
        seen.append(len(sides.npus))
        return lines

    def checked_part(
        form: part_forms.CsvForm,
        sides: Sides,
        mode: str,
        stacks: Mapping[str, list[str]] | None,
        float_stats: Sequence[bool],
        read: Any,
    ) -> tuple[part_forms.Sections, ColumnTable] | None:
        assert read == part_table.read_columns()
        if mode != "statistics":
            return None
        seen.append(len(sides.npus))
        return assert_same_part(sides, stacks, float_stats)

    monkeypatch.setattr(part_forms, "statistics_lines", checked)
    monkeypatch.setattr(part_forms.CsvForm, "render_cells", checked_part)
    target, golden = DATA / case / "target", DATA / case / "golden"
    runs: list[list[str]] = [[]]
    if (DATA / case / "data_mapping.yaml").is_file():
        runs += [["-dm", str(DATA / case / "data_mapping.yaml")], ["-fm"]]
    for i, extra in enumerate(runs):
        for quiet in (["-q"], []):  # (-q: the lines only; else with the summary's cells)
            out = str(tmp_path / f"{i}{''.join(quiet)}")
            code = main(["compare", *quiet, "-tp", str(target), "-gp", str(golden), "-o", out, *extra])
            assert code in (0, 2)
    if any(b",Max diff," in p.read_bytes().split(b"\n", 1)[0] for p in tmp_path.rglob("*.csv")):
        assert sum(seen) > 0  # (a statistics table was written: by the kernel)


_STATS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1.0, 1e-320, 1.7e308, -1.7e308, 5e-324]),
    st.integers(min_value=-(2**70), max_value=2**70),
    # (small ints and bools, which repeat in a part: 1, 1.0 and True are equal keys of the kernel's memos)
    st.integers(min_value=-2, max_value=2),
    st.booleans(),
    st.sampled_from(["None", "Nan", "inf", "-inf", "True", "False", "npu:0", "cpu", "1.5", " 2", "...", NA]),
)
_DTYPES = ["torch.float32", "Float32", "torch.float16", "<class 'int'>", "<class 'float'>", "torch.bool", NA]
_SHAPES = ["[]", "[2, 3]", "[4]", NA]
_GRADS = ["True", "False", NA, ""]
_NAMES = [
    "Functional.linear.{k}.forward",
    "Tensor.to.{k}.forward",
    "Distributed._all_gather_base.{k}.forward",
    "Torch.batch_isend_irecv.{k}.forward",
    "Module.qkv.{k}.backward",
    "plain{k}",
]


@st.composite
def _side(draw: Any, name: str, entry: str, state: str) -> LeafRow:
    stats = tuple(draw(_STATS) for _ in range(4))
    if draw(st.booleans()):  # a scalar argument: one value four times
        stats = (stats[0],) * 4
    return LeafRow(
        name,
        entry,
        state,
        draw(st.sampled_from(_DTYPES)),
        draw(st.sampled_from(_SHAPES)),
        draw(st.sampled_from(_GRADS)),
        stats,  # type: ignore[arg-type]
        "00000000",
        "-1",
    )


@st.composite
def _part(draw: Any) -> tuple[Sides, dict[str, list[str]] | None]:
    npus: list[LeafRow] = []
    benches: list[LeafRow | None] = []
    for k in range(draw(st.integers(0, 6))):
        entry = draw(st.sampled_from(_NAMES)).format(k=k)
        for j in range(draw(st.integers(1, 4))):
            state = draw(st.sampled_from(["input", "output", "parameters"]))
            name = f"{entry}.{state}.{j}"
            npus.append(draw(_side(name, entry, state)))
            bench = draw(_side(draw(st.sampled_from([name, name + ".qkv", NA])), entry, state))
            benches.append(bench if draw(st.integers(0, 5)) else None)
    stacks = {n.entry: ["File a.py, line 1", n.entry] for n in npus[::2]} if draw(st.booleans()) else None
    return Sides(npus, benches), stacks


def _float_stats(sides: Sides) -> tuple[bool, ...]:
    matched = [b for b in sides.benches if b is not None]
    return float_stat_columns(sides.npus, matched, len(matched) < len(sides.benches))


@settings(max_examples=400, deadline=None)
@given(_part())
def test_drawn_rows(part: tuple[Sides, dict[str, list[str]] | None]) -> None:
    """Rows of every kind of statistic (floats of every magnitude, NaN, infinities, signed zeros, ints
    too large for a float, bools, texts), every dtype, shape and Requires_grad the checkers compare, names of
    ignored APIs, outputs, partners missing: the Python path's bytes, or its error."""
    sides, stacks = part
    float_stats = _float_stats(sides)
    try:
        expected: bytes | Exception = python_lines(sides, stacks, float_stats)
    except (ValueError, OverflowError) as e:
        expected = e
    if isinstance(expected, Exception):
        with pytest.raises(type(expected)):
            stat_lines.statistics_lines(sides, stacks, float_stats)
        with pytest.raises(type(expected)):
            stat_lines.statistics_cells(sides, float_stats)
        with pytest.raises(type(expected)):
            assert_same_part(sides, stacks, float_stats)
    else:
        assert stat_lines.statistics_lines(sides, stacks, float_stats) == expected
        assert_same_table(sides, float_stats)
        assert_same_part(sides, stacks, float_stats)


def test_the_kernel_takes_its_numbers_and_messages_from_python(monkeypatch: pytest.MonkeyPatch) -> None:
    """Other limits and messages handed to the kernel change its lines as they change the Python path's."""
    limits = rules.LIMITS._replace(small_input_norm=10.0, big_output_norm=0.01, tenfold=0.5)
    messages = tuple(m.replace(": The", ": THE") for m in rules.SUMMARY_MESSAGES)
    npus = [
        LeafRow(
            "Functional.f.0.forward.input.0",
            "Functional.f.0.forward",
            "input",
            "torch.float32",
            "[2]",
            "True",
            (1.0, 0.5, 0.25, 2.0),
            "00000000",
            "-1",
        ),  # fmt: skip
        LeafRow(
            "Functional.f.0.forward.output.0",
            "Functional.f.0.forward",
            "output",
            "torch.float16",
            "[2]",
            "True",
            (1.0, 0.5, 0.25, 2.0),
            "00000000",
            "-1",
        ),  # fmt: skip
    ]
    benches = [row._replace(stats=(1.0, 0.5, 0.25, 1.9)) for row in npus]
    benches[1] = benches[1]._replace(dtype="torch.float32", requires_grad="False")
    sides = Sides(npus, benches)
    monkeypatch.setattr(rules, "CHECKERS", rules.CHECKERS._replace(limits=limits, messages=messages))
    rules_of = stat_lines._rules(False)
    monkeypatch.setattr(stat_lines, "RULES", {False: rules_of})
    lines = stat_lines.statistics_lines(sides, None, (True,) * 12)
    monkeypatch.setattr(rules, "LIMITS", limits)
    monkeypatch.setattr(rules, "MSG_NORM_OUTPUT", messages[1])
    monkeypatch.setattr(rules, "MSG_REQUIRES_GRAD", messages[2])
    monkeypatch.setattr(rules, "MSG_DTYPE", messages[4])
    monkeypatch.setattr(rules, "MSG_NORM_TENFOLD", messages[6])
    assert lines == python_lines(sides, None, (True,) * 12)
    assert b"error: THE NormRelativeErr" in lines and b"warning: THE norm relative error" in lines


def _leaves(names: Sequence[str], stats: Sequence[tuple[Any, Any, Any, Any]]) -> Sides:
    """Rows named ``names`` with ``stats``, their Bench partners the same but for Requires_grad every
    other row (a False Requires_grad Consistent cell: a bool)."""
    npus = [
        LeafRow(
            name, "Functional.f.0.forward", "input", "torch.float32", "[2]", "True", four, "00000000", "-1"
        )
        for name, four in zip(names, stats, strict=True)
    ]
    benches = [row._replace(requires_grad="False" if i % 2 else "True") for i, row in enumerate(npus)]
    return Sides(npus, benches)


TEXTS = ["a;b", "it's", 'x"y,z', "a\nb", "c\rd", "''", "=1+2", " @x", "plain", "é€", "\U0001f600", ""]
"""Names of every class of character: quoted under one dialect or another, neutralised, not ASCII."""


@pytest.mark.parametrize("dialect", [csv_writer.CsvDialect(";", "'", "\r\n"), csv_writer.DIALECT])
def test_the_kernel_takes_the_csv_dialect_from_python(
    dialect: csv_writer.CsvDialect, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The csv's punctuation (csv_writer.DIALECT: the delimiter, the quote and the line end, handed to
    the kernel in NATIVE_RULES): under another dialect its lines are the Python path's, which are the
    csv module's of the cells' texts; a delimiter of two characters is refused."""
    quoted = frozenset("".join(dialect))
    monkeypatch.setattr(csv_writer, "DIALECT", dialect)
    monkeypatch.setattr(csv_writer, "_QUOTED", quoted)
    monkeypatch.setattr(csv_writer, "_CHANGED_INSIDE", csv_writer._changed_inside(quoted))
    native = (*csv_writer.NATIVE_RULES[:2], "".join(sorted(quoted)), csv_writer.NATIVE_RULES[3], *dialect)
    monkeypatch.setattr(csv_writer, "NATIVE_RULES", native)
    monkeypatch.setattr(stat_lines, "RULES", {w: stat_lines._rules(w) for w in (False, True)})
    sides = _leaves(TEXTS, [(1.5, -0.0, 2, 1e-7)] * len(TEXTS))
    float_stats = _float_stats(sides)
    table = build_table(sides, "statistics", None, None, float_stats, highlight=False)
    module = io.StringIO(newline="")
    writer = csv.writer(
        module, delimiter=dialect.delimiter, quotechar=dialect.quote, lineterminator=dialect.line_end
    )
    writer.writerows([[cell_text(v) for v in row] for row in table.rows])
    lines = stat_lines.statistics_lines(sides, None, float_stats)
    assert lines == python_lines(sides, None, float_stats) == module.getvalue().encode("utf-8")
    refused = stat_lines.StatRules(*stat_lines.RULES[False])._replace(csv=(*native[:4], ";;", *native[5:]))
    monkeypatch.setattr(stat_lines, "RULES", {False: tuple(refused)})
    with pytest.raises(ValueError, match="csv rules"):
        stat_lines.statistics_lines(sides, None, float_stats)


def test_the_kernel_asks_python_for_a_bools_text(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bool cell's text (Requires_grad Consistent) is the Python path's (cell_text: str of the bool),
    asked of the ``field`` handed in, not written in C: under another printing of bools the kernel's
    lines are the Python path's under it."""

    def bool_text(value: Any) -> str:
        return ("yes" if value else "no") if value.__class__ is bool else cell_text(value)

    sides = _leaves(["a", "b", "c", "d"], [(1, 0, 1.5, True)] * 4)  # (ints and a bool: not the bools' texts)
    float_stats = _float_stats(sides)
    other = stat_lines.StatRules(*stat_lines.RULES[False])._replace(
        field=lambda value: csv_writer.quoted(bool_text(value))
    )
    monkeypatch.setattr(stat_lines, "RULES", {False: tuple(other)})
    lines = stat_lines.statistics_lines(sides, None, float_stats)
    monkeypatch.setattr(csv_writer, "cell_text", bool_text)
    assert lines == python_lines(sides, None, float_stats)
    assert b",yes," in lines and b",no," in lines


def test_the_kernel_prints_every_finite_float_as_repr() -> None:
    """The kernel writes every finite float from orjson's shortest digits in repr's notation
    (msprobe_dask/csrc/deferred_floats.h): the Python path's text (repr's) for 20,000 random bit
    patterns, each power of ten and its neighbours, and the notations' edges."""
    rng = random.Random(16)
    floats = [struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0] for _ in range(20_000)]
    for e in range(-324, 309):
        x = float(f"1e{e}")
        floats += [x, math.nextafter(x, 0.0), math.nextafter(x, math.inf), 1.5 * x, 9.999999999999999 * x]
    floats += [0.0, -0.0, 5e-324, 1e-4, 9.999999999999999e-05, 1e16, 9999999999999998.0, 0.1 + 0.2]
    finite = [x for x in floats if math.isfinite(x)]
    stats = [tuple(finite[i : i + 4]) for i in range(0, len(finite) - 3, 4)]
    sides = _leaves([f"Functional.f.0.forward.input.{i}" for i in range(len(stats))], stats)
    float_stats = _float_stats(sides)
    lines = stat_lines.statistics_lines(sides, None, float_stats)
    assert lines == python_lines(sides, None, float_stats)
    assert all(repr(x).encode() in lines for x in finite[::97])
