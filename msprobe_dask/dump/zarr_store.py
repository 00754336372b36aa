"""Tensors as zarr arrays: the array format of a converted dump (``msprobe-dask convert``, ``convert.py``).

A converted dump (a *store*) mirrors the dump folder: every file is kept as it is (dump.json, stack.json,
construct.json...), except the tensor files of its ``dump_tensor_data/`` folders, which become zarr v3
arrays under the same names (a folder each, chunked and compressed). So every layout reader and every
dump path rule work on a store as on the dump; only ``tensor_file.open_tensor`` sees that a tensor is an
array, and reads it here.

An array holds the tensor flattened in C order, in the unsigned integer dtype of the tensor's item size
(zarr knows no bfloat16, float8 or raw void), with the tensor's own dtype and shape in its attributes.
Its attributes also say ``complete`` once every chunk is written, which is what a resumed conversion
looks at. The header (dtype, shape) is read from ``zarr.json`` alone, and the chunks of an array laid out
as ``write_array`` writes it straight from their files with blosc (``read_bytes``); zarr reads any other
array (one at a URL) and writes them all.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import struct
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from msprobe_dask.dump.fastjson import loads
from msprobe_dask.dump.file_bytes import read_into
from msprobe_dask.dump.tensor_dtypes import ML_DTYPES, Element, element_of, element_size
from msprobe_dask.errors import StoreError, TensorFileError, cannot, one_line

METADATA = "zarr.json"
ATTRIBUTE = "msprobe_dask"
URL = "url"
"""The attribute of a mirrored array's metadata naming where its chunks are (``with_url``)."""
EVERY_CHUNK = "every_chunk"
"""The attribute of an array ``write_array`` wrote: it has a file for every chunk, even one of zeros (zarr
leaves those unwritten), so a chunk file missing is a damaged store (a copy that stopped half-way), not
zeros."""
CHUNK_BYTES = 8 << 20
"""Bytes per zarr chunk (uncompressed)."""


def is_array(path: Path) -> bool:
    """A folder holding a zarr array's metadata (as a tensor file name of a store)."""
    return (path / METADATA).is_file()


def in_store(path: Path) -> bool:
    """``path`` names something inside a store's ``dump_tensor_data`` group (which has zarr metadata)."""
    return (path.parent / METADATA).is_file()


def element_name(element: Element) -> str:
    """A text that ``element_of`` turns back into ``element`` (ml_dtypes' by name, numpy's by ``str``)."""
    if isinstance(element, str):
        return element
    return element.name if element.name in ML_DTYPES else element.str


def _storage_dtype(itemsize: int) -> np.dtype:
    return np.dtype(f"u{itemsize}")


def array_header(path: Path) -> tuple[Element, tuple[int, ...], bool]:
    """(element type, shape, complete) of the tensor stored at ``path``, from its metadata file (an
    ml_dtypes type stays a name: ``tensor_dtypes``)."""
    try:
        meta = json.loads((path / METADATA).read_bytes())
        attrs = meta["attributes"][ATTRIBUTE]
        element, shape = element_of(attrs["dtype"]), tuple(int(n) for n in attrs["shape"])
        complete = bool(attrs.get("complete"))
        size = meta["shape"][0]
    except OSError as exc:
        raise StoreError(path, cannot("read the array's metadata", exc)) from None
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        raise StoreError(
            path, f"not a tensor array of a converted dump ({type(exc).__name__}: {exc})"
        ) from None
    if size != int(np.prod(shape, dtype=np.int64)):
        raise StoreError(path, f"array of {size} elements for a tensor of shape {list(shape)}")
    return element, shape, complete


def array_nbytes(path: Path) -> int:
    """The tensor bytes of the array at ``path`` by its metadata alone (its flat size times its storage
    dtype's item size), 0 for a folder that is no such array: what a compare sizes its thousands of
    arrays by before laying out their tasks, at a third of ``array_header``'s cost (reading an array
    checks it)."""
    try:
        with open(os.path.join(path, METADATA), "rb") as file:
            meta = loads(file.read())
        return math.prod(meta["shape"]) * np.dtype(meta["data_type"]).itemsize
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return 0


def with_url(metadata: bytes, url: str) -> bytes:
    """An array's metadata that says its chunks are read from ``url`` (a store mirrored by ``remote``)."""
    meta = json.loads(metadata)
    meta["attributes"][ATTRIBUTE][URL] = url
    return json.dumps(meta).encode()


def _source(path: Path, meta: dict[str, Any]) -> Any:
    """What zarr opens for the array at ``path``: the path, or the store at the URL its metadata names."""
    url = meta["attributes"][ATTRIBUTE].get(URL)
    if url is None:
        return str(path)
    from zarr.storage import FsspecStore

    return FsspecStore.from_url(url, read_only=True)


