"""Tensor files of a dump (``dump_tensor_data/*.npy`` and ``*.pt``) as lazy, header-only handles.

A handle says where the elements are (file, byte offset, dtype, shape, element strides); reading is a
separate step (into a buffer, or memory-mapped for the C pass alone: ``mapped_run``), so the coordinator
never holds a tensor and a worker reads only the chunk it needs.

``.pt`` headers are read by ``pt_file.py`` (a restricted unpickler, without torch; ``pt_legacy.py`` for
the format before the zip); the handle itself is ``tensor_handle.py``'s.
"""

from __future__ import annotations

import functools
import mmap
import os
import re
import stat
import struct
import warnings
import zipfile
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

import numpy as np

from msprobe_dask.dump import zarr_store
from msprobe_dask.dump.confine import check_regular
from msprobe_dask.dump.file_bytes import read_into
from msprobe_dask.dump.pt_file import open_pt
from msprobe_dask.dump.pt_legacy import open_legacy_pt
from msprobe_dask.dump.pt_zip import HEAD_BYTES, ZIP_MAGIC
from msprobe_dask.dump.tensor_handle import TensorHandle, c_strides
from msprobe_dask.errors import StoreError, TensorFileError, UnsafePathError, cannot, one_line

_NPY_MAGIC = b"\x93NUMPY"
_PICKLE_PROTOCOL = b"\x80"  # the opcode a pickle of protocol 2 or later starts with: a legacy .pt
_MAX_NPY_HEADER = 1 << 20
_SMALL_READ_BYTES = 1 << 20  # below this a read beats setting up a memory map


# ---------------------------------------------------------------------------------------------------------
# Where a data_name points


def resolve_data_file(tensor_dir: Path, data_name: str) -> Path:
    """The file for a dump entry's ``data_name`` inside ``tensor_dir``, refusing anything that escapes it.

    ``data_name`` comes from a dump.json, i.e. from whoever wrote the dump: ``..`` components, absolute paths
    and symlinks (of the file or of any folder on the way) that resolve outside ``tensor_dir`` are refused
    with :class:`UnsafePathError`. Only path strings and symlink targets are inspected; no file is opened.
    """
    if not isinstance(data_name, str) or not data_name or "\x00" in data_name:
        raise UnsafePathError(tensor_dir, f"invalid data_name {data_name!r}")
    plain = _plain_file(tensor_dir, data_name)
    if plain is not None:
        return plain
    posix, windows = PurePosixPath(data_name), PureWindowsPath(data_name)
    if posix.is_absolute() or windows.is_absolute() or windows.drive or windows.root:
        raise UnsafePathError(data_name, f"data_name is an absolute path, not a file inside {tensor_dir}")
    if ".." in posix.parts or ".." in windows.parts:
        raise UnsafePathError(data_name, f"data_name contains '..' and would escape {tensor_dir}")
    base = Path(tensor_dir).parent.resolve() / Path(tensor_dir).name  # the folder itself may not lead out
    try:
        target = (base / data_name).resolve()
    except RuntimeError:  # a symlink loop, which leads nowhere: reading it says so
        return base / data_name
    if not target.is_relative_to(base) or target == base:
        raise UnsafePathError(base / data_name, f"resolves to {target}, outside {base} (symlink?)")
    return target


def _plain_file(tensor_dir: Path, data_name: str) -> Path | None:
    """``resolve_data_file``'s answer without its path parsing and resolving, for the usual case (a few
    microseconds instead of ~0.4 ms, for each of thousands of tensors): a plain file name (no separator,
    drive or ``..``) that is no symlink, in a folder reached without symlinks, is that folder's file.
    None for anything else (the general rule decides)."""
    if data_name in (".", "..") or any(c in data_name for c in "/\\:"):
        return None
    folder = _real_folder(str(tensor_dir))
    if folder is None:
        return None
    path = os.path.join(folder, data_name)
    try:
        if stat.S_ISLNK(os.lstat(path).st_mode):
            return None
    except FileNotFoundError:
        pass  # (the general rule gives the same path; reading it says it is missing)
    except OSError:
        return None
    return Path(path)


@functools.lru_cache(maxsize=64)
def _real_folder(tensor_dir: str) -> str | None:
    """The absolute path ``resolve_data_file`` measures against, if resolving it changes nothing (no
    symlink on the way); else None."""
    base = str(Path(tensor_dir).parent.resolve() / Path(tensor_dir).name)
    return base if os.path.realpath(base) == base else None


# ---------------------------------------------------------------------------------------------------------
# Handles


