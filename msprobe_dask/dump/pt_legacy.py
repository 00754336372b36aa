"""Legacy ``.pt`` files: what ``torch.save(obj, f, _use_new_zipfile_serialization=False)`` writes (the only
format before torch 1.6), read without torch.

The file is five pickles one after another, then the storages' bytes:

1. a magic number, 2. the format's version (1001), 3. the writer's system information (a dict:
   ``little_endian``, the sizes of C types), 4. the object, here one tensor, whose storages are persistent
   ids (``pt_file``'s unpickler rebuilds it), 5. the list of the storages' keys, in the order of their bytes;
   then, for each storage, its element count (8 bytes, little-endian) and its elements' bytes.

Before anything is unpickled the five pickles are walked opcode by opcode (``pickletools``, which reads
each opcode's argument from the bytes at hand and allocates no more than those), from a prefix of the file
that grows up to ``MAX_PICKLE_BYTES``: a pickle that claims more bytes than the file has is an error, not
an allocation. The handle points into the file at the storage's bytes, so a legacy tensor is read as any
other (memory-mapped, or chunk by chunk: its size does not matter).
"""

from __future__ import annotations

import io
import os
import pickletools
import struct
from pathlib import Path
from typing import Any

from msprobe_dask.dump.pt_file import (
    MAX_PICKLE_BYTES,
    PtTensor,
    TensorUnpickler,
    storage_handle,
    storage_nbytes,
)
from msprobe_dask.dump.tensor_handle import TensorHandle
from msprobe_dask.errors import TensorFileError, cannot, one_line

MAGIC_NUMBER = 0x1950A86A20F9469CFC6C
PROTOCOL_VERSION = 1001
_PICKLES = 5  # magic number, version, system information, the object, the storage keys
_COUNT = struct.Struct("<q")
_WHAT = "legacy (pre-zip) .pt"


class _Truncated(Exception):
    """The pickles run past the bytes at hand."""


def open_legacy_pt(path: Path, fd: int, head: bytes) -> TensorHandle:
    """The handle of the legacy ``.pt`` at ``path``, open as ``fd``, whose first bytes are ``head``."""
    try:
        file_size = os.fstat(fd).st_size
        pickles, end = _pickles(fd, head, file_size)
        tensor = _loaded(path, pickles)
        return _handle(path, fd, tensor, end, file_size)
    except TensorFileError as exc:
        raise TensorFileError(path, f"{_WHAT}: {exc.problem}") from exc
    except OSError as exc:
        raise TensorFileError(path, cannot("read tensor file", exc)) from exc


def _pickles(fd: int, head: bytes, file_size: int) -> tuple[list[bytes], int]:
    """The five pickles' bytes and where the last ends, from a prefix of the file grown until they fit."""
    prefix = head
    while True:
        try:
            return _split(prefix)
        except _Truncated as exc:
            if len(prefix) >= min(file_size, MAX_PICKLE_BYTES):
                if len(prefix) >= MAX_PICKLE_BYTES:
                    raise TensorFileError(None, f"its pickles run past {MAX_PICKLE_BYTES} bytes") from None
                raise TensorFileError(None, f"truncated or corrupt: {exc}") from None
            wanted = min(max(2 * len(prefix), 4096), MAX_PICKLE_BYTES, file_size)
            prefix = os.pread(fd, wanted, 0)


def _split(prefix: bytes) -> tuple[list[bytes], int]:
    """The five pickles at the start of ``prefix``, each walked to its STOP opcode; _Truncated when
    ``prefix`` ends before them, TensorFileError for bytes that are no pickle."""
    stream, pickles, start = io.BytesIO(prefix), [], 0
    for _ in range(_PICKLES):
        try:
            for _opcode, _arg, _pos in pickletools.genops(stream):
                pass
        except ValueError as exc:  # an argument or the STOP past the bytes at hand, or a bad opcode
            if stream.tell() >= len(prefix):
                raise _Truncated(one_line(exc)) from None
            raise TensorFileError(None, f"not a pickle: {one_line(exc)}") from None
        except Exception as exc:  # noqa: BLE001 - what else a damaged argument can make pickletools raise
            raise TensorFileError(None, f"not a pickle: {one_line(exc)}") from None
        pickles.append(prefix[start : stream.tell()])
        start = stream.tell()
    return pickles, start


def _loaded(path: Path, pickles: list[bytes]) -> PtTensor:
    """The five pickles unpickled (only the globals a tensor names) and checked; the tensor."""
    magic, version, system, tensor, keys = (_unpickled(path, data) for data in pickles)
    if magic != MAGIC_NUMBER:
        raise TensorFileError(None, "bad magic number: not a torch.save file")
    if version != PROTOCOL_VERSION:
        raise TensorFileError(None, f"unknown format version {version!r:.40}")
    if not isinstance(system, dict) or system.get("little_endian") is not True:
        raise TensorFileError(
            None, "written on a big-endian machine (or no system information): not supported"
        )
    if not isinstance(tensor, PtTensor):
        raise TensorFileError(None, f"holds a {type(tensor).__name__}, not a single tensor")
    if keys != [tensor.storage.key]:
        raise TensorFileError(None, f"its storage keys {keys!r:.80} are not the tensor's one storage")
    return tensor


def _unpickled(path: Path, data: bytes) -> Any:
    try:
        return TensorUnpickler(data, path).load()
    except TensorFileError as exc:
        raise TensorFileError(None, exc.problem) from exc
    except Exception as exc:  # noqa: BLE001 - anything a hostile or broken pickle can make the unpickler raise
        raise TensorFileError(None, f"a pickle that rebuilds no tensor: {one_line(exc)}") from exc


def _handle(path: Path, fd: int, tensor: PtTensor, end: int, file_size: int) -> TensorHandle:
    """The tensor's handle: its storage's element count at ``end``, checked against the pickle's, and its
    bytes after it, checked against the file's size."""
    counted = os.pread(fd, _COUNT.size, end)
    if len(counted) != _COUNT.size:
        raise TensorFileError(
            None, f"truncated: no storage after the pickles (the file has {file_size} bytes)"
        )
    (count,) = _COUNT.unpack(counted)
    storage = tensor.storage
    if count != storage.numel:
        raise TensorFileError(
            None, f"storage {storage.key} holds {count} elements, its pickle says {storage.numel}"
        )
    start, nbytes = end + _COUNT.size, storage_nbytes(storage)
    if start + nbytes > file_size:
        problem = (
            f"truncated: storage {storage.key} needs {nbytes} bytes at byte {start}, the file has {file_size}"
        )
        raise TensorFileError(None, problem)
    return storage_handle(path, tensor, tensor.dtype, f"storage {storage.key}", nbytes, start)
