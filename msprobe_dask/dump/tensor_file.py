"""Tensor files of a dump (``dump_tensor_data/*.npy`` and ``*.pt``) as lazy, header-only handles.

A handle says where the elements are (file, byte offset, dtype, shape, element strides); reading is a
separate step that memory-maps the file, so the coordinator never holds a tensor and a worker reads only
the chunk it needs.

``.pt`` files are what ``torch.save`` writes: a zip holding ``<name>/data.pkl`` (a pickle that rebuilds the
tensor) and ``<name>/data/<key>`` (the raw storage bytes, stored uncompressed and 64-byte aligned). The
pickle is read by an unpickler that knows only the few globals a tensor rebuild names; any other global
(``os.system``, ``builtins.eval``...) is refused before anything runs. torch is never imported.
"""

from __future__ import annotations

import math
import os
import pickle
import struct
import warnings
import zipfile
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import TYPE_CHECKING, Any, Literal

import ml_dtypes
import numpy as np

from msprobe_dask.dump import zarr_store
from msprobe_dask.dump.confine import check_regular
from msprobe_dask.errors import StoreError, TensorFileError, UnsafePathError

if TYPE_CHECKING:
    import dask.array as da

DEFAULT_CHUNK_ELEMS = 1 << 20
"""Elements per dask chunk: 4-8 MB for the usual 4-8 byte dtypes."""

_NPY_MAGIC = b"\x93NUMPY"
_ZIP_MAGIC = b"PK\x03\x04"
_MAX_PICKLE_BYTES = 16 << 20  # a tensor's data.pkl is ~150 bytes; refuse pickle bombs
_MAX_NPY_HEADER = 1 << 20
_SMALL_READ_BYTES = 1 << 20  # below this np.fromfile beats setting up a memory map


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


# ---------------------------------------------------------------------------------------------------------
# Handles


@dataclass(frozen=True, slots=True)
class TensorHandle:
    """Where one tensor's elements are, read from headers only.

    Element ``i`` (a multi-index) lives at byte ``offset + itemsize * sum(i[k] * strides[k])``, counted in the
    file itself when ``zip_member`` is None (``.npy``, and ``.pt`` storages stored uncompressed, which is what
    torch writes) and otherwise inside that (compressed) zip member.
    """

    path: Path
    kind: Literal["npy", "pt", "zarr"]
    dtype: np.dtype
    shape: tuple[int, ...]
    offset: int
    strides: tuple[int, ...]  # in elements, never negative
    zip_member: str | None = None

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def is_contiguous(self) -> bool:
        """C-contiguous: the elements are one run of ``size`` items from ``offset``."""
        return self.size <= 1 or all(
            n == 1 or s == c for n, s, c in zip(self.shape, self.strides, _c_strides(self.shape))
        )

    @property
    def extent(self) -> int:
        """Elements spanned from ``offset``, from the first element to one past the last."""
        if self.size == 0:
            return 0
        return 1 + sum((n - 1) * s for n, s in zip(self.shape, self.strides))


def _c_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


def open_tensor(path: Path) -> TensorHandle:
    """Read the header of a ``.npy`` or ``.pt`` file (sniffed by content), or of a converted dump's zarr
    array (``zarr_store``), and check the data is all there."""
    path = Path(path)
    if path.is_dir() and zarr_store.is_array(path):
        dtype, shape, _ = zarr_store.array_header(path)
        return TensorHandle(path, "zarr", dtype, shape, 0, _c_strides(shape))
    check_regular(path, TensorFileError)  # a FIFO would block the read forever
    try:
        with open(path, "rb") as f:
            magic = f.read(6)
            if magic == _NPY_MAGIC:
                return _open_npy(path, f)
        if magic[:4] == _ZIP_MAGIC:
            return _open_pt(path)
    except OSError as exc:
        if zarr_store.in_store(path):
            raise StoreError(path, "the zarr store has no such array (an incomplete store?)") from None
        raise TensorFileError(path, f"cannot read tensor file: {exc.strerror or exc}") from exc
    if not magic:
        raise TensorFileError(path, "empty file, not a .npy or .pt tensor")
    if magic[:2] == b"\x80\x02" or magic[:1] == b"\x80":
        raise TensorFileError(path, "legacy (pre-zip) torch.save format is not supported")
    raise TensorFileError(path, "neither a .npy file nor a torch.save .pt zip")


