"""Legacy ``.pt`` files (torch.save's format before the zip, ``pt_legacy.py``): read as torch reads them,
on every path of the compare (one shot, chunked, lazy, zarr), the reference's csv cell for cell; a damaged,
lying or hostile one is a TensorFileError naming it, never a crash, an allocation of what it claims, or
code run.

tests/data/tensor_legacy (make_legacy.py): a dump pair whose target files are legacy ``.pt`` of float32,
float16, bfloat16, int64, bool, 0-d, a Parameter, a view (storage offset, strides) and a tensor sharing a
bigger storage, and ``ref/legacy.csv``, the reference's csv of the pair.
"""

from __future__ import annotations

import pickle
import struct
from pathlib import Path

import numpy as np
import pytest

from msprobe_dask.cli import main
from msprobe_dask.dump.pt_legacy import MAGIC_NUMBER, PROTOCOL_VERSION
from msprobe_dask.dump.tensor_file import open_tensor, read_array, read_flat
from msprobe_dask.errors import TensorFileError
from msprobe_dask.metrics.tensor import measure_pair, measure_pair_delayed

LEGACY = Path(__file__).resolve().parents[1] / "data" / "tensor_legacy"
PT = LEGACY / "pt"
CASES = ("f32", "f16", "bf16", "int64", "bool", "zerod", "param", "view", "shared", "legacy_both")


def _file(case: str, side: str = "target") -> Path:
    return PT / side / "dump_tensor_data" / f"Torch.{case}.0.forward.input.0.pt"


def _compare(out: Path, *more: str, sides: tuple[Path, Path] = (PT / "target", PT / "golden")) -> Path:
    argv = ["compare", "-q", "-tp", str(sides[0] / "dump.json"), "-gp", str(sides[1] / "dump.json")]
    assert main([*argv, "-o", str(out), *more]) == 0
    (written,) = out.glob("*.csv")
    return written


@pytest.mark.parametrize("more", [(), ("--workers", "2")])
def test_legacy_files_give_the_reference_s_csv(tmp_path: Path, more: tuple[str, ...]) -> None:
    assert _compare(tmp_path / "out", *more).read_bytes() == (LEGACY / "ref" / "legacy.csv").read_bytes()


def test_legacy_files_converted_to_zarr_give_the_reference_s_csv(tmp_path: Path) -> None:
    stores = []
    for side in ("target", "golden"):
        assert main(["convert", "-q", str(PT / side), "-o", str(tmp_path / side)]) == 0
        stores.append(tmp_path / side)
    written = _compare(tmp_path / "out", sides=(stores[0], stores[1]))
    assert written.read_bytes() == (LEGACY / "ref" / "legacy.csv").read_bytes()


@pytest.mark.parametrize("case", CASES)
def test_every_path_measures_a_legacy_pair_alike(case: str) -> None:
    """One shot, chunked (chunks of 5 elements) and lazy (a dask.array reduction) give the same row."""
    n, b = _file(case), _file(case, "golden")
    one_shot = measure_pair(n, b)
    assert not one_shot.unreadable
    assert measure_pair(n, b, big_elems=1, chunk_elems=5) == one_shot
    for big in (1, None):
        assert measure_pair_delayed(n, b, big_elems=big, chunk_elems=5).compute(scheduler="sync") == one_shot


def test_view_and_shared_storage_are_read_where_they_are() -> None:
    view = open_tensor(_file("view"))
    expected = (np.arange(60, dtype=np.float32).reshape(6, 10) / np.float32(7))[1:5, 2::3]
    assert (view.shape, view.strides, view.is_contiguous) == ((4, 3), (10, 3), False)
    np.testing.assert_array_equal(read_array(view), expected)
    chunks = [read_flat(view, i, i + 5) for i in range(0, view.size, 5)]
    np.testing.assert_array_equal(np.concatenate(chunks), expected.reshape(-1))
    shared = open_tensor(_file("shared"))
    expected = (np.arange(40, dtype=np.float32) / np.float32(3))[5:29].reshape(2, 3, 4)
    np.testing.assert_array_equal(read_array(shared), expected)
    bf16 = read_array(open_tensor(_file("bf16")))
    assert bf16.dtype.name == "bfloat16" and bf16.shape == (2, 3, 4)
    zerod = open_tensor(_file("zerod"))
    assert zerod.shape == () and read_array(zerod) == np.float32(1.5)


# ---------------------------------------------------------------------------------------------------------
# Damaged and hostile files, built by hand (no torch)

_SYSTEM = {"protocol_version": PROTOCOL_VERSION, "little_endian": True, "type_sizes": {"short": 2}}


def _tensor_pickle(numel: int, shape: tuple[int, ...], stride: tuple[int, ...], view: object = None) -> bytes:
    """A protocol-2 pickle of ``_rebuild_tensor_v2`` over a FloatStorage ``'k'`` of ``numel`` elements, as
    the legacy format writes it (a persistent id of six items)."""

    def g(module: str, name: str) -> bytes:
        return b"c" + f"{module}\n{name}\n".encode()

    def tup(*items: bytes) -> bytes:
        return b"(" + b"".join(items) + b"t"

    def s(text: str) -> bytes:
        return b"X" + struct.pack("<I", len(text)) + text.encode()

    def i(n: int) -> bytes:
        return pickle.dumps(n, 2)[2:-1]

    view_bytes = pickle.dumps(view, 2)[2:-1]
    pid = tup(s("storage"), g("torch", "FloatStorage"), s("k"), s("cpu"), i(numel), view_bytes) + b"Q"
    args = pid + i(0) + tup(*map(i, shape)) + tup(*map(i, stride)) + b"\x89"
    hooks = g("collections", "OrderedDict") + b")R"
    return b"\x80\x02" + g("torch._utils", "_rebuild_tensor_v2") + b"(" + args + hooks + b"tR."


