"""A kernel dump tensor's statistics read chunk by chunk (``kernel_stats``) against numpy on the whole array
(``kernel.tensor_stats``, the reference's numbers): the same type and bits, over random arrays and
adversarial ones (signed zeros, NaN, infinities, overflowing squares, subnormals, cancellation, the
integers' extremes, every size near the chunks', numpy's buffers', the dot lanes' and the BLAS threads'
runs' edges), of every dtype it reads in chunks (float16, float32, float64, the integers and bool); and the
L2 norm of float64, integer and bool tensors as the reference's process gives it (its OpenBLAS's two
threads), checked against the reference's own cells."""

from __future__ import annotations

import os
import subprocess
import sys
from csv import reader
from pathlib import Path

import numpy as np
import pytest

from msprobe_dask.cli import main
from msprobe_dask.dump.kernel import KernelTensor
from msprobe_dask.dump.tensor_file import open_tensor
from msprobe_dask.errors import TensorFileError
from msprobe_dask.metrics import kernel_stats
from msprobe_dask.metrics.kernel import l2_norm, tensor_stats
from msprobe_dask.metrics.kernel_stats import chunkable, chunked_stats, is_all_zero
from msprobe_dask.metrics.reference_dot import KERNEL_ORDERS, kernel_order
from msprobe_dask.pipeline import kernel_rows

CHUNK = 2 * 8192
SIZES = [1, 7, 8, 31, 32, 63, 64, 65, 95, 96, 127, 8191, 8192, 8193, CHUNK - 1, CHUNK, CHUNK + 1, CHUNK + 63]
SIZES += [2 * CHUNK + 8, 3 * CHUNK + 37, 5 * CHUNK + 100, 7 * CHUNK + 8191]
RUN_EDGES = [10_000, 10_001, 10_015, 10_016, 10_017, 10_033, 10_063, 10_065, 20_001, 20_033, 2 * CHUNK + 31]
"""Sizes whose ddot runs (two above 10,000 elements) end at each edge of the lanes' blocks of 16 and 32."""
WIDE_DTYPES = (np.float64, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
               bool)  # fmt: skip


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


def _integers(rng: np.random.Generator, size: int, dtype: type) -> list[np.ndarray]:
    if dtype is bool:
        return [rng.random(size) < 0.5, np.zeros(size, bool), np.ones(size, bool), rng.random(size) < 0.001]
    info = np.iinfo(dtype)
    return [
        rng.integers(info.min, info.max, size, dtype=dtype, endpoint=True),
        np.full(size, info.max, dtype),  # squares and sums beyond float64's 53 bits
        np.full(size, info.min, dtype),
        np.zeros(size, dtype),
        rng.integers(0, 3, size, dtype=dtype),
        np.where(rng.random(size) < 0.5, info.max, info.min).astype(dtype),  # cancellation
    ]


def _arrays(rng: np.random.Generator, dtype: type, size: int) -> list[np.ndarray]:
    if np.dtype(dtype).kind == "f":
        return _adversarial(rng, size, dtype)
    return _integers(rng, size, dtype)


def check(folder: str) -> int:
    """Every size and array of each dtype read in chunks against numpy on the whole array; the number of
    arrays checked (run in a process of its own: OpenBLAS's kernel is chosen when it loads)."""
    rng = np.random.default_rng(16)
    path = Path(folder) / "t.npy"
    checked = 0
    for dtype in (np.float16, np.float32, *WIDE_DTYPES):
        sizes = SIZES if dtype in (np.float16, np.float32) else SIZES + RUN_EDGES
        for size in sizes:
            for array in _arrays(rng, dtype, size):
                np.save(path, array.reshape(1, size))
                handle = open_tensor(path)
                assert chunkable(handle)
                whole = tensor_stats(np.load(path))
                chunked = chunked_stats(handle, chunk_elems=CHUNK)
                assert [_bits(v) for v in chunked] == [_bits(v) for v in whole], (dtype, size, array[:8])
                assert is_all_zero(handle, CHUNK) == (not np.any(np.where(np.isfinite(array), array, 0)))
                checked += 1
    return checked


def _expected_count() -> int:
    rng = np.random.default_rng(0)
    count = 0
    for dtype in (np.float16, np.float32, *WIDE_DTYPES):
        sizes = SIZES if dtype in (np.float16, np.float32) else SIZES + RUN_EDGES
        count += len(sizes) * len(_arrays(rng, dtype, 1))
    return count


