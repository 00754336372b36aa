"""A converted dump (zarr store) named by an fsspec URL (``memory://``, ``s3://``, ``gs://``...): read
through a private local mirror for the length of one run.

The store's small files (dump.json, stack.json, construct.json, group and array metadata) are copied into
a temporary folder (mode 0700, removed when the run ends, also on an error or a signal), keeping the
store's folder layout, so that every dump reader works on it as on a local store. The tensors are not
copied: each array's metadata in the mirror says its URL (``zarr_store.with_url``), and its chunks are read
from there. ``file://`` URLs and plain paths are read in place (``location.dump_path``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from msprobe_dask.dump.location import url_scheme
from msprobe_dask.errors import StoreError

DUMP_ARGUMENTS = ("target_path", "golden_path")
"""The command-line arguments (``-tp``, ``-gp``) that name a dump."""


def _filesystem(url: str):  # noqa: ANN202 - fsspec's AbstractFileSystem, imported lazily
    import fsspec

    scheme = url_scheme(url)
    try:
        return fsspec.filesystem(scheme)
    except ImportError as exc:
        raise StoreError(
            url,
            f"cannot be reached: {scheme}:// needs a package that is not installed ({exc}); "
            "install the remote extra: pip install 'msprobe-dask[remote]'",
        ) from None
    except ValueError as exc:
        raise StoreError(url, f"cannot be reached: {exc}") from None


def _relative(name: str, root: str) -> PurePosixPath:
    relative = PurePosixPath(name[len(root) :].lstrip("/"))
    if not name.startswith(root) or relative.is_absolute() or ".." in relative.parts:
        raise StoreError(name, f"is not inside the store {root}")
    return relative


def mirror_store(url: str, folder: Path) -> Path:
    """Copy the small files of the store at ``url`` into ``folder``; the local path standing for ``url``
    (the mirror's root, or its file when ``url`` names a file of the store, e.g. ``.../dump.json``)."""
    from msprobe_dask.dump import zarr_store  # numpy: only when a URL is given

    fs = _filesystem(url)
    root = fs._strip_protocol(url).rstrip("/")
    try:
        if fs.isfile(root):
            parent, name = url.rstrip("/").rsplit("/", 1)
            return mirror_store(parent, folder) / name
        if not fs.isdir(root):
            raise StoreError(url, "cannot be reached: no such store")
        names = sorted(fs.find(root))
        metadata = fs.cat([n for n in names if n.rsplit("/", 1)[-1] == zarr_store.METADATA])
    except OSError as exc:
        raise StoreError(url, f"cannot be reached: {exc}") from None
    if f"{root}/{zarr_store.METADATA}" not in metadata:
        raise StoreError(url, f"is not a converted dump (no {zarr_store.METADATA}; make one with convert)")
    arrays = {
        name.rsplit("/", 1)[0]
        for name, text in metadata.items()
        if json.loads(text).get("node_type") == "array"
    }
    wanted = [n for n in names if not any(n.startswith(a + "/") for a in arrays) or n in metadata]
    try:
        contents = fs.cat([n for n in wanted if n not in metadata])
    except OSError as exc:
        raise StoreError(url, f"cannot be reached: {exc}") from None
    base = url.rstrip("/")
    for name in wanted:
        relative = _relative(name, root)
        target = folder.joinpath(*relative.parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        array = str(relative.parent)
        if name in metadata and name.rsplit("/", 1)[0] in arrays:
            target.write_bytes(zarr_store.with_url(metadata[name], f"{base}/{array}"))
        else:
            target.write_bytes(metadata[name] if name in metadata else contents[name])
    return folder


@contextlib.contextmanager
def local_dumps(args: argparse.Namespace) -> Iterator[None]:
    """For the run of ``args``: each dump argument that is a URL (not ``file://``) replaced by the path
    of a local mirror, which is removed when the run ends."""
    urls = {
        name: getattr(args, name)
        for name in DUMP_ARGUMENTS
        if url_scheme(getattr(args, name, None) or "") not in (None, "file")
    }
    if not urls:
        yield
        return
    folder = Path(tempfile.mkdtemp(prefix="msprobe-dask-store-"))  # mode 0700
    try:
        for name, url in urls.items():
            setattr(args, name, str(mirror_store(url, folder / name)))
        yield
    finally:
        shutil.rmtree(folder, ignore_errors=True)