def open_tensor(path: Path) -> TensorHandle:
    """Read the header of a ``.npy`` or ``.pt`` file (sniffed by content), or of a converted dump's zarr
    array (``zarr_store``), and check the data is all there.

    A file costs a ``stat``, an open and a read of its first ``HEAD_BYTES`` (a ``.npy``'s header, a
    ``.pt``'s first members; then a ``.pt``'s last bytes): a batch task opens thousands."""
    path = path if isinstance(path, Path) else Path(path)  # (Path(a Path) parses it again)
    try:
        mode = os.stat(path).st_mode
    except OSError:
        mode = 0
    if not stat.S_ISREG(mode):
        if stat.S_ISDIR(mode) and zarr_store.is_array(path):
            element, shape, _ = zarr_store.array_header(path)
            return TensorHandle(path, "zarr", element, shape, 0, c_strides(shape))
        check_regular(path, TensorFileError)  # (its line for what is no regular file: a FIFO would block)
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            head = os.pread(fd, HEAD_BYTES, 0)
            if head[:6] == _NPY_MAGIC:
                return _open_npy(path, fd, head)
            if head[:4] == ZIP_MAGIC:
                return open_pt(path, fd, head)
            if head[:1] == _PICKLE_PROTOCOL:
                return open_legacy_pt(path, fd, head)
        finally:
            os.close(fd)
    except OSError as exc:
        if zarr_store.in_store(path):
            raise StoreError(path, "the zarr store has no such array (an incomplete store?)") from None
        raise TensorFileError(path, cannot("read tensor file", exc)) from exc
    if not head:
        raise TensorFileError(path, "empty file, not a .npy or .pt tensor")
    raise TensorFileError(path, "neither a .npy file nor a torch.save .pt zip")


# ---------------------------------------------------------------------------------------------------------
# .npy

_NPY_NUMBER = rb"(?:0|[1-9][0-9]*)"
_NPY_HEADER = re.compile(
    rb"\{'descr': '([<>|=]?[A-Za-z][0-9]*)', 'fortran_order': (True|False), 'shape': "
    rb"\(((?:%s, )*%s,|%s(?:, %s)+|)\), \} *\n?" % ((_NPY_NUMBER,) * 4)
)
"""A ``.npy`` header as ``np.save`` writes it (a dict's repr, padded with spaces and a newline), whose
values numpy's parser reads the same; any other header is left to that parser."""
_NPY_LENGTHS = {1: struct.Struct("<H"), 2: struct.Struct("<I"), 3: struct.Struct("<I")}
"""The header length's field after the magic and the version (major, 0), by major version."""


def _open_npy(path: Path, fd: int, head: bytes) -> TensorHandle:
    """The handle of the ``.npy`` at ``path`` (open as ``fd``), whose first bytes are ``head``."""
    parsed = _plain_npy_header(head)
    if parsed is None:
        with open(path, "rb") as f:
            parsed = _numpy_npy_header(path, f)
    shape, fortran, dtype, offset = parsed
    if dtype.hasobject:
        raise TensorFileError(path, ".npy holds Python objects (needs pickle); refused")
    if any(n < 0 for n in shape):
        raise TensorFileError(path, f"bad .npy header: negative shape {shape}")
    strides = tuple(reversed(c_strides(tuple(reversed(shape))))) if fortran else c_strides(shape)
    handle = TensorHandle(path, "npy", dtype, shape, offset, strides)
    available = os.fstat(fd).st_size - offset
    if available < handle.nbytes:
        raise TensorFileError(
            path, f"truncated .npy: header promises {handle.nbytes} data bytes, file has {max(available, 0)}"
        )
    return handle


def _plain_npy_header(head: bytes) -> tuple[tuple[int, ...], bool, np.dtype, int] | None:
    """(shape, fortran order, dtype, where the data starts) of a header that ``head`` holds whole and
    ``_NPY_HEADER`` matches; None for any other (numpy's parser decides)."""
    length = _NPY_LENGTHS.get(head[6]) if len(head) > 8 and head[7] == 0 else None
    if length is None or len(head) < 8 + length.size:
        return None
    start = 8 + length.size
    end = start + length.unpack_from(head, 8)[0]
    found = _NPY_HEADER.fullmatch(head, start, end) if end <= len(head) else None
    if found is None:
        return None
    descr, fortran, numbers = found.groups()
    try:
        dtype = np.dtype(descr.decode())
    except TypeError:
        return None
    return tuple(int(n) for n in numbers.split(b",") if n), fortran == b"True", dtype, end