# ---------------------------------------------------------------------------------------------------------
# .npy


def _open_npy(path: Path, f: Any) -> TensorHandle:
    f.seek(0)
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
        raise TensorFileError(path, f"bad .npy header: {_one_line(exc)}") from exc
    if dtype.hasobject:
        raise TensorFileError(path, ".npy holds Python objects (needs pickle); refused")
    offset = f.tell()
    shape = tuple(int(n) for n in shape)
    if any(n < 0 for n in shape):
        raise TensorFileError(path, f"bad .npy header: negative shape {shape}")
    strides = tuple(reversed(_c_strides(tuple(reversed(shape))))) if fortran else _c_strides(shape)
    handle = TensorHandle(path, "npy", dtype, shape, offset, strides)
    available = os.fstat(f.fileno()).st_size - offset
    if available < handle.nbytes:
        raise TensorFileError(
            path, f"truncated .npy: header promises {handle.nbytes} data bytes, file has {max(available, 0)}"
        )
    return handle


# ---------------------------------------------------------------------------------------------------------
# .pt


@dataclass(frozen=True, slots=True)
class _StorageType:
    """A ``torch.*Storage`` class named by the pickle; ``dtype`` None for ``UntypedStorage`` (bytes)."""

    name: str
    dtype: np.dtype | None


@dataclass(frozen=True, slots=True)
class _TorchDtype:
    name: str
    dtype: np.dtype


@dataclass(frozen=True, slots=True)
class _Storage:
    key: str
    dtype: np.dtype | None
    numel: int  # elements of dtype, or bytes when dtype is None


@dataclass(frozen=True, slots=True)
class _PtTensor:
    storage: _Storage
    storage_offset: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: np.dtype


def _np(name: str) -> np.dtype:
    return np.dtype(getattr(ml_dtypes, name)) if hasattr(ml_dtypes, name) else np.dtype(name)


_STORAGE_DTYPES: dict[str, str] = {
    "DoubleStorage": "float64",
    "FloatStorage": "float32",
    "HalfStorage": "float16",
    "BFloat16Storage": "bfloat16",
    "LongStorage": "int64",
    "IntStorage": "int32",
    "ShortStorage": "int16",
    "CharStorage": "int8",
    "ByteStorage": "uint8",
    "BoolStorage": "bool",
    "ComplexFloatStorage": "complex64",
    "ComplexDoubleStorage": "complex128",
}
_TORCH_DTYPES: dict[str, str] = {
    "float64": "float64", "double": "float64", "float32": "float32", "float": "float32",
    "float16": "float16", "half": "float16", "bfloat16": "bfloat16",
    "int64": "int64", "long": "int64", "int32": "int32", "int": "int32", "int16": "int16",
    "short": "int16", "int8": "int8", "uint8": "uint8", "uint16": "uint16", "uint32": "uint32",
    "uint64": "uint64", "bool": "bool", "complex64": "complex64", "cfloat": "complex64",
    "complex128": "complex128", "cdouble": "complex128",
    "float8_e4m3fn": "float8_e4m3fn", "float8_e5m2": "float8_e5m2", "float8_e4m3fnuz": "float8_e4m3fnuz",
    "float8_e5m2fnuz": "float8_e5m2fnuz", "float8_e8m0fnu": "float8_e8m0fnu",
}  # fmt: skip


def _rebuild_tensor(storage: Any, storage_offset: Any, size: Any, stride: Any, *_rest: Any) -> _PtTensor:
    """Stands in for ``torch._utils._rebuild_tensor`` / ``_rebuild_tensor_v2``."""
    if not isinstance(storage, _Storage) or storage.dtype is None:
        raise ValueError("tensor rebuilt from something that is not a typed storage")
    return _make_tensor(storage, storage_offset, size, stride, storage.dtype)