def read_bytes(path: Path, itemsize: int, start: int, stop: int, out: np.ndarray | None = None) -> np.ndarray:
    """The bytes of elements ``start:stop`` of the flat tensor (of ``itemsize``-byte elements), as a uint8
    array (``out``, of their size, when given). A chunk file that cannot be read, is cut while it is read
    or is not a chunk is a :class:`TensorFileError` naming it (that tensor's rows are errors, as for a
    damaged ``.npy``); a damaged store (metadata unreadable, a chunk file missing: a store copied in part)
    or an array zarr cannot read is a :class:`StoreError` (the run stops).

    An array as ``write_array`` lays it out (``_chunk_elems``) is read here, chunk file by chunk file, each
    decompressed straight into ``out``: zarr's own reader costs about 10 ms of CPU per array (its event
    loop, its codec pipeline), more than reading and decompressing a 1 MB tensor. Any other array (one
    read from a URL, or laid out otherwise) is read by zarr.
    """
    nbytes = (stop - start) * itemsize
    out = np.empty(nbytes, np.uint8) if out is None else out
    try:
        meta = json.loads((path / METADATA).read_bytes())
        chunk = _chunk_elems(meta, itemsize)
        if chunk is None:
            out[:] = _zarr_elements(path, meta, itemsize, start, stop)
        else:
            _read_chunks(
                path, itemsize, chunk, start, stop, out, bool(meta["attributes"][ATTRIBUTE].get(EVERY_CHUNK))
            )
    except (StoreError, TensorFileError):
        raise
    except Exception as exc:  # noqa: BLE001 - a corrupt chunk makes the codecs raise almost anything
        raise StoreError(path, f"corrupt zarr array (elements {start}:{stop}): {one_line(exc)}") from None
    return out


def _zarr_elements(path: Path, meta: dict[str, Any], itemsize: int, start: int, stop: int) -> np.ndarray:
    import zarr

    raw = np.asarray(zarr.open_array(_source(path, meta), mode="r")[start:stop])
    if raw.dtype != _storage_dtype(itemsize) or raw.shape != (stop - start,):
        raise StoreError(path, f"array holds {raw.dtype}{list(raw.shape)}, not the tensor's bytes")
    return raw.view(np.uint8)


BLOSC: dict[str, Any] = {"cname": "lz4", "clevel": 5, "shuffle": "shuffle", "blocksize": 0}
"""How ``write_array`` compresses a chunk (blosc): bytes shuffled by item size, then lz4. Each array's
metadata and each chunk's blosc header record it, so stores written with another blosc compressor (zstd
before) read as well. On the 1,865-tensor float32/float16 dump of 2.0 GB: 0.94 of the size, decompressed at
about 2.7 GB/s of one CPU, against 0.55 GB/s for zstd at level 3 (0.85 of the size) and 1.6 GB/s for lz4
on shuffled bits (0.89); a compare on the stores took 8 s of CPU, against 15 s and 10 s (4.4 s on the dump
itself)."""
_BLOSC_SHUFFLES = {"noshuffle": 0, "shuffle": 1, "bitshuffle": 2}
_BLOSC_HEADER = struct.Struct("<4xIII")
"""A blosc chunk's header (16 bytes): version, format version, flags and item size, then the bytes it
decompresses to, its block size and its own length."""
_compressed = threading.local()
"""This thread's buffer for a chunk file's bytes (``_chunk_file``), reused from one chunk to the next."""


def _array_metadata(
    size: int, chunk: int, itemsize: int, attributes: Any, blosc: dict[str, Any]
) -> dict[str, Any]:
    """The zarr v3 metadata of a flat array of ``size`` unsigned ``itemsize``-byte integers in chunks of
    ``chunk`` (files ``c/<index>``, an edge chunk stored whole), each its bytes in this machine's order
    compressed by blosc (``blosc``: its configuration beside the item size). The layout ``write_array``
    writes and ``read_bytes`` reads without zarr."""
    endian = {"configuration": {"endian": sys.byteorder}} if itemsize > 1 else {}
    return {
        "shape": [size],
        "data_type": f"uint{8 * itemsize}",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [chunk]}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": 0,
        "codecs": [{"name": "bytes", **endian}, {"name": "blosc", "configuration": blosc}],
        "attributes": attributes,
        "zarr_format": 3,
        "node_type": "array",
        "storage_transformers": [],
    }


def _chunk_elems(meta: dict[str, Any], itemsize: int) -> int | None:
    """Elements per chunk of an array laid out as ``_array_metadata`` says, whatever its blosc compressor
    (so that it is read without zarr); None for any other array, or one whose chunks are at a URL."""
    try:
        size, chunk = meta["shape"][0], meta["chunk_grid"]["configuration"]["chunk_shape"][0]
        blosc = meta["codecs"][1]["configuration"]
    except (KeyError, IndexError, TypeError):
        return None
    plain = meta == _array_metadata(size, chunk, itemsize, meta["attributes"], blosc)
    return chunk if plain and chunk > 0 and URL not in meta["attributes"][ATTRIBUTE] else None


def _blosc() -> Any:
    """numcodecs' blosc, its own threads off: dask's tasks are the parallelism, blosc's threads would
    oversubscribe the workers."""
    from numcodecs import blosc

    blosc.use_threads = False
    return blosc


