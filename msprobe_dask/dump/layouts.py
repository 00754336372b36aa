"""One reader per dump layout, behind ``open_dump(path)`` (the xarray-backends pattern).

Each reader looks at a path and returns a ``DumpTree`` if the layout is its own, ``None`` if it is
not, or raises ``DumpError`` if the layout is its own but broken. ``open_dump`` tries them in order:

=================  ==========================================================================
single             ``dump.json`` / ``debug.json``, or a folder holding one
mixed              MindSpore ``graph/`` + ``pynative/``, each with step folders of rank folders
steps              ``step*/`` folders, each holding ``rank*/`` (or one ``proc*/``) folders
ranks              ``rank*/`` folders, or exactly one ``proc*/`` folder (one step of a run)
kernel             MindSpore static-graph kernel dumps (``*.npy`` / ``statistic.csv`` leaf folders),
                   in ``kernel.py``
=================  ==========================================================================

Locating files is cheap and happens on the coordinator; nothing here parses a dump.json.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

from msprobe_dask.dump.confine import check_regular, listed
from msprobe_dask.dump.location import dump_path
from msprobe_dask.dump.source import (
    DUMP_FILE_NAMES,
    DumpSource,
    DumpTree,
    log_warning,
    pair_trees,
    rank_number,
    step_number,
)
from msprobe_dask.errors import DumpError, cannot

LayoutReader = Callable[[Path], "DumpTree | None"]

# The folder names of a run, for both commands (compare.md §2.3, graph_visualize.md §1.2-§1.3). The two
# references list rank folders by the same rule, and graph_visualize lists step folders by the like of
# it; graph_visualize first decides that a folder holds only rank or only step folders by the looser
# ``*_NAME`` rules, so that ``step01`` counts as a step folder which the listing then refuses (the
# reference's error). compare's step*/ run folders (D10: the reference compares none) are the folders
# that STEP_NAME matches. graph_visualize's reading of these folders is dump/graph_layouts.py.
RANK_DIR = re.compile(r"^rank(?:0|[1-9][0-9]*)?$")  # "rank" alone too
PROC_DIR = re.compile(r"^proc\d+$")  # one process's dump, where a step has no rank folders
STEP_DIR = re.compile(r"^step(?:0|[1-9][0-9]*)?$")  # "step" alone too
RANK_NAME = re.compile(r"^rank\d+$")
STEP_NAME = re.compile(r"^step\d+$")
MIXED_GROUPS = ("graph", "pynative")


def _subdirs(path: Path) -> list[Path]:
    return sorted(p for p in map(path.joinpath, listed(path)) if p.is_dir())


def _dump_file(folder: Path) -> Path | None:
    for name in DUMP_FILE_NAMES:
        path = folder / name
        try:
            os.lstat(path)
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError as exc:  # a rank folder that cannot be searched: not a rank without its dump
            raise DumpError(path, cannot("be read", exc)) from None
        check_regular(path)  # (a folder of that name is refused naming it; load_dump refuses a FIFO)
        return path
    return None


def _single_file(path: Path) -> DumpTree | None:
    if not path.is_file():
        return None
    if path.name not in DUMP_FILE_NAMES:
        raise DumpError(path, "is not a dump: the file must be named dump.json or debug.json")
    return DumpTree(root=path.parent, layout="single", sources=(DumpSource(path),))


def _single_folder(path: Path) -> DumpTree | None:
    found = _dump_file(path)
    if found is None:
        return None
    return DumpTree(root=path, layout="single", sources=(DumpSource(found),))


def _rank_sources(path: Path, step: str = "", group: str = "") -> tuple[list[DumpSource], list[str]] | None:
    """The rank (or single proc) folders of one step folder: (sources, rank folders without a dump).

    None when ``path`` holds neither. A rank folder without dump.json is reported, not dropped, so
    that pairing can name it. Other folders are ignored unless they hold a dump of their own: then
    the tree is ambiguous and that is an error.
    """
    subdirs = _subdirs(path)
    ranks = [d for d in subdirs if RANK_DIR.match(d.name)]
    procs = [d for d in subdirs if PROC_DIR.match(d.name)]
    if ranks and procs:
        raise DumpError(
            path, f"mixes rank folders ({ranks[0].name}, ...) with proc folders ({procs[0].name}, ...)"
        )
    if not ranks and not procs:
        return None
    if procs and len(procs) > 1:
        names = ", ".join(d.name for d in procs)
        raise DumpError(path, f"holds several proc folders ({names}); compare them one at a time")
    chosen = ranks or procs
    others = [d.name for d in subdirs if d not in chosen and _dump_file(d) is not None]
    if others:
        kind = chosen[0].name[:4]
        raise DumpError(path, f"mixes {kind} folders with other dump folders: {', '.join(others)}")
    chosen.sort(key=lambda d: rank_number(d.name))
    sources, missing = [], []
    for folder in chosen:
        found = _dump_file(folder)
        if found is None:
            missing.append(folder.name)
        else:
            sources.append(DumpSource(found, rank=folder.name, step=step, group=group))
    return sources, missing


# per step folder: (sources, rank folders without a dump, step, group)
Found = list[tuple[list[DumpSource], list[str], str, str]]


def _tree(root: Path, layout: str, found: Found) -> DumpTree:
    sources = tuple(s for part in found for s in part[0])
    missing = tuple(
        DumpSource(root / group / step / rank / "dump.json", rank=rank, step=step, group=group)
        for _, ranks, step, group in found
        for rank in ranks
    )
    if not sources and missing:
        raise DumpError(root, f"no rank folder holds a dump.json (e.g. {missing[0].folder})")
    return DumpTree(root=root, layout=layout, sources=sources, missing=missing)


def _ranks(path: Path) -> DumpTree | None:
    found = _rank_sources(path)
    if found is None:
        return None
    return _tree(path, "ranks", [(found[0], found[1], "", "")])


def _step_folders(path: Path, group: str = "") -> Found | None:
    steps = sorted((d for d in _subdirs(path) if STEP_NAME.match(d.name)), key=lambda d: step_number(d.name))
    if not steps:
        return None
    found: Found = []
    for step in steps:
        single = _dump_file(step)
        if single is not None:
            found.append(([DumpSource(single, step=step.name, group=group)], [], step.name, group))
            continue
        ranks = _rank_sources(step, step.name, group)
        if ranks is None:
            raise DumpError(step, "is a step folder without rank*/ or proc*/ folders (nor a dump.json)")
        found.append((ranks[0], ranks[1], step.name, group))
    return found


def _steps(path: Path) -> DumpTree | None:
    found = _step_folders(path)
    if found is None:
        return None
    return _tree(path, "steps", found)


def _mixed(path: Path) -> DumpTree | None:
    """MindSpore L0 mixed dumps: ``graph/`` and ``pynative/``, each with step folders of rank folders.

    The reference recurses into ``graph/{step}`` with any step folder name, so any sub-folder counts.
    """
    groups = [path / g for g in MIXED_GROUPS if (path / g).is_dir()]
    if not groups:
        return None
    found: Found = []
    for group in groups:
        steps = _subdirs(group)
        if not steps:
            raise DumpError(group, "holds no step folders")
        for step in sorted(steps, key=lambda d: step_number(d.name)):
            single = _dump_file(step)
            if single is not None:
                source = DumpSource(single, step=step.name, group=group.name)
                found.append(([source], [], step.name, group.name))
                continue
            ranks = _rank_sources(step, step.name, group.name)
            if ranks is None:
                raise DumpError(step, "is a step folder without rank*/ or proc*/ folders (nor a dump.json)")
            found.append((ranks[0], ranks[1], step.name, group.name))
    return _tree(path, "mixed", found)


def _kernel(path: Path) -> DumpTree | None:
    from msprobe_dask.dump.kernel import read_kernel_tree  # numpy: imported only when no other layout fits

    return read_kernel_tree(path)


READERS: list[LayoutReader] = [_single_file, _single_folder, _mixed, _steps, _ranks, _kernel]


def open_dump(path: str | Path) -> DumpTree:
    """Recognise the dump layout at ``path`` (a folder, a dump.json, a converted dump's zarr store, or a
    ``file://`` URL of one) and list its dumps; raise DumpError if there is none."""
    path = dump_path(path)
    if not path.exists():
        raise DumpError(path, "does not exist")
    if path.is_dir():
        listed(path)  # (a folder that cannot be listed: refused before a reader looks into it)
    for reader in READERS:
        tree = reader(path)
        if tree is not None:
            return tree
    if path.is_dir() and not any(path.iterdir()):
        raise DumpError(path, "is an empty folder")
    raise DumpError(
        path,
        "holds no dump.json (nor debug.json, rank*/, step*/, proc*/, graph/ or pynative/ folders, "
        "nor static-graph kernel .npy files or statistic.csv)",
    )


def pair_dumps(
    target: str | Path, golden: str | Path, skip_missing_ranks: bool = False
) -> list[tuple[str, DumpSource, DumpSource]]:
    """(output label, target source, golden source) for every (step, rank) to compare.

    Ranks are paired by id (D5, ``source.pair_trees``); what is skipped is logged as a warning. The label
    says where the result goes below ``-o``: sub-folders, then the rank folder name that the reference
    puts in the file name (``graph/step0/rank0``).
    """
    return pair_trees(open_dump(target), open_dump(golden), skip_missing_ranks, warn=log_warning)
