"""Tensor files: path containment, header-only handles, the restricted .pt unpickler, reads, dask chunks."""

from __future__ import annotations

import builtins
import dataclasses
import io
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from msprobe_dask.dump.pt_zip import BadZip, zip64_sizes
from msprobe_dask.dump.tensor_file import (
    TensorHandle,
    cut_error,
    mapped_run,
    open_tensor,
    read_array,
    read_flat,
    resolve_data_file,
)
from msprobe_dask.errors import TensorFileError, UnsafePathError

DATA = Path(__file__).resolve().parents[1] / "data"
TENSORS = DATA / "tensors"
EDGE_PT = TENSORS / "edge" / "pt" / "target" / "dump_tensor_data"
MIX = DATA / "tensor_mix"


def edge_pt(case: str) -> Path:
    return EDGE_PT / f"Torch.{case}.0.forward.input.0.pt"


# ---------------------------------------------------------------------------------------------------------
# .pt files built by hand (no torch): a protocol-2 pickle like torch.save's, in a zip


def _g(module: str, name: str) -> bytes:
    return b"c" + f"{module}\n{name}\n".encode()


def _s(text: str) -> bytes:
    raw = text.encode()
    return b"X" + struct.pack("<I", len(raw)) + raw


def _i(n: int) -> bytes:
    return b"J" + struct.pack("<i", n)


def _t(*items: bytes) -> bytes:
    return b"(" + b"".join(items) + b"t"


def tensor_pickle(storage_cls: str, numel: int, offset: int, shape: tuple, stride: tuple) -> bytes:
    """What torch.save pickles for ``_rebuild_tensor_v2(storage, offset, shape, stride, False, {})``."""
    storage = _t(_s("storage"), _g("torch", storage_cls), _s("0"), _s("cpu"), _i(numel)) + b"Q"
    args = storage + _i(offset) + _t(*map(_i, shape)) + _t(*map(_i, stride)) + b"\x89"
    hooks = _g("collections", "OrderedDict") + b")R"
    return b"\x80\x02" + _g("torch._utils", "_rebuild_tensor_v2") + b"(" + args + hooks + b"tR."


def write_pt(path: Path, pickle_bytes: bytes, storage: bytes, compression: int = zipfile.ZIP_STORED) -> Path:
    with zipfile.ZipFile(path, "w", compression) as zf:
        zf.writestr("t/data.pkl", pickle_bytes)
        zf.writestr("t/byteorder", "little")
        zf.writestr("t/data/0", storage)
        zf.writestr("t/version", "3\n")
    return path


# ---------------------------------------------------------------------------------------------------------
# resolve_data_file


