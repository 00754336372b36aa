"""Which (step, rank) dump folders an input path holds, as graph_visualize sees them (§1.2, §1.3).

graph_visualize classifies folders by its own rules (a folder of files, ``rank*``/``proc*`` folders
or ``step*`` folders) and numbers ranks and steps from the folder names. Its reference differs from
compare's in what it does with them, so this is a reader apart from ``layouts.open_dump``: it decides
the layout from the first folder ``os.listdir`` gives, builds steps in folder-name order, compares the
steps and ranks both sides have, naming the others in a warning (compare: an error, D5), and refuses a
folder name whose number is not a number. The folder names themselves are defined once, in
``dump/layouts.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from msprobe_dask.dump.confine import check_regular, listed
from msprobe_dask.dump.layouts import PROC_DIR, RANK_DIR, RANK_NAME, STEP_DIR, STEP_NAME
from msprobe_dask.dump.source import one_side_warnings
from msprobe_dask.errors import DumpError


def classify(path: Path) -> str:
    """'files', 'ranks' or 'steps'."""
    if not path.exists():
        raise DumpError(path, "does not exist")
    if not path.is_dir():
        raise DumpError(path, "is not a folder (graph_visualize takes the folder that holds dump.json)")
    entries = listed(path)
    if "dump.json" in entries:  # (a folder of that name: refused naming it, not read as a rank)
        check_regular(path / "dump.json")
    if not entries:
        raise DumpError(path, "is empty")
    if (path / "dump_tensor_data").exists() or not any((path / e).is_dir() for e in entries):
        return "files"
    if entries == ["rank"] or entries[0].startswith("proc"):
        return "ranks"
    dirs = [e for e in entries if (path / e).is_dir()]
    if dirs and all(RANK_NAME.match(d) for d in dirs):
        return "ranks"
    if dirs and all(STEP_NAME.match(d) for d in dirs):
        return "steps"
    raise DumpError(
        path,
        "mixes folders and files: expected only step<N> folders, only rank<N> folders, "
        "or the files of one dump",
    )


def _number(name: str, prefix: str) -> int:
    if name in (prefix, "None") or name.startswith("proc"):
        return 0
    suffix = name[len(prefix) :]
    if suffix.isdigit():
        return int(suffix)
    raise DumpError(name, f"folder name must be {prefix}<number>")


def _sort_key(name: str) -> int:
    try:
        return int(name[4:])
    except ValueError:
        return 0


def rank_dirs(path: Path) -> list[tuple[int, str]]:
    """(rank number, folder name) in rank order; falls back to exactly one ``proc<pid>`` folder."""
    names = [e for e in listed(path) if RANK_DIR.match(e) and (path / e).is_dir()]
    if names:
        return [(_number(n, "rank"), n) for n in sorted(names, key=_sort_key)]
    procs = [e for e in listed(path) if PROC_DIR.match(e) and (path / e).is_dir()]
    if len(procs) != 1:
        raise DumpError(
            path, f"expected rank<N> folders or exactly one proc<pid> folder, found {len(procs)} proc folders"
        )
    return [(0, procs[0])]


def step_dirs(path: Path, strict: bool) -> list[str]:
    names = []
    for e in listed(path):
        if STEP_DIR.match(e) and (path / e).is_dir():
            names.append(e)
        elif strict:
            raise DumpError(path / e, "unexpected entry: the folder must hold only step<N> folders")
    return names


def step_number(name: str) -> int:
    return _number(name, "step")


def build_sources(path: Path) -> tuple[str, list[tuple[int, int, str]]]:
    """(layout, [(step, rank, folder)]) for a build, in the reference's processing order."""
    kind = classify(path)
    if kind == "files":
        return kind, [(0, 0, str(path))]
    if kind == "ranks":
        return kind, [(0, r, str(path / name)) for r, name in rank_dirs(path)]
    out = []
    for step in sorted(step_dirs(path, strict=True)):
        sp = path / step
        for r, name in rank_dirs(sp):
            out.append((step_number(step), r, str(sp / name)))
    return kind, out


def _paired_ranks(
    npu: Path, bench: Path, step: str, skipped: list[set[tuple[str, str, str]]]
) -> list[tuple[int, str, str]]:
    """The ranks of both sides, by rank number; each side's others are added to ``skipped``."""
    a = rank_dirs(npu)
    b = rank_dirs(bench)
    if a == [(0, a[0][1])] and a[0][1].startswith("proc") and b and b[0][1].startswith("proc"):
        return [(0, a[0][1], b[0][1])]
    bmap = {r: n for r, n in b}
    common = [(r, n, bmap[r]) for r, n in a if r in bmap]
    if not common:
        raise DumpError(npu, f"shares no rank with {bench}: the two runs' ranks are completely different")
    for side, mine, other in zip(skipped, (a, b), (b, a)):
        paired = {r for r, _ in other}
        side.update(("", step, f"rank{r}") for r, _ in mine if r not in paired)
    return common


def compare_sources(
    npu: Path, bench: Path, warn: Callable[[str], None] | None = None
) -> tuple[str, list[tuple[int, int, str, str]]]:
    """(layout, [(step, rank, npu folder, bench folder)]) for a compare: the steps and ranks both sides
    hold, as the reference pairs them; ``warn`` is told which steps and ranks that leaves out (the
    reference says nothing of them)."""
    kind = classify(npu)
    other = classify(bench)
    if kind != other:
        raise DumpError(bench, f"has a different folder structure from {npu} ({other} vs {kind})")
    if kind == "files":
        return kind, [(0, 0, str(npu), str(bench))]
    skipped: list[set[tuple[str, str, str]]] = [set(), set()]
    if kind == "ranks":
        out = [(0, r, str(npu / a), str(bench / b)) for r, a, b in _paired_ranks(npu, bench, "", skipped)]
    else:
        sa, sb = step_dirs(npu, strict=False), step_dirs(bench, strict=False)
        steps = sa if sa == sb else sorted(set(sa) & set(sb), key=_sort_key)
        skipped[0].update(("", s, "") for s in sa if s not in sb)
        skipped[1].update(("", s, "") for s in sb if s not in sa)
        out = []
        for step in steps:
            for r, a, b in _paired_ranks(npu / step, bench / step, step, skipped):
                out.append((step_number(step), r, str(npu / step / a), str(bench / step / b)))
    if warn is not None:
        for warning in one_side_warnings(*skipped):
            warn(warning)
    return kind, out
