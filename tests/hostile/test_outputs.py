"""What a run writes: never half a file, never over an existing one, 0640 files in 0750 folders (less
with a stricter umask), a full disk named in one line, spreadsheet formulas neutralised."""

from __future__ import annotations

import csv
import io
import stat
import time
from pathlib import Path

import pytest
from hostile_dumps import edited, entries, write_dump
from hostile_run import Case, check, new_case, result_files

KINDS = {"csv": ("compare",), "xlsx": ("compare", "--xlsx"), "vis.db": ("graph_visualize",)}


def _run(case: Case, kind: str, out: Path | None = None, *more: str, **limits: int) -> object:
    target = write_dump(case.dumps / "target")
    golden = write_dump(case.dumps / "golden")
    command, *flags = KINDS[kind]
    out = out or case.out
    argv = ("-tp", str(target), "-gp", str(golden), "-o", str(out), "-q", *flags, *more)
    return case.run(command, *argv, **limits)


@pytest.mark.parametrize("workers", [(), ("--workers", "2")], ids=["in-process", "workers-2"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_full_disk_while_writing(tmp_path: Path, kind: str, workers: tuple[str, ...]) -> None:
    """RLIMIT_FSIZE: every write past 1 KiB fails with EFBIG, as a full disk fails with ENOSPC: one line,
    exit 2, no result, no temporary left (``check``), whichever process's write fails."""
    case = new_case(tmp_path)
    outcome = _run(case, kind, None, *workers, fsize=1024)
    check(outcome, 2, str(case.out), "too large" if kind != "vis.db" else "vis.db")
    assert not result_files(case.out)


@pytest.mark.parametrize("kind", ["csv", "xlsx"])
def test_no_space_left(tmp_path: Path, kind: str) -> None:
    """ENOSPC from the file system, in the middle of the write."""
    case = new_case(tmp_path)
    prelude = (
        "import errno, os\n"
        "def full(*a, **k): raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))\n"
        "import msprobe_dask.pipeline.part_forms as forms\n"
        "forms.header_line = forms.package_spool = full\n"  # the csv's first write, the xlsx's zip
    )
    outcome = _run(case, kind, prelude=prelude)
    check(outcome, 2, "No space left on device", "compare_result_")
    assert not result_files(case.out)


RESULT_NAMES = {
    "csv": "compare_result_{}.csv",
    "xlsx": "compare_result_{}.xlsx",
    "vis.db": "compare_{}.vis.db",
}


@pytest.mark.parametrize("kind", list(KINDS))
def test_existing_result_of_the_same_second_is_kept(tmp_path: Path, kind: str) -> None:
    """D30, D32: neither replaced nor changed (the reference replaces a csv or xlsx, and adds its rows
    to a vis.db)."""
    case = new_case(tmp_path)
    case.out.mkdir()
    now = time.time()
    kept = [
        case.out / RESULT_NAMES[kind].format(time.strftime("%Y%m%d%H%M%S", time.localtime(now + s)))
        for s in range(4)
    ]
    for path in kept:
        path.write_text("KEEP")
    outcome = _run(case, kind)
    check(outcome, 2, "already exists", "not replaced")
    assert all(path.read_text() == "KEEP" for path in kept)
    assert result_files(case.out) == sorted(kept)


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("umask, file_mode, folder_mode", [(0o022, 0o640, 0o750), (0o077, 0o600, 0o700)])
def test_permissions(tmp_path: Path, kind: str, umask: int, file_mode: int, folder_mode: int) -> None:
    """D30: results 0640, folders 0750, less under a stricter umask."""
    case = new_case(tmp_path)
    out = case.out / "deeper"
    outcome = _run(case, kind, out=out, umask=umask)
    check(outcome, 0, lines=None)
    (result,) = result_files(case.out)
    assert stat.S_IMODE(result.stat().st_mode) == file_mode
    for folder in (case.out, out):
        assert stat.S_IMODE(folder.stat().st_mode) == folder_mode


@pytest.mark.parametrize("kind", list(KINDS))
def test_output_path_is_a_file(tmp_path: Path, kind: str) -> None:
    case = new_case(tmp_path)
    case.out.write_text("a file")
    check(_run(case, kind), 2, str(case.out))
    assert case.out.read_text() == "a file"


FORMULAS = [
    "=1+1",
    "+1+1",
    "-1+A1",
    "@SUM(A1)",
    "\t=1+1",
    "\r=1+1",
    "\n=1+1",
    "a\rb",
    "a\nb",
    "\r\n=HYPERLINK(1)",
]


@pytest.mark.parametrize("kind", ["csv", "xlsx"])
def test_formula_injection(tmp_path: Path, kind: str) -> None:
    """D9, D29: a cell that a spreadsheet would run as a formula gets a leading ', a CR is written as \\r."""
    case = new_case(tmp_path)
    names = [f"{start}Functional.relu.{i}.forward" for i, start in enumerate(FORMULAS)]
    data = edited({})
    data.update(entries(names=tuple(names)))
    target = write_dump(case.dumps / "target", data)
    write_dump(case.dumps / "golden", data)
    args = ("-tp", str(target), "-gp", str(case.dumps / "golden"), "-o", str(case.out), "-q")
    outcome = case.run("compare", *args, *(("--xlsx",) if kind == "xlsx" else ()))
    check(outcome, 0, lines=None)
    (result,) = result_files(case.out)
    if kind == "csv":
        text = result.read_text(encoding="utf-8")
        assert "\r" not in text
        rows = list(csv.reader(io.StringIO(text, newline="")))
        assert len({len(r) for r in rows}) == 1, "a row was split"
        cells = [cell for row in rows[1:] for cell in row]
    else:
        from openpyxl import load_workbook

        sheet = load_workbook(result).active
        cells = [c.value for row in sheet.iter_rows(min_row=2) for c in row if isinstance(c.value, str)]
    for cell in cells:
        assert "\r" not in cell, repr(cell)
        stripped = cell.lstrip("\t ")
        assert not stripped or stripped[0] not in "=+@" or cell.startswith("'"), repr(cell)
        assert not (stripped.startswith("-") and not _is_number(stripped)) or cell.startswith("'"), repr(cell)


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return text in ("-inf", " -inf")