@pytest.fixture
def no_open(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if anything opens a file."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"a file was opened: {args[:1]}")

    for target, name in ((builtins, "open"), (io, "open"), (os, "open")):
        monkeypatch.setattr(target, name, refuse)


@pytest.fixture
def tensor_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "dump" / "dump_tensor_data"
    folder.mkdir(parents=True)
    np.save(folder / "ok.npy", np.arange(3.0))
    secret = tmp_path / "secret.npy"
    np.save(secret, np.arange(2.0))
    return folder


def test_resolve_plain_name(tensor_dir: Path) -> None:
    assert resolve_data_file(tensor_dir, "ok.npy") == (tensor_dir / "ok.npy").resolve()


@pytest.mark.parametrize(
    "name", ["../../x.npy", "../secret.npy", "a/../../secret.npy", "..\\secret.npy", ".."]
)
def test_resolve_refuses_dotdot(tensor_dir: Path, no_open: None, name: str) -> None:
    with pytest.raises(UnsafePathError, match=r"\.\."):
        resolve_data_file(tensor_dir, name)


def test_resolve_refuses_absolute(tensor_dir: Path, no_open: None) -> None:
    for name in ("/etc/passwd", str(tensor_dir / "ok.npy"), "C:\\x.npy", "\\\\server\\share\\x.npy"):
        with pytest.raises(UnsafePathError, match="absolute"):
            resolve_data_file(tensor_dir, name)


@pytest.mark.parametrize("name", ["", ".", "a\x00b.npy"])
def test_resolve_refuses_degenerate(tensor_dir: Path, no_open: None, name: str) -> None:
    with pytest.raises(UnsafePathError):
        resolve_data_file(tensor_dir, name)


def test_resolve_refuses_symlinked_file_outside(tensor_dir: Path, no_open: None) -> None:
    (tensor_dir / "link.npy").symlink_to(tensor_dir.parents[1] / "secret.npy")
    with pytest.raises(UnsafePathError, match="outside"):
        resolve_data_file(tensor_dir, "link.npy")


def test_resolve_refuses_symlinked_folder_outside(tensor_dir: Path, no_open: None) -> None:
    (tensor_dir / "sub").symlink_to(tensor_dir.parents[1])
    with pytest.raises(UnsafePathError, match="outside"):
        resolve_data_file(tensor_dir, "sub/secret.npy")


def test_resolve_accepts_symlinks_that_stay_inside(tensor_dir: Path, tmp_path: Path) -> None:
    (tensor_dir / "alias.npy").symlink_to(tensor_dir / "ok.npy")
    assert resolve_data_file(tensor_dir, "alias.npy") == (tensor_dir / "ok.npy").resolve()
    linked_dump = tmp_path / "linked_dump"
    linked_dump.symlink_to(tensor_dir.parent)  # the dump folder itself may be reached through a link
    assert resolve_data_file(linked_dump / tensor_dir.name, "ok.npy") == (tensor_dir / "ok.npy").resolve()


def test_resolve_s_shortcut_gives_the_general_rule_s_path(
    tensor_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Plain names take a shortcut (no path parsing or resolving); it answers as the general rule does."""
    import msprobe_dask.dump.tensor_file as tensor_file

    (tensor_dir / "alias.npy").symlink_to(tensor_dir / "ok.npy")
    linked_dump = tmp_path / "linked_dump"
    linked_dump.symlink_to(tensor_dir.parent)
    cases = [(tensor_dir, name) for name in ("ok.npy", "missing.npy", "alias.npy", "sub/a.npy", "a b.npy")]
    cases.append((linked_dump / tensor_dir.name, "ok.npy"))
    shortcut = [resolve_data_file(folder, name) for folder, name in cases]
    assert tensor_file._plain_file(tensor_dir, "ok.npy") == tensor_dir.resolve() / "ok.npy"
    assert tensor_file._plain_file(tensor_dir, "alias.npy") is None  # a symlink: the general rule
    monkeypatch.setattr(tensor_file, "_plain_file", lambda *_: None)
    assert shortcut == [resolve_data_file(folder, name) for folder, name in cases]


def test_resolve_refuses_a_tensor_folder_linked_out_of_the_dump(tensor_dir: Path, tmp_path: Path) -> None:
    dump = tmp_path / "other_dump"
    dump.mkdir()
    (dump / "dump_tensor_data").symlink_to(tensor_dir)
    with pytest.raises(UnsafePathError, match="outside"):
        resolve_data_file(dump / "dump_tensor_data", "ok.npy")


# ---------------------------------------------------------------------------------------------------------
# .npy


def test_npy_real_mindspore_files_match_np_load() -> None:
    folder = DATA / "ms_vs_pt_tensor" / "target" / "dump_tensor_data"
    files = sorted(folder.glob("*.npy"))
    assert len(files) > 100
    for path in files:
        handle = open_tensor(path)
        assert handle.kind == "npy"
        expected = np.load(path, allow_pickle=False)
        assert handle.shape == expected.shape and handle.dtype == expected.dtype
        np.testing.assert_array_equal(read_array(handle), expected)


@pytest.mark.parametrize("order", ["C", "F"])
def test_npy_layouts(tmp_path: Path, order: str) -> None:
    values = np.asarray(np.arange(24, dtype=">f8").reshape(2, 3, 4), order=order)
    np.save(tmp_path / "x.npy", values)
    handle = open_tensor(tmp_path / "x.npy")
    assert handle.is_contiguous == (order == "C")
    np.testing.assert_array_equal(read_array(handle), values)
    assert read_array(handle).dtype == np.dtype(">f8")
    np.testing.assert_array_equal(read_flat(handle, 5, 17), values.reshape(-1)[5:17])


@pytest.mark.parametrize(
    "header",
    [
        "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }",
        "{'descr': '>f8', 'fortran_order': True, 'shape': (2, 3, 4), }",
        "{'descr': '|V2', 'fortran_order': False, 'shape': (7,), }",
        "{'descr': '<f2', 'fortran_order': False, 'shape': (), }",
        "{'descr': '|b1', 'fortran_order': False, 'shape': (0, 10), }",
        "{'shape': (3, 4), 'descr': '<f4', 'fortran_order': False}",  # (another order: numpy's parser)
        "{'descr': '<f4', 'fortran_order': False, 'shape': (5), }",  # (not a tuple: numpy's error)
        "{'descr': '<q9', 'fortran_order': False, 'shape': (3,), }",  # (no dtype: numpy's error)
        "{'descr': '<f4', 'fortran_order': False, 'shape': (03,), }",  # (not a Python literal)
    ],
)
@pytest.mark.parametrize("version", [1, 2, 3])
def test_npy_headers_read_as_numpy_reads_them(tmp_path: Path, header: str, version: int) -> None:
    """The header regular expression gives numpy's parser's shape, order and dtype, or leaves the header
    to it (whose error is then the line)."""
    text = (header + " " * 40 + "\n").encode()
    size = struct.pack("<H" if version == 1 else "<I", len(text))
    path = tmp_path / "x.npy"
    path.write_bytes(b"\x93NUMPY" + bytes([version, 0]) + size + text + bytes(4096))
    try:
        with open(path, "rb") as f:
            version_read = np.lib.format.read_magic(f)
            read = (
                np.lib.format.read_array_header_1_0
                if version_read == (1, 0)
                else np.lib.format.read_array_header_2_0
            )
            shape, fortran, dtype = read(f)
    except Exception:  # noqa: BLE001 - numpy refuses it: so do we, in one line
        with pytest.raises(TensorFileError, match="bad .npy header"):
            open_tensor(path)
        return
    handle = open_tensor(path)
    assert (handle.shape, handle.dtype, handle.offset) == (shape, dtype, 12 - (version == 1) * 2 + len(text))
    assert handle.is_contiguous == (not fortran or len([n for n in shape if n > 1]) <= 1)


def test_mapped_runs_of_1_mb_or_more(tmp_path: Path) -> None:
    """A run of 1 MB or more of a one-run file is memory-mapped (at any element, the map starting on a
    page); less, or a file cut before it is mapped, is not (None, or a TensorFileError)."""
    values = np.arange(3 << 18, dtype=np.float64)
    np.save(tmp_path / "big.npy", values)
    handle = open_tensor(tmp_path / "big.npy")
    for first, count in ((0, handle.size), (12345, 1 << 17), (handle.size - (1 << 17), 1 << 17)):
        run = mapped_run(handle, first, count)
        assert run is not None and run.base is not None
        np.testing.assert_array_equal(run.view(np.float64), values[first : first + count])
    assert mapped_run(handle, 0, (1 << 17) - 1) is None
    os.truncate(tmp_path / "big.npy", 1 << 20)
    with pytest.raises(TensorFileError, match="truncated: expected"):
        mapped_run(handle, 0, handle.size)
    assert str(cut_error(handle)).endswith(
        f"truncated: expected {handle.nbytes} bytes at byte 128, found {(1 << 20) - 128}"
    )


def test_npy_empty_and_0d(tmp_path: Path) -> None:
    np.save(tmp_path / "e.npy", np.ones((0, 3), np.float32))
    np.save(tmp_path / "s.npy", np.float32(2.5))
    assert read_array(open_tensor(tmp_path / "e.npy")).shape == (0, 3)
    scalar = read_array(open_tensor(tmp_path / "s.npy"))
    assert scalar.shape == () and scalar == np.float32(2.5)


def test_npy_object_array_refused(tmp_path: Path) -> None:
    np.save(tmp_path / "o.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(TensorFileError, match="pickle"):
        open_tensor(tmp_path / "o.npy")


def test_truncated_npy(tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", np.arange(100, dtype=np.float32))
    raw = (tmp_path / "x.npy").read_bytes()
    (tmp_path / "x.npy").write_bytes(raw[:-8])
    with pytest.raises(TensorFileError, match="truncated .npy") as info:
        open_tensor(tmp_path / "x.npy")
    assert "\n" not in str(info.value) and str(tmp_path / "x.npy") in str(info.value)
    (tmp_path / "x.npy").write_bytes(raw[:40])  # cut inside the header
    with pytest.raises(TensorFileError, match="npy"):
        open_tensor(tmp_path / "x.npy")


# ---------------------------------------------------------------------------------------------------------
# .pt


def _leaves(node: object):
    if isinstance(node, dict):
        if isinstance(node.get("type"), str):
            yield node
        else:
            for value in node.values():
                yield from _leaves(value)
    elif isinstance(node, list):
        for value in node:
            yield from _leaves(value)


@pytest.mark.parametrize("side", ["target", "golden"])
def test_pt_real_files_agree_with_dump_json(side: str) -> None:
    """Every tensor of a real PyTorch dump (float32, bfloat16, int64, bool) has the shape and max/min the
    dumper recorded (computed by torch in the tensor's own dtype)."""
    root = MIX / side
    dtypes = set()
    for leaf in _leaves(json.loads((root / "dump.json").read_text())["data"]):
        if "data_name" not in leaf:
            continue
        handle = open_tensor(root / "dump_tensor_data" / leaf["data_name"])
        array = read_array(handle)
        dtypes.add(str(array.dtype))
        assert list(array.shape) == leaf["shape"]
        values = (array.astype(np.float32) if array.dtype.kind == "V" else array).astype(np.float64)
        for key, reduce in (("Max", np.max), ("Min", np.min)):
            if leaf[key] is not None and values.size:
                expected, got = float(leaf[key]), float(reduce(values))
                assert got == expected or (math.isnan(got) and math.isnan(expected)), leaf["data_name"]
    assert {"float32", "int64", "bool"} | ({"bfloat16"} if side == "target" else set()) <= dtypes


def test_pt_bfloat16_and_float8_dtypes() -> None:
    assert open_tensor(edge_pt("bf16")).dtype == np.dtype(ml_dtypes.bfloat16)
    handle = open_tensor(edge_pt("float8"))
    assert handle.dtype == np.dtype(ml_dtypes.float8_e4m3fn)
    np.testing.assert_array_equal(read_array(handle).astype(np.float32), [1.0, 2.0, -0.5, 4.0])


def test_pt_non_contiguous_and_storage_offset() -> None:
    handle = open_tensor(edge_pt("noncontig"))  # arange(12).reshape(3, 4).t()
    assert handle.shape == (4, 3) and handle.strides == (1, 4) and not handle.is_contiguous
    expected = np.arange(12.0, dtype=np.float32).reshape(3, 4).T
    np.testing.assert_array_equal(read_array(handle), expected)
    np.testing.assert_array_equal(read_flat(handle, 2, 9), expected.reshape(-1)[2:9])
    offset = open_tensor(edge_pt("storage_offset"))  # arange(20)[5:15]
    np.testing.assert_array_equal(read_array(offset), np.arange(5.0, 15.0, dtype=np.float32))


def test_pt_parameter_0d_and_empty() -> None:
    np.testing.assert_array_equal(read_array(open_tensor(edge_pt("parameter"))), [1.0, 2.0, 3.0])
    scalar = read_array(open_tensor(edge_pt("zerod_f32")))
    assert scalar.shape == () and float(scalar) == 3.5
    assert read_array(open_tensor(edge_pt("empty_npu"))).shape == (0, 3)


def test_pt_hand_built_strided_compressed(tmp_path: Path) -> None:
    storage = np.arange(12, dtype=np.float32).tobytes()
    pkl = tensor_pickle("FloatStorage", 12, 1, (3, 2), (1, 3))
    expected = np.lib.stride_tricks.as_strided(np.arange(12, dtype=np.float32)[1:], (3, 2), (4, 12))
    for compression in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        handle = open_tensor(write_pt(tmp_path / f"t{compression}.pt", pkl, storage, compression))
        assert (handle.zip_member is None) == (compression == zipfile.ZIP_STORED)
        np.testing.assert_array_equal(read_array(handle), expected)
        np.testing.assert_array_equal(_chunk_by_chunk(handle, 4), expected.reshape(-1))


@pytest.mark.parametrize(
    ("path", "global_name"),
    [(TENSORS / "evil_os_system.pt", "os.system"), (TENSORS / "evil_eval.pt", "builtins.eval")],
)
def test_pt_forbidden_global_fixtures(path: Path, global_name: str) -> None:
    with pytest.raises(TensorFileError, match=f"pickle names forbidden global {global_name}$"):
        open_tensor(path)


@pytest.mark.parametrize("module", ["os", "posix", "subprocess"])
def test_pt_forbidden_global_is_not_executed(tmp_path: Path, module: str) -> None:
    marker = tmp_path / "pwned"
    name = "getoutput" if module == "subprocess" else "system"
    evil = b"\x80\x02" + _g(module, name) + _t(_s(f"touch {marker}")) + b"R."
    path = write_pt(tmp_path / "evil.pt", evil, b"\x00" * 4)
    with pytest.raises(TensorFileError, match=f"forbidden global {module}.{name}"):
        open_tensor(path)
    assert not marker.exists()


def test_pt_forbidden_global_inside_a_tensor_pickle(tmp_path: Path) -> None:
    pkl = tensor_pickle("FloatStorage", 1, 0, (1,), (1,)).replace(
        _g("collections", "OrderedDict"), _g("builtins", "eval")
    )
    with pytest.raises(TensorFileError, match="forbidden global builtins.eval"):
        open_tensor(write_pt(tmp_path / "x.pt", pkl, b"\x00" * 4))


def test_truncated_pt(tmp_path: Path) -> None:
    raw = edge_pt("random").read_bytes()
    for cut in (len(raw) // 2, len(raw) - 10, 100):
        (tmp_path / "x.pt").write_bytes(raw[:cut])
        with pytest.raises(TensorFileError, match="truncated or corrupt") as info:
            open_tensor(tmp_path / "x.pt")
        assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "source",
    [
        edge_pt("random"),
        DATA / "ms_vs_pt_tensor" / "target" / "dump_tensor_data" / "Cell.head.Dense.forward.0.input.0.npy",
        DATA / "tensor_legacy" / "pt" / "target" / "dump_tensor_data" / "Torch.view.0.forward.input.0.pt",
    ],
)
def test_damaged_files_only_ever_raise_tensor_file_error(tmp_path: Path, source: Path) -> None:
    """Random byte flips and cuts: a file reads, or fails with TensorFileError; nothing else escapes."""
    rng = np.random.default_rng(11)
    raw = source.read_bytes()
    path = tmp_path / "damaged"
    outcomes = {"read": 0, "refused": 0}
    for _ in range(400):
        damaged = bytearray(raw)
        for _ in range(rng.integers(0, 4)):
            damaged[rng.integers(len(damaged))] = rng.integers(256)
        if rng.random() < 0.5:
            del damaged[rng.integers(len(damaged)) :]
        path.write_bytes(bytes(damaged))
        try:
            read_array(open_tensor(path))
            outcomes["read"] += 1
        except TensorFileError:
            outcomes["refused"] += 1
    assert outcomes["refused"] > 100


def test_pt_storage_shorter_than_tensor(tmp_path: Path) -> None:
    pkl = tensor_pickle("FloatStorage", 12, 0, (3, 4), (4, 1))
    with pytest.raises(TensorFileError, match="truncated .pt"):
        open_tensor(write_pt(tmp_path / "short.pt", pkl, b"\x00" * 40))


def test_pt_expanded_view_is_read_up_to_a_bound(tmp_path: Path) -> None:
    """Strides of 0 (torch.save keeps an expanded view's): a few elements over one float are read as torch
    reads them; 2**40 of them (days of reading) are refused."""
    small = write_pt(tmp_path / "small.pt", tensor_pickle("FloatStorage", 1, 0, (3, 4), (0, 0)), b"\0\0\x80?")
    np.testing.assert_array_equal(read_array(open_tensor(small)), np.ones((3, 4), np.float32))
    huge = tensor_pickle("FloatStorage", 1, 0, (1 << 20, 1 << 20), (0, 0))
    with pytest.raises(TensorFileError, match=r"1099511627776 elements lie in 1 of data/0 \(strides of 0"):
        open_tensor(write_pt(tmp_path / "huge.pt", huge, b"\0\0\x80?"))


def test_pt_big_compressed_storage_is_refused(tmp_path: Path) -> None:
    """torch.save never compresses a storage; one of more than 8 MB (whose chunks would each decompress it
    again) is refused, a smaller one read."""
    n = (8 << 20) // 4
    small = tensor_pickle("FloatStorage", n, 0, (n,), (1,))
    path = write_pt(tmp_path / "small.pt", small, b"\0" * (4 * n), zipfile.ZIP_DEFLATED)
    assert read_array(open_tensor(path)).shape == (n,)
    big = tensor_pickle("FloatStorage", n + 1, 0, (n + 1,), (1,))
    path = write_pt(tmp_path / "big.pt", big, b"\0" * (4 * n + 4), zipfile.ZIP_DEFLATED)
    with pytest.raises(TensorFileError, match="storage t/data/0 is compressed"):
        open_tensor(path)


def test_pt_whose_zip_lies_about_sizes(tmp_path: Path) -> None:
    """The central directory says every member is 1 GiB: an error naming the file, nothing that big read."""
    raw = bytearray(edge_pt("random").read_bytes())
    at = raw.find(b"PK\x01\x02")
    while at >= 0:
        raw[at + 20 : at + 28] = (1 << 30).to_bytes(4, "little") * 2
        at = raw.find(b"PK\x01\x02", at + 4)
    (tmp_path / "x.pt").write_bytes(bytes(raw))
    with pytest.raises(TensorFileError, match="x.pt: "):
        open_tensor(tmp_path / "x.pt")


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"", "empty file"),
        (b"hello world", "neither"),
        (b"\x80\x02}q\x00.", "legacy"),
    ],
)
def test_not_a_tensor_file(tmp_path: Path, content: bytes, problem: str) -> None:
    (tmp_path / "x.pt").write_bytes(content)
    with pytest.raises(TensorFileError, match=problem):
        open_tensor(tmp_path / "x.pt")