def _read_chunks(
    path: Path, itemsize: int, chunk: int, start: int, stop: int, out: np.ndarray, every_chunk: bool
) -> None:
    """Elements ``start:stop`` into ``out`` from the chunk files of an array of ``chunk``-element chunks. A
    missing chunk file is a chunk of zeros, the fill value: zarr writes none for a chunk all zeros; unless
    the array has ``every_chunk`` file (``EVERY_CHUNK``): then it is a StoreError."""
    blosc = _blosc()
    for index in range(start // chunk, (stop - 1) // chunk + 1):
        first = index * chunk
        lo, hi = max(start, first), min(stop, first + chunk)
        into = out[(lo - start) * itemsize : (hi - start) * itemsize]
        data = _chunk_file(path, index)
        if data is None:
            if every_chunk:
                raise StoreError(path, f"chunk c/{index} is missing (a store copied in part?)")
            into[:] = 0
            continue
        try:
            _decompress(blosc, data, chunk * itemsize, into, (lo - first) * itemsize)
        except Exception as exc:  # noqa: BLE001 - a corrupt chunk makes the codec raise almost anything
            raise TensorFileError(path / "c" / str(index), f"corrupt zarr chunk: {one_line(exc)}") from None


def _decompress(blosc: Any, data: memoryview, nbytes: int, into: np.ndarray, skip: int) -> None:
    """``into`` filled from the blosc chunk ``data`` of ``nbytes`` bytes, from its byte ``skip``."""
    size, _, length = _BLOSC_HEADER.unpack_from(data) if len(data) >= _BLOSC_HEADER.size else (0, 0, 0)
    if size != nbytes or length != len(data):
        raise ValueError(f"not a blosc chunk of {nbytes} bytes")
    if into.size == nbytes:
        blosc.decompress(data, into)
    else:
        into[:] = np.frombuffer(blosc.decompress(data), np.uint8)[skip : skip + into.size]


def _chunk_file(path: Path, index: int) -> memoryview | None:
    """The bytes of chunk file ``c/<index>``, read into this thread's reused buffer; None when there is no
    such file. A file that cannot be read or is cut while it is read is a TensorFileError naming it.

    Never a memory map: a file cut meanwhile would make blosc's reads of its missing pages fault (SIGBUS),
    which kills the process. The kernel's copy costs about 0.1 s of CPU per GB (page-cached)."""
    name = path / "c" / str(index)
    try:
        fd = os.open(name, os.O_RDONLY)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise TensorFileError(name, cannot("read the chunk", exc)) from None
    try:
        size = os.fstat(fd).st_size
        buffer = getattr(_compressed, "buffer", None)
        if buffer is None or len(buffer) < size:
            buffer = _compressed.buffer = bytearray(size)
        view = memoryview(buffer)[:size]
        got = read_into(fd, view, 0)
    except OSError as exc:
        raise TensorFileError(name, cannot("read the chunk", exc)) from None
    finally:
        os.close(fd)
    if got < size:
        raise TensorFileError(name, f"cut while it was read: {size} bytes, found {got}")
    return view


def write_array(
    path: Path, element: Element, shape: tuple[int, ...], read: Callable[[int, int], np.ndarray]
) -> None:
    """Write a tensor as the array at ``path``, chunk by chunk (``read(start, stop)`` gives its C-order flat
    elements, or their bytes as integers of their size), then mark it complete. An array left incomplete
    (an interrupted conversion) is overwritten.

    The array's metadata and chunk files are written here, as zarr would (zarr reads them: a test), but
    without its per-array cost (about 15 ms of CPU: its event loop, a comparison of every chunk with the
    fill value).
    """
    blosc = _blosc()
    size = int(np.prod(shape, dtype=np.int64))
    itemsize = element_size(element)
    chunk = max(1, min(size, CHUNK_BYTES // itemsize))
    attrs: dict[str, Any] = {
        "dtype": element_name(element),
        "shape": list(shape),
        "complete": False,
        EVERY_CHUNK: True,
    }
    config = {"typesize": itemsize, **BLOSC}

    def metadata(complete: bool) -> None:
        meta = _array_metadata(size, chunk, itemsize, {ATTRIBUTE: {**attrs, "complete": complete}}, config)
        (path / METADATA).write_text(json.dumps(meta, indent=2))

    if path.exists():
        shutil.rmtree(path)
    (path / "c").mkdir(parents=True)
    metadata(complete=False)
    cname, shuffle = BLOSC["cname"].encode(), _BLOSC_SHUFFLES[BLOSC["shuffle"]]
    for index, start in enumerate(range(0, size, chunk)):
        data = np.ascontiguousarray(read(start, min(start + chunk, size))).reshape(-1).view(np.uint8)
        if data.size < chunk * itemsize:  # an edge chunk, stored whole: padded with the fill value
            data = np.concatenate([data, np.zeros(chunk * itemsize - data.size, np.uint8)])
        packed = blosc.compress(data, cname, BLOSC["clevel"], shuffle, typesize=itemsize)
        (path / "c" / str(index)).write_bytes(packed)
    metadata(complete=True)
