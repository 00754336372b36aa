"""Unreadable tensor files: the run completes, each affected row is an ``error`` naming the file and
the problem, one line at the end counts them, exit 1; a hostile pickle is never run."""

from __future__ import annotations

import csv
import os
import pickle
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hostile_dumps import APIS, entries, evil_pickle, mkfifo, write_dump, zipped_pickle
from hostile_run import Case, check, new_case, result_files, visdb_npu_nodes

from msprobe_dask.columns import TENSOR_METRIC_COLUMNS
from msprobe_dask.dump.pt_legacy import MAGIC_NUMBER, PROTOCOL_VERSION

VICTIM = f"{APIS[1]}.output.0.npy"


def _truncate(path: Path, case: Case) -> None:
    path.write_bytes(path.read_bytes()[:90])


def _empty(path: Path, case: Case) -> None:
    path.write_bytes(b"")


def _mislabelled(path: Path, case: Case) -> None:
    path.write_text("this is a text file named like a tensor")


def _pickle_calling(name: str) -> Callable[[Path, Case], None]:
    module, function = name.split(".")

    def damage(path: Path, case: Case) -> None:
        zipped_pickle(path, evil_pickle(module, function, case.root / "pwned"))

    return damage


def _fifo(path: Path, case: Case) -> None:
    mkfifo(path)


def _loop(path: Path, case: Case) -> None:
    path.unlink()
    path.symlink_to(path)


def _wrong_shape(path: Path, case: Case) -> None:
    np.save(path, np.zeros((7,), np.float32))


def _other_dtype(path: Path, case: Case) -> None:
    """The same values as float64: the reference says pass (D35)."""
    np.save(path, np.load(path).astype(np.float64))


def _folder(path: Path, case: Case) -> None:
    path.unlink()
    path.mkdir()


def _legacy_pickle(path: Path, case: Case) -> None:
    path.write_bytes(evil_pickle("builtins", "eval", case.root / "pwned"))


def _missing(path: Path, case: Case) -> None:
    path.unlink()


def _strings(path: Path, case: Case) -> None:
    """Strings that the reference casts to float (D27: no numbers)."""
    with open(path, "wb") as f:
        np.save(f, np.full((2, 3), "1.5"))


def _legacy_calling_os_system(path: Path, case: Case) -> None:
    """A legacy .pt whose system information pickle calls os.system (then no tensor, no storage keys)."""
    head = pickle.dumps(MAGIC_NUMBER, 2) + pickle.dumps(PROTOCOL_VERSION, 2)
    evil = evil_pickle("os", "system", case.root / "pwned")
    path.write_bytes(head + evil + pickle.dumps(None, 2) + pickle.dumps([], 2))


DAMAGES = {
    "truncated": (_truncate, "npy header"),
    "empty": (_empty, "empty"),
    "mislabelled": (_mislabelled, "neither"),
    "os.system": (_pickle_calling("os.system"), "forbidden global os.system"),
    "eval": (_pickle_calling("builtins.eval"), "forbidden global builtins.eval"),
    "legacy-eval": (_legacy_pickle, "legacy"),
    "legacy-os.system": (
        _legacy_calling_os_system,
        "legacy (pre-zip) .pt: pickle names forbidden global os.system",
    ),
    "strings": (_strings, "the file holds str96 [2, 3], not numbers"),
    "fifo": (_fifo, "FIFO"),
    "symlink-loop": (_loop, "symbolic links"),
    "folder": (_folder, VICTIM),
    "missing": (_missing, VICTIM),
    "other-shape": (_wrong_shape, "dump.json says torch.float32 [2, 3]"),  # readable, not what it says (D35)
    "other-dtype": (_other_dtype, "dump.json says torch.float32 [2, 3]"),
}


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_unreadable_tensor_is_an_error_row(tmp_path: Path, damage: str) -> None:
    case = new_case(tmp_path)
    make, problem = DAMAGES[damage]
    target = write_dump(case.dumps / "target", task="tensor")
    golden = write_dump(case.dumps / "golden", task="tensor")
    make(target / "dump_tensor_data" / VICTIM, case)
    outcome = case.run("compare", "-tp", str(target), "-gp", str(golden), "-o", str(case.out), "-q")
    check(outcome, 1, "1 row(s) could not be read", VICTIM, problem)
    assert not (case.root / "pwned").exists()
    (result,) = result_files(case.out)
    rows = {row["NPU Name"]: row for row in csv.DictReader(result.open(encoding="utf-8"))}
    bad = rows[VICTIM.removesuffix(".npy")]
    assert bad["Result"] == "error", bad
    assert VICTIM in bad["Err_message"] and problem.split()[0] in bad["Err_message"]
    others = [r for name, r in rows.items() if r is not bad and r["Data_name"] != "['-1', '-1']"]
    assert others and all(r["Result"] == "pass" for r in others)