@pytest.mark.parametrize("kernel", ["Haswell", "SkylakeX"])
def test_chunked_stats_are_the_whole_arrays(tmp_path: Path, kernel: str) -> None:
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    if kernel == "SkylakeX" and "avx512f" not in flags or "avx2" not in flags:
        pytest.skip(f"this CPU does not run OpenBLAS's {kernel} kernels")
    code = (
        f"import sys; sys.path[:0] = [{str(Path(__file__).parent)!r}, {str(Path(__file__).parents[1])!r}]; "
        f"import {Path(__file__).stem} as t; "
    )
    code += f"print(t.check({str(tmp_path)!r}))"
    env = {**os.environ, "OPENBLAS_CORETYPE": kernel}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.split() == [str(_expected_count())]


def test_only_native_runs_of_numbers_are_chunkable(tmp_path: Path) -> None:
    cases = {
        "big-endian": np.zeros(4, ">f4"),
        "big-endian-i4": np.zeros(4, ">i4"),
        "fortran": np.asfortranarray(np.zeros((3, 4), np.float16)),
        "complex": np.zeros(4, np.complex64),
        "longdouble": np.zeros(4, np.longdouble),
    }
    for name, array in cases.items():
        np.save(tmp_path / f"{name}.npy", array)
        assert not chunkable(open_tensor(tmp_path / f"{name}.npy")), name
    for dtype in (np.float16, np.float32, *WIDE_DTYPES):
        np.save(tmp_path / "t.npy", np.zeros((3, 4), dtype))
        assert chunkable(open_tensor(tmp_path / "t.npy")), dtype


_NORMS = """
import sys, numpy as np
for path in sys.argv[1:]:
    print(repr(float(np.linalg.norm(np.load(path)))))
"""


