"""One reader per dump layout, behind ``open_dump(path)`` (the xarray-backends pattern)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from msprobe_dask.dump.source import DUMP_FILE_NAMES, DumpSource, DumpTree
from msprobe_dask.errors import DumpError

LayoutReader = Callable[[Path], "DumpTree | None"]


def _single_file(path: Path) -> DumpTree | None:
    if not path.is_file():
        return None
    if path.name not in DUMP_FILE_NAMES:
        raise DumpError(path, "is not a dump: the file must be named dump.json or debug.json")
    return DumpTree(root=path.parent, layout="single", sources=(DumpSource(path),))


def _single_folder(path: Path) -> DumpTree | None:
    for name in DUMP_FILE_NAMES:
        candidate = path / name
        if candidate.is_file():
            return DumpTree(root=path, layout="single", sources=(DumpSource(candidate),))
    return None


READERS: list[LayoutReader] = [_single_file, _single_folder]


def open_dump(path: str | Path) -> DumpTree:
    """Recognise the dump layout at ``path`` and list its dumps; raise DumpError if there is none."""
    path = Path(path)
    if not path.exists():
        raise DumpError(path, "does not exist")
    for reader in READERS:
        tree = reader(path)
        if tree is not None:
            return tree
    raise DumpError(path, "holds no dump.json (nor debug.json, rank*/, step*/ or proc*/ folders)")
