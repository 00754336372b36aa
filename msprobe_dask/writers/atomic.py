"""Write to a temporary name in the output folder, rename when complete (never a half file)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from msprobe_dask.errors import OutputError


def prepare_output_dir(path: str | Path) -> Path:
    """Create the output folder if needed and check that it is writable."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(path, f"cannot create the output folder: {exc.strerror or exc}") from None
    if not path.is_dir():
        raise OutputError(path, "is not a folder")
    if not os.access(path, os.W_OK | os.X_OK):
        raise OutputError(path, "output folder is not writable")
    return path


def missing_folders(folder: Path) -> list[Path]:
    """``folder`` and its parents that do not exist yet, deepest first: what making it creates."""
    missing = []
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    return missing


@contextlib.contextmanager
def output_dir(path: str | Path) -> Iterator[Path]:
    """``prepare_output_dir`` for the block; if the block fails (a bad input found late), the folders
    made for it (the output folder and any missing parents) are removed again while still empty."""
    path = Path(path)
    created = missing_folders(path)
    try:
        yield prepare_output_dir(path)
    except BaseException:
        for folder in created:  # deepest first; stops at the first that is not empty
            try:
                folder.rmdir()
            except OSError:
                break
        raise


@contextlib.contextmanager
def atomic_path(final: Path) -> Iterator[Path]:
    """Yield a temporary path beside ``final``; it becomes ``final`` only if the block succeeds."""
    fd, tmp = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".part", dir=final.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o644)
        os.replace(tmp, final)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