def test_pt_holding_something_else(tmp_path: Path) -> None:
    path = write_pt(tmp_path / "d.pt", b"\x80\x02}q\x00.", b"")
    with pytest.raises(TensorFileError, match="not a single tensor"):
        open_tensor(path)


def test_permission_denied(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file this user may not read (chmod 0 does not stop root, so os.open refuses here)."""
    path = edge_pt("random")

    def refuse(*args: object, **kwargs: object) -> int:
        raise PermissionError(13, "Permission denied", str(args[0]))

    monkeypatch.setattr(os, "open", refuse)
    with pytest.raises(TensorFileError, match=f"^{path}: cannot read tensor file: Permission denied$"):
        open_tensor(path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(TensorFileError, match="cannot read"):
        open_tensor(tmp_path / "nope.pt")


# ---------------------------------------------------------------------------------------------------------
# Handles and dask


def test_handle_is_frozen() -> None:
    handle = open_tensor(edge_pt("random"))
    assert isinstance(handle, TensorHandle)
    with pytest.raises(dataclasses.FrozenInstanceError):
        handle.offset = 0  # type: ignore[misc]
    assert not hasattr(handle, "__dict__")


def _chunk_by_chunk(handle: TensorHandle, chunk_elems: int) -> np.ndarray:
    """The flat tensor read as the chunked metrics read it."""
    return np.concatenate([read_flat(handle, i, i + chunk_elems) for i in range(0, handle.size, chunk_elems)])


@pytest.mark.parametrize("case", ["random", "noncontig", "bf16", "bool", "int64"])
def test_chunk_by_chunk_matches_read_array(case: str) -> None:
    handle = open_tensor(edge_pt(case))
    flat = _chunk_by_chunk(handle, 4)
    assert flat.shape == (handle.size,) and flat.dtype == read_array(handle).dtype
    np.testing.assert_array_equal(flat, read_array(handle).reshape(-1))


def test_files_are_not_left_open_or_modified(tmp_path: Path) -> None:
    path = tmp_path / "x.pt"
    shutil.copy(edge_pt("random"), path)
    before = path.read_bytes()
    array = read_array(open_tensor(path))
    assert not array.flags.writeable
    assert path.read_bytes() == before


def test_read_into_a_buffer_gives_the_same_array(tmp_path: Path) -> None:
    """Every edge .pt and a .npy read into a reused buffer equal their plain read; a file cut short after
    its header was read is a TensorFileError."""
    np.save(tmp_path / "a.npy", np.arange(1000, dtype=np.float32).reshape(10, 100))
    np.save(tmp_path / "big.npy", np.arange(1 << 19, dtype=np.float64))
    paths = [*sorted(EDGE_PT.iterdir()), tmp_path / "a.npy", tmp_path / "big.npy"]
    buffer = np.empty(1 << 20, np.uint8)
    read = 0
    for path in paths:
        try:
            handle = open_tensor(path)
        except TensorFileError:
            continue
        plain, into = read_array(handle), read_array(handle, buffer[: handle.nbytes])
        assert into.dtype == plain.dtype and into.shape == plain.shape
        assert into.tobytes() == plain.tobytes()
        read += 1
    assert read > 20
    for name in ("a.npy", "big.npy"):
        handle = open_tensor(tmp_path / name)
        os.truncate(tmp_path / name, os.path.getsize(tmp_path / name) - 4)
        with pytest.raises(TensorFileError, match="truncated"):
            read_array(handle, buffer[: handle.nbytes])


def test_zip64_sizes_come_from_the_extra_field() -> None:
    """A member past 4 GB (or at an offset past it) has 0xFFFFFFFF in its central directory record and the
    real values, those marked only and in that order, in its zip64 extra field."""
    big, bigger, full = 5 << 30, 6 << 30, 0xFFFFFFFF
    other = struct.pack("<HH", 0x5455, 5) + b"\0" * 5  # an extended timestamp before it
    extra = other + struct.pack("<HHQQ", 0x0001, 16, big, bigger)
    assert zip64_sizes(extra, full, 100, full) == (big, 100, bigger)
    assert zip64_sizes(b"", 7, 8, 9) == (7, 8, 9)
    with pytest.raises(BadZip):
        zip64_sizes(other, full, 100, 9)
    with pytest.raises(BadZip):
        zip64_sizes(struct.pack("<HHQ", 0x0001, 8, big), full, full, 9)


ML_DTYPES_CHECK = """
import sys
from pathlib import Path
from msprobe_dask.dump.tensor_file import open_tensor, read_array
from msprobe_dask.metrics.tensor import measure_pairs
folder = Path(sys.argv[1])
imported = []
for name in ("f32", "f16", "bf16"):
    suffix = ".pt" if name == "bf16" else ".npy"
    (cells,) = measure_pairs([(folder / f"n_{name}{suffix}", folder / f"b_{name}{suffix}")])
    assert isinstance(cells.cells[0], float), cells
    imported.append("ml_dtypes" in sys.modules)
read_array(open_tensor(folder / "n_bf16.pt"))
print(*imported, "ml_dtypes" in sys.modules)
"""


def test_ml_dtypes_is_imported_only_for_an_array_of_its_dtypes(tmp_path: Path) -> None:
    """Importing ml_dtypes costs 0.5-1 s of CPU in each process: float32 / float16 pairs never need it, nor
    do bfloat16 pairs that the C pass measures from their bytes; a bfloat16 array does."""
    from msprobe_dask.metrics.one_shot import kernel_kinds

    rng = np.random.default_rng(2)
    values = rng.standard_normal((2, 64)).astype(np.float32)
    for side, row in (("n", values[0]), ("b", values[0] * np.float32(1.001))):
        np.save(tmp_path / f"{side}_f32.npy", row)
        np.save(tmp_path / f"{side}_f16.npy", row.astype(np.float16))
        bf16 = (row.view(np.uint32) >> 16).astype(np.uint16).tobytes()
        write_pt(tmp_path / f"{side}_bf16.pt", tensor_pickle("BFloat16Storage", 64, 0, (64,), (1,)), bf16)
    code = [sys.executable, "-c", ML_DTYPES_CHECK, str(tmp_path)]
    out = subprocess.run(code, capture_output=True, text=True, timeout=60)
    kernel = kernel_kinds("bfloat16", "bfloat16") is not None
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["False", "False", str(not kernel), "True"]