def _rebuild_tensor_v3(
    storage: Any,
    storage_offset: Any,
    size: Any,
    stride: Any,
    requires_grad: Any,
    hooks: Any,
    dtype: Any,
    *_rest: Any,
) -> _PtTensor:
    """Stands in for ``torch._utils._rebuild_tensor_v3``: an ``UntypedStorage`` plus an explicit dtype."""
    if not isinstance(storage, _Storage) or not isinstance(dtype, _TorchDtype):
        raise ValueError("tensor rebuilt from something that is not a storage and a dtype")
    return _make_tensor(storage, storage_offset, size, stride, dtype.dtype)


def _rebuild_parameter(data: Any, *_rest: Any) -> Any:
    """Stands in for ``torch._utils._rebuild_parameter``: a Parameter is its tensor here."""
    return data


def _make_tensor(storage: _Storage, offset: Any, size: Any, stride: Any, dtype: np.dtype) -> _PtTensor:
    shape, strides = tuple(size), tuple(stride)
    numbers = (offset, *shape, *strides)
    if len(shape) != len(strides) or not all(type(n) is int and n >= 0 for n in numbers):
        raise ValueError(f"bad tensor geometry offset={offset!r} size={size!r} stride={stride!r}")
    return _PtTensor(storage, offset, shape, strides, dtype)


_REBUILDERS = {
    "_rebuild_tensor": _rebuild_tensor,
    "_rebuild_tensor_v2": _rebuild_tensor,
    "_rebuild_tensor_v3": _rebuild_tensor_v3,
    "_rebuild_parameter": _rebuild_parameter,
}


class _TensorUnpickler(pickle.Unpickler):
    """Knows the globals a ``torch.save``d tensor names, and nothing else."""

    def __init__(self, data: bytes, path: Path) -> None:
        import io

        super().__init__(io.BytesIO(data))
        self._path = path

    def find_class(self, module: str, name: str) -> Any:
        if module == "torch._utils" and name in _REBUILDERS:
            return _REBUILDERS[name]
        if module == "collections" and name == "OrderedDict":
            return OrderedDict
        if module == "torch" and name in _STORAGE_DTYPES:
            return _StorageType(name, _np(_STORAGE_DTYPES[name]))
        if module in ("torch", "torch.storage") and name == "UntypedStorage":
            return _StorageType(name, None)
        if module == "torch" and name in _TORCH_DTYPES:
            return _TorchDtype(name, _np(_TORCH_DTYPES[name]))
        raise TensorFileError(self._path, f"pickle names forbidden global {module}.{name}")

    def persistent_load(self, pid: Any) -> _Storage:
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
            raise TensorFileError(self._path, f"pickle has an unknown persistent id {pid!r:.80}")
        _, storage_type, key, _location, numel = pid
        if not isinstance(storage_type, _StorageType) or not isinstance(key, str) or type(numel) is not int:
            raise TensorFileError(self._path, f"pickle has a malformed storage reference {pid!r:.80}")
        return _Storage(key, storage_type.dtype, numel)


def _open_pt(path: Path) -> TensorHandle:
    try:
        with zipfile.ZipFile(path) as zf:
            tensor, member, byteorder = _read_pt_pickle(path, zf)
            return _pt_handle(path, tensor, member, byteorder)
    except TensorFileError:
        raise
    except OSError as exc:
        raise TensorFileError(path, f"cannot read tensor file: {exc.strerror or exc}") from exc
    except Exception as exc:  # noqa: BLE001 - BadZipFile, or what a damaged zip makes zipfile raise
        problem = f"not a readable zip (truncated or corrupt .pt): {_one_line(exc)}"
        raise TensorFileError(path, problem) from exc


