"""``msprobe-dask convert DUMP -o STORE.zarr``: a dump rewritten as a zarr store (``dump/convert.py``),
which ``compare`` and ``graph_visualize`` then take wherever they take the dump.

Each batch of files is one Dask task; a progress bar shows on a terminal. An existing STORE is refused;
an interrupted conversion (``STORE.zarr.partial``) is resumed by the same command.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from msprobe_dask.cli_args import add_command, add_run_options
from msprobe_dask.pipeline.scheduler import RunOptions, computing


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = add_command(
        subparsers,
        "convert",
        "rewrite a dump as a zarr store (tensors as compressed arrays)",
        "msprobe-dask convert run_npu -o run_npu.zarr",
        "msprobe-dask compare -tp run_npu.zarr -gp run_gpu.zarr -o out --scheduler tcp://HOST:8786",
    )
    p.add_argument("dump", metavar="DUMP", help="a dump folder (any layout: a rank, rank*/, step*/rank*/...)")
    p.add_argument(
        "-o",
        "--output",
        metavar="STORE",
        required=True,
        help="the store to create, e.g. run.zarr (never overwritten)",
    )
    add_run_options(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import dask

    from msprobe_dask.dump.convert import (
        Converted,
        batches,
        convert_files,
        dump_files,
        partial_path,
        store_bytes,
        write_groups,
    )
    from msprobe_dask.dump.layouts import open_dump
    from msprobe_dask.errors import StoreError

    dump, store = Path(args.dump), Path(args.output)
    if not dump.is_dir():
        raise StoreError(dump, "is not a dump folder")
    open_dump(dump)  # a dump of a layout we read, or one line naming the problem
    if store.exists():
        raise StoreError(store, "already exists; convert never overwrites (remove it or name another store)")
    partial = partial_path(store)
    resumed = partial.exists()
    files = dump_files(dump)
    write_groups(dump, partial, {"msprobe_dask": {"converted_from": str(dump.resolve())}})
    options = RunOptions(
        address=args.scheduler,
        workers=args.workers,
        progress=not args.quiet,
        input_bytes=sum(size for _, size in files),
    )
    with computing(options) as compute:
        done = compute([dask.delayed(convert_files)(dump, partial, names) for names in batches(files)])
    total = sum(done, Converted())
    os.replace(partial, store)
    kept = f", {total.skipped} kept from the interrupted run" if resumed else ""
    if not args.quiet:
        print(
            f"{total.arrays} tensors as zarr arrays, {total.copies} files copied{kept}: "
            f"{sum(size for _, size in files) / 1e6:.1f} MB -> {store_bytes(store) / 1e6:.1f} MB"
        )
    print(f"The zarr store is: {store}")
    return 0