def _numpy_norms(paths: list[Path], threads: int) -> list[float]:
    """np.linalg.norm of each saved array in a fresh process whose OpenBLAS runs ``threads`` threads."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": str(threads)}
    run = subprocess.run([sys.executable, "-c", _NORMS, *map(str, paths)], env=env, capture_output=True,
                         text=True, check=True, timeout=300)  # fmt: skip
    return [float(line) for line in run.stdout.split()]


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="OpenBLAS runs one thread on one CPU")
def test_the_norm_is_numpys_on_the_reference_s_two_blas_threads(tmp_path: Path) -> None:
    """In this process, whose BLAS runs one thread (as a dask worker's), as numpy gives it on two, which one
    thread does not give."""
    rng = np.random.default_rng(7)
    paths, ours = [], []
    for dtype in WIDE_DTYPES:
        for size in (9_999, 10_017, 20_001, 65_537):
            for i, array in enumerate(_arrays(rng, dtype, size)[:2]):
                paths.append(tmp_path / f"{np.dtype(dtype).name}-{size}-{i}.npy")
                np.save(paths[-1], array)
                with np.errstate(over="ignore"):
                    ours.append(float(l2_norm(array)))
    assert ours == _numpy_norms(paths, 2)
    assert ours != _numpy_norms(paths, 1)  # (these arrays do show the thread count in the last digits)


def _deterministic_arrays() -> dict[str, np.ndarray]:
    """Arrays made without a random generator (the same on any numpy)."""

    def h(n: int) -> np.ndarray:
        return (np.arange(n, dtype=np.int64) * 2654435761 + 97) % 2147483647

    return {
        "f64": (h(20_001) / 2147483647 - 0.5) * 1e4,
        "f64x2": ((h(120 * 171) % 1000003) * 1.5e-3 - 700.0).reshape(120, 171),
        "i32": (h(30_011) - 2**30).astype(np.int32),
        "i64": ((h(20_017) << 31) ^ h(20_017)) - 2**61,
        "u8": (h(25_000) % 256).astype(np.uint8),
        "u64": (h(10_033).astype(np.uint64) << np.uint64(32)) + np.uint64(12345),
        "i16": (h(16_411) % 65536 - 32768).astype(np.int16),
        "b": h(12_345) % 3 == 0,
    }


REFERENCE_CELLS = {
    "b": ["True", "False", "0.3332523288780883", "64.1404708432983"],
    "f64": ["4998.896587639533", "-4999.999548308551", "-0.49779805312346537", "408269.2220065038"],
    "f64x2": ["799.8755000000001", "-699.8545", "49.74136410818715", "62445.86699941874"],
    "i16": ["32766", "-32768", "3.2062031564194746", "2423755.169830278"],
    "i32": ["1073600863", "-1073741727", "-53647.31441804671", "107395586129.84906"],
    "i64": ["2305334150078161507", "-2305842800907779999", "-262339376953651.3", "1.8836000459835002e+20"],
    "u64": ["9221942014608683065", "416611840057", "4.6107132639391237e+18", "5.333173887538044e+20"],
    "u8": ["255", "0", "127.49888", "23300.76595307545"],
}
"""NPU max, min, mean and l2norm of ``_deterministic_arrays`` in the reference's csv (mindstudio-probe 26.2.0
through tests/data/kernel_npy/ref/shim, 2026-12-06 on a 2-CPU machine, OPENBLAS_CORETYPE=Haswell as
conftest pins it: ``msprobe compare -tp T -gp G --rank 0``, each array saved as ``rank_0/Net/1/0/
Add.op{key}.{i}.0.17172000000000{i:02d}.output.0.DefaultFormat.npy`` on both sides). Before, ours had
other last digits in 3 norms of the 8 (one BLAS thread)."""
SKYLAKEX_NORMS = {"f64": "408269.2220065037", "i64": "1.8836000459835e+20", "u64": "5.3331738875380446e+20"}
"""The reference's other l2norm cells on OpenBLAS's SkylakeX kernels (the same run without the pin)."""


@pytest.mark.parametrize("chunked", [False, True])
def test_float64_integer_and_bool_statistics_are_the_references(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunked: bool
) -> None:
    for side in ("target", "golden"):
        leaf = tmp_path / side / "rank_0" / "Net" / "1" / "0"
        leaf.mkdir(parents=True)
        for i, (key, array) in enumerate(_deterministic_arrays().items()):
            np.save(leaf / f"Add.op{key}.{i}.0.17172000000000{i:02d}.output.0.DefaultFormat.npy", array)
    read_in_chunks = []
    if chunked:  # every tensor read 8192 elements at a time
        monkeypatch.setattr(kernel_rows, "BIG_TENSOR_ELEMS", 1000)
        in_chunks = lambda h: read_in_chunks.append(h) or chunked_stats(h, 8192)  # noqa: E731
        monkeypatch.setattr(kernel_rows, "chunked_stats", in_chunks)
    out = tmp_path / "out"
    argv = ["compare", "-q", "-tp", str(tmp_path / "target"), "-gp", str(tmp_path / "golden")]
    assert main([*argv, "-o", str(out)]) == 0
    (csv,) = out.glob("*.csv")
    with open(csv, newline="") as file:
        header, *rows = list(reader(file))
    columns = [header.index(name) for name in ("NPU max", "NPU min", "NPU mean", "NPU l2norm")]
    found = {row[0].split("Add.op")[1].split(".")[0]: [row[i] for i in columns] for row in rows}
    expected = {key: [*cells] for key, cells in REFERENCE_CELLS.items()}
    if kernel_order() == KERNEL_ORDERS["skylakex"]:
        for key, norm in SKYLAKEX_NORMS.items():
            expected[key][3] = norm
    assert found == expected
    assert len(read_in_chunks) == (2 * len(REFERENCE_CELLS) if chunked else 0)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.int32, np.uint8, bool])
@pytest.mark.parametrize("case", ["random", "zero-npu"])
def test_a_big_kernel_row_read_in_chunks_is_the_whole_read_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str, dtype: type
) -> None:
    """A pair above BIG_TENSOR_ELEMS (here 3 chunks) gives the row of the tensors read whole."""
    monkeypatch.setattr(kernel_rows, "BIG_TENSOR_ELEMS", 3 * CHUNK)
    monkeypatch.setattr(kernel_stats, "CHUNK_ELEMS", CHUNK)
    rng = np.random.default_rng(3)
    bench = (rng.standard_normal((4, CHUNK)) * 100).astype(dtype)
    npu = np.zeros_like(bench) if case == "zero-npu" else (bench * 1.01).astype(dtype)
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
