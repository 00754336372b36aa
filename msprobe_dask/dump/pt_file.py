"""``.pt`` tensor files: what ``torch.save`` writes, read without torch.

A ``.pt`` is a zip holding ``<name>/data.pkl`` (a pickle that rebuilds the tensor) and ``<name>/data/<key>``
(the raw storage bytes, stored uncompressed and 64-byte aligned). The pickle is read by an unpickler that
knows only the few globals a tensor rebuild names; any other global (``os.system``, ``builtins.eval``...)
is refused before anything runs. torch is never imported. :func:`open_pt` gives the tensor's handle; the
zip's records are read by ``pt_zip.py``; the format before the zip (torch < 1.6) by ``pt_legacy.py``.
"""

from __future__ import annotations

import functools
import io
import pickle
import zipfile
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from msprobe_dask.dump.pt_zip import STORED, BadZip, Member, PtZip
from msprobe_dask.dump.tensor_dtypes import Element, as_dtype, element_of, element_size
from msprobe_dask.dump.tensor_handle import TensorHandle
from msprobe_dask.errors import TensorFileError, cannot, one_line

MAX_PICKLE_BYTES = 16 << 20  # a tensor's data.pkl is ~150 bytes; refuse pickle bombs
MAX_COMPRESSED_STORAGE_BYTES = 8 << 20
"""A storage stored compressed (never by torch.save) is read up to this size: at most 8M elements, which a
compare measures in one shot (read chunk by chunk, each chunk would decompress the member again up to it)."""
MAX_OVERLAPPING_ELEMS = 1 << 24
"""Elements a tensor may have beyond its storage's (strides of 0, as torch.save keeps an expanded view's):
16M of them are measured in seconds, a tensor of 2**40 elements over one float would take days."""


@dataclass(frozen=True, slots=True)
class _StorageType:
    """A ``torch.*Storage`` class named by the pickle; ``dtype`` None for ``UntypedStorage`` (bytes)."""

    name: str
    dtype: Element | None


@dataclass(frozen=True, slots=True)
class _TorchDtype:
    name: str
    dtype: Element


@dataclass(frozen=True, slots=True)
class _Storage:
    key: str
    dtype: Element | None
    numel: int  # elements of dtype, or bytes when dtype is None


@dataclass(frozen=True, slots=True)
class PtTensor:
    storage: _Storage
    storage_offset: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: Element


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


def _rebuild_tensor(storage: Any, storage_offset: Any, size: Any, stride: Any, *_rest: Any) -> PtTensor:
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
) -> PtTensor:
    """Stands in for ``torch._utils._rebuild_tensor_v3``: an ``UntypedStorage`` plus an explicit dtype."""
    if not isinstance(storage, _Storage) or not isinstance(dtype, _TorchDtype):
        raise ValueError("tensor rebuilt from something that is not a storage and a dtype")
    return _make_tensor(storage, storage_offset, size, stride, dtype.dtype)


def _rebuild_parameter(data: Any, *_rest: Any) -> Any:
    """Stands in for ``torch._utils._rebuild_parameter``: a Parameter is its tensor here."""
    return data


def _make_tensor(storage: _Storage, offset: Any, size: Any, stride: Any, dtype: Element) -> PtTensor:
    shape, strides = tuple(size), tuple(stride)
    numbers = (offset, *shape, *strides)
    if len(shape) != len(strides) or not all(type(n) is int and n >= 0 for n in numbers):
        raise ValueError(f"bad tensor geometry offset={offset!r} size={size!r} stride={stride!r}")
    return PtTensor(storage, offset, shape, strides, dtype)


_REBUILDERS = {
    "_rebuild_tensor": _rebuild_tensor,
    "_rebuild_tensor_v2": _rebuild_tensor,
    "_rebuild_tensor_v3": _rebuild_tensor_v3,
    "_rebuild_parameter": _rebuild_parameter,
}


