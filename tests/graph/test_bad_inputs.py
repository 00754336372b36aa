"""Inputs the reference refuses: one clear line on stderr, exit code 2, nothing left in OUT."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from msprobe_dask.cli import main as cli_main
from msprobe_dask.graph import chunks, speedups
from msprobe_dask.writers import packed_rows

DATA = Path(__file__).resolve().parents[1] / "data"


def _copy_dump(src: Path, dst: Path) -> Path:
    dst.mkdir(parents=True)
    for name in ("construct.json", "dump.json", "stack.json"):
        shutil.copyfile(src / name, dst / name)
    return dst


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    rc = cli_main(["graph_visualize", *args])
    err = capsys.readouterr().err.strip()
    return rc, err


def _assert_refused(rc: int, err: str, out: Path, *needles: str) -> None:
    assert rc == 2
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("msprobe-dask: error: "), err
    for n in needles:
        assert n in lines[0], lines[0]
    assert not out.exists() or not any(out.iterdir()), list(out.iterdir())


def test_empty_construct_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    rc, err = _run(["-tp", str(DATA / "L1_only" / "target"), "-o", str(out)], capsys)
    _assert_refused(rc, err, out, "construct.json", "L0 or mix")


@pytest.mark.parametrize(
    ("target", "golden", "expected"),
    [
        ("L1_only/target", "L1_only/golden", "construct.json"),  # empty construct.json
        ("multirank/target", "stat_mix/golden", "different folder structure"),
        ("ms_vs_pt/target", "ms_vs_pt/golden", "-lm"),  # two frameworks without a layer mapping
    ],
)
def test_refused_compare(
    target: str, golden: str, expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    rc, err = _run(["-tp", str(DATA / target), "-gp", str(DATA / golden), "-o", str(out)], capsys)
    _assert_refused(rc, err, out, expected)


def test_mixed_folders(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tree = tmp_path / "mixed"
    _copy_dump(DATA / "multirank" / "target" / "step0" / "rank0", tree / "rank0")
    _copy_dump(DATA / "multirank" / "target" / "step0" / "rank1", tree / "step1")
    out = tmp_path / "out"
    rc, err = _run(["-tp", str(tree), "-o", str(out)], capsys)
    _assert_refused(rc, err, out, str(tree), "step<N>")


def test_missing_stack_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dump = _copy_dump(DATA / "stat_mix" / "target", tmp_path / "dump")
    (dump / "stack.json").unlink()
    out = tmp_path / "out"
    rc, err = _run(["-tp", str(dump), "-o", str(out)], capsys)
    _assert_refused(rc, err, out, "stack.json")


def test_truncated_dump_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dump = _copy_dump(DATA / "stat_mix" / "target", tmp_path / "dump")
    text = (dump / "dump.json").read_text()
    (dump / "dump.json").write_text(text[: len(text) // 2])
    out = tmp_path / "out"
    rc, err = _run(["-tp", str(dump), "-o", str(out)], capsys)
    _assert_refused(rc, err, out, "dump.json", "not valid JSON")


@pytest.mark.parametrize("chunk_bytes", [1 << 30, 1])
def test_an_entry_of_dump_json_that_does_not_parse(
    chunk_bytes: int, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """dump.json is read lazily (dump/entries.py): its entries are parsed in the chunk tasks, one or
    many (half the entries are bad, so that many tasks meet one), and the error is still the one line
    naming dump.json and its first bad line."""
    monkeypatch.setattr(chunks, "CHUNK_BYTES", chunk_bytes)
    tp = _copy_dump(DATA / "transformer_big" / "target", tmp_path / "target")
    gp = _copy_dump(DATA / "transformer_big" / "golden", tmp_path / "golden")
    lines = (gp / "dump.json").read_text().split("\n")
    at = [i for i, line in enumerate(lines) if '"Max": ' in line]
    for i in at[len(at) // 2 :]:
        lines[i] = lines[i].replace('"Max": ', '"Max": 1.2.')
    bad = at[len(at) // 2]
    (gp / "dump.json").write_text("\n".join(lines))
    out = tmp_path / "out"
    rc, err = _run(["-tp", str(tp), "-gp", str(gp), "-o", str(out)], capsys)
    _assert_refused(rc, err, out, str(gp / "dump.json"), "not valid JSON", f"line {bad + 1} column")


@pytest.mark.parametrize("native", [True, False], ids=["c_path", "python_path"])
@pytest.mark.parametrize("gp", [False, True], ids=["build", "compare"])
def test_an_item_whose_data_name_is_not_a_string(
    native: bool,
    gp: bool,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A leaf of an entry with ``"data_name": 5``: one line naming dump.json, the item and the value,
    with the C path (which hands such a leaf to Python) and without it."""
    if not native:
        monkeypatch.setattr(speedups, "native", None)
    tp = _copy_dump(DATA / "stat_mix" / "target", tmp_path / "target")
    text = (tp / "dump.json").read_text()
    at = text.index('"type": "torch.Tensor"')
    (tp / "dump.json").write_text(text[:at] + '"data_name": 5, ' + text[at:])
    out = tmp_path / "out"
    args = ["-tp", str(tp), "-o", str(out)] + (["-gp", str(DATA / "stat_mix" / "golden")] if gp else [])
    rc, err = _run(args, capsys)
    _assert_refused(rc, err, out, str(tp / "dump.json"), "data_name 5 is not a string")


