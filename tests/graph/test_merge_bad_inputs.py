"""Parallel-merge inputs the reference refuses (§6.1): one line naming the side and the option, exit 2,
nothing left in OUT."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from test_bad_inputs import _assert_refused, _run

DATA = Path(__file__).resolve().parents[1] / "data"
TP2 = str(DATA / "tp_merge" / "target")  # rank0, rank1
GOLDEN = str(DATA / "tp_merge" / "golden")  # rank0


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (
            ["--rank_size", "4", "--tp", "2", "--pp", "1"],
            ("--rank_size", "[NPU]", "you set 4", "2 rank folders"),
        ),
        (["--rank_size", "2", "--tp", "3", "--pp", "1"], ("--tp", "[NPU]", "greater than --rank_size")),
        (
            ["--rank_size", "2", "--tp", "2", "--pp", "1", "--vpp", "2"],
            ("--vpp", "[NPU]", "--pp of at least 2"),
        ),
        (
            ["--rank_size", "2", "--tp", "2", "--pp", "1", "--order", "TP-dp"],
            ("--order", "[NPU]", "lowercase"),
        ),
        (["--rank_size", "2", "--tp", "2"], ("--rank_size/--tp/--pp", "all three")),
        (["--rank_size", "2", "--tp", "2", "--pp", "0"], ("--pp", "[NPU]", "greater than 0")),
        (["--rank_size", "2", "--tp", "2", "--pp", "1", "-gp", GOLDEN], ("--rank_size", "two values")),
        (
            ["--rank_size", "2", "2", "--tp", "2", "1", "--pp", "1", "1", "-gp", GOLDEN],
            ("--rank_size", "[Bench]", "you set 2", "1 rank folders"),
        ),
        (
            [
                "--rank_size",
                "2",
                "1",
                "--tp",
                "2",
                "1",
                "--pp",
                "1",
                "1",
                "-gp",
                GOLDEN,
                "--file_type",
                "json",
            ],
            ("--file_type", "comparison mode"),
        ),
    ],
    ids=[
        "rank-count",
        "tp-over-rank-size",
        "vpp-without-pp",
        "bad-order",
        "missing-pp",
        "zero-pp",
        "compare-one-value",
        "bench-rank-count",
        "json-compare",
    ],
)
def test_bad_parallel_params(args: list[str], needles: tuple[str, ...], tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    rc, err = _run(["-tp", TP2, *args, "-o", str(out)], capsys)
    _assert_refused(rc, err, out, *needles)


def test_tp_not_dividing_rank_size(tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    target = str(DATA / "tp_pp_merge" / "target")  # 4 ranks
    rc, err = _run(["-tp", target, "--rank_size", "4", "--tp", "3", "--pp", "1", "-o", str(out)], capsys)
    _assert_refused(rc, err, out, "--tp", "[NPU]", "not divisible by 3")


def test_proc_folder_in_merge_mode(tmp_path: Path, capsys) -> None:
    target = tmp_path / "dump"
    shutil.copytree(DATA / "tp_merge" / "target" / "rank0", target / "proc123")
    out = tmp_path / "out"
    rc, err = _run(["-tp", str(target), "--rank_size", "1", "--tp", "1", "--pp", "1", "-o", str(out)], capsys)
    _assert_refused(rc, err, out, "proc123", "rank<N> folder")


def test_json_needs_rank_folders(tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    args = ["-tp", str(DATA / "stat_mix" / "target"), "--rank_size", "1", "--tp", "1", "--pp", "1"]
    rc, err = _run([*args, "--file_type", "json", "-o", str(out)], capsys)
    _assert_refused(rc, err, out, "-tp", "single dump")


def test_dp_mismatch_between_sides(tmp_path: Path, capsys) -> None:
    """The reference's vis_steps_dp_mismatch run (merge_oracle): NPU merges into 1 graph, Bench into 2."""
    out = tmp_path / "out"
    args = ["-tp", str(DATA / "multirank" / "target"), "-gp", str(DATA / "multirank" / "golden")]
    args += ["--rank_size", "4", "4", "--tp", "4", "2", "--pp", "1", "1", "-o", str(out)]
    rc, err = _run(args, capsys)
    _assert_refused(rc, err, out, "NPU side merges into 1", "Bench side into 2")


