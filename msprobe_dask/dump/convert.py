"""Rewrite a dump as a zarr store (``msprobe-dask convert DUMP -o STORE.zarr``), as Dask tasks.

The store mirrors the dump (see ``zarr_store``): each tensor file of a ``dump_tensor_data/`` folder becomes
a chunked, compressed zarr array of the same name; every other file (and a tensor file that cannot be
read or holds no numbers, so that the store reports it as the dump does) is copied as it is. Every folder
gets zarr group metadata, so zarr's own tools open the store.

The store is built under ``STORE.partial`` and renamed when complete: an existing ``STORE`` is never
overwritten, and a conversion that stopped half-way is resumed by running the same command again
(complete arrays and copied files are kept, anything else is written again).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from msprobe_dask.dump.tensor_dtypes import Element, element_size, holds_numbers
from msprobe_dask.dump.tensor_handle import TensorHandle
from msprobe_dask.errors import StoreError, TensorFileError

TENSOR_DIR = "dump_tensor_data"
PARTIAL_SUFFIX = ".partial"
BATCH_BYTES = 256 << 20  # tensor bytes per conversion task
_GROUP = {"zarr_format": 3, "node_type": "group", "attributes": {}}


@dataclass(frozen=True, slots=True)
class Converted:
    """What one task did: tensors written as arrays, files copied, bytes read and written."""

    arrays: int = 0
    copies: int = 0
    skipped: int = 0
    bytes_in: int = 0

    def __add__(self, other: Converted) -> Converted:
        return Converted(
            self.arrays + other.arrays,
            self.copies + other.copies,
            self.skipped + other.skipped,
            self.bytes_in + other.bytes_in,
        )


def partial_path(store: Path) -> Path:
    return store.with_name(store.name + PARTIAL_SUFFIX)


def dump_files(dump: Path) -> list[tuple[str, int]]:
    """(path relative to ``dump``, size) of every file below it, refusing what is not a regular file or
    leaves the dump (a FIFO, a device, a symlink pointing outside)."""
    root = dump.resolve()
    files = []
    for folder, dirs, names in os.walk(root):
        for name in sorted(dirs):
            if (Path(folder) / name).is_symlink():
                raise StoreError(
                    Path(folder) / name, "is a symlinked folder; convert copies only the dump itself"
                )
        dirs.sort()
        for name in sorted(names):
            path = Path(folder) / name
            real = path.resolve()
            if not real.is_relative_to(root):
                raise StoreError(path, f"resolves to {real}, outside the dump")
            info = real.stat()
            if not stat.S_ISREG(info.st_mode):
                raise StoreError(path, "is not a regular file")
            files.append((str(path.relative_to(root)), info.st_size))
    return files


def batches(files: Sequence[tuple[str, int]]) -> list[list[str]]:
    """Files grouped so that each task reads about ``BATCH_BYTES`` (a bigger file is a task alone)."""
    out: list[list[str]] = []
    current: list[str] = []
    size = 0
    for name, nbytes in files:
        if current and size + nbytes > BATCH_BYTES:
            out.append(current)
            current, size = [], 0
        current.append(name)
        size += nbytes
    if current:
        out.append(current)
    return out


def convert_files(dump: Path, partial: Path, names: list[str]) -> Converted:
    """One task: each file of ``names`` into the store being built at ``partial``."""
    done = Converted()
    for name in names:
        done = done + _convert_one(dump / name, partial / name)
    return done


def _convert_one(source: Path, target: Path) -> Converted:
    from msprobe_dask.dump import zarr_store
    from msprobe_dask.dump.tensor_file import open_tensor, read_flat

    if target.is_file() or (zarr_store.is_array(target) and zarr_store.array_header(target)[2]):
        return Converted(skipped=1)
    if source.parent.name == TENSOR_DIR:
        try:
            handle = open_tensor(source)
        except TensorFileError:
            handle = None  # copied as it is: the store reports it as the dump does
        if handle is not None and holds_numbers(handle.element):  # (strings, records...: copied too)
            element, raw = _stored_element(handle), _as_unsigned(handle)
            zarr_store.write_array(
                target, element, handle.shape, lambda start, stop: read_flat(raw, start, stop)
            )
            return Converted(arrays=1, bytes_in=source.stat().st_size)
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(target.name + PARTIAL_SUFFIX)
    shutil.copyfile(source, temporary)
    os.replace(temporary, target)
    return Converted(copies=1, bytes_in=source.stat().st_size)


def _stored_element(handle: TensorHandle) -> Element:
    """The element type an array records: a ``.pt``'s in this machine's byte order (as reading it gives)."""
    element = handle.element
    return element.newbyteorder("=") if handle.kind == "pt" and not isinstance(element, str) else element


def _as_unsigned(handle: TensorHandle) -> TensorHandle:
    """``handle`` reading the elements as unsigned integers of their size and byte order (a ``.pt``'s made
    native, as reading it does): the bytes an array stores, without making an ml_dtypes type (importing
    ml_dtypes costs 0.5-1 s of CPU in each worker)."""
    element = handle.element
    order = "=" if isinstance(element, str) else element.byteorder  # (ml_dtypes' types are native)
    return replace(handle, element=np.dtype(f"{order}u{element_size(element)}"))


def write_groups(dump: Path, partial: Path, root_attributes: dict[str, object]) -> None:
    """Zarr group metadata in every folder of the store (the root's with ``root_attributes``)."""
    for folder, dirs, _ in os.walk(dump.resolve()):
        relative = Path(folder).relative_to(dump.resolve())
        target = partial / relative
        target.mkdir(parents=True, exist_ok=True)
        attributes = root_attributes if relative == Path(".") else {}
        (target / "zarr.json").write_text(json.dumps({**_GROUP, "attributes": attributes}))
        dirs.sort()


def store_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
