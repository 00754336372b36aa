"""Write to a temporary name in the output folder, rename when complete (never a half file, never over
an existing file); results are 0640 and folders 0750 (as msProbe documents them), less if the umask
says less."""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from msprobe_dask.errors import OutputError, RunStopped, cannot

FILE_MODE = 0o640
FOLDER_MODE = 0o750
_temporaries: set[str] = set()  # being written, removed by remove_temporaries if the run is stopped
_stopped = False  # the run is stopped: no temporary may be begun or published any more
_results: set[str] = set()  # results this run made (not there before it): withdrawn if it fails


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def track(path: str | Path) -> None:
    """``path`` is a temporary file of this run until ``untrack``: removed if the run is stopped. A
    task thread that begins one after the run was stopped (the main thread unwinding from a signal)
    gets ``RunStopped`` and the file is removed."""
    _temporaries.add(str(path))
    check_running()


def begin_run() -> None:
    """A new run in this process (the CLI's ``main``): nothing stopped, nothing tracked."""
    global _stopped
    _stopped = False
    _temporaries.clear()
    _results.clear()


def check_running() -> None:
    """Raise ``RunStopped`` (removing this run's temporaries) once the run has been stopped: called
    before a temporary is begun and before a result is published."""
    if _stopped:
        remove_temporaries()
        raise RunStopped("the run was stopped")


def untrack(path: str | Path) -> None:
    _temporaries.discard(str(path))


def stop_writing() -> None:
    """The run is stopped (a signal's handler): from now on ``check_running`` refuses."""
    global _stopped
    _stopped = True


def remove_temporaries() -> None:
    """Stop the run's writing: remove every temporary file still being written (a run stopped by a
    signal, from any thread), with SQLite's companion files. They stay tracked, and a task thread still
    writing can begin or publish nothing more (``check_running``), so a second call as the process
    leaves removes what such a thread created meanwhile."""
    stop_writing()
    for tmp in list(_temporaries):
        if os.path.isdir(tmp):  # a folder of temporary files (a compare's spooled table parts)
            shutil.rmtree(tmp, ignore_errors=True)
            continue
        for suffix in ("", "-wal", "-shm", "-journal"):
            with contextlib.suppress(OSError):
                os.unlink(tmp + suffix)


def withdraw_results() -> None:
    """A failed or stopped run (the CLI's end, once its worker processes are gone) leaves no result:
    every result it published, or named as its own (``withdrawn_if_failed``: one a worker process may
    have published), is removed with the temporaries of its name that remain. A file that was there
    before the run is never among them."""
    for final in list(_results):
        _withdraw(Path(final), made=True)


def _withdraw(final: Path, made: bool) -> None:
    """Remove the temporaries of ``final``'s name (``.{name}.*``) that remain, and ``final`` if ``made``
    by this run."""
    for path in list(final.parent.glob(f".{glob.escape(final.name)}.*")) + ([final] if made else []):
        if path.is_dir() and not path.is_symlink():  # a folder of temporaries (a compare's spool folder)
            shutil.rmtree(path, ignore_errors=True)
            continue
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def set_result_mode(path: str | Path) -> None:
    """A result file's permissions: 0640, or less if the umask says less."""
    os.chmod(path, FILE_MODE & ~_umask())


_MADE: list[Path] = []  # the folders prepare_output_dir made, in order: output_dir removes a failed run's


def prepare_output_dir(path: str | Path) -> Path:
    """Create the output folder if needed and check that it is writable."""
    path = Path(path)
    try:
        for folder in reversed(missing_folders(path)):
            folder.mkdir(mode=FOLDER_MODE)
            _MADE.append(folder)
    except OSError as exc:
        raise OutputError(path, cannot("create the output folder", exc)) from None
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
    made for it (the output folder, any missing parents, and the step folders made for its results)
    are removed again while still empty."""
    first = len(_MADE)
    try:
        yield prepare_output_dir(path)
    except BaseException:
        for folder in reversed(_MADE[first:]):  # deepest first; a folder not empty stays
            try:
                folder.rmdir()
            except OSError:
                pass
        raise
    finally:
        del _MADE[first:]


@contextlib.contextmanager
def atomic_path(final: Path) -> Iterator[Path]:
    """Yield a temporary path beside ``final``; it becomes ``final`` only if the block succeeds and no
    ``final`` exists by then (an existing file is never replaced: OutputError). A full disk or a file
    size limit while writing is an OutputError naming ``final``."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".part", dir=final.parent)
    except OSError as exc:
        raise OutputError(final, cannot("be written", exc)) from None
    os.close(fd)
    track(tmp)
    try:
        yield Path(tmp)
        set_result_mode(tmp)
        publish(Path(tmp), final)
    except OSError as exc:
        raise OutputError(final, cannot("be written", exc)) from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        untrack(tmp)


def unused_name(path: Path) -> Path:
    """``path``, or ``{stem}_1{suffix}``, ``_2``... if it is taken: for an output no script looks for by
    its exact name (a second report of the same second)."""
    candidate, n = path, 0
    while os.path.lexists(candidate):
        n += 1
        candidate = path.with_name(f"{path.stem}_{n}{path.suffix}")
    return candidate


@contextlib.contextmanager
def withdrawn_if_failed(*finals: Path) -> Iterator[None]:
    """``finals`` are the block's results, written by tasks that may run in worker processes (a
    a cluster's, dask's processes scheduler's), which do not see that the run was stopped: they may
    still publish a result, or be killed while writing it. If the block fails or is stopped, each
    ``final`` that was not there when it began is removed, and so are the temporaries of its name
    (``.{name}.*``) that remain. Call it where the workers are gone by the end of the block. A worker
    still running then (the block stopped by a signal) may publish one after: the run's end withdraws
    it again (``withdraw_results``)."""
    ours = [final for final in finals if not os.path.lexists(final)]
    _results.update(str(final) for final in ours)
    try:
        yield
        check_running()  # (stopped by a signal whose exception was lost in an at-fork hook: cli._Received)
    except BaseException:
        for final in finals:
            _withdraw(final, made=final in ours)
        raise


def not_replaced(final: Path) -> OutputError:
    """The error of a result whose name is taken: an existing file is never replaced nor changed."""
    return OutputError(final, "already exists and is not replaced; run again for a new name")


def publish(tmp: Path, final: Path) -> None:
    """Give the complete file ``tmp`` its name ``final``, unless a file of that name exists (a hard link
    fails then, where a rename would replace it; unless it is ``tmp`` itself, named by a task that runs
    again after its worker was lost); ``tmp`` stays for the caller to remove. Nothing is
    published once the run was stopped (``check_running``): a stop that comes as it is named takes the
    name back; one that comes later finds it among the run's results (``withdraw_results``)."""
    check_running()
    first = str(final) not in _results  # (not named already as the run's by withdrawn_if_failed)
    _results.add(str(final))
    try:
        os.link(tmp, final)
    except FileExistsError:
        if os.path.samefile(tmp, final):
            return
        if first:  # (another's file: never withdrawn)
            _results.discard(str(final))
        raise not_replaced(final) from None
    except OSError:  # a file system without hard links
        if os.path.lexists(final):
            if first:
                _results.discard(str(final))
            raise not_replaced(final) from None
        os.replace(tmp, final)
    if _stopped:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(final)
        check_running()
