"""One exception type per kind of user mistake; the CLI prints each as one line and exits 2. The words of a
problem that an OSError (or any exception) caused: ``cannot`` and ``one_line``."""

from __future__ import annotations

import os


class UserError(Exception):
    """A problem with the user's input or environment, not a bug: shown as ``path: problem``."""

    def __init__(self, path: str | os.PathLike[str] | None, problem: str) -> None:
        self.path = str(path) if path is not None else None
        self.problem = problem
        super().__init__(f"{self.path}: {problem}" if self.path else problem)

    def __reduce__(self) -> tuple[type, tuple[str | None, str]]:
        # raised inside a worker process, it crosses back to the CLI by pickle
        return (type(self), (self.path, self.problem))


def one_line(exc: BaseException) -> str:
    """An exception's text on one line (its type's name if it has none)."""
    return " ".join(str(exc).split()) or type(exc).__name__


def cannot(action: str, exc: BaseException) -> str:
    """The problem of a file that ``exc`` (an OSError, mostly) kept from ``action``: ``cannot be read:
    Permission denied``. An OSError says only its reason (the message names the file already)."""
    return f"cannot {action}: {getattr(exc, 'strerror', None) or one_line(exc)}"


class DumpError(UserError):
    """A dump folder or file that is missing, malformed or of an unknown layout."""


class UnsafePathError(UserError):
    """A path taken from inside a dump (data_name, mapping file) that escapes its folder."""


class TensorFileError(UserError):
    """A tensor file that cannot be read safely (bad pickle, truncated data, unknown dtype)."""


class ConfigError(UserError):
    """A bad command-line option or a bad yaml mapping file."""


class ClusterError(UserError):
    """The dask workers failed the run: every worker gone, a worker process killed."""


class WorkerLost(ClusterError):
    """A local worker process died (killed: out of memory?) and took the run with it (dask's processes
    scheduler does not make a lost worker's tasks again): the command may be run again."""


class OutputError(UserError):
    """An output folder that cannot be created or written."""


class StoreError(UserError):
    """A zarr store (a converted dump) that is damaged, incomplete or cannot be reached."""


class RunStopped(BaseException):
    """Raised in a task thread that would begin or publish a result after the run was stopped by a
    signal (the main thread is unwinding): a BaseException, so that no task's error handling takes it
    for a failure of its own."""


class Terminated(BaseException):
    """SIGTERM, raised in the main thread like KeyboardInterrupt for SIGINT: the run unwinds, removing
    its temporaries, and the CLI exits 143."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(signum)