BIG_SHAPE = (3, 2_800_000)
"""More elements than a compare measures in one shot (8M): the pair is read chunk by chunk, in tasks of their
own, once the graph is made from the files' headers."""


def _with_big_victim(folder: Path) -> Path:
    """A tensor dump whose victim is a sparse .npy of ``BIG_SHAPE`` zeros (no disk blocks), as its entry
    says."""
    data = entries(True)
    data[APIS[1]]["output"][0]["shape"] = list(BIG_SHAPE)
    write_dump(folder, data, task="tensor")
    path = folder / "dump_tensor_data" / VICTIM
    with open(path, "wb") as f:
        np.lib.format.write_array_header_1_0(f, {"descr": "<f4", "fortran_order": False, "shape": BIG_SHAPE})
        f.truncate(f.tell() + 4 * BIG_SHAPE[0] * BIG_SHAPE[1])
    return folder


_WHILE_COMPARED = """import os
from dask.callbacks import Callback

def _damage(dsk, state):
    if any(isinstance(key, tuple) and str(key[0]).startswith("merge_records-") for key in dsk):
        {damage}

Callback(start_state=_damage).register()
"""
"""A prelude that damages a file as the graph that reads a big pair's chunks starts (its headers read)."""
WHILE_COMPARED = {
    "truncated": ("os.truncate({path!r}, 4096)", "truncated: expected"),
    "folder": ("os.unlink({path!r}); os.mkdir({path!r})", "Is a directory"),
    "missing": ("os.unlink({path!r})", "No such file"),
}
BEFORE = {"truncated": _truncate, "folder": _folder, "missing": _missing}


def _victim_row(case: Case, words: tuple[str, ...], *flags: str, prelude: str = "") -> dict[str, str]:
    """The victim's row of a compare of ``case``'s dumps, which ends as a run with an unreadable row does,
    every other row measured and passed."""
    target, golden = case.dumps / "target", case.dumps / "golden"
    argv = ("compare", "-tp", str(target), "-gp", str(golden), "-o", str(case.out), "-q", *flags)
    check(case.run(*argv, prelude=prelude), 1, "1 row(s) could not be read", *words)
    (result,) = result_files(case.out)
    rows = {row["NPU Name"]: row for row in csv.DictReader(result.open(encoding="utf-8"))}
    bad = rows.pop(VICTIM.removesuffix(".npy"))
    others = [r for r in rows.values() if r["Data_name"] != "['-1', '-1']"]
    assert others and all(r["Result"] == "pass" and r["Cosine"] != "unsupported" for r in others)
    return bad


@pytest.mark.parametrize("workers", [(), ("--workers", "1"), ("--workers", "2")], ids=["auto", "w1", "w2"])
@pytest.mark.parametrize("damage", list(WHILE_COMPARED))
def test_big_tensor_damaged_while_compared_is_an_error_row(
    tmp_path: Path, damage: str, workers: tuple[str, ...]
) -> None:
    """A file of more than 8M elements damaged after its header was read, as its chunks are read (on local
    worker processes: the input is 67 MB): its row is an error naming the file and the problem, as a small
    file damaged before the run gives (it stopped the run: exit 2, one line)."""
    (tmp_path / "small").mkdir()
    (tmp_path / "big").mkdir()
    small = new_case(tmp_path / "small")
    for side in ("target", "golden"):
        write_dump(small.dumps / side, task="tensor")
    small_path = small.dumps / "target" / "dump_tensor_data" / VICTIM
    BEFORE[damage](small_path, small)
    expected = _victim_row(small, (VICTIM,))
    case = new_case(tmp_path / "big")
    for side in ("target", "golden"):
        _with_big_victim(case.dumps / side)
    path = case.dumps / "target" / "dump_tensor_data" / VICTIM
    action, problem = WHILE_COMPARED[damage]
    prelude = _WHILE_COMPARED.format(damage=action.format(path=str(path)))
    row = _victim_row(case, (str(path), problem), *workers, prelude=prelude)
    columns = ["Result", *TENSOR_METRIC_COLUMNS]
    assert [row[c] for c in columns] == [expected[c] for c in columns] == ["error", *["unsupported"] * 6]
    said = '["error: the tensor could not be read: {}: '
    assert row["Err_message"].startswith(said.format(path)) and problem in row["Err_message"], row
    assert expected["Err_message"].startswith(said.format(small_path)), expected


