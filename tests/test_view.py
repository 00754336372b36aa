"""``msprobe-dask view OUT`` starts TensorBoard with tb-graph-ascend from this environment, prints its
address, and answers there on 127.0.0.1 (slow: TensorBoard starts in seconds)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import case_dir

from msprobe_dask.cli import main


@pytest.fixture(scope="module", autouse=True)
def _viewer_installed() -> None:
    pytest.importorskip("tensorboard")
    from msprobe_dask.errors import ConfigError
    from msprobe_dask.view_cli import graph_ascend_plugin

    try:
        graph_ascend_plugin()
    except ConfigError as exc:
        pytest.skip(str(exc))


def test_view_serves_the_vis_db_on_localhost(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert main(["graph_visualize", "-q", "-tp", str(case_dir("stat_mix") / "target"), "-o", str(out)]) == 0
    env = dict(os.environ, NO_PROXY="127.0.0.1,localhost", TMPDIR=str(tmp_path))
    proc = subprocess.Popen(
        [sys.executable, "-m", "msprobe_dask", "view", str(out), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # printed once TensorBoard listens
        match = re.search(r"(http://127\.0\.0\.1:\d+/)#graph_ascend", line)
        assert match, line
        deadline = time.time() + 60
        while True:
            try:
                with urllib.request.urlopen(match[1] + "data/plugins_listing", timeout=5) as answer:
                    plugins = json.loads(answer.read())
                break
            except OSError:
                assert time.time() < deadline and proc.poll() is None, "tensorboard does not answer"
                time.sleep(0.5)
        assert "graph_ascend" in plugins
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_view_of_a_folder_without_vis_db_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["view", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "holds no .vis.db file" in err[0]
