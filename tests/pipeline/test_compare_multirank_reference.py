"""Multi-rank and multi-step trees (issue 4): every successful reference compare run in multirank/ and
multistep/ ref/ is matched cell for cell; ranks are paired by id (D5)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from conftest import case_dir, read_csv
from test_compare_csv_reference import assert_same_cells
from test_compare_xlsx_reference import assert_same_xlsx_except_d6

from msprobe_dask.cli import main

STAMP = re.compile(r"_\d{14}(?=\.(csv|xlsx)$)")


def _compare(out: Path, target: Path, golden: Path, *extra: str) -> int:
    return main(["compare", "-q", "-tp", str(target), "-gp", str(golden), "-o", str(out), *extra])


def _outputs(folder: Path) -> dict[str, Path]:
    """Result files below ``folder`` by their name without the time stamp (relative path)."""
    return {
        STAMP.sub("", str(p.relative_to(folder))): p
        for p in folder.rglob("compare_result*")
        if not p.name.startswith(".")
    }


STEP_RUNS = [
    ("multirank", "step0", "compare_step0_csv"),
    ("multirank", "step1", "compare_step1_csv"),
    ("multistep", "step0", "compare_step0_csv"),
    ("multistep", "step1", "compare_step1_csv"),
    ("multistep", "step2", "compare_step2_csv"),
]


@pytest.mark.parametrize(("case", "step", "run"), STEP_RUNS)
def test_step_folder_csv_equals_reference(case: str, step: str, run: str, tmp_path: Path) -> None:
    root = case_dir(case)
    assert _compare(tmp_path, root / "target" / step, root / "golden" / step) == 0
    ours, ref = _outputs(tmp_path), _outputs(root / "ref" / run)
    assert sorted(ours) == sorted(ref)
    for name in ref:
        assert_same_cells(read_csv(ours[name]), read_csv(ref[name]))


def test_single_rank_file_equals_reference(tmp_path: Path) -> None:
    root = case_dir("multirank")
    rank2 = Path("step1") / "rank2" / "dump.json"
    assert _compare(tmp_path, root / "target" / rank2, root / "golden" / rank2) == 0
    ours, ref = _outputs(tmp_path), _outputs(root / "ref" / "compare_rank2_step1_csv")
    assert list(ours) == list(ref) == ["compare_result.csv"]
    assert_same_cells(read_csv(ours["compare_result.csv"]), read_csv(ref["compare_result.csv"]))


def test_step_tree_writes_one_folder_per_step(tmp_path: Path) -> None:
    """A whole run (step*/rank*/) compares every step into out/stepN/; the reference needs one call
    per step folder (D10: it rejects the run folder). Each file equals that step's reference file."""
    root = case_dir("multirank")
    assert _compare(tmp_path, root / "target", root / "golden") == 0
    ours = _outputs(tmp_path)
    assert len(ours) == 8
    for step in ("step0", "step1"):
        ref = _outputs(root / "ref" / f"compare_{step}_csv")
        for name, path in ref.items():
            assert_same_cells(read_csv(ours[f"{step}/{name}"]), read_csv(path))


def _copy_ranks(src: Path, dst: Path, ranks: dict[str, str]) -> Path:
    for new, old in ranks.items():
        shutil.copytree(src / old, dst / new)
    return dst


def test_sparse_rank_ids_are_paired_by_id(tmp_path: Path) -> None:
    """Target and golden {rank0, rank2}: each rank's file equals the reference's file of that rank."""
    root = case_dir("multirank")
    target = _copy_ranks(root / "target" / "step0", tmp_path / "t", {"rank0": "rank0", "rank2": "rank2"})
    golden = _copy_ranks(root / "golden" / "step0", tmp_path / "g", {"rank0": "rank0", "rank2": "rank2"})
    out = tmp_path / "out"
    assert _compare(out, target, golden) == 0
    ours = _outputs(out)
    ref = _outputs(root / "ref" / "compare_step0_csv")
    assert sorted(ours) == ["compare_result_rank0.csv", "compare_result_rank2.csv"]
    assert_same_cells(read_csv(ours["compare_result_rank2.csv"]), read_csv(ref["compare_result_rank2.csv"]))


def test_rank_on_one_side_only_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """D5: target {rank0, rank2} vs golden {rank0, rank1}. The reference pairs by sorted position and
    silently compares target rank2 with golden rank1 (compare.md §9); we name both ranks, exit 2."""
    root = case_dir("multirank")
    target = _copy_ranks(root / "target" / "step0", tmp_path / "t", {"rank0": "rank0", "rank2": "rank2"})
    golden = _copy_ranks(root / "golden" / "step0", tmp_path / "g", {"rank0": "rank0", "rank1": "rank1"})
    assert _compare(tmp_path / "out", target, golden) == 2
    err = capsys.readouterr().err
    assert "rank2 only in the target" in err and "rank1 only in the golden" in err
    assert err.count("\n") == 1
    assert not list((tmp_path / "out").glob("*.csv"))


def test_skip_missing_ranks_compares_the_others(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """D5 with --skip-missing-ranks: only rank0 (present on both sides) is compared, with a warning."""
    root = case_dir("multirank")
    target = _copy_ranks(root / "target" / "step0", tmp_path / "t", {"rank0": "rank0", "rank2": "rank2"})
    golden = _copy_ranks(root / "golden" / "step0", tmp_path / "g", {"rank0": "rank0", "rank1": "rank1"})
    out = tmp_path / "out"
    assert _compare(out, target, golden, "--skip-missing-ranks") == 0
    assert sorted(_outputs(out)) == ["compare_result_rank0.csv"]
    assert "rank2 only in the target" in caplog.text


@pytest.mark.parametrize(
    ("case", "step", "run"),
    [("multirank", "step0", "compare_step0_xlsx"), ("multistep", "step2", "compare_step2_xlsx")],
)
def test_step_folder_xlsx_equals_reference_except_d6(case: str, step: str, run: str, tmp_path: Path) -> None:
    root = case_dir(case)
    assert _compare(tmp_path, root / "target" / step, root / "golden" / step, "--xlsx") == 0
    ours, ref = _outputs(tmp_path), _outputs(root / "ref" / run)
    assert sorted(ours) == sorted(ref)
    highlighted = sum(assert_same_xlsx_except_d6(ours[name], ref[name]) for name in ref)
    assert highlighted > 0