WORKERS = ("--workers", "2")  # a LocalCluster: the tensors are read by its worker processes


@pytest.mark.parametrize(
    "damage, workers",
    [*((damage, ()) for damage in DAMAGES), ("truncated", WORKERS), ("os.system", WORKERS)],
)
def test_unreadable_tensor_is_an_error_node(tmp_path: Path, damage: str, workers: tuple[str, ...]) -> None:
    """graph_visualize's tensor mode: the node's row says error and why, in the vis.db's node data."""
    case = new_case(tmp_path)
    make, problem = DAMAGES[damage]
    target = write_dump(case.dumps / "target", task="tensor")
    golden = write_dump(case.dumps / "golden", task="tensor")
    make(target / "dump_tensor_data" / VICTIM, case)
    argv = ("graph_visualize", "-tp", str(target), "-gp", str(golden), "-o", str(case.out), "-q", *workers)
    outcome = case.run(*argv)
    check(outcome, 1, "1 row(s) could not be read", VICTIM, problem, lines=2)
    assert not (case.root / "pwned").exists()
    (result,) = result_files(case.out)
    nodes = visdb_npu_nodes(result)
    node = APIS[1]
    assert nodes[node][0] == 1, nodes[node]
    bad = nodes[node][2][VICTIM.removesuffix(".npy")]
    assert bad["Result"] == "error", bad
    assert VICTIM in bad["Err_message"] and problem.split()[0] in bad["Err_message"]
    rows = [item for _, inputs, outputs in nodes.values() for item in (*inputs.values(), *outputs.values())]
    others = [r for r in rows if r is not bad and r.get("data_name", "-1") != "-1"]
    assert others and all(r["Result"] == "pass" and r["Cosine"] != "unsupported" for r in others)


@pytest.mark.parametrize("command", ["compare", "graph_visualize"])
def test_tensor_folder_that_is_a_symlink_out_of_the_dump(tmp_path: Path, command: str) -> None:
    """D28: refused, exit 2."""
    case = new_case(tmp_path)
    target = write_dump(case.dumps / "target", task="tensor")
    golden = write_dump(case.dumps / "golden", task="tensor")
    elsewhere = case.root / "outside" / "tensors"
    os.replace(target / "dump_tensor_data", elsewhere)
    (target / "dump_tensor_data").symlink_to(elsewhere)
    outcome = case.run(command, "-tp", str(target), "-gp", str(golden), "-o", str(case.out), "-q")
    check(outcome, 2, "dump_tensor_data", "outside")
    assert not result_files(case.out)


@pytest.mark.parametrize("command", ["compare", "graph_visualize"])
def test_tensor_file_symlink_out_of_the_dump(tmp_path: Path, command: str) -> None:
    case = new_case(tmp_path)
    target = write_dump(case.dumps / "target", task="tensor")
    golden = write_dump(case.dumps / "golden", task="tensor")
    (target / "dump_tensor_data" / VICTIM).unlink()
    (target / "dump_tensor_data" / VICTIM).symlink_to(case.root / "outside" / "secret.npy")
    outcome = case.run(command, "-tp", str(target), "-gp", str(golden), "-o", str(case.out), "-q")
    check(outcome, 2, VICTIM, "outside")


@pytest.mark.parametrize("command", ["compare", "graph_visualize"])
@pytest.mark.parametrize("data_name", ["../../outside/secret.npy", "/etc/passwd", "a\\..\\..\\x.npy"])
def test_data_name_escaping(tmp_path: Path, data_name: str, command: str) -> None:
    case = new_case(tmp_path)
    import json

    target = write_dump(case.dumps / "target", task="tensor")
    golden = write_dump(case.dumps / "golden", task="tensor")
    text = (target / "dump.json").read_text().replace(json.dumps(VICTIM), json.dumps(data_name))
    (target / "dump.json").write_text(text)
    outcome = case.run(command, "-tp", str(target), "-gp", str(golden), "-o", str(case.out), "-q")
    check(outcome, 2, "data_name" if "\\" not in data_name else "..")
