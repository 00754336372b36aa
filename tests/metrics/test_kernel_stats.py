"""A kernel dump tensor's statistics read chunk by chunk (``kernel_stats``) against numpy on the whole array
(``kernel.tensor_stats``, the reference's numbers): the same type and bits, over random arrays and
adversarial ones (signed zeros, NaN, infinities, overflowing squares, subnormals, cancellation, every size
near the chunks', numpy's buffers' and the sdot lanes' edges)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from msprobe_dask.dump.kernel import KernelTensor
from msprobe_dask.dump.tensor_file import open_tensor
from msprobe_dask.errors import TensorFileError
from msprobe_dask.metrics import kernel_stats
from msprobe_dask.metrics.kernel import tensor_stats
from msprobe_dask.metrics.kernel_stats import chunkable, chunked_stats, is_all_zero
from msprobe_dask.pipeline import kernel_rows

CHUNK = 2 * 8192
SIZES = [1, 7, 8, 31, 32, 63, 64, 65, 95, 96, 127, 8191, 8192, 8193, CHUNK - 1, CHUNK, CHUNK + 1, CHUNK + 63]
SIZES += [2 * CHUNK + 8, 3 * CHUNK + 37, 5 * CHUNK + 100, 7 * CHUNK + 8191]


def _bits(value: object) -> tuple[str, bytes]:
    return type(value).__name__, np.asarray(value).tobytes()


def _adversarial(rng: np.random.Generator, size: int, dtype: type) -> list[np.ndarray]:
    info = np.finfo(dtype)
    scale = float(info.max) ** 0.5
    normal = rng.standard_normal(size)
    zeros = np.where(rng.random(size) < 0.5, -0.0, 0.0)
    arrays = [
        normal * rng.uniform(1e-3, 1e3),
        normal * scale * 0.9,  # squares near and beyond the largest
        np.abs(normal) + 1e4,  # a large mean: each addition rounds
        normal * float(info.tiny) * 4,  # subnormal squares
        np.where(rng.random(size) < 0.5, 1e4, -1e4) + normal,  # cancellation
        zeros,
        np.full(size, -0.0),
        np.full(size, 3.0),
        np.where(rng.random(size) < 0.01, np.nan, normal),
        np.where(rng.random(size) < 0.01, np.inf, normal),
        np.where(rng.random(size) < 0.01, -np.inf, zeros),
        np.sort(normal)[::-1] * 100,
    ]
    return [array.astype(dtype) for array in arrays]


def check(folder: str) -> int:
    """Every size and array of both dtypes read in chunks against numpy on the whole array; the number of
    arrays checked (run in a process of its own: OpenBLAS's kernel is chosen when it loads)."""
    rng = np.random.default_rng(16)
    path = Path(folder) / "t.npy"
    checked = 0
    for dtype in (np.float16, np.float32):
        for size in SIZES:
            for array in _adversarial(rng, size, dtype):
                np.save(path, array.reshape(1, size))
                handle = open_tensor(path)
                assert chunkable(handle)
                whole = tensor_stats(np.load(path))
                chunked = chunked_stats(handle, chunk_elems=CHUNK)
                assert [_bits(v) for v in chunked] == [_bits(v) for v in whole], (size, array[:8])
                assert is_all_zero(handle, CHUNK) == (not np.any(np.where(np.isfinite(array), array, 0)))
                checked += 1
    return checked


@pytest.mark.parametrize("kernel", ["Haswell", "SkylakeX"])
def test_chunked_stats_are_the_whole_arrays(tmp_path: Path, kernel: str) -> None:
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    if kernel == "SkylakeX" and "avx512f" not in flags or "avx2" not in flags:
        pytest.skip(f"this CPU does not run OpenBLAS's {kernel} kernels")
    code = (
        f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); import {Path(__file__).stem} as t; "
    )
    code += f"print(t.check({str(tmp_path)!r}))"
    env = {**os.environ, "OPENBLAS_CORETYPE": kernel}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.split() == [str(2 * len(SIZES) * 12)]


def test_only_native_float_runs_are_chunkable(tmp_path: Path) -> None:
    cases = {
        "f8": np.zeros(4),
        "i4": np.zeros(4, np.int32),
        "big-endian": np.zeros(4, ">f4"),
        "fortran": np.asfortranarray(np.zeros((3, 4), np.float16)),
    }
    for name, array in cases.items():
        np.save(tmp_path / f"{name}.npy", array)
        assert not chunkable(open_tensor(tmp_path / f"{name}.npy")), name
    np.save(tmp_path / "f2.npy", np.zeros((3, 4), np.float16))
    assert chunkable(open_tensor(tmp_path / "f2.npy"))


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
@pytest.mark.parametrize("case", ["random", "zero-npu"])
def test_a_big_kernel_row_read_in_chunks_is_the_whole_read_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str, dtype: type
) -> None:
    """A pair above BIG_TENSOR_ELEMS (here 3 chunks) gives the row of the tensors read whole."""
    monkeypatch.setattr(kernel_rows, "BIG_TENSOR_ELEMS", 3 * CHUNK)
    monkeypatch.setattr(kernel_stats, "CHUNK_ELEMS", CHUNK)
    rng = np.random.default_rng(3)
    bench = rng.standard_normal((4, CHUNK)).astype(dtype)
    npu = np.zeros_like(bench) if case == "zero-npu" else bench * dtype(1.01)
    paths = tmp_path / "npu.npy", tmp_path / "bench.npy"
    for path, values in zip(paths, (npu, bench)):
        np.save(path, values)
    tensors = [KernelTensor(path.stem, 0, path.name, path) for path in paths]
    read_whole = []
    real = kernel_rows.read_array
    monkeypatch.setattr(kernel_rows, "read_array", lambda handle: read_whole.append(handle) or real(handle))
    chunked = kernel_rows.npy_row(*tensors)
    assert read_whole == []
    monkeypatch.setattr(kernel_rows, "chunkable", lambda handle: False)
    whole = kernel_rows.npy_row(*tensors)
    assert len(read_whole) == 2
    assert [_bits(v) if isinstance(v, np.generic) else v for v in chunked] == [
        _bits(v) if isinstance(v, np.generic) else v for v in whole
    ]
    if case == "zero-npu":
        assert "All the data is Zero in npu dump data" in str(whole)


def test_a_file_cut_while_its_chunks_are_read_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file cut after its first chunk is read: the error of a truncated file (the compare stops with one
    line naming it, as for a file cut before), never numbers from part of it."""
    path = tmp_path / "t.npy"
    np.save(path, np.ones(4 * CHUNK, np.float32))
    handle = open_tensor(path)
    real = kernel_stats.read_flat

    def cut_after_first(handle: object, start: int, stop: int, buffer: np.ndarray) -> np.ndarray:
        chunk = real(handle, start, stop, buffer)
        os.truncate(path, 4096)
        return chunk

    monkeypatch.setattr(kernel_stats, "read_flat", cut_after_first)
    with pytest.raises(TensorFileError, match=f"{path}: truncated: expected"):
        chunked_stats(handle, CHUNK)
