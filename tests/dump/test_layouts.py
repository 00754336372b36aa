"""One reader per dump layout behind open_dump, and its error cases (one clear DumpError each)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import case_dir

from msprobe_dask.cli import main
from msprobe_dask.dump.dumpjson import load_construct
from msprobe_dask.dump.kernel import kernel_rank_step
from msprobe_dask.dump.layouts import open_dump
from msprobe_dask.dump.source import pair_trees
from msprobe_dask.errors import DumpError

RANK_DUMP = case_dir("multirank") / "target" / "step0" / "rank0"


def _rank(dest: Path, dump: str = "dump.json") -> Path:
    dest.mkdir(parents=True)
    shutil.copy(RANK_DUMP / "dump.json", dest / dump)
    return dest


def _layout(path: Path) -> list[tuple[str, str, str, str]]:
    tree = open_dump(path)
    return [(s.group, s.step, s.rank, s.dump_json.name) for s in tree.sources]


def test_single_file_and_folder() -> None:
    assert open_dump(RANK_DUMP / "dump.json").layout == "single"
    tree = open_dump(RANK_DUMP)
    assert tree.layout == "single" and tree.sources[0].dump_json == RANK_DUMP / "dump.json"


def test_debug_json(tmp_path: Path) -> None:
    folder = _rank(tmp_path / "d", "debug.json")
    tree = open_dump(folder)
    assert tree.layout == "single" and tree.sources[0].is_debug


def test_rank_folders_sorted_by_id(tmp_path: Path) -> None:
    for name in ("rank10", "rank2", "rank", "rank0"):
        _rank(tmp_path / name)
    (tmp_path / "logs").mkdir()  # a folder without a dump is ignored
    assert open_dump(tmp_path).layout == "ranks"
    assert [r for _, _, r, _ in _layout(tmp_path)] == ["rank", "rank0", "rank2", "rank10"]


def test_proc_folder() -> None:
    tree = open_dump(case_dir("multistep") / "target" / "step1")
    assert tree.layout == "ranks" and [s.rank for s in tree.sources] == ["proc19035"]


def test_step_tree() -> None:
    assert _layout(case_dir("multirank") / "golden") == [
        ("", step, f"rank{r}", "dump.json") for step in ("step0", "step1") for r in range(4)
    ]
    assert [s.rank for s in open_dump(case_dir("multistep") / "golden").sources] == ["proc19034"] * 3


def test_mindspore_graph_and_pynative(tmp_path: Path) -> None:
    _rank(tmp_path / "graph" / "step0" / "rank0")
    _rank(tmp_path / "graph" / "step1" / "rank0")
    _rank(tmp_path / "pynative" / "step0" / "rank0")
    _rank(tmp_path / "pynative" / "step0" / "rank1")
    tree = open_dump(tmp_path)
    assert tree.layout == "mixed"
    assert [s.output_label for s in tree.sources] == [
        "graph/step0/rank0",
        "graph/step1/rank0",
        "pynative/step0/rank0",
        "pynative/step0/rank1",
    ]


def test_mixed_tree_compare_writes_graph_and_pynative_folders(tmp_path: Path) -> None:
    """Results go to out/graph/stepN/ and out/pynative/stepN/; a step on one side only is skipped."""
    for side in ("t", "g"):
        _rank(tmp_path / side / "graph" / "step0" / "rank0")
        _rank(tmp_path / side / "pynative" / "step0" / "rank0")
    _rank(tmp_path / "t" / "graph" / "step1" / "rank0")
    out = tmp_path / "out"
    assert (
        main(["compare", "-q", "-tp", str(tmp_path / "t"), "-gp", str(tmp_path / "g"), "-o", str(out)]) == 0
    )
    found = sorted(str(p.parent.relative_to(out)) for p in out.rglob("compare_result_rank0_*.csv"))
    assert found == ["graph/step0", "pynative/step0"]


def test_kernel_dump_rank_and_step(tmp_path: Path) -> None:
    leaf = tmp_path / "rank_3" / "net" / "0" / "7"
    leaf.mkdir(parents=True)
    (leaf / "statistic.csv").write_text("Op Type,Op Name\n")
    other = tmp_path / "x" / "1" / "net" / "0" / "2"
    other.mkdir(parents=True)
    (other / "Add.Default_Add-op1.4.2.1700000000.output.0.DefaultFormat.npy").write_bytes(b"")
    assert kernel_rank_step(leaf) == (3, 7)
    tree = open_dump(tmp_path)
    assert tree.layout == "kernel"
    assert sorted((s.rank, s.step) for s in tree.sources) == [("1", "2"), ("3", "7")]
    with pytest.raises(DumpError, match="static-graph kernel dump"):
        pair_trees(tree, tree)


# ---- error cases -------------------------------------------------------------------------------


def test_missing_path(tmp_path: Path) -> None:
    with pytest.raises(DumpError, match="does not exist"):
        open_dump(tmp_path / "nope")


def test_empty_folder(tmp_path: Path) -> None:
    with pytest.raises(DumpError, match="empty folder"):
        open_dump(tmp_path)


def test_folder_without_dump(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(DumpError, match="holds no dump.json"):
        open_dump(tmp_path)


def test_wrongly_named_file(tmp_path: Path) -> None:
    path = tmp_path / "x_dump.json"
    path.write_text("{}")
    with pytest.raises(DumpError, match="must be named dump.json or debug.json"):
        open_dump(path)


def test_mixed_rank_and_non_rank_folders(tmp_path: Path) -> None:
    """D12: a step folder mixing rank folders with other dump folders is an error."""
    _rank(tmp_path / "rank0")
    _rank(tmp_path / "backup")
    with pytest.raises(DumpError, match="mixes rank folders with other dump folders: backup"):
        open_dump(tmp_path)


def test_mixed_rank_and_proc_folders(tmp_path: Path) -> None:
    _rank(tmp_path / "rank0")
    _rank(tmp_path / "proc12")
    with pytest.raises(DumpError, match="mixes rank folders"):
        open_dump(tmp_path)


def test_several_proc_folders(tmp_path: Path) -> None:
    _rank(tmp_path / "proc1")
    _rank(tmp_path / "proc2")
    with pytest.raises(DumpError, match="several proc folders"):
        open_dump(tmp_path)


def test_step_folder_without_ranks(tmp_path: Path) -> None:
    _rank(tmp_path / "step0" / "rank0")
    (tmp_path / "step1").mkdir()
    with pytest.raises(DumpError, match=r"step1: is a step folder without rank"):
        open_dump(tmp_path)


def test_rank_folder_without_dump_json(tmp_path: Path) -> None:
    """D11: a rank folder without dump.json is named in an error (skipped with skip_missing)."""
    for side in ("t", "g"):
        _rank(tmp_path / side / "rank0")
        (tmp_path / side / "rank1").mkdir()
        (tmp_path / side / "rank1" / "stack.json").write_text("{}")
    npu, bench = open_dump(tmp_path / "t"), open_dump(tmp_path / "g")
    assert [m.rank for m in npu.missing] == ["rank1"]
    with pytest.raises(DumpError, match=r"rank1 \(target\) without dump.json"):
        pair_trees(npu, bench)
    assert [label for label, _, _ in pair_trees(npu, bench, skip_missing=True)] == ["rank0"]


def test_no_rank_folder_holds_a_dump(tmp_path: Path) -> None:
    (tmp_path / "rank0").mkdir()
    (tmp_path / "rank0" / "stack.json").write_text("{}")
    with pytest.raises(DumpError, match="no rank folder holds a dump.json"):
        open_dump(tmp_path)


def test_construct_json_not_valid_json(tmp_path: Path) -> None:
    folder = _rank(tmp_path / "rank0")
    (folder / "construct.json").write_text('{"Module.fc1.Linear.forward.0": ')
    source = open_dump(tmp_path).sources[0]
    with pytest.raises(DumpError, match=r"construct.json: is not valid JSON"):
        load_construct(source.construct_json)


def test_layouts_differ(tmp_path: Path) -> None:
    _rank(tmp_path / "t" / "rank0")
    with pytest.raises(DumpError, match="is a single dump but the target is a ranks dump"):
        pair_trees(open_dump(tmp_path / "t"), open_dump(RANK_DUMP))


def test_dump_json_not_valid_json_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for side in ("t", "g"):
        _rank(tmp_path / side / "rank0")
    (tmp_path / "t" / "rank0" / "dump.json").write_text(json.dumps({"task": "statistics"})[:-3])
    assert (
        main(
            [
                "compare",
                "-q",
                "-tp",
                str(tmp_path / "t"),
                "-gp",
                str(tmp_path / "g"),
                "-o",
                str(tmp_path / "o"),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "dump.json: is not valid JSON" in err
