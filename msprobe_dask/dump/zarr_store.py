"""Tensors as zarr arrays: the array format of a converted dump (``msprobe-dask convert``, ``convert.py``).

A converted dump (a *store*) mirrors the dump folder: every file is kept as it is (dump.json, stack.json,
construct.json...), except the tensor files of its ``dump_tensor_data/`` folders, which become zarr v3
arrays under the same names (a folder each, chunked and compressed). So every layout reader and every
dump path rule work on a store as on the dump; only ``tensor_file.open_tensor`` sees that a tensor is an
array, and reads it here.

An array holds the tensor flattened in C order, in the unsigned integer dtype of the tensor's item size
(zarr knows no bfloat16, float8 or raw void), with the tensor's own dtype and shape in its attributes.
Its attributes also say ``complete`` once every chunk is written, which is what a resumed conversion
looks at. Reading needs zarr; the header (dtype, shape) is read from ``zarr.json`` alone.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from msprobe_dask.dump.tensor_dtypes import ML_DTYPES, named_dtype
from msprobe_dask.errors import StoreError

METADATA = "zarr.json"
ATTRIBUTE = "msprobe_dask"
URL = "url"
"""The attribute of a mirrored array's metadata naming where its chunks are (``with_url``)."""
CHUNK_BYTES = 8 << 20
"""Bytes per zarr chunk (uncompressed)."""


def is_array(path: Path) -> bool:
    """A folder holding a zarr array's metadata (as a tensor file name of a store)."""
    return (path / METADATA).is_file()


def in_store(path: Path) -> bool:
    """``path`` names something inside a store's ``dump_tensor_data`` group (which has zarr metadata)."""
    return (path.parent / METADATA).is_file()


def dtype_name(dtype: np.dtype) -> str:
    """A text that ``named_dtype`` turns back into ``dtype`` (ml_dtypes' by name, numpy's by ``str``)."""
    return dtype.name if dtype.name in ML_DTYPES else dtype.str


def _storage_dtype(dtype: np.dtype) -> np.dtype:
    return np.dtype(f"u{dtype.itemsize}")


def array_header(path: Path) -> tuple[np.dtype, tuple[int, ...], bool]:
    """(dtype, shape, complete) of the tensor stored at ``path``, from its metadata file."""
    try:
        meta = json.loads((path / METADATA).read_bytes())
        attrs = meta["attributes"][ATTRIBUTE]
        dtype, shape = named_dtype(attrs["dtype"]), tuple(int(n) for n in attrs["shape"])
        complete = bool(attrs.get("complete"))
        size = meta["shape"][0]
    except OSError as exc:
        raise StoreError(path, f"cannot read the array's metadata: {exc.strerror or exc}") from None
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        raise StoreError(
            path, f"not a tensor array of a converted dump ({type(exc).__name__}: {exc})"
        ) from None
    if size != int(np.prod(shape, dtype=np.int64)):
        raise StoreError(path, f"array of {size} elements for a tensor of shape {list(shape)}")
    return dtype, shape, complete


def with_url(metadata: bytes, url: str) -> bytes:
    """An array's metadata that says its chunks are read from ``url`` (a store mirrored by ``remote``)."""
    meta = json.loads(metadata)
    meta["attributes"][ATTRIBUTE][URL] = url
    return json.dumps(meta).encode()


def _source(path: Path) -> Any:
    """What zarr opens for the array at ``path``: the path, or the store at the URL its metadata names."""
    url = json.loads((path / METADATA).read_bytes())["attributes"][ATTRIBUTE].get(URL)
    if url is None:
        return str(path)
    from zarr.storage import FsspecStore

    return FsspecStore.from_url(url, read_only=True)


def read_elements(path: Path, dtype: np.dtype, start: int, stop: int) -> np.ndarray:
    """Elements ``start:stop`` of the flat tensor; a damaged chunk is a :class:`StoreError`."""
    import zarr

    try:
        array = zarr.open_array(_source(path), mode="r")
        raw = np.asarray(array[start:stop])
    except Exception as exc:  # noqa: BLE001 - a corrupt chunk makes the codecs raise almost anything
        text = " ".join(str(exc).split()) or type(exc).__name__
        raise StoreError(path, f"corrupt zarr array (elements {start}:{stop}): {text}") from None
    if raw.dtype != _storage_dtype(dtype) or raw.shape != (stop - start,):
        raise StoreError(path, f"array holds {raw.dtype}{list(raw.shape)}, not the tensor's bytes")
    return raw.view(dtype)


def write_array(
    path: Path, dtype: np.dtype, shape: tuple[int, ...], read: Callable[[int, int], np.ndarray]
) -> None:
    """Write a tensor as the array at ``path``, chunk by chunk (``read(start, stop)`` gives its C-order flat
    elements), then mark it complete. An array left incomplete (an interrupted conversion) is overwritten.
    """
    import zarr
    from zarr.codecs import BloscCodec

    size = int(np.prod(shape, dtype=np.int64))
    storage = _storage_dtype(dtype)
    chunk = max(1, min(size, CHUNK_BYTES // dtype.itemsize))
    attrs: dict[str, Any] = {"dtype": dtype_name(dtype), "shape": list(shape), "complete": False}
    array = zarr.create_array(
        str(path), shape=(size,), chunks=(chunk,), dtype=storage, overwrite=True,
        compressors=BloscCodec(cname="zstd", clevel=3, shuffle="shuffle", typesize=dtype.itemsize),
        attributes={ATTRIBUTE: attrs}, fill_value=0,
    )  # fmt: skip
    for start in range(0, size, chunk):
        stop = min(start + chunk, size)
        array[start:stop] = np.ascontiguousarray(read(start, stop)).reshape(-1).view(storage)
    array.attrs[ATTRIBUTE] = {**attrs, "complete": True}
