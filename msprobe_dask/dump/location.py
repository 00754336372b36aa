"""Where a dump given on the command line is: a local path, or an fsspec URL of a converted dump.

``file://`` URLs name local stores (and dumps) and are read in place; other schemes are refused with
one line (not read yet).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from msprobe_dask.errors import StoreError

_URL = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*)://")


def url_scheme(path: str | os.PathLike[str]) -> str | None:
    """The scheme of an fsspec URL (``file``, ``memory``, ``s3``...), None for a plain path."""
    match = _URL.match(str(path)) if isinstance(path, str) else None
    return match.group(1).lower() if match else None


def dump_path(path: str | os.PathLike[str]) -> Path:
    """The local path of ``path``; a URL that is not ``file://`` is refused."""
    scheme = url_scheme(path)
    if scheme is None:
        return Path(path)
    text = str(path)
    if scheme == "file":
        return Path(text[len("file://") :])
    raise StoreError(text, f"cannot be reached: {scheme}:// URLs are not supported (only file://)")
