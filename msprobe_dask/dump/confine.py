"""What a run may open of a dump: regular files whose real path is inside the dump's folder.

Checked on the path before the file is opened (``os.stat`` follows the symlinks, ``realpath`` says
where they lead): a FIFO or device would block or never end, a symlink loop or a link out of the
dump is refused with one line naming the file."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from msprobe_dask.errors import DumpError, UserError, cannot

_KINDS = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFDIR: "a folder",
}


def file_kind(mode: int) -> str:
    return _KINDS.get(stat.S_IFMT(mode), "not a file")


def check_regular(path: Path, error: type[UserError] = DumpError) -> None:
    """``path`` is a regular file (after its symlinks); a missing file is left to the reader."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:  # ELOOP: a symlink loop
        raise error(path, cannot("be read", exc)) from None
    if not stat.S_ISREG(mode):
        raise error(path, f"is {file_kind(mode)}, not a regular file")


def listed(folder: Path) -> list[str]:
    """The names in ``folder``; one that cannot be listed (no permission, not a folder) is refused."""
    try:
        return os.listdir(folder)
    except OSError as exc:
        raise DumpError(folder, cannot("be listed", exc)) from None


def check_dump_file(path: Path, root: Path | None = None) -> None:
    """``path`` is a regular file whose real path is inside ``root`` (its own folder by default)."""
    check_regular(path)
    if not os.path.lexists(path):
        return
    base = (root if root is not None else path.parent).resolve()
    real = path.resolve()
    if not real.is_relative_to(base):
        raise DumpError(path, f"resolves to {real}, outside the dump folder {base} (symlink?)")