def _read_pt_pickle(path: Path, zf: zipfile.ZipFile) -> tuple[_PtTensor, zipfile.ZipInfo, str]:
    pickles = [n for n in zf.namelist() if n.endswith("/data.pkl") and n.count("/") == 1]
    if len(pickles) != 1:
        raise TensorFileError(path, "zip has no single <name>/data.pkl: not a torch.save file")
    prefix = pickles[0][: -len("data.pkl")]
    info = zf.getinfo(pickles[0])
    if info.file_size > _MAX_PICKLE_BYTES:
        raise TensorFileError(path, f"data.pkl is {info.file_size} bytes, too big for a tensor")
    try:
        obj = _TensorUnpickler(zf.read(info), path).load()
    except TensorFileError:
        raise
    except (zipfile.BadZipFile, EOFError, OSError) as exc:
        raise TensorFileError(path, f"truncated or corrupt .pt (data.pkl): {_one_line(exc)}") from exc
    except Exception as exc:  # anything a hostile or broken pickle can make the unpickler raise
        raise TensorFileError(path, f"data.pkl is not a tensor pickle: {_one_line(exc)}") from exc
    if not isinstance(obj, _PtTensor):
        raise TensorFileError(path, f"the .pt holds a {type(obj).__name__}, not a single tensor")
    byteorder = "little"
    if prefix + "byteorder" in zf.namelist():
        byteorder = zf.read(prefix + "byteorder").decode("ascii", "replace").strip()
    try:
        member = zf.getinfo(f"{prefix}data/{obj.storage.key}")
    except KeyError:
        raise TensorFileError(path, f"storage data/{obj.storage.key} missing from the zip") from None
    return obj, member, byteorder


def _pt_handle(path: Path, t: _PtTensor, member: zipfile.ZipInfo, byteorder: str) -> TensorHandle:
    dtype = t.dtype
    if byteorder == "big":
        if dtype.kind not in "biufc":
            raise TensorFileError(path, f"big-endian {dtype} storage is not supported")
        dtype = dtype.newbyteorder(">")
    elif byteorder != "little":
        raise TensorFileError(path, f"unknown byteorder {byteorder!r}")
    storage_bytes = t.storage.numel * (t.storage.dtype.itemsize if t.storage.dtype is not None else 1)
    handle = TensorHandle(path, "pt", dtype, t.shape, t.storage_offset * dtype.itemsize, t.strides)
    needed = (t.storage_offset + handle.extent) * dtype.itemsize if handle.size else 0
    if needed > min(storage_bytes, member.file_size):
        raise TensorFileError(
            path,
            f"truncated .pt: tensor needs {needed} storage bytes, data/{t.storage.key} has "
            f"{min(storage_bytes, member.file_size)}",
        )
    if member.compress_type != zipfile.ZIP_STORED:  # offset counts inside the decompressed member
        return TensorHandle(path, "pt", dtype, t.shape, handle.offset, t.strides, member.filename)
    start = _stored_member_start(path, member)
    if start + member.file_size > path.stat().st_size:
        raise TensorFileError(path, f"truncated .pt: storage {member.filename} runs past the end of the file")
    return TensorHandle(path, "pt", dtype, t.shape, start + handle.offset, t.strides)


