"""A ``--scheduler`` address where no dask scheduler answers: a server that takes the connection and says
nothing (distributed's Client waited for its handshake without end), one that answers in another
protocol (an HTTP server's answer read as the lengths of dask's frames: a MemoryError, internal error),
and TLS without its configuration (a TypeError, internal error): one line naming the address, exit 2,
nothing written, for both commands."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import case_dir

from msprobe_dask.cli import main
from msprobe_dask.pipeline import cluster

HTTP_ANSWER = b"HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n\r\n"
WORDS = {"silent": "no dask scheduler answered", "http": "does not answer as a dask scheduler"}


@pytest.fixture(params=["silent", "http"])
def server(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    """(address, the words of the error line) of a TCP server on 127.0.0.1 that is no dask scheduler."""
    listener = socket.create_server(("127.0.0.1", 0))
    taken: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:  # the listener closed: the test is over
                return
            taken.append(connection)
            if request.param == "http":
                connection.sendall(HTTP_ANSWER)

    threading.Thread(target=accept, daemon=True).start()
    address = f"tcp://127.0.0.1:{listener.getsockname()[1]}"
    yield address, WORDS[request.param]
    listener.close()
    for connection in taken:
        connection.close()


def _run(command: str, out: Path, address: str) -> int:
    stat = case_dir("stat_mix")
    argv = [command, "-tp", str(stat / "target"), "-gp", str(stat / "golden"), "-o", str(out)]
    return main([*argv, "--scheduler", address])


@pytest.mark.parametrize("command", ["compare", "graph_visualize"])
def test_a_server_that_is_no_dask_scheduler(
    server: tuple[str, str],
    command: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(cluster, "SCHEDULER_ANSWER_SECONDS", 1)
    address, words = server
    start = time.monotonic()
    assert _run(command, tmp_path / "out", address) == 2
    assert time.monotonic() - start < 20
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and address in lines[0] and words in lines[0], lines
    assert not (tmp_path / "out").exists()


def test_tls_without_its_configuration(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run("compare", tmp_path / "out", "tls://127.0.0.1:1") == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "tls://127.0.0.1:1: cannot reach the dask scheduler" in lines[0], lines