def test_dp_mismatch_in_every_step_names_the_first_on_two_workers(tmp_path: Path, capsys) -> None:
    """Both steps' sides disagree: step0 is named, whichever replica task on the two worker processes
    would find its step's mismatch first (graph/merge/plan.py: the sides checked a step at a time)."""
    out = tmp_path / "out"
    args = ["-tp", str(DATA / "multirank" / "target"), "-gp", str(DATA / "multirank" / "golden")]
    args += ["--rank_size", "4", "4", "--tp", "4", "2", "--pp", "1", "1", "--workers", "2", "-o", str(out)]
    rc, err = _run(args, capsys)
    _assert_refused(rc, err, out, str(DATA / "multirank" / "target" / "step0"), "NPU side merges into 1")


def test_default_groups_need_every_dimension_in_order(tmp_path: Path, capsys) -> None:
    """No all_reduce group in this dump, so the tp groups come from --order, which lacks tp."""
    out = tmp_path / "out"
    args = ["-tp", str(DATA / "multirank" / "target" / "step1"), "--rank_size", "4", "--tp", "2", "--pp", "1"]
    rc, err = _run([*args, "--order", "dp-pp", "-o", str(out)], capsys)
    _assert_refused(rc, err, out, "--order", "[NPU]", "(tp)")


def test_json_output_failing_late_leaves_no_partial_dump(tmp_path: Path, capsys) -> None:
    """Four merged graphs (2 steps x 2 dp replicas); the last cannot be written (a folder is in the
    way, and nothing is replaced): the three written before it are removed again, the user's folder
    is left alone."""
    out = tmp_path / "out"
    blocker = out / "step1" / "rank2" / "stack.json"
    blocker.mkdir(parents=True)
    args = ["-tp", str(DATA / "multirank" / "target"), "--rank_size", "4", "--tp", "2", "--pp", "1"]
    rc, err = _run([*args, "--file_type", "json", "-o", str(out)], capsys)
    assert rc == 2 and err.startswith("msprobe-dask: error: ") and "already exists" in err, err
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*")) == [
        "step1",
        "step1/rank2",
        "step1/rank2/stack.json",
    ]


def test_refused_merge_removes_the_folders_it_made(tmp_path: Path, capsys) -> None:
    target = tmp_path / "dump"
    shutil.copytree(DATA / "tp_merge" / "target", target)
    (target / "rank1" / "dump.json").write_text('{"data": {"x": ')
    out = tmp_path / "new" / "out"
    rc, err = _run(["-tp", str(target), "--rank_size", "2", "--tp", "2", "--pp", "1", "-o", str(out)], capsys)
    _assert_refused(rc, err, out, "rank1/dump.json", "not valid JSON")
    assert not (tmp_path / "new").exists()


def _replicas(tmp_path: Path) -> Path:
    """tp_pp_merge's target as 3 data-parallel replicas: 12 ranks, tp 2, pp 2."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "workflows"))
    from gen_merge_replicas import write_replicas

    write_replicas(DATA / "tp_pp_merge" / "target", tmp_path / "dump", tp=2, pp=2, dp=3)
    return tmp_path / "dump"


@pytest.mark.parametrize("flags", [[], ["--workers", "2"]], ids=["here", "w2"])
def test_a_rank_missing_in_one_replica(flags: list[str], tmp_path: Path, capsys) -> None:
    """rank5 is rank12: its replica's pp group [5, 11] names a rank no folder holds (D5: ranks by
    their number, where the reference pairs them by position)."""
    dump = _replicas(tmp_path)
    (dump / "rank5").rename(dump / "rank12")
    out = tmp_path / "out"
    args = ["-tp", str(dump), "--rank_size", "12", "--tp", "2", "--pp", "2", *flags, "-o", str(out)]
    rc, err = _run(args, capsys)
    _assert_refused(rc, err, out, f"{dump}: [NPU]", "names rank 5, which has no rank folder")


@pytest.mark.parametrize("tp, pp", [("2", "4"), ("4", "2")])
def test_tp_times_pp_not_dividing_rank_size(tp: str, pp: str, tmp_path: Path, capsys) -> None:
    """Each divides 12, their product 8 does not: the default groups cannot be made (the reference: "The
    world size (12) is not divisible by 2 x 4 x 1")."""
    out = tmp_path / "out"
    args = ["-tp", str(_replicas(tmp_path)), "--rank_size", "12", "--tp", tp, "--pp", pp, "-o", str(out)]
    rc, err = _run(args, capsys)
    _assert_refused(rc, err, out, "--tp/--pp", "[NPU]", "12 is not divisible by tp x pp")
