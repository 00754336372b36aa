"""``compare -da`` equals the reference key for key: the per-rank json files and diff_analyze json of
multirank/ref/compare_step0_da, and the diff_analyze of every variant in ref/da_variants/."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
from conftest import case_dir, read_csv
from variants import VARIANTS, build_variant

from msprobe_dask.analysis.comm_apis import is_communication
from msprobe_dask.analysis.first_diff import Entry, first_divergence
from msprobe_dask.cli import main

STAMP = re.compile(r"_\d{14}(?=\.json$)")
STAMP_CSV = re.compile(r"_\d{14}(?=\.csv$)")


def assert_same_json(ours: Any, ref: Any, where: str = "") -> None:
    """Equal values of equal types, dict keys in the same order (NaN equals NaN)."""
    assert type(ours) is type(ref), f"{where}: {type(ours).__name__} vs {type(ref).__name__}"
    if isinstance(ref, dict):
        assert list(ours) == list(ref), f"{where}: keys differ"
        for key in ref:
            assert_same_json(ours[key], ref[key], f"{where}/{key}")
    elif isinstance(ref, list):
        assert len(ours) == len(ref), f"{where}: length {len(ours)} vs {len(ref)}"
        for i, (a, b) in enumerate(zip(ours, ref)):
            assert_same_json(a, b, f"{where}[{i}]")
    elif isinstance(ref, float) and math.isnan(ref):
        assert math.isnan(ours), where
    else:
        assert ours == ref, f"{where}: {ours!r} vs {ref!r}"


def _run_da(target: Path, golden: Path, out: Path) -> int:
    return main(["compare", "-q", "-da", "-tp", str(target), "-gp", str(golden), "-o", str(out)])


def _load(folder: Path, pattern: str) -> dict[str, Any]:
    return {STAMP.sub("", p.name): json.loads(p.read_text()) for p in folder.glob(pattern)}


def test_da_equals_reference(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = case_dir("multirank")
    assert _run_da(root / "target" / "step0", root / "golden" / "step0", tmp_path) == 0
    ref_dir = root / "ref" / "compare_step0_da"
    ours, ref = _load(tmp_path, "compare_result_*.json"), _load(ref_dir, "compare_result_*.json")
    assert sorted(ours) == sorted(ref) == [f"compare_result_rank{r}.json" for r in range(4)]
    for name in ref:
        assert_same_json(ours[name], ref[name], name)
    [ours_diff] = tmp_path.glob("diff_analyze_*.json")
    [ref_diff] = ref_dir.glob("diff_analyze_*.json")
    assert re.fullmatch(r"diff_analyze_\d{19}\.json", ours_diff.name)
    assert_same_json(json.loads(ours_diff.read_text()), json.loads(ref_diff.read_text()))
    lines = capsys.readouterr().out.splitlines()
    assert "First divergence" not in "\n".join(lines)  # -q: the result path lines only
    assert lines[-4:] == [f"The result file path is: {p.resolve()}." for p in sorted(tmp_path.glob("*.csv"))]


def test_da_also_writes_the_tables_and_the_first_divergence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """D23: the reference's -da writes only json; ours also writes the run's csv (the reference's plain
    compare's cells) and prints the first divergence before the result path lines."""
    root = case_dir("multirank")
    args = ["compare", "-da", "-tp", str(root / "target" / "step0"), "-gp", str(root / "golden" / "step0")]
    assert main([*args, "-o", str(tmp_path)]) == 0
    ours = {STAMP_CSV.sub("", p.name): p for p in tmp_path.glob("*.csv")}
    ref = {STAMP_CSV.sub("", p.name): p for p in (root / "ref" / "compare_step0_csv").glob("*.csv")}
    assert sorted(ours) == sorted(ref) == [f"compare_result_rank{r}.csv" for r in range(4)]
    for name in ref:
        assert read_csv(ours[name]) == read_csv(ref[name]), name
    lines = capsys.readouterr().out.splitlines()
    start = lines.index("First divergence: rank2 Functional.linear.1.forward")
    assert "no earlier node made it" in lines[start + 1]
    assert lines[start + 3 : start + 6] == [
        f"    spread: rank{r} Distributed.all_reduce.1.forward (received from rank 2)" for r in (0, 1, 3)
    ]
    assert all(line.startswith("The result file path is: ") for line in lines[start + 6 :])
    assert lines[-1].endswith(".csv.")
    assert sum("received from rank 2" in line for line in lines[:start]) == 3  # the per-rank summaries


@pytest.mark.parametrize("name", list(VARIANTS))
def test_da_variant_equals_reference(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = case_dir("multirank")
    target, golden = build_variant(root, name, tmp_path)
    out = tmp_path / "out"
    assert _run_da(target, golden, out) == 0
    ref = root / "ref" / "da_variants" / name / "diff_analyze.json"
    found = list(out.glob("diff_analyze_*.json"))
    if not ref.exists():
        assert found == []
        assert "Cannot find any diff node, no need to generate analyze file." in capsys.readouterr().out
        return
    assert len(found) == 1
    assert_same_json(json.loads(found[0].read_text()), json.loads(ref.read_text()))


def test_da_on_two_files_works(tmp_path: Path) -> None:
    """D2: the reference ignores -da for two dump.json files and writes a csv; we analyse them (and
    write the csv too, D23)."""
    root = case_dir("multirank")
    rank2 = Path("step0") / "rank2" / "dump.json"
    assert _run_da(root / "target" / rank2, root / "golden" / rank2, tmp_path) == 0
    ours = _load(tmp_path, "compare_result_*.json")
    ref = _load(root / "ref" / "compare_step0_da", "compare_result_rank2_*.json")
    assert list(ours) == ["compare_result.json"]
    assert_same_json(ours["compare_result.json"], ref["compare_result_rank2.json"])
    assert len(list(tmp_path.glob("compare_result_*.csv"))) == 1
    [diff] = tmp_path.glob("diff_analyze_*.json")
    nodes = json.loads(diff.read_text())["rank_0"]
    assert [node["op_name"] for node in nodes] == ["Tensor.__add__.5.forward"]


def test_da_on_step_tree_writes_per_step(tmp_path: Path) -> None:
    root = case_dir("multirank")
    assert _run_da(root / "target", root / "golden", tmp_path) == 0
    for step in ("step0", "step1"):
        assert len(list((tmp_path / step).glob("compare_result_rank*_*.json"))) == 4
    ref = json.loads(next((root / "ref" / "compare_step0_da").glob("diff_analyze_*.json")).read_text())
    [ours] = (tmp_path / "step0").glob("diff_analyze_*.json")
    assert_same_json(json.loads(ours.read_text()), ref)


def _entries(*spec: str) -> list[Entry]:
    """'name' is same, '!name' is not."""
    return [Entry(s.lstrip("!"), not s.startswith("!")) for s in spec]


def test_communication_names() -> None:
    assert is_communication("Distributed.all_reduce.3.forward")
    assert is_communication("MintDistributed.broadcast.0.forward")
    assert not is_communication("Distributed.get_rank.0.forward")
    assert not is_communication("Tensor.add_.0.forward")


def test_first_divergence_stages() -> None:
    comm = "Distributed.all_reduce.{}.forward"
    same = _entries(
        "Tensor.a.0.forward", comm.format(0), "Tensor.b.0.forward", comm.format(1), "Tensor.c.0.forward"
    )
    assert first_divergence({0: same, 1: same}) == ("", {})
    pre = _entries("!Tensor.a.0.forward", comm.format(0))
    assert first_divergence({0: same, 1: pre}) == ("before communication", {1: ["Tensor.a.0.forward"]})
    early = _entries(
        "Tensor.a.0.forward", comm.format(0), "Tensor.x.0.forward", "!Tensor.b.0.forward", comm.format(1)
    )
    late = _entries("Tensor.a.0.forward", comm.format(0), "!Tensor.b.0.forward", comm.format(1))
    assert first_divergence({0: early, 1: late}) == ("during communication", {1: ["Tensor.b.0.forward"]})
    post = _entries("Tensor.a.0.forward", comm.format(0), "!Tensor.z.0.forward")
    assert first_divergence({0: post}) == ("after communication", {0: ["Tensor.z.0.forward"]})
    ignored = _entries("!Torch.empty.0.forward", comm.format(0))
    assert first_divergence({0: [e for e in ignored if "empty" not in e.name]}) == ("", {})


@pytest.mark.parametrize(("case", "run"), [("md5_mix", "da_md5"), ("tensor_mix", "da_tensor")])
def test_da_other_modes_equal_reference(case: str, run: str, tmp_path: Path) -> None:
    """md5 mode keeps a bare pass/Different verdict (Err_message NaN); tensor dumps are analysed on
    their statistics. Inputs: the case's dumps as rank0 of a step folder (ref/<run>/commands.txt)."""
    import shutil

    for side, name in (("target", "t"), ("golden", "g")):
        shutil.copytree(case_dir(case) / side, tmp_path / name / "rank0")
    out = tmp_path / "out"
    assert _run_da(tmp_path / "t", tmp_path / "g", out) == 0
    ref_dir = case_dir("multirank") / "ref" / run
    ours, ref = _load(out, "compare_result_*.json"), _load(ref_dir, "compare_result_*.json")
    assert list(ours) == list(ref) == ["compare_result_rank0.json"]
    assert_same_json(ours["compare_result_rank0.json"], ref["compare_result_rank0.json"])
    [ours_diff] = out.glob("diff_analyze_*.json")
    [ref_diff] = ref_dir.glob("diff_analyze_*.json")
    assert_same_json(json.loads(ours_diff.read_text()), json.loads(ref_diff.read_text()))


def test_da_on_proc_folders_works(tmp_path: Path) -> None:
    """D13: the reference's -da on a step folder of proc* folders crashes (FileNotFoundError on its
    own output folder); we analyse the single process as rank_0."""
    root = case_dir("multistep")
    assert _run_da(root / "target" / "step2", root / "golden" / "step2", tmp_path) == 0
    assert list(_load(tmp_path, "compare_result_*.json")) == ["compare_result_proc19035.json"]
    [diff] = tmp_path.glob("diff_analyze_*.json")
    assert list(json.loads(diff.read_text())) == ["rank_0"]
