"""The values a rank's plan leaves in the rank's spool folder (``spool_folder``) rather than pass
through the process that schedules the tasks (dask's processes scheduler pickles each task's result into
it and each task's inputs out of it): the parts' spans of the scan, the pairs the match finds in each
partition, the parsed rows, each partition's keys, the npu parts' stacks. Each task is its function's
(part_scan, part_keys, part_table) with its result left in a file and sent as where it is there (Spooled);
given no file name (``name`` None: the tasks' values are shared, one process) the value itself.
part_file.py leaves each table part's bytes in the same folder for the rank's file."""

from __future__ import annotations

import contextlib
import pickle
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from msprobe_dask.dump.entry_index import EntryIndex
from msprobe_dask.dump.source import DumpSource
from msprobe_dask.errors import OutputError, cannot
from msprobe_dask.pipeline.part_keys import key_part, match_partition, pairs_of_part
from msprobe_dask.pipeline.part_match import PlanCut, RankFacts
from msprobe_dask.pipeline.part_scan import PartKeys, RowPart, SideScan, parse_part, scan_side
from msprobe_dask.pipeline.part_table import split_stacks


def spool_folder(path: Path) -> Path:
    """Where the rank's table parts leave their bytes for their appends."""
    return path.with_name(f".{path.name}.parts")


@contextlib.contextmanager
def writing(path: Path) -> Iterator[None]:
    """A write to the rank's temporary files that fails (a full disk) names ``path``. The files stay until
    the run's process removes them (compare_to_files), once no task runs: a task of another worker may be
    reading its spool file meanwhile (removed under it, its FileNotFoundError could reach the run's end
    before this error: an internal error, exit 1)."""
    try:
        yield
    except OSError as exc:
        raise OutputError(path, cannot("be written", exc)) from None


@dataclass(frozen=True, slots=True)
class Spooled:
    """Bytes that wait in a file of their rank's spool folder: ``size`` bytes at ``at`` in ``file``."""

    file: Path
    at: int
    size: int

    def read(self) -> bytes:
        with open(self.file, "rb") as f:
            f.seek(self.at)
            return f.read(self.size)


def _spooled(path: Path, name: str, values: Sequence[bytes]) -> list[Spooled]:
    """``values`` left one after the other in file ``name`` of the rank of ``path``'s spool folder."""
    with writing(path):
        spool_folder(path).mkdir(exist_ok=True)
        file = spool_folder(path) / name
        spooled = []
        with open(file, "wb") as f:
            for value in values:
                spooled.append(Spooled(file, f.tell(), len(value)))
                f.write(value)
    return spooled


def spooled_scan(path: Path, name: str | None, source: DumpSource, parts: int) -> tuple[Any, ...]:
    """part_scan.scan_side(source, parts), its parts' spans left in file ``name`` of the rank of
    ``path``'s spool folder (None: kept in the value), each sent as where it is there (Spooled): dask's
    processes scheduler would pickle the side's spans (1M entries a side: 33 MB) through the process
    that schedules into each task that takes a part's spans from them (TaskGraph._groups: 11 a side),
    while the workers wait (0.7 s at 1M entries a side), and each group back out."""
    scan, *spans = scan_side(source, parts)
    if name is None:
        return (scan, *spans)
    return (scan, *_spooled(path, name, [pickle.dumps(index, pickle.HIGHEST_PROTOCOL) for index in spans]))


def _index(spans: EntryIndex | Spooled) -> EntryIndex:
    if isinstance(spans, Spooled):
        index: EntryIndex = pickle.loads(spans.read())
        return index
    return spans


def spooled_found(path: Path, name: str | None, *args: Any) -> tuple[Any, ...]:
    """part_keys.match_partition(*args): each target part's pairs found in the partition left in file
    ``name`` of the rank of ``path``'s spool folder (None: kept in the value), each sent as where it is
    there (Spooled): dask's processes scheduler would pickle them (1M entries a side: 14 partitions of
    4.7 MB) through the process that schedules into each task that takes a part's pairs from them
    (TaskGraph._groups: 11 a partition), and each group back out into the parts' tasks (105 of
    6.6 MB), while the table parts wait."""
    *found, unpaired = match_partition(*args)
    if name is None:
        return (*found, unpaired)
    return (*_spooled(path, name, found), unpaired)


def spooled_pairs(facts: RankFacts, window: range, *found: bytes | Spooled) -> PlanCut:
    """part_keys.pairs_of_part, of the pairs found in each partition (``spooled_found``)."""
    return pairs_of_part(facts, window, *(f.read() if isinstance(f, Spooled) else f for f in found))


def spooled_parse(
    path: Path, name: str | None, scan: SideScan, spans: EntryIndex | Spooled, *args: Any
) -> tuple[RowPart, PartKeys]:
    """part_scan.parse_part(*args), its rows left in file ``name`` of the rank of ``path``'s spool folder
    (None: kept in the value), where they would pass through the process that schedules on their way
    to their readers (the item of its keys, the match's key part, the export of far partners, the table
    part) and wait there from their parse to their table part: a rank of 50,050 entries a side sent
    43 MB of rows there and about 150 MB back out; a rank of 1M entries a side leaves 1.0 GB of rows in
    its spool files, uncompressed: part_scan.ROWS_ZLIB_FROM_BYTES)."""
    rows, keys = parse_part(scan, _index(spans), *args)
    if name is None:
        return rows, keys
    with writing(path):
        spool_folder(path).mkdir(exist_ok=True)
        return rows.spooled(spool_folder(path) / name), keys


def spooled_keys(path: Path, name: str | None, *args: Any) -> tuple[bytes | Path, ...]:
    """part_keys.key_part(*args): each partition's keys of the part, left in file ``name``-{partition} of
    the rank of ``path``'s spool folder (None: kept in the value), where they would pass through the
    process that schedules into the match's tasks (a rank of 50,050 entries a side: 13 MB, which the
    match then waits for)."""
    buckets = key_part(*args)
    if name is None:
        return buckets
    with writing(path):
        folder = spool_folder(path)
        folder.mkdir(exist_ok=True)
        files = tuple(folder / f"{name}-{p}" for p in range(len(buckets)))
        for file, bucket in zip(files, buckets):
            file.write_bytes(bucket)
    return files


def spooled_stacks(
    path: Path, shared: bool, after: object, scan: SideScan, *parts: EntryIndex | Spooled
) -> tuple[Path | bytes | None, ...]:
    """part_table.split_stacks: each npu part's stacks, left in a file of the rank of ``path``'s spool
    folder unless the tasks' values are ``shared`` (chunked.rank_file). ``after`` is what the task waits
    for and does not read (the rank's match facts, or None)."""
    with writing(path):
        return split_stacks(scan, None if shared else spool_folder(path), *map(_index, parts))
