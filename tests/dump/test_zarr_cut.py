"""A converted dump's chunk file cut while it is read (``zarr_store._read_chunks``). Memory-mapped, blosc's
reads of its missing pages faulted (SIGBUS) and killed the process; read into a buffer, the cut is either
whole in the bytes read (the intact pair's row) or an error row naming the chunk file (as a ``.npy`` cut
while it is read; tests/dump/test_zarr_store.py: a corrupt chunk). Each case runs in a process of its
own, so that a fault kills that process, not the test session."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from msprobe_dask.dump.zarr_store import CHUNK_BYTES, write_array

ELEMS = 3 * (CHUNK_BYTES // 4) + 1000  # float32: three whole chunks and an edge

_MEASURE = """
import json, os, sys
from msprobe_dask.dump import zarr_store
from msprobe_dask.errors import StoreError
from msprobe_dask.metrics.tensor import measure_pair

npu, bench, when = sys.argv[1], sys.argv[2], sys.argv[3]
chunk = os.path.join(bench, "c", "1")
real_preadv, real_blosc = os.preadv, zarr_store._blosc

def cut_while_read(fd, buffers, offset):  # the file cut after its first bytes are read
    got = real_preadv(fd, [memoryview(buffers[0])[:4096]], offset)
    if os.path.realpath(f"/proc/self/fd/{fd}") == chunk and os.path.getsize(chunk) > 4096:
        os.truncate(chunk, 4096)
    return got

with open(chunk, "rb") as file:
    head = file.read(4096)

class CutBeforeDecoding:  # the file cut once its bytes are read, before blosc decodes them
    def __init__(self, blosc):
        self.blosc = blosc
    def decompress(self, data, *out):
        if bytes(memoryview(data)[:4096]) == head:  # (the bench array's chunk c/1)
            os.truncate(chunk, 4096)
        return self.blosc.decompress(data, *out)

if when == "while-read":
    os.preadv = cut_while_read
elif when == "before-decoding":
    zarr_store._blosc = lambda: CutBeforeDecoding(real_blosc())
try:
    row = measure_pair(npu, bench)
    cut = os.path.getsize(chunk) == 4096
    print(json.dumps({"cells": row.cells, "unreadable": row.unreadable, "cut": cut, "message": row.message}))
except StoreError as exc:
    print(json.dumps({"error": str(exc)}))
"""


def _stores(folder: Path) -> tuple[Path, Path]:
    values = np.random.default_rng(0).standard_normal(ELEMS, dtype=np.float32)
    paths = folder / "npu.npy", folder / "bench.npy"
    for path, data in zip(paths, (values, values * np.float32(1.001))):
        write_array(path, np.dtype(np.float32), data.shape, lambda lo, hi, data=data: data[lo:hi])
    return paths


def _measure(npu: Path, bench: Path, when: str) -> dict:
    run = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(npu), str(bench), when],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr  # (a fault: -7)
    return json.loads(run.stdout)


def test_chunk_cut_once_read_is_the_intact_row(tmp_path: Path) -> None:
    intact = _measure(*_stores(tmp_path / "a"), "intact")
    assert not intact["unreadable"] and intact["cells"][0] != "unsupported", intact
    cut = _measure(*_stores(tmp_path / "b"), "before-decoding")
    assert cut["cut"] and cut["cells"] == intact["cells"] and not cut["unreadable"], cut


def test_chunk_cut_while_read_is_an_error_row_naming_it(tmp_path: Path) -> None:
    """As a ``.npy`` cut while it is read (tests/metrics/test_tensor_cut.py): the row is an error, the
    run goes on."""
    npu, bench = _stores(tmp_path)
    size = (bench / "c" / "1").stat().st_size
    row = _measure(npu, bench, "while-read")
    assert row["cut"] and row["unreadable"], row
    assert row["cells"] == ["unsupported"] * 6, row
    assert row["message"] == f"{bench}/c/1: cut while it was read: {size} bytes, found 4096", row
