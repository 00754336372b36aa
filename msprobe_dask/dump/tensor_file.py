"""Tensor files of a dump (``dump_tensor_data/*.npy`` and ``*.pt``) as lazy, header-only handles.

A handle says where the elements are (file, byte offset, dtype, shape, element strides); reading is a
separate step that memory-maps the file, so the coordinator never holds a tensor and a worker reads only
the chunk it needs.

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
    """The whole tensor as a read-only array, memory-mapped when it is big; read into ``buffer`` (a uint8
    array of at least ``handle.nbytes`` bytes, whose pages are already mapped) instead when it is given
    and the elements are one run in the file itself (the usual ``.npy`` and ``.pt``).

    ``.pt`` data comes back in native byte order (as ``torch.load`` gives it); ``.npy`` as stored.
    """
    if handle.size == 0:
        return np.empty(handle.shape, handle.dtype)
    raw = read_bytes(handle, buffer) if buffer is not None else None
    if raw is not None:
        return typed(handle, raw)
    storage = _read_run(handle, 0, handle.extent)
    if handle.is_contiguous:
        array = storage.reshape(handle.shape)
    else:
        byte_strides = tuple(s * handle.dtype.itemsize for s in handle.strides)
        array = np.lib.stride_tricks.as_strided(storage, handle.shape, byte_strides, writeable=False)
    return _native(handle, array)


def read_flat(handle: TensorHandle, start: int, stop: int) -> np.ndarray:
    """Elements ``start:stop`` of the tensor in C (row-major) order, reading only what they need."""
    start, stop = max(start, 0), min(stop, handle.size)
    if stop <= start:
        return np.empty(0, handle.dtype)
    if handle.is_contiguous:
        return _native(handle, _read_run(handle, start, stop - start))
    index = np.unravel_index(np.arange(start, stop, dtype=np.int64), handle.shape)
    elems = sum((i * s for i, s in zip(index, handle.strides)), np.zeros(stop - start, np.int64))
    lo, hi = int(elems.min()), int(elems.max())
    return _native(handle, _read_run(handle, lo, hi - lo + 1)[elems - lo])


def _read_run(handle: TensorHandle, first: int, count: int) -> np.ndarray:
    """``count`` consecutive items starting ``first`` items after ``handle.offset``."""
    offset = handle.offset + first * handle.itemsize
    nbytes = count * handle.itemsize
    if handle.kind == "zarr":
        return zarr_store.read_bytes(handle.path, handle.itemsize, first, first + count).view(handle.dtype)
    try:
        if handle.zip_member is not None:
            with zipfile.ZipFile(handle.path) as zf, zf.open(handle.zip_member) as member:
                member.seek(offset)
                data = member.read(nbytes)
            run = np.frombuffer(data, handle.dtype, count=len(data) // handle.dtype.itemsize)
        elif nbytes < _SMALL_READ_BYTES:
            run = np.fromfile(handle.path, handle.dtype, count=count, offset=offset)
        else:
            with open(handle.path, "rb") as f:
                _check_holds(handle.path, f, offset, nbytes)
                run = np.memmap(f, handle.dtype, mode="r", offset=offset, shape=(count,))
    except TensorFileError:
        raise
    except Exception as exc:  # noqa: BLE001 - I/O errors, or a zip member damaged since its header was read
        raise TensorFileError(handle.path, cannot("read tensor data", exc)) from exc
    if run.size != count:
        raise _truncated(handle.path, nbytes, offset, run.size * handle.itemsize)
    run.flags.writeable = False
    return run


def _check_holds(path: Path, file: Any, offset: int, nbytes: int) -> None:
    """The open ``file`` holds ``nbytes`` bytes from ``offset`` (it may have been cut since its header was
    read: a memory map of it would raise, or fault, where the data is missing)."""
    found = os.fstat(file.fileno()).st_size - offset
    if found < nbytes:
        raise _truncated(path, nbytes, offset, max(found, 0))


def _truncated(path: Path, nbytes: int, offset: int, found: int) -> TensorFileError:
    return TensorFileError(path, f"truncated: expected {nbytes} bytes at byte {offset}, found {found}")


def read_bytes(handle: TensorHandle, buffer: np.ndarray) -> np.ndarray | None:
    """The tensor's bytes (C order), when its elements are one run in the file itself (the usual ``.npy``
    and ``.pt``) or a converted dump's array; None for any other tensor. Its dtype is not made (``typed``
    makes the array).

    A converted dump's array is decompressed into ``buffer`` (a uint8 array of at least ``handle.nbytes``
    bytes, whose pages are already mapped), and so are files up to ``_SMALL_READ_BYTES``; more are
    mapped read-only, every page at once
    (``MAP_POPULATE``): the file's cached pages become the array's, where a read copies them (4 GB of
    tensors: 0.6-0.9 s of system time instead of 1.0-1.5 s)."""
    if handle.kind == "zarr":
        return zarr_store.read_bytes(handle.path, handle.itemsize, 0, handle.size, buffer[: handle.nbytes])
    if not handle.is_contiguous or handle.zip_member is not None:
        return None
    if handle.nbytes < _SMALL_READ_BYTES:
        return _read_into(handle, buffer[: handle.nbytes])
    return _mapped(handle)


def _mapped(handle: TensorHandle) -> np.ndarray:
    """The bytes of a tensor that is one run in its file, memory-mapped (read-only), pages populated: a
    view of the file in the task that reads it, as numpy's ``np.load(mmap_mode="r")`` gives (the mapping
    never leaves the task: only the metrics do; no memory shared between processes)."""
    try:
        with open(handle.path, "rb") as f:
            _check_holds(handle.path, f, handle.offset, handle.nbytes)
            flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
            mapped = mmap.mmap(f.fileno(), handle.offset + handle.nbytes, flags=flags, prot=mmap.PROT_READ)
    except OSError as exc:
        raise TensorFileError(handle.path, cannot("read tensor data", exc)) from exc
    return np.frombuffer(mapped, np.uint8, count=handle.nbytes, offset=handle.offset)


def typed(handle: TensorHandle, raw: np.ndarray) -> np.ndarray:
    """``read_bytes``' bytes as the tensor (read-only in spirit; native byte order, as ``read_array``)."""
    return _native(handle, raw.view(handle.dtype).reshape(handle.shape))


def _read_into(handle: TensorHandle, buffer: np.ndarray) -> np.ndarray:
    """The tensor's bytes read into ``buffer`` (exactly its size)."""
    try:
        with open(handle.path, "rb", buffering=0) as f:
            f.seek(handle.offset)
            got = f.readinto(buffer.data)
    except OSError as exc:
        raise TensorFileError(handle.path, cannot("read tensor data", exc)) from exc
    if got != buffer.size:
        raise _truncated(handle.path, buffer.size, handle.offset, got or 0)
    return buffer


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
