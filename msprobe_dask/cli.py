"""Command line: ``msprobe-dask {compare,graph_visualize,...}`` with msprobe's flags.

Each sub-command lives in its own module that provides ``add_parser(subparsers)``; the parser's
``run(args) -> int`` is stored as the ``run`` default. User mistakes (``UserError``) print one line
and exit 2; ``--debug`` shows the traceback (exit codes: ``main``).
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import signal
import sys
import traceback
from types import FrameType
from typing import Any

from msprobe_dask import __version__
from msprobe_dask.cli_args import add_debug, examples_text
from msprobe_dask.errors import RunStopped, Terminated, UserError, WorkerLost
from msprobe_dask.processes import direct_children, stop_children
from msprobe_dask.writers.atomic import begin_run, remove_temporaries, stop_writing, withdraw_results

COMMAND_MODULES = {
    "compare": "msprobe_dask.pipeline.compare_cli",
    "graph_visualize": "msprobe_dask.graph.cli",
    "merge_result": "msprobe_dask.pipeline.merge_cli",
    "convert": "msprobe_dask.pipeline.convert_cli",
    "report": "msprobe_dask.report.cli",
    "view": "msprobe_dask.view_cli",
}


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser of every sub-command, or only of the one named in ``argv`` (it imports less)."""
    parser = argparse.ArgumentParser(
        prog="msprobe-dask",
        description=__doc__.splitlines()[0],
        epilog=examples_text(
            "msprobe-dask compare -tp run_npu/dump.json -gp run_gpu/dump.json -o out",
            "msprobe-dask graph_visualize -tp run_npu -gp run_gpu -o out && msprobe-dask view out",
            "msprobe-dask COMMAND --help                 # each command's options and examples",
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    add_debug(parser)
    subparsers = parser.add_subparsers(dest="command", required=True)
    named = next((a for a in argv or () if not a.startswith("-")), None)
    modules = [COMMAND_MODULES[named]] if named in COMMAND_MODULES else COMMAND_MODULES.values()
    for module_name in modules:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:
                continue
            raise
        module.add_parser(subparsers)
    return parser


def main(argv: list[str] | None = None, exiting: bool = False) -> int:
    """Run one command; the exit code: 0 done, 1 rows that could not be read or an internal bug (one
    line asking for a report), 2 a user mistake (one line), 130 / 143 stopped by SIGINT / SIGTERM.
    Whatever the ending, the temporary files are removed and the child processes stopped. ``exiting``:
    the process leaves right after (console_main), so a stopped run stays stopped for the task threads
    still running; else (a caller in the same process) writing is allowed again on return."""
    argv = sys.argv[1:] if argv is None else argv
    debug = "--debug" in argv
    previous = _handlers() if _in_main_thread() else None
    unraisable_hook, children = sys.unraisablehook, direct_children()
    begin_run()
    _Received.signum = None
    sys.unraisablehook = _quiet_stops(unraisable_hook)
    if previous is not None:
        signal.signal(signal.SIGTERM, _raise_stopped)
        signal.signal(signal.SIGINT, _raise_stopped)
    try:
        args = build_parser(argv).parse_args(argv)
        from msprobe_dask.dump.remote import local_dumps  # after --help: it imports numpy

        with local_dumps(args):
            code = _run_again_if_a_worker_died(args, children)
        if _Received.signum is not None:  # its exception lost (see _Received) and the run went on to its end
            raise Terminated(_Received.signum)
        return code
    except (KeyboardInterrupt, Terminated, RunStopped, Exception) as exc:  # (RunStopped: see _Received)
        signum = _stopped_by(exc) or _Received.signum
        if signum is not None:
            return _fail(debug, 128 + signum, f"stopped by {signal.Signals(signum).name}", children)
        if isinstance(exc, UserError):
            return _fail(debug, 2, f"error: {exc}", children)
        problem = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        return _fail(
            debug, 1, f"internal error ({problem}); please report it with the output of --debug", children
        )
    finally:
        sys.unraisablehook = unraisable_hook
        if not exiting:
            begin_run()
        if previous is not None:
            for signum, handler in previous.items():
                signal.signal(signum, handler)


def _in_main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def _handlers() -> dict[int, Any]:
    return {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}


def _stopped_by(exc: BaseException) -> int | None:
    """The signal that stopped the run, if ``exc`` is its exception or was raised while unwinding from
    it (a library's clean-up failing half-way, e.g. a process pool stopped while it started)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, KeyboardInterrupt):
            return signal.SIGINT
        if isinstance(seen, Terminated):
            return seen.signum
        seen = seen.__context__
    return None


class _Received:
    """The stopping signal this run received, if any: the run ends as stopped by it whatever exception
    reaches ``main``. The handler's own exception can be lost: raised inside an ``os.register_at_fork``
    hook (a signal held across a worker's fork is taken as the hook unblocks it), Python passes it to
    ``sys.unraisablehook`` and the run goes on, to fail on the workers the signal stopped too (or on those
    forked after it, whose tasks refuse to write: RunStopped), or to its end if they ignored it (a
    Ctrl-C): its results are then withdrawn all the same."""

    signum: int | None = None


def _quiet_stops(hook: Any) -> Any:
    """``hook``, but for the stopping signals' exceptions, which only say the run is being stopped (see
    ``_Received``): not printed as "Exception ignored" with a traceback."""

    def unraisable(found: Any) -> None:
        if _stopped_by(found.exc_value) is None:
            hook(found)

    return unraisable


def _raise_stopped(signum: int, frame: object) -> None:
    """SIGINT / SIGTERM: from this moment no task thread begins or publishes a result (the scheduler
    may wait for its running tasks before the exception reaches ``main``), then unwind."""
    _Received.signum = signum
    stop_writing()
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise Terminated(signum)


def _run_again_if_a_worker_died(args: Any, children: set[int]) -> int:
    """Run the command; if a local worker process died (dask's processes scheduler does not make its
    tasks again, as a cluster does), clear what the run left, as at a failed run's end, and run it once
    more: a worker killed once changes nothing in the output. Not after a stopping signal, which may
    have reached the worker first."""
    try:
        return int(args.run(args) or 0)
    except WorkerLost as exc:
        if _Received.signum is not None:
            raise
        _clear_run(children)
        begin_run()
        print(f"msprobe-dask: {exc.problem}; running the command again", file=sys.stderr, flush=True)
        return int(args.run(args) or 0)


def _clear_run(children: set[int]) -> None:
    """Remove the run's temporaries, stop the child processes it started (not ``children``, there
    before), withdraw the results it wrote."""
    remove_temporaries()
    stop_children(spared=children)
    withdraw_results()  # (once the workers are gone: one may have published a result after the stop)


def _fail(debug: bool, code: int, line: str, children: set[int]) -> int:
    """The end of a failed run: no further signal interrupts it, the temporaries, the child processes
    it started (not ``children``, there before) and the results it wrote go, then one line (after the
    traceback with ``--debug``)."""
    if _in_main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, signal.SIG_IGN)
    if debug:
        traceback.print_exc()
    else:  # a file object of the failed write, closed when freed, fails again: not news
        sys.unraisablehook = lambda unraisable: None
    _clear_run(children)
    print(f"msprobe-dask: {line}", file=sys.stderr, flush=True)
    return code


BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "1")
"""Set (unless the user set it) before numpy is first imported: every process that calls BLAS pins it to
one thread (``metrics/reference_dot.py``), so the thread pool OpenBLAS starts as numpy loads is never used;
it spins meanwhile (0.04 s of CPU on another core at each command's start, measured on 2 CPUs)."""


class LeanDask:
    """An import hook of the command's process: two optional imports of dask, which it does without and
    whose answers a command does not use, find their module missing (``REFUSED``); dask then runs as
    where they are not installed. ``import dask`` costs 0.12e9 instructions less (~30 ms, of 0.67e9).
    Any other importer (distributed's dashboard, this package's processes.py) gets them as usual."""

    REFUSED = {  # module -> the importer it is refused to
        # the templates of dask's HTML reprs in a notebook, which a command never shows (jinja2 is
        # dask's "diagnostics" extra): 0.08e9
        "jinja2": "dask.widgets.widgets",
        # the CPU affinity, which on Linux dask reads from os.sched_getaffinity too (the same set): 0.04e9
        **({"psutil": "dask.system"} if sys.platform == "linux" else {}),
    }

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        refused_to = self.REFUSED.get(name)  # (the importer is looked for only then: every import asks)
        if refused_to is not None and _importer() == refused_to:
            raise ModuleNotFoundError(f"{name} is not imported for dask (cli.LeanDask)", name=name)
        return None


YAML_NON_PRINTABLE = "[^\x09\x0A\x0D\x20-\x7E\x85\xA0-\uD7FF\uE000-\uFFFD\U00010000-\U0010ffff]"
"""PyYAML's ``yaml.reader.Reader.NON_PRINTABLE`` (dask.config imports yaml): re compiles a class this wide
by marking its 63,000 BMP characters one at a time in Python (0.058e9 instructions, ~1.2% of the
transformer's graph_visualize)."""
YAML_NON_PRINTABLE_AS_LISTED = "[\x00-\x08\x0B\x0C\x0E-\x1F\x7F-\x84\x86-\x9F\uD800-\uDFFF\uFFFE\uFFFF]"
"""The same characters listed rather than excluded (tests/test_imports.py checks every code point):
0.004e9 instructions to compile."""


def lean_yaml_reader() -> None:
    """Before yaml is first imported: its reader's NON_PRINTABLE compiled from the class that lists the
    same characters (re's cache answers the reader's ``re.compile``; the reader only searches with it). A
    PyYAML whose pattern is another, or a re without that cache, compiles its own as before."""
    cache = getattr(re, "_cache", None)
    if "yaml.reader" not in sys.modules and isinstance(cache, dict):
        cache[str, YAML_NON_PRINTABLE, 0] = re.compile(YAML_NON_PRINTABLE_AS_LISTED)


def _importer() -> str | None:
    """The module whose code runs the import being looked for (the caller's first frame outside Python's
    import machinery)."""
    frame: FrameType | None = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename.startswith("<frozen importlib"):
        frame = frame.f_back
    return frame.f_globals.get("__name__") if frame is not None else None


def console_main() -> None:
    """``msprobe-dask`` / ``python -m msprobe_dask``: run, flush, and leave without the interpreter's
    teardown, which frees a big run's objects one by one (2-4 s after a 100,000-node graph_visualize).
    Every output file is complete and renamed before ``main`` returns."""
    os.environ.setdefault(*BLAS_THREADS)
    if not any(isinstance(finder, LeanDask) for finder in sys.meta_path):
        sys.meta_path.insert(0, LeanDask())
    lean_yaml_reader()
    code = main(exiting=True)
    if code:  # a task thread of a stopped run may have created a temporary since main removed them
        remove_temporaries()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
