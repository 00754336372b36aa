"""Bad input (D8): one line naming the file and the problem, exit code 2, no traceback, nothing left
behind."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import case_dir, run_cli

from msprobe_dask.dump.dumpjson import parse_json
from msprobe_dask.errors import ConfigError, DumpError

GOOD = case_dir("stat_mix") / "golden" / "dump.json"


def assert_user_error(proc: subprocess.CompletedProcess[str], *words: str) -> None:
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    for word in words:
        assert word in lines[0], lines[0]


def assert_no_result(out: Path) -> None:
    assert not out.exists() or not any(out.iterdir()), list(out.iterdir())


def write_dump(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "dump.json"
    path.write_text(text)
    return path


def test_missing_path(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "dump.json"
    out = tmp_path / "out"
    proc = run_cli("compare", "-tp", str(missing), "-gp", str(GOOD), "-o", str(out))
    assert_user_error(proc, str(missing), "does not exist")
    assert_no_result(out)


def test_folder_without_dump_json(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("not a dump")
    out = tmp_path / "out"
    proc = run_cli("compare", "-tp", str(empty), "-gp", str(GOOD), "-o", str(out))
    assert_user_error(proc, str(empty), "dump.json")
    assert_no_result(out)


@pytest.mark.parametrize(
    "text, problem",
    [
        ('{"task": "statistics", "level": "mix", "data": {"a": ', "not valid JSON"),
        ("{not json", "not valid JSON"),
        ("", "empty"),
        ('{"task": "statistics", "level": "mix", "data": [1, 2]}', "'data' must be a mapping"),
        ('{"task": "statistics", "level": "mix"}', "no 'data'"),
        ("[1, 2, 3]", "top level must be a JSON object"),
    ],
)
def test_malformed_dump_json(tmp_path: Path, text: str, problem: str) -> None:
    bad = write_dump(tmp_path / "bad", text)
    out = tmp_path / "out"
    proc = run_cli("compare", "-tp", str(bad), "-gp", str(GOOD), "-o", str(out))
    assert_user_error(proc, str(bad), problem)
    assert_no_result(out)


def test_truncated_real_dump(tmp_path: Path) -> None:
    text = GOOD.read_text()
    bad = write_dump(tmp_path / "bad", text[: len(text) // 2])
    out = tmp_path / "out"
    proc = run_cli("compare", "-tp", str(bad), "-gp", str(GOOD), "-o", str(out))
    assert_user_error(proc, str(bad), "not valid JSON")
    assert_no_result(out)


def test_the_json_error_names_the_place_once(tmp_path: Path) -> None:
    """json's own message ('Unterminated string starting at') is followed by the place, not by a
    second 'at'."""
    path = tmp_path / "dump.json"
    with pytest.raises(DumpError) as caught:
        parse_json(path, '{"data": {"a": "abc')
    assert str(caught.value).endswith("Unterminated string starting at: line 1 column 16")


def test_output_folder_that_cannot_be_written(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    proc = run_cli("compare", "-tp", str(GOOD), "-gp", str(GOOD), "-o", str(blocker / "out"))
    assert_user_error(proc, str(blocker / "out"), "cannot create the output folder")


def test_debug_shows_traceback(tmp_path: Path) -> None:
    proc = run_cli("--debug", "compare", "-tp", str(tmp_path / "x"), "-gp", str(GOOD), "-o", str(tmp_path))
    assert proc.returncode == 2
    assert "Traceback" in proc.stderr


def test_task_mismatch(tmp_path: Path) -> None:
    doc = json.loads(GOOD.read_text())
    doc["task"] = "tensor"
    bad = write_dump(tmp_path / "tensor", json.dumps(doc))
    out = tmp_path / "out"
    proc = run_cli("compare", "-tp", str(bad), "-gp", str(GOOD), "-o", str(out))
    assert_user_error(proc, "task")
    assert_no_result(out)


def _tensor_dump_copy(tmp_path: Path) -> Path:
    """A small tensor-mode dump (the first entries of tensor_mix's target) that tests may spoil."""
    import shutil

    source = case_dir("tensor_mix") / "target"
    doc = json.loads((source / "dump.json").read_text())
    doc["data"] = dict(list(doc["data"].items())[:3])
    folder = tmp_path / "target"
    (folder / "dump_tensor_data").mkdir(parents=True)
    names = json.dumps(doc["data"])
    for pt in (source / "dump_tensor_data").iterdir():
        if pt.name in names:
            shutil.copy(pt, folder / "dump_tensor_data" / pt.name)
    (folder / "dump.json").write_text(json.dumps(doc))
    return folder


def _first_tensor_leaf(doc: dict) -> dict:
    for body in doc["data"].values():
        for leaf in body.get("input_args", []):
            if isinstance(leaf, dict) and leaf.get("data_name"):
                return leaf
    raise AssertionError("no tensor leaf")


@pytest.mark.parametrize("data_name", ["../../x.npy", "/etc/passwd", "link.pt"])
def test_data_name_escaping_dump_tensor_data_is_refused(tmp_path: Path, data_name: str) -> None:
    folder = _tensor_dump_copy(tmp_path)
    (folder / "dump_tensor_data" / "link.pt").symlink_to(case_dir("tensor_mix") / "golden" / "dump.json")
    doc = json.loads((folder / "dump.json").read_text())
    _first_tensor_leaf(doc)["data_name"] = data_name
    (folder / "dump.json").write_text(json.dumps(doc))
    out = tmp_path / "out"
    proc = run_cli(
        "compare", "-tp", str(folder), "-gp", str(case_dir("tensor_mix") / "golden"), "-o", str(out)
    )
    assert_user_error(proc, data_name.rsplit("/", 1)[-1])
    assert_no_result(out)


def test_truncated_tensor_file_gives_a_row_message_and_the_run_completes(tmp_path: Path) -> None:
    folder = _tensor_dump_copy(tmp_path)
    doc = json.loads((folder / "dump.json").read_text())
    victim = folder / "dump_tensor_data" / _first_tensor_leaf(doc)["data_name"]
    victim.write_bytes(victim.read_bytes()[:300])
    out = tmp_path / "out"
    proc = run_cli(
        "compare", "-q", "-tp", str(folder), "-gp", str(case_dir("tensor_mix") / "golden"), "-o", str(out)
    )
    assert proc.returncode == 1, proc.stderr  # rows that could not be read: scripts notice
    assert victim.name in proc.stderr and "1 row(s) could not be read" in proc.stderr
    (result,) = list(out.iterdir())
    rows = [r for r in result.read_text().splitlines() if r.startswith(victim.name.rsplit(".", 1)[0] + ",")]
    assert rows and "unsupported" in rows[0] and ",error," in rows[0] and victim.name in rows[0]


def test_user_errors_survive_pickling() -> None:
    """A user error raised in a worker process (--workers, --scheduler) comes back intact."""
    import pickle

    for err in (DumpError("run/rank0/dump.json", "is not valid json"), ConfigError(None, "bad flag")):
        back = pickle.loads(pickle.dumps(err))
        assert type(back) is type(err) and str(back) == str(err)
        assert (back.path, back.problem) == (err.path, err.problem)


@pytest.mark.parametrize("dumps", ["dump.json", "multirank"])
def test_api_mapping_between_two_pytorch_dumps_is_refused(tmp_path: Path, dumps: str) -> None:
    """-am maps MindSpore APIs to PyTorch's: the reference refuses it between two PyTorch dumps
    ('Argument -am is not supported in PyTorch framework', compare.md §2.1); it was ignored."""
    case = "stat_mix" if dumps == "dump.json" else "multirank"
    target, golden = (
        case_dir(case) / side / ("dump.json" if dumps == "dump.json" else "") for side in ("target", "golden")
    )
    out = tmp_path / "out"
    proc = run_cli("compare", "-tp", str(target), "-gp", str(golden), "-am", "-o", str(out))
    assert_user_error(proc, "-am", "PyTorch")
    assert_no_result(out)