@functools.lru_cache(maxsize=64)
def _allowed_global(module: str, name: str) -> Any:
    """What a tensor's pickle may name as ``module.name`` (the same object each time); None for anything
    else."""
    if module == "torch._utils" and name in _REBUILDERS:
        return _REBUILDERS[name]
    if module == "collections" and name == "OrderedDict":
        return OrderedDict
    if module == "torch" and name in _STORAGE_DTYPES:
        return _StorageType(name, element_of(_STORAGE_DTYPES[name]))
    if module in ("torch", "torch.storage") and name == "UntypedStorage":
        return _StorageType(name, None)
    if module == "torch" and name in _TORCH_DTYPES:
        return _TorchDtype(name, element_of(_TORCH_DTYPES[name]))
    return None


class TensorUnpickler(pickle.Unpickler):
    """Knows the globals a ``torch.save``d tensor names, and nothing else."""

    def __init__(self, data: bytes, path: Path) -> None:
        # (a buffered reader: the unpickler then takes its bytes in one peek, not a read call per opcode)
        super().__init__(io.BufferedReader(io.BytesIO(data)))
        self._path = path

    def find_class(self, module: str, name: str) -> Any:
        found = _allowed_global(module, name)
        if found is None:
            raise TensorFileError(self._path, f"pickle names forbidden global {module}.{name}")
        return found

    def persistent_load(self, pid: Any) -> _Storage:
        """A storage: ``('storage', type, key, location, numel)``, with a sixth item in a legacy ``.pt``
        (a view of another storage, never written since torch 0.4: refused unless None)."""
        if not (isinstance(pid, tuple) and len(pid) in (5, 6) and pid[0] == "storage"):
            raise TensorFileError(self._path, f"pickle has an unknown persistent id {pid!r:.80}")
        if len(pid) == 6 and pid[5] is not None:
            raise TensorFileError(self._path, f"a view of a storage is not supported ({pid[5]!r:.80})")
        _, storage_type, key, _location, numel = pid[:5]
        if not isinstance(storage_type, _StorageType) or not isinstance(key, str) or type(numel) is not int:
            raise TensorFileError(self._path, f"pickle has a malformed storage reference {pid!r:.80}")
        return _Storage(key, storage_type.dtype, numel)


def open_pt(path: Path, fd: int, head: bytes) -> TensorHandle:
    """The handle of the ``.pt`` at ``path``, open as ``fd``, whose first ``HEAD_BYTES`` (or fewer: the
    whole file) are ``head``."""
    try:
        archive = PtZip(fd, head)
        tensor, member, byteorder = _read_pt_pickle(path, archive)
        return _pt_handle(path, archive, tensor, member, byteorder)
    except TensorFileError:
        raise
    except OSError as exc:
        raise TensorFileError(path, cannot("read tensor file", exc)) from exc
    except Exception as exc:  # noqa: BLE001 - BadZip, or what a damaged zip makes zipfile raise
        problem = f"not a readable zip (truncated or corrupt .pt): {one_line(exc)}"
        raise TensorFileError(path, problem) from exc


def _member_bytes(path: Path, archive: PtZip, member: Member) -> bytes:
    """A small member's bytes (torch stores them uncompressed; zipfile reads any other)."""
    if member.method == STORED:
        return archive.stored_bytes(member)
    with zipfile.ZipFile(path) as zf:
        return zf.read(member.name)