def _stored_member_start(path: Path, member: zipfile.ZipInfo) -> int:
    """Absolute file offset of an uncompressed member's bytes (after its local header)."""
    with open(path, "rb") as f:
        f.seek(member.header_offset)
        header = f.read(30)
    if len(header) != 30 or header[:4] != _ZIP_MAGIC:
        raise TensorFileError(path, f"corrupt .pt: bad local header for {member.filename}")
    name_len, extra_len = struct.unpack("<HH", header[26:30])
    return member.header_offset + 30 + name_len + extra_len


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
    if buffer is not None and handle.is_contiguous and handle.kind != "zarr" and handle.zip_member is None:
        return _native(handle, _read_into(handle, buffer[: handle.nbytes]).reshape(handle.shape))
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
    offset = handle.offset + first * handle.dtype.itemsize
    nbytes = count * handle.dtype.itemsize
    if handle.kind == "zarr":
        return zarr_store.read_elements(handle.path, handle.dtype, first, first + count)
    try:
        if handle.zip_member is not None:
            with zipfile.ZipFile(handle.path) as zf, zf.open(handle.zip_member) as member:
                member.seek(offset)
                data = member.read(nbytes)
            run = np.frombuffer(data, handle.dtype, count=len(data) // handle.dtype.itemsize)
        elif nbytes < _SMALL_READ_BYTES:
            run = np.fromfile(handle.path, handle.dtype, count=count, offset=offset)
        else:
            run = np.memmap(handle.path, handle.dtype, mode="r", offset=offset, shape=(count,))
    except Exception as exc:  # noqa: BLE001 - I/O errors, or a zip member damaged since its header was read
        raise TensorFileError(handle.path, f"cannot read tensor data: {_one_line(exc)}") from exc
    if run.size != count:
        problem = f"truncated: expected {count} items at byte {offset}, got {run.size}"
        raise TensorFileError(handle.path, problem)
    run.flags.writeable = False
    return run


def _read_into(handle: TensorHandle, buffer: np.ndarray) -> np.ndarray:
    """The tensor's bytes read into ``buffer`` (exactly its size), as an array of its dtype."""
    try:
        with open(handle.path, "rb", buffering=0) as f:
            f.seek(handle.offset)
            got = f.readinto(buffer.data)
    except OSError as exc:
        raise TensorFileError(handle.path, f"cannot read tensor data: {exc.strerror or exc}") from exc
    if got != buffer.size:
        problem = f"truncated: expected {buffer.size} bytes at byte {handle.offset}, got {got or 0}"
        raise TensorFileError(handle.path, problem)
    return buffer.view(handle.dtype)


def _native(handle: TensorHandle, array: np.ndarray) -> np.ndarray:
    if handle.kind == "pt" and not array.dtype.isnative:
        return array.astype(array.dtype.newbyteorder("="))
    return array


@dataclass(frozen=True, slots=True)
class _FlatReader:
    """The tensor seen as a 1-D array, for ``dask.array.from_array``: only flat slices are ever asked for."""

    handle: TensorHandle

    @property
    def shape(self) -> tuple[int]:
        return (self.handle.size,)

    @property
    def dtype(self) -> np.dtype:
        return self.handle.dtype.newbyteorder("=") if self.handle.kind == "pt" else self.handle.dtype

    @property
    def ndim(self) -> int:
        return 1

    def __getitem__(self, key: Any) -> np.ndarray:
        key = key[0] if isinstance(key, tuple) else key
        if not isinstance(key, slice) or key.step not in (None, 1):
            raise TypeError(f"only contiguous flat slices are supported, got {key!r}")
        start, stop, _ = key.indices(self.handle.size)
        return read_flat(self.handle, start, stop)


def as_dask_array(handle: TensorHandle, chunk_elems: int = DEFAULT_CHUNK_ELEMS) -> da.Array:
    """The tensor flattened (C order) as a 1-D dask array of ``chunk_elems``-element chunks.

    Each chunk is one task reading only its bytes, so a worker holds one chunk, never the whole tensor;
    the reader is inlined in every chunk's task (no shared key that would draw the chunks to one worker).
    """
    import dask.array as da
    from dask.base import tokenize

    reader = _FlatReader(handle)
    stat = handle.path.stat()
    name = "tensor-" + tokenize(str(handle.path), stat.st_mtime_ns, stat.st_size, handle.offset, chunk_elems)
    return da.from_array(
        reader, chunks=(max(int(chunk_elems), 1),), name=name, meta=np.empty((0,), reader.dtype),
        asarray=True, lock=False, inline_array=True,
    )  # fmt: skip


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def stored_nbytes(path: Path) -> int:
    """How many bytes the tensor at ``path`` holds, from the file system only (0 when it cannot be told:
    reading the tensor will report why)."""
    try:
        if zarr_store.is_array(path):
            dtype, shape, _ = zarr_store.array_header(path)
            return math.prod(shape) * dtype.itemsize
        return os.path.getsize(path)
    except (OSError, StoreError):
        return 0