def _legacy(
    *,
    numel: int = 6,
    count: int | None = None,
    data: bytes | None = None,
    shape: tuple[int, ...] = (2, 3),
    stride: tuple[int, ...] = (3, 1),
    magic: bytes | None = None,
    system: object = _SYSTEM,
    keys: object = ("k",),
    view: object = None,
) -> bytes:
    head = magic if magic is not None else pickle.dumps(MAGIC_NUMBER, 2)
    pickles = head + pickle.dumps(PROTOCOL_VERSION, 2) + pickle.dumps(system, 2)
    pickles += _tensor_pickle(numel, shape, stride, view) + pickle.dumps(list(keys), 2)  # type: ignore[call-overload]
    data = np.arange(numel, dtype="<f4").tobytes() if data is None else data
    return pickles + struct.pack("<q", numel if count is None else count) + data


def test_a_legacy_file_built_by_hand_is_read(tmp_path: Path) -> None:
    (tmp_path / "x.pt").write_bytes(_legacy())
    np.testing.assert_array_equal(read_array(open_tensor(tmp_path / "x.pt")), np.arange(6.0).reshape(2, 3))


def test_pickles_longer_than_the_first_read_are_read(tmp_path: Path) -> None:
    """System information of 100 kB: the prefix read grows (4 kB, 8 kB...) until the pickles fit."""
    (tmp_path / "x.pt").write_bytes(_legacy(system={**_SYSTEM, "pad": "x" * 100_000}))
    np.testing.assert_array_equal(read_array(open_tensor(tmp_path / "x.pt")), np.arange(6.0).reshape(2, 3))


def _evil(module: str, name: str, marker: Path) -> bytes:
    return (
        b"\x80\x02c"
        + f"{module}\n{name}\n".encode()
        + pickle.dumps((f"open({str(marker)!r}, 'w')",), 2)[2:-1]
        + b"R."
    )


@pytest.mark.parametrize(
    ("build", "problem"),
    [
        (dict(data=b"\0" * 20), "truncated: storage k needs 24 bytes"),
        (dict(count=1 << 60), "storage k holds 1152921504606846976 elements, its pickle says 6"),
        (dict(numel=1 << 40, count=1 << 40, data=b""), "truncated: storage k needs 4398046511104 bytes"),
        (dict(shape=(4, 3)), "truncated .pt: tensor needs 48 storage bytes, storage k has 24"),
        (dict(magic=pickle.dumps(12345, 2)), "bad magic number"),
        (dict(system={"little_endian": False}), "big-endian"),
        (dict(system=[1]), "big-endian"),
        (dict(keys=("k", "other")), "are not the tensor's one storage"),
        (dict(keys=()), "are not the tensor's one storage"),
        (dict(view=("v", 0, 2)), "a view of a storage is not supported"),
    ],
)
def test_lying_legacy_files_are_refused(tmp_path: Path, build: dict, problem: str) -> None:
    path = tmp_path / "x.pt"
    path.write_bytes(_legacy(**build))
    with pytest.raises(TensorFileError) as info:
        open_tensor(path)
    message = str(info.value)
    assert message.startswith(f"{path}: legacy (pre-zip) .pt: ") and problem in message, message


@pytest.mark.parametrize("where", ["magic", "system", "keys"])
def test_a_global_in_any_legacy_pickle_is_refused_and_never_run(tmp_path: Path, where: str) -> None:
    marker = tmp_path / "pwned"
    evil = _evil("builtins", "eval", marker)
    build = {"magic": dict(magic=evil), "system": dict(system=None), "keys": dict(keys=())}[where]
    raw = _legacy(**build)
    if where != "magic":  # put the evil pickle in place of the system information or the keys
        parts = raw.split(pickle.dumps(None if where == "system" else [], 2), 1)
        raw = parts[0] + evil + parts[1]
    (tmp_path / "x.pt").write_bytes(raw)
    with pytest.raises(TensorFileError, match="forbidden global builtins.eval"):
        open_tensor(tmp_path / "x.pt")
    assert not marker.exists()


def test_a_pickle_claiming_more_bytes_than_the_file_has(tmp_path: Path) -> None:
    """A BINBYTES8 of 2**62 bytes in the system information: refused from the bytes at hand."""
    huge = b"\x80\x04\x8e" + struct.pack("<Q", 1 << 62) + b"abc"
    raw = pickle.dumps(MAGIC_NUMBER, 2) + pickle.dumps(PROTOCOL_VERSION, 2) + huge
    (tmp_path / "x.pt").write_bytes(raw)
    with pytest.raises(TensorFileError, match="legacy .* truncated or corrupt"):
        open_tensor(tmp_path / "x.pt")


def test_every_cut_of_a_legacy_file_is_refused(tmp_path: Path) -> None:
    raw = _file("view").read_bytes()
    path = tmp_path / "x.pt"
    for cut in range(1, len(raw)):
        path.write_bytes(raw[:cut])
        with pytest.raises(TensorFileError):
            open_tensor(path)
    path.write_bytes(raw)
    assert open_tensor(path).shape == (4, 3)
