"""merge_result: our workbook equals the reference's (sheets, rows, cell values and types), from the
reference's per-rank xlsx files, from hand-edited copies of them, and from our own xlsx results."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import openpyxl
import pytest
from conftest import case_dir

from msprobe_dask.cli import main
from msprobe_dask.writers.merge_result import type_column

REF = case_dir("multirank") / "ref"
MERGE = REF / "merge_result"


def _cells(path: Path) -> dict[str, list[list[tuple[Any, type]]]]:
    book = openpyxl.load_workbook(path)
    return {
        sheet.title: [[(c.value, type(c.value)) for c in row] for row in sheet.iter_rows()] for sheet in book
    }


def _merge(input_dir: Path, out: Path, config: str) -> Path:
    assert main(["merge_result", "-i", str(input_dir), "-o", str(out), "-config", str(MERGE / config)]) == 0
    [result] = out.glob("multi_ranks_compare_merge_*.xlsx")
    return result


def _assert_same_workbook(ours: Path, ref: Path) -> None:
    a, b = _cells(ours), _cells(ref)
    assert list(a) == list(b)
    for sheet in b:
        assert len(a[sheet]) == len(b[sheet]), sheet
        for row_a, row_b in zip(a[sheet], b[sheet]):
            assert row_a == row_b, f"{sheet}: {row_b[0][0]}"


@pytest.mark.parametrize(
    ("input_dir", "config", "ref_dir"),
    [
        ("../compare_step0_xlsx", "config.yaml", "out"),
        ("../compare_step0_xlsx", "config_all.yaml", "out_all"),
        ("variant_input", "config.yaml", "variant_out"),
        ("variant2_input", "config.yaml", "variant2_out"),
    ],
)
def test_merge_equals_reference(input_dir: str, config: str, ref_dir: str, tmp_path: Path) -> None:
    ours = _merge(MERGE / input_dir, tmp_path, config)
    [ref] = (MERGE / ref_dir).glob("*.xlsx")
    _assert_same_workbook(ours, ref)


def test_merge_of_our_xlsx_equals_reference(tmp_path: Path) -> None:
    root = case_dir("multirank")
    results = tmp_path / "results"
    assert (
        main(
            [
                "compare",
                "-q",
                "--xlsx",
                "-tp",
                str(root / "target" / "step0"),
                "-gp",
                str(root / "golden" / "step0"),
                "-o",
                str(results),
            ]
        )
        == 0
    )
    ours = _merge(results, tmp_path / "merged", "config.yaml")
    [ref] = (MERGE / "out").glob("*.xlsx")
    _assert_same_workbook(ours, ref)


def test_type_column_follows_the_reference_reader() -> None:
    assert type_column(["0", "0"]) == [0, 0]
    assert type_column(["0", "0.5", "inf"]) == [0.0, 0.5, float("inf")]
    assert type_column(["0", "N/A"]) == ["0", "N/A"]
    assert type_column(["0", "Nan"]) == ["0", "Nan"]
    assert type_column(["0", None]) == ["0", ""]
    assert type_column([True, False]) == [True, False]


def _copy(names: list[str], dest: Path) -> Path:
    dest.mkdir()
    source = sorted((REF / "compare_step0_xlsx").glob("*.xlsx"))[0]
    for name in names:
        shutil.copy(source, dest / name)
    return dest


def _refused(input_dir: Path, config: Path, out: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """Run merge_result expecting a user error; return stderr."""
    argv = ["merge_result", "-i", str(input_dir), "-o", str(out), "-config", str(config)]
    assert main(argv) == 2
    assert not out.exists()
    return capsys.readouterr().err


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (["compare_result_rank0_20261129072651.xlsx"], "no more than 1"),
        (["compare_result_rank0_20261129072651.xlsx", "result.xlsx"], "Wrong compare result name"),
        (
            ["compare_result_rank0_20261129072651.xlsx", "compare_result_rank_20261129072651.xlsx"],
            "no more than 1",
        ),
    ],
)
def test_merge_input_errors(
    names: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _copy(names, tmp_path / "in")
    err = _refused(folder, MERGE / "config.yaml", tmp_path / "out", capsys)
    assert message in err


def test_merge_config_without_api(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("compare_index:\n  - Max diff\n")
    err = _refused(REF / "compare_step0_xlsx", config, tmp_path / "out", capsys)
    assert "The APIs required to merge data were not found" in err


def test_merge_invalid_index_is_nothing_to_merge(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("api:\n  - Distributed\ncompare_index:\n  - Cosine\n")
    err = _refused(REF / "compare_step0_xlsx", config, tmp_path / "out", capsys)
    assert "The invalid compare indexes: ['Cosine']" in err and "Nothing to merge." in err
