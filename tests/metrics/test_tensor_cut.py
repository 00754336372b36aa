"""A tensor file cut while the C pass reads its memory-mapped pages (``tensor_file.mapped_run``): the
missing pages fault (SIGBUS), which would kill the process; the pass's guard makes the row an error naming
the file instead. Each case runs in a process of its own, so that a guard that fails kills that process,
not the test session."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from msprobe_dask.metrics.one_shot import pair_pass_kernel
from msprobe_dask.metrics.tensor import BIG_TENSOR_ELEMS

pytestmark = pytest.mark.skipif(pair_pass_kernel is None, reason="the C pass is not built")

_CUT_AFTER_MAPPING = """
import json, os, sys
from msprobe_dask.metrics import chunked, tensor

npu, bench, big_elems, chunk_elems = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
module, name = (chunked, "mapped_run") if big_elems else (tensor, "pass_bytes")
real = getattr(module, name)
mapped = []

def cut_once_mapped(handle, *args):
    out = real(handle, *args)
    mapped.append(out is not None)
    if str(handle.path) == bench and out is not None:
        os.truncate(bench, 4096)
    return out

setattr(module, name, cut_once_mapped)
sizes = {"big_elems": big_elems, "chunk_elems": chunk_elems} if big_elems else {}
row = tensor.measure_pair(npu, bench, **sizes)
print(json.dumps({"unreadable": row.unreadable, "message": row.message, "mapped": mapped}))
"""


def _pair(folder: Path, elems: int) -> tuple[Path, Path]:
    values = np.random.default_rng(0).standard_normal(elems, dtype=np.float32)
    npu, bench = folder / "npu.npy", folder / "bench.npy"
    np.save(npu, values)
    np.save(bench, values * np.float32(1.001))
    return npu, bench


def _run(code: str, *args: object, stdin: int | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", code, *map(str, args)],
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.parametrize(
    "elems, big_elems, chunk_elems",
    [(1 << 21, 0, 0), (1 << 21, 1 << 20, 1 << 19)],
    ids=["one-shot", "chunked"],
)
def test_file_cut_after_it_was_mapped_is_an_error_row(
    tmp_path: Path, elems: int, big_elems: int, chunk_elems: int
) -> None:
    """The bench file cut once its pages are mapped, before the pass reads them: an error row naming it
    (D27's wording), the process alive; the same pair intact is measured from the maps."""
    npu, bench = _pair(tmp_path, elems)
    size = bench.stat().st_size
    run = _run(_CUT_AFTER_MAPPING, npu, bench, big_elems, chunk_elems)
    out, err = run.communicate(timeout=120)
    assert run.returncode == 0, err
    row = json.loads(out)
    assert row["mapped"] and all(row["mapped"]), row
    assert row["unreadable"], row
    expected = f"{bench}: truncated: expected {size - 128} bytes at byte 128, found 3968"
    assert expected in row["message"], row


_MEASURE_WHEN_TOLD = """
import json, sys
from msprobe_dask.metrics.tensor import measure_pair_delayed

def measured():
    row = measure_pair_delayed(sys.argv[1], sys.argv[2]).compute(scheduler="sync")
    return {"unreadable": row.unreadable, "message": row.message, "cells": row.cells}

intact = measured()  # (its first run imports what a run needs: 0.5 s)
print("ready", flush=True)
sys.stdin.readline()
print(json.dumps({"intact": intact, "cut": measured()}))
"""
_CUT_WHEN_TOLD = """
import os, sys, time
print("ready", flush=True)
sys.stdin.readline()
time.sleep(float(sys.argv[2]))
os.truncate(sys.argv[1], 4096)
"""


@pytest.mark.parametrize("delay", [0.0, 0.004, 0.008, 0.012, 0.016, 0.02, 0.03])
def test_big_file_cut_by_another_process_while_read(tmp_path: Path, delay: float) -> None:
    """A pair of more than 8M elements read chunk by chunk from the maps while another process cuts the
    bench file, ``delay`` seconds after both were told to go (the pair's two chunks take about 20 ms):
    whether the cut comes before the header is read, before a chunk is mapped, while the pass reads its
    pages or after the last, the row is the intact pair's or an error naming the file, and the process
    lives (each outcome seen over these delays, on an idle and a loaded host)."""
    npu, bench = _pair(tmp_path, BIG_TENSOR_ELEMS + (1 << 20))
    reader = _run(_MEASURE_WHEN_TOLD, npu, bench, stdin=subprocess.PIPE)
    cutter = _run(_CUT_WHEN_TOLD, bench, delay, stdin=subprocess.PIPE)
    for process in (reader, cutter):
        assert process.stdout is not None and process.stdout.readline() == "ready\n"
    for process in (cutter, reader):
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()
    out, err = reader.communicate(timeout=120)
    assert cutter.wait(timeout=60) == 0 and os.path.getsize(bench) == 4096
    assert reader.returncode == 0, err
    rows = json.loads(out)
    assert not rows["intact"]["unreadable"] and rows["intact"]["cells"][0] != "unsupported", rows
    if rows["cut"]["unreadable"]:
        assert f"{bench}: truncated" in rows["cut"]["message"], rows  # (the header, a chunk or the pass)
    else:
        assert rows["cut"] == rows["intact"], rows
