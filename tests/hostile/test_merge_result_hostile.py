"""merge_result on broken and hostile inputs: config yaml, rank workbooks (also read by report), output."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hostile_dumps import mkfifo
from hostile_run import Case, check, new_case, result_files

from msprobe_dask.writers.merge_result import MODE_HEADERS

CONFIG = "api:\n  - Distributed.all_reduce\ncompare_index:\n  - Max diff\n"
BOMB = (
    "a: &a [x, x, x, x, x, x, x, x, x]\n"
    + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
        for i in range(8)
    )
    + "api: *i\n"
)


def rank_workbook(path: Path, rank: int, name: str = "Distributed.all_reduce.0.forward.input.0") -> Path:
    from openpyxl import Workbook

    header = MODE_HEADERS["statistics"]
    book = Workbook()
    sheet = book.active
    sheet.append(header)
    row = ["N/A"] * len(header)
    row[header.index("NPU Name")] = name
    row[header.index("Bench Name")] = name
    for column in ("Max diff", "NPU max", "Bench max"):
        row[header.index(column)] = 0.5 + rank
    sheet.append(row)
    for cell in sheet[2]:
        if isinstance(cell.value, str):
            cell.data_type = "s"  # a text, even if it starts with '='
    book.save(path)
    return path


def inputs(case: Case, name: str = "Distributed.all_reduce.0.forward.input.0") -> Path:
    folder = case.dumps / "results"
    folder.mkdir()
    for rank in (0, 1):
        rank_workbook(folder / f"compare_result_rank{rank}_20260101000000.xlsx", rank, name)
    return folder


def config(case: Case, text: str = CONFIG) -> Path:
    path = case.root / "cfg" / "config.yaml"
    path.write_text(text)
    return path


def merge(case: Case, folder: Path, cfg: Path, *more: str, **limits: object) -> object:
    argv = ("-i", str(folder), "-o", str(case.out), "-config", str(cfg), *more)
    return case.run("merge_result", *argv, **limits)


def test_merges(tmp_path: Path) -> None:
    case = new_case(tmp_path)
    outcome = merge(case, inputs(case), config(case))
    check(outcome, 0, lines=0)
    (result,) = result_files(case.out)
    assert oct(result.stat().st_mode & 0o777) == oct(0o640)


def test_yaml_alias_bomb(tmp_path: Path) -> None:
    case = new_case(tmp_path)
    check(merge(case, inputs(case), config(case, BOMB)), 2, "config.yaml", "alias")


def test_config_is_a_fifo(tmp_path: Path) -> None:
    case = new_case(tmp_path)
    cfg = mkfifo(case.root / "cfg" / "config.yaml")
    check(merge(case, inputs(case), cfg), 2, "config.yaml", "FIFO")


@pytest.mark.parametrize("text", ["[1, 2]", "api: 7", "{{{", "\x00\x01", "api: [" * 3000])
def test_bad_config(tmp_path: Path, text: str) -> None:
    case = new_case(tmp_path)
    check(merge(case, inputs(case), config(case, text)), 2, "config.yaml")


def entity_bomb(path: Path) -> None:
    """The workbook with a cell of its sheet holding an entity that expands 10**9 times (billion laughs)."""
    import zipfile

    entities = '<!ENTITY lol0 "lololololol">' + "".join(
        f'<!ENTITY lol{i} "{f"&lol{i - 1};" * 10}">' for i in range(1, 10)
    )
    with zipfile.ZipFile(path) as book:
        parts = {name: book.read(name) for name in book.namelist()}
    sheet = parts["xl/worksheets/sheet1.xml"].decode()
    sheet = sheet.split("?>", 1)[1] if sheet.startswith("<?xml") else sheet
    assert "<v>1.5</v>" in sheet
    head = f'<?xml version="1.0"?><!DOCTYPE lolz [{entities}]>'
    parts["xl/worksheets/sheet1.xml"] = (head + sheet.replace("<v>1.5</v>", "<v>&lol9;</v>", 1)).encode()
    with zipfile.ZipFile(path, "w") as book:
        for name, data in parts.items():
            book.writestr(name, data)


@pytest.mark.parametrize("damage", ["garbage", "fifo", "loop", "outside", "empty", "entities"])
def test_bad_rank_workbook(tmp_path: Path, damage: str) -> None:
    case = new_case(tmp_path)
    folder = inputs(case)
    victim = folder / "compare_result_rank1_20260101000000.xlsx"
    if damage == "entities":
        entity_bomb(victim)
        check(merge(case, folder, config(case)), 2, victim.name, "amplification")
        assert not result_files(case.out)
        return
    victim.unlink()
    if damage == "garbage":
        victim.write_bytes(b"PK\x03\x04 not really a zip")
    elif damage == "empty":
        victim.write_bytes(b"")
    elif damage == "fifo":
        mkfifo(victim)
    elif damage == "loop":
        victim.symlink_to(victim)
    else:
        outside = rank_workbook(case.root / "outside" / "x.xlsx", 1)
        victim.symlink_to(outside)
    check(merge(case, folder, config(case)), 2, victim.name)
    assert not result_files(case.out)


def test_report_of_an_entity_bomb(tmp_path: Path) -> None:
    """``report`` reads the result workbooks back the same way (writers/workbook_rows.py)."""
    case = new_case(tmp_path)
    folder = inputs(case)
    victim = folder / "compare_result_rank1_20260101000000.xlsx"
    entity_bomb(victim)
    check(case.run("report", str(folder), "-q"), 2, victim.name, "amplification")
    assert not list(folder.glob("report_*"))


def test_input_folder_missing(tmp_path: Path) -> None:
    case = new_case(tmp_path)
    check(merge(case, case.dumps / "nowhere", config(case)), 2, "nowhere")


@pytest.mark.parametrize("workers", [(), ("--workers", "2")], ids=["in-process", "workers-2"])
def test_full_disk(tmp_path: Path, workers: tuple[str, ...]) -> None:
    case = new_case(tmp_path)
    check(merge(case, inputs(case), config(case), *workers, fsize=1024), 2, "multi_ranks_compare_merge_")
    assert not result_files(case.out)


def test_formula_in_a_name_is_neutralised(tmp_path: Path) -> None:
    case = new_case(tmp_path)
    from openpyxl import load_workbook

    check(
        merge(case, inputs(case, "=HYPERLINK(1)Distributed.all_reduce.0.forward"), config(case)), 0, lines=0
    )
    (result,) = result_files(case.out)
    names = [row[0].value for row in load_workbook(result).active.iter_rows(min_row=2)]
    assert names and all(not str(n).startswith("=") for n in names)


def test_signal_while_writing(tmp_path: Path) -> None:
    case = new_case(tmp_path)
    prelude = (
        "import os, signal, msprobe_dask.writers.atomic as atomic\n"
        "_track = atomic.track\n"
        "def _tracking(path):\n"
        "    _track(path)\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "atomic.track = _tracking\n"
    )
    check(merge(case, inputs(case), config(case), prelude=prelude), 143, "stopped by SIGTERM")
    assert not result_files(case.out)
    assert os.listdir(case.dumps / "results")
