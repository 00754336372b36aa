"""``code_digest()``: a digest of this install's Python sources. A cluster's workers must run the same
code as the command that sends them its tasks: a worker started from another checkout or release could
give other answers, or fail on a name the command's graph holds (an internal error instead of one line).
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]


def sources_digest(package: Path) -> str:
    """The digest of every ``.py`` file below ``package``: their paths and bytes, in path order."""
    digest = hashlib.blake2b(digest_size=16)
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


@functools.cache
def code_digest() -> str:
    """This process's msprobe_dask sources' digest (read once a process)."""
    return sources_digest(PACKAGE)