def _read_pt_pickle(path: Path, archive: PtZip) -> tuple[PtTensor, Member, str]:
    names = archive.members
    pickles = [n for n in names if n.endswith("/data.pkl") and n.count("/") == 1]
    if len(pickles) != 1:
        raise TensorFileError(path, "zip has no single <name>/data.pkl: not a torch.save file")
    prefix = pickles[0][: -len("data.pkl")]
    info = names[pickles[0]]
    if info.size > MAX_PICKLE_BYTES:
        raise TensorFileError(path, f"data.pkl is {info.size} bytes, too big for a tensor")
    try:
        obj = TensorUnpickler(_member_bytes(path, archive, info), path).load()
    except TensorFileError:
        raise
    except (BadZip, zipfile.BadZipFile, EOFError, OSError) as exc:
        raise TensorFileError(path, f"truncated or corrupt .pt (data.pkl): {one_line(exc)}") from exc
    except Exception as exc:  # anything a hostile or broken pickle can make the unpickler raise
        raise TensorFileError(path, f"data.pkl is not a tensor pickle: {one_line(exc)}") from exc
    if not isinstance(obj, PtTensor):
        raise TensorFileError(path, f"the .pt holds a {type(obj).__name__}, not a single tensor")
    byteorder = "little"
    if prefix + "byteorder" in names:
        stored = _member_bytes(path, archive, names[prefix + "byteorder"])
        byteorder = stored.decode("ascii", "replace").strip()
    member = names.get(f"{prefix}data/{obj.storage.key}")
    if member is None:
        raise TensorFileError(path, f"storage data/{obj.storage.key} missing from the zip")
    return obj, member, byteorder


def _pt_handle(path: Path, archive: PtZip, t: PtTensor, member: Member, byteorder: str) -> TensorHandle:
    dtype = t.dtype
    if byteorder == "big":
        dtype = as_dtype(dtype)
        if dtype.kind not in "biufc":
            raise TensorFileError(path, f"big-endian {dtype} storage is not supported")
        dtype = dtype.newbyteorder(">")
    elif byteorder != "little":
        raise TensorFileError(path, f"unknown byteorder {byteorder!r}")
    storage_bytes = min(storage_nbytes(t.storage), member.size)
    if member.method != STORED:  # offset counts inside the decompressed member
        if member.size > MAX_COMPRESSED_STORAGE_BYTES:
            raise TensorFileError(
                path,
                f"storage {member.name} is compressed ({member.size} bytes once decompressed, it says): "
                f"torch.save stores them as they are; more than {MAX_COMPRESSED_STORAGE_BYTES} are not read",
            )
        return storage_handle(path, t, dtype, f"data/{t.storage.key}", storage_bytes, 0, member.name)
    start = archive.data_start(member)
    handle = storage_handle(path, t, dtype, f"data/{t.storage.key}", storage_bytes, start)
    if start + member.size > archive.file_size:
        raise TensorFileError(path, f"truncated .pt: storage {member.name} runs past the end of the file")
    return handle


def storage_nbytes(storage: _Storage) -> int:
    """The bytes a storage holds, as its pickle says."""
    return storage.numel * (element_size(storage.dtype) if storage.dtype is not None else 1)


def storage_handle(
    path: Path,
    t: PtTensor,
    dtype: Element,
    storage_name: str,
    storage_bytes: int,
    start: int,
    zip_member: str | None = None,
) -> TensorHandle:
    """The handle of ``t`` (of ``dtype``), whose storage ``storage_name`` holds ``storage_bytes`` bytes from
    byte ``start`` (of the file, or of the compressed ``zip_member``); TensorFileError for a tensor that
    reaches past them."""
    size = element_size(dtype)
    handle = TensorHandle(path, "pt", dtype, t.shape, start + t.storage_offset * size, t.strides, zip_member)
    needed = (t.storage_offset + handle.extent) * size if handle.size else 0
    if needed > storage_bytes:
        raise TensorFileError(
            path, f"truncated .pt: tensor needs {needed} storage bytes, {storage_name} has {storage_bytes}"
        )
    if handle.size > max(storage_bytes // size, MAX_OVERLAPPING_ELEMS):
        raise TensorFileError(
            path,
            f"the tensor's {handle.size} elements lie in {storage_bytes // size} of {storage_name} "
            f"(strides of 0: an expanded view?); more than {MAX_OVERLAPPING_ELEMS} are not read",
        )
    return handle
