"""A preloaded process that runs each hostile case in a forked child, as ``msprobe-dask`` would run it.

Started once per test session (``python forkserver.py``): it imports the CLI and what a run needs, then
reads one JSON request per line on stdin and answers one JSON line on stdout. Each case runs in a child
of its own session (so that every process it starts can be found and counted afterwards), with stdout
and stderr sent to files, optional resource limits and an audit hook writing the real path of every
file the case opens to a log (from the child and from any process it forks). A fork takes milliseconds
where a fresh interpreter takes most of a second.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import sys
import time
import traceback

import dask  # noqa: F401  (preloaded: the cases then open no module files)
import dask.threaded  # noqa: F401
import numpy  # noqa: F401
import openpyxl  # noqa: F401
import yaml  # noqa: F401

import msprobe_dask.cli as cli
import msprobe_dask.graph.api  # noqa: F401
import msprobe_dask.graph.cli  # noqa: F401
import msprobe_dask.pipeline.compare_cli  # noqa: F401
import msprobe_dask.pipeline.merge_cli  # noqa: F401


def _record_opens(log_path: str, root: str) -> None:
    """Log the real path of every file opened below ``root`` (the rest are the interpreter's)."""
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    def hook(event: str, args: tuple) -> None:
        if event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
            path = os.path.realpath(os.fsdecode(args[0]))
            if path.startswith(root):
                # (never an error in the run's open: a line past the case's file size limit, fsize, is lost,
                # where its EFBIG failed a worker's open of a spool file, or the removal of the spool folder)
                with contextlib.suppress(OSError):
                    os.write(fd, (path + "\n").encode("utf-8", "surrogateescape"))

    sys.addaudithook(hook)


def _child(request: dict) -> int:
    os.setsid()
    os.chdir(request["cwd"])
    for stream, name in ((1, "stdout"), (2, "stderr")):
        fd = os.open(request[name], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(fd, stream)
        os.close(fd)
    if request.get("umask") is not None:
        os.umask(request["umask"])
    if request.get("fsize") is not None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (request["fsize"], request["fsize"]))
    if request.get("prelude"):
        exec(request["prelude"], {})
    _record_opens(request["opened"], os.path.realpath(request["root"]))
    try:
        return cli.main(request["argv"], exiting=True)  # the child leaves right after, as console_main
    except SystemExit as exc:  # argparse
        return exc.code if isinstance(exc.code, int) else 2
    except BaseException:  # what the interpreter would do
        traceback.print_exc()
        return 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()


def _session_members(sid: int) -> list[str]:
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[3]) == sid and fields[0] != "Z":
                members.append(entry)
    return members


def _run(request: dict) -> dict:
    pid = os.fork()
    if pid == 0:
        os._exit(_child(request))
    deadline = time.monotonic() + request.get("timeout", 60)
    status = None
    while status is None:
        done, raw = os.waitpid(pid, os.WNOHANG)
        if done:
            status = raw
        elif time.monotonic() > deadline:
            os.killpg(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            status = -1
        else:
            time.sleep(0.005)
    left = _session_members(pid)
    for _ in range(100):  # what leaves by itself once the run is gone (multiprocessing's tracker)
        if not left:
            break
        time.sleep(0.02)
        left = _session_members(pid)
    for member in left:
        os.kill(int(member), signal.SIGKILL)
    code = os.waitstatus_to_exitcode(status) if status != -1 else "timeout"
    return {"code": code, "left": left}


def main() -> None:
    for line in sys.stdin:
        print(json.dumps(_run(json.loads(line))), flush=True)


if __name__ == "__main__":
    main()