@pytest.mark.parametrize("native", [True, False], ids=["c_path", "python_path"])
def test_a_name_that_is_not_valid_unicode(
    native: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lone surrogate escape (``\\ud800``, valid JSON) in a dump's names cannot go into the vis.db:
    one line naming the dump (the reference crashes and leaves a partial vis.db)."""
    if not native:
        monkeypatch.setattr(speedups, "native", None)
        monkeypatch.setattr(packed_rows, "native", None)
    tp = _copy_dump(DATA / "multirank" / "target" / "step0" / "rank0", tmp_path / "target")
    for name in ("construct.json", "dump.json", "stack.json"):
        path = tp / name
        path.write_text(path.read_text().replace("Module.fc1.Linear", "Module.fc\\ud8001.Linear"))
    out = tmp_path / "out"
    rc, err = _run(["-tp", str(tp), "-o", str(out)], capsys)
    _assert_refused(rc, err, out, str(tp), "not valid Unicode ('\\ud800')")


def test_a_bad_entry_that_no_node_holds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An entry missing from construct.json is not a node, but the full parse would refuse the file."""
    tp = _copy_dump(DATA / "transformer_big" / "target", tmp_path / "target")
    text = (tp / "dump.json").read_text()
    at = text.index('\n  "', text.index('"data": {'))
    (tp / "dump.json").write_text(
        text[:at] + '\n  "Torch.orphan.0.forward": {\n   "x": nan\n  },' + text[at:]
    )
    out = tmp_path / "out"
    rc, err = _run(["-tp", str(tp), "-o", str(out)], capsys)
    _assert_refused(rc, err, out, str(tp / "dump.json"), "not valid JSON")


def test_target_is_a_file_other_than_dump_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """D31: any file but a dump.json (or debug.json) is refused in one line."""
    out = tmp_path / "out"  # a dump.json stands for its folder (tests/test_cli.py), other files do not
    rc, err = _run(["-tp", str(DATA / "stat_mix" / "target" / "stack.json"), "-o", str(out)], capsys)
    _assert_refused(rc, err, out, "not a folder")


def test_existing_output_folder_is_left_alone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("x")
    rc, err = _run(["-tp", str(DATA / "L1_only" / "target"), "-o", str(out)], capsys)
    assert rc == 2 and [p.name for p in out.iterdir()] == ["keep.txt"]


@pytest.mark.parametrize("parent", [3, ["x"], {"a": 1}, True])
def test_a_parent_that_is_not_a_name(
    parent: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """construct.json maps a node to something else than a name or null: one line naming the file and
    the node (D22: the reference crashes with a traceback)."""
    tp = _copy_dump(DATA / "L0_only" / "target", tmp_path / "target")
    construct = json.loads((tp / "construct.json").read_text())
    node = list(construct)[3]
    construct[node] = parent
    (tp / "construct.json").write_text(json.dumps(construct))
    out = tmp_path / "out"
    rc, err = _run(["-tp", str(tp), "-o", str(out)], capsys)
    _assert_refused(rc, err, out, str(tp / "construct.json"), repr(node), "parent's name or null")