def _numpy_npy_header(path: Path, f: Any) -> tuple[tuple[int, ...], bool, np.dtype, int]:
    """(shape, fortran order, dtype, where the data starts) of any ``.npy`` header, by numpy's parser."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # numpy warns about (damaged or) Python 2 headers
            version = np.lib.format.read_magic(f)
            if version == (1, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_1_0(
                    f, max_header_size=_MAX_NPY_HEADER
                )
            elif version in ((2, 0), (3, 0)):
                shape, fortran, dtype = np.lib.format.read_array_header_2_0(
                    f, max_header_size=_MAX_NPY_HEADER
                )
            else:
                raise ValueError(f"unknown .npy format version {version}")
    except Exception as exc:  # noqa: BLE001 - a damaged header can make numpy's parser raise almost anything
        raise TensorFileError(path, f"bad .npy header: {one_line(exc)}") from exc
    return tuple(int(n) for n in shape), fortran, dtype, f.tell()


# ---------------------------------------------------------------------------------------------------------
# .pt


# ---------------------------------------------------------------------------------------------------------
# Reading


def read_array(handle: TensorHandle, buffer: np.ndarray | None = None) -> np.ndarray:
    """The whole tensor as an array, read into ``buffer`` (a uint8 array, reused from one tensor to the
    next) when it holds the bytes the tensor's elements span in the file, else into a fresh array.

    ``.pt`` data comes back in native byte order (as ``torch.load`` gives it); ``.npy`` as stored.
    """
    if handle.size == 0:
        return np.empty(handle.shape, handle.dtype)
    raw = read_bytes(handle, buffer) if buffer is not None else None
    if raw is not None:
        return _typed(handle, raw)
    storage = _read_run(handle, 0, handle.extent, buffer)
    if handle.is_contiguous:
        array = storage.reshape(handle.shape)
    else:
        byte_strides = tuple(s * handle.dtype.itemsize for s in handle.strides)
        array = np.lib.stride_tricks.as_strided(storage, handle.shape, byte_strides, writeable=False)
    return _native(handle, array)


def read_flat(handle: TensorHandle, start: int, stop: int, buffer: np.ndarray | None = None) -> np.ndarray:
    """Elements ``start:stop`` of the tensor in C (row-major) order, reading only what they need (into
    ``buffer``, a uint8 array reused from one chunk to the next, where it is big enough)."""
    start, stop = max(start, 0), min(stop, handle.size)
    if stop <= start:
        return np.empty(0, handle.dtype)
    if handle.is_contiguous:
        return _native(handle, _read_run(handle, start, stop - start, buffer))
    index = np.unravel_index(np.arange(start, stop, dtype=np.int64), handle.shape)
    elems = sum((i * s for i, s in zip(index, handle.strides)), np.zeros(stop - start, np.int64))
    lo, hi = int(elems.min()), int(elems.max())
    return _native(handle, _read_run(handle, lo, hi - lo + 1, buffer)[elems - lo])


def _read_run(handle: TensorHandle, first: int, count: int, buffer: np.ndarray | None = None) -> np.ndarray:
    """``count`` consecutive items starting ``first`` items after ``handle.offset``, read into ``buffer``
    where it holds them, else into a fresh array."""
    if handle.zip_member is not None:
        return _member_run(handle, handle.zip_member, first, count)
    run = _run_bytes(handle, first, count, buffer).view(handle.dtype)
    run.flags.writeable = False
    return run


def _run_bytes(handle: TensorHandle, first: int, count: int, buffer: np.ndarray | None) -> np.ndarray:
    """``_read_run``'s bytes, for a tensor whose items are in its file itself or a converted dump's array
    (as a uint8 array: no dtype made, which for bfloat16 would import ml_dtypes)."""
    nbytes = count * handle.itemsize
    into = buffer[:nbytes] if buffer is not None and buffer.size >= nbytes else np.empty(nbytes, np.uint8)
    if handle.kind == "zarr":
        return zarr_store.read_bytes(handle.path, handle.itemsize, first, first + count, into)
    return _read_at(handle.path, handle.offset + first * handle.itemsize, into)


def _member_run(handle: TensorHandle, name: str, first: int, count: int) -> np.ndarray:
    """``_read_run`` of a tensor in the compressed zip member ``name``."""
    offset = handle.offset + first * handle.itemsize
    nbytes = count * handle.itemsize
    try:
        with zipfile.ZipFile(handle.path) as zf, zf.open(name) as member:
            member.seek(offset)
            data = member.read(nbytes)
    except Exception as exc:  # noqa: BLE001 - I/O errors, or a zip member damaged since its header was read
        raise TensorFileError(handle.path, cannot("read tensor data", exc)) from exc
    if len(data) != nbytes:
        raise _truncated(handle.path, nbytes, offset, len(data))
    return np.frombuffer(data, handle.dtype)


def _read_at(path: Path, offset: int, into: np.ndarray) -> np.ndarray:
    """``into`` (a uint8 array) filled with the file's bytes from ``offset`` (``preadv``, straight into the
    array); a file that ends before (cut since its header was read) raises ``TensorFileError``."""
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            got = read_into(fd, into.data, offset)
        finally:
            os.close(fd)
    except OSError as exc:
        raise TensorFileError(path, cannot("read tensor data", exc)) from exc
    if got < into.size:
        raise _truncated(path, into.size, offset, got)
    return into


def _truncated(path: Path, nbytes: int, offset: int, found: int) -> TensorFileError:
    return TensorFileError(path, f"truncated: expected {nbytes} bytes at byte {offset}, found {found}")


def read_bytes(handle: TensorHandle, buffer: np.ndarray) -> np.ndarray | None:
    """The tensor's bytes (C order) read into ``buffer`` (a uint8 array of at least ``handle.nbytes``
    bytes, reused from one tensor to the next: its pages are mapped once), when its elements are one run in
    the file itself (the usual ``.npy`` and ``.pt``) or a converted dump's array (decompressed); None for
    any other tensor. Its dtype is not made."""
    if handle.kind != "zarr" and (not handle.is_contiguous or handle.zip_member is not None):
        return None
    return _run_bytes(handle, 0, handle.size, buffer)


def pass_bytes(handle: TensorHandle, buffer: np.ndarray) -> np.ndarray | None:
    """``read_bytes`` for the C pass (``metrics/one_shot.kernel_pass``) alone: a file's run of
    ``_SMALL_READ_BYTES`` or more is memory-mapped instead (``mapped_run``)."""
    mapped = mapped_run(handle, 0, handle.size)
    return mapped if mapped is not None else read_bytes(handle, buffer)


def mapped_run(handle: TensorHandle, first: int, count: int) -> np.ndarray | None:
    """The bytes of elements ``first:first + count`` of a tensor that is one run in its file (the usual
    ``.npy`` and ``.pt``), memory-mapped read-only, every page at once (``MAP_POPULATE``): the file's cached
    pages become the array's, where a read copies them (1.5 GB of page-cached tensors: 0.01-0.05 s of
    system time against 0.19-0.29 s, more than the C pass's own CPU). None for another tensor or a run
    under ``_SMALL_READ_BYTES`` (read it).

    Only the C pass may read these bytes: a file cut meanwhile makes its missing pages fault (SIGBUS), which
    the pass survives (``BufferError``: ``cut_error`` says which file) and anything else would die of."""
    nbytes = count * handle.itemsize
    one_run = handle.kind != "zarr" and handle.is_contiguous and handle.zip_member is None
    if nbytes < _SMALL_READ_BYTES or not one_run:
        return None
    offset = handle.offset + first * handle.itemsize
    start = offset - offset % mmap.ALLOCATIONGRANULARITY
    try:
        with open(handle.path, "rb") as f:
            found = os.fstat(f.fileno()).st_size - offset
            if found < nbytes:
                raise _truncated(handle.path, nbytes, offset, max(found, 0))
            flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
            length = offset + nbytes - start
            mapped = mmap.mmap(f.fileno(), length, flags=flags, prot=mmap.PROT_READ, offset=start)
    except OSError as exc:
        raise TensorFileError(handle.path, cannot("read tensor data", exc)) from exc
    return np.frombuffer(mapped, np.uint8, count=nbytes, offset=offset - start)


def cut_error(*handles: TensorHandle) -> TensorFileError:
    """The error of tensors whose memory-mapped pages the C pass could not read (its ``BufferError``): the
    first file now shorter than its data, else the first file (cut and written again meanwhile)."""
    for handle in handles:
        try:
            found = os.stat(handle.path).st_size - handle.offset
        except OSError as exc:
            return TensorFileError(handle.path, cannot("read tensor data", exc))
        if found < handle.nbytes:
            return _truncated(handle.path, handle.nbytes, handle.offset, max(found, 0))
    return TensorFileError(handles[0].path, "its data changed while it was read (the file cut meanwhile)")


def _typed(handle: TensorHandle, raw: np.ndarray) -> np.ndarray:
    """``read_bytes``' bytes as the tensor (native byte order, as ``read_array``)."""
    return _native(handle, raw.view(handle.dtype).reshape(handle.shape))


def _native(handle: TensorHandle, array: np.ndarray) -> np.ndarray:
    if handle.kind == "pt" and not array.dtype.isnative:
        return array.astype(array.dtype.newbyteorder("="))
    return array


def stored_nbytes(path: Path) -> int:
    """How many bytes the tensor at ``path`` holds, from the file system only (0 when it cannot be told:
    reading the tensor will report why). A file costs one ``stat`` (thousands are sized before a run's
    tensor tasks are laid out)."""
    try:
        status = os.stat(path)
    except OSError:
        return 0
    return zarr_store.array_nbytes(path) if stat.S_ISDIR(status.st_mode) else status.st_size
