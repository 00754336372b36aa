"""A rank's csv or xlsx file written by a chain of tasks: the header, each table part's bytes appended
in the reference's order (an xlsx's next sheet opened where a part's rows reach it), the complete file
made the result by its form (``part_forms.py``: the csv renamed, the xlsx's sheets stored in its zip);
the rank's summary gathered. The first-divergence analysis's nodes of each part stay out of the chain:
they come back to the process that runs the graph from the table parts' tasks (``with_nodes``), on local
worker processes through a file each (``nodes_folder``).

A table part's task leaves its bytes in a spool file of the rank's spool folder (``spooled_part``;
part_spool.py: the plan's other values left there), which its append copies into the file: the bytes go
from process to process through the file system, not through the process that schedules the tasks
(dask's processes scheduler pickles each task's result into it and each task's inputs out of it: a rank
of 50,400 entries a side, 55 MB twice)."""

from __future__ import annotations

import contextlib
import os
import pickle
import shutil
from collections.abc import Container, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from msprobe_dask.errors import OutputError, cannot
from msprobe_dask.pipeline.part_forms import CsvForm, packed
from msprobe_dask.pipeline.part_match import PlanHead
from msprobe_dask.pipeline.part_spool import spool_folder, writing
from msprobe_dask.pipeline.part_table import table_part
from msprobe_dask.summary.kinds import KindCounter
from msprobe_dask.summary.model import GroupSummary
from msprobe_dask.summary.table import merge_summaries

if TYPE_CHECKING:  # the first-divergence analysis: imported where a summary is asked for (not with -q)
    from msprobe_dask.analysis.divergence import RankNodes, Walk
    from msprobe_dask.analysis.findings import Finding
    from msprobe_dask.analysis.flow import LightNode, Node
    from msprobe_dask.analysis.quiet_rows import QuietRun
    from msprobe_dask.analysis.tolerance import Tolerance
    from msprobe_dask.summary.divergence import NodePart, WalkedPart


@dataclass(frozen=True, slots=True)
class PartWritten:
    """A part once its bytes are in the file (the bytes are not kept): what the rank's result needs.

    The chain's tasks may run again (a dask worker lost after or during its task, on a cluster): each
    append writes from the ``end`` of the file that its input says, so that a part appended in part,
    or wholly, by a first run is written once; the parts' spools stay until the rank's file is named
    (a lost worker's appends run again from the first whose result went with it). Once the rank's file
    is there under the name its run chose (free when the run began: compare never replaces a file),
    a first run of the chain's end named it: the tasks that run again only count (``_named``)."""

    path: Path
    columns: list[str]
    starts: tuple[int, ...]  # where each section of the file begins (an xlsx's sheets)
    rows: int = 0
    summary: tuple[GroupSummary, KindCounter] | None = None
    end: int = 0  # the file's size once this part is in


@dataclass(frozen=True, slots=True)
class WrittenRank:
    """One rank compared into its csv or xlsx file (``path`` None: no row to write, no file)."""

    label: str
    path: Path | None
    summary: GroupSummary | None  # when asked for
    # the divergence analysis's nodes of each part, with the summary: packed until the analysis reads
    # them part by part (as Python objects, a rank's took 5x the memory of its packed rows); those
    # walked ahead, their count alone
    node_parts: tuple[NodePart | WalkedPart, ...] | None
    ahead: Finding | Walk | None = None  # its first parts walked by a task (``walk_ahead``), or None

    @property
    def nodes(self) -> RankNodes | None:
        """The divergence analysis's nodes of the rank."""
        from msprobe_dask.summary.divergence import rank_of_parts

        return None if self.node_parts is None else rank_of_parts(self.node_parts, self.ahead)


@dataclass(frozen=True, slots=True)
class NodesFile:
    """A table part's NodePart left in a file of the rank's nodes folder (``spooled_part``): read as the
    walk reaches it (``PartNodes``), its count and whether it ``exceeds`` at hand."""

    path: Path
    count: int
    exceeds: bool

    def read(self) -> NodePart:
        try:
            with open(self.path, "rb") as f:
                part: NodePart = pickle.load(f)
        except OSError as exc:
            raise OutputError(self.path, cannot("be read", exc)) from None
        return part

    def comms(self, start: int) -> list[Node]:
        return self.read().comms(start)

    def nodes(self, receiving: Container[int]) -> Iterator[Node | LightNode | QuietRun]:
        return self.read().nodes(receiving)


@dataclass(frozen=True, slots=True)
class SpooledPart:
    """A table part (part_table.TablePart) whose bytes wait in its spool file for their append."""

    spool: Path
    sections: tuple[tuple[int, int], ...]  # (section, bytes in the spool), in the file's order
    rows: int
    summary: tuple[GroupSummary, KindCounter] | None
    nodes: NodePart | NodesFile | None  # (a NodesFile: where they wait, ``nodes_folder``)


def part_file(path: Path) -> Path:
    """Where the rank's file is written before it becomes ``path``."""
    return path.with_name(f".{path.name}.part")


def nodes_folder(path: Path) -> Path:
    """Where the rank's table parts leave their first-divergence nodes (``spooled_part``) for the process
    that runs the graph, which reads them once the rank is written (``with_nodes``)."""
    return path.with_name(f".{path.name}.nodes")


def temporaries(path: Path) -> tuple[Path, Path, Path, Path]:
    """The rank's files before ``path`` is complete: its part file, an xlsx's zip made from it, the
    spool folder, and the nodes folder."""
    return part_file(path), packed(part_file(path)), spool_folder(path), nodes_folder(path)


def remove_temporaries_of(path: Path) -> None:
    """Remove what the rank's tasks left on the way to ``path`` (a failed run)."""
    _remove(temporaries(path))


def _remove(paths: Sequence[Path]) -> None:
    for tmp in paths:
        if tmp.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            tmp.unlink(missing_ok=True)


def spooled_part(path: Path, k: int, nodes_apart: bool, *args: Any) -> SpooledPart:
    """part_table.table_part(*args), its bytes left in spool file ``k`` of the rank of ``path``; its
    nodes, where ``nodes_apart``, in file ``k`` of its nodes folder: dask's processes scheduler would
    pickle them (1-2 MB a part of 50,050 entries) into the process that schedules with the part's
    value, and out again with it into the part's append, which does not read them, while the workers
    ran beside it (S50k: 0.09 s of that process's CPU during the run, 0.045 s without them)."""
    part = table_part(*args)
    spool = spool_folder(path) / str(k)
    nodes: NodePart | NodesFile | None = part.nodes
    with writing(path):
        spool.parent.mkdir(exist_ok=True)
        with open(spool, "wb") as f:
            for _, data in part.sections:
                f.write(data)
        if part.nodes is not None and nodes_apart:
            nodes = NodesFile(nodes_folder(path) / str(k), part.nodes.count, part.nodes.exceeds)
            nodes.path.parent.mkdir(exist_ok=True)
            nodes.path.write_bytes(pickle.dumps(part.nodes, pickle.HIGHEST_PROTOCOL))
    sections = tuple((section, len(data)) for section, data in part.sections)
    return SpooledPart(spool, sections, part.rows, part.summary, nodes)


def _named(path: Path) -> bool:
    """Whether the rank's file was named by a first run of the chain's end (see PartWritten)."""
    return os.path.lexists(path)


def begin_file(form: CsvForm, path: Path, head: PlanHead) -> PartWritten:
    if _named(path):
        return PartWritten(path, head.columns, (0,))
    with writing(path), _part_file_open(path) as f:
        f.write(form.head(head.columns))
        return PartWritten(path, head.columns, (0,), end=f.tell())


def _part_file_open(path: Path) -> BinaryIO:
    """The rank's part file open to write from its start, created if need be but never truncated: a task of
    the chain run again (its dask worker lost) writes the same bytes where a first run wrote them, and the
    parts after them, whose tasks need not run again, stay (truncated, the rank's end made the file of
    their ``end``s, with zeros where they were)."""
    return open(os.open(part_file(path), os.O_RDWR | os.O_CREAT, 0o666), "r+b")


def append_part(form: CsvForm, previous: PartWritten, part: SpooledPart) -> PartWritten:
    if _named(previous.path):
        return replace(previous, rows=part.rows, summary=part.summary)
    starts = list(previous.starts)
    with writing(previous.path), _part_file_open(previous.path) as f, open(part.spool, "rb") as spool:
        f.seek(previous.end)  # (over what a first run of this task wrote; the rank's end truncates)
        for section, size in part.sections:
            while len(starts) <= section:  # the part begins a section (an xlsx's next sheet)
                f.write(form.tail)
                starts.append(f.tell())
                f.write(form.head(previous.columns))
            _copy(spool, f, size)
        end = f.tell()
    return replace(previous, starts=tuple(starts), rows=part.rows, summary=part.summary, end=end)


def _copy(source: BinaryIO, target: BinaryIO, size: int) -> None:
    """The next ``size`` bytes of ``source`` written where ``target`` is, copied by the kernel
    (``os.copy_file_range``: the bytes never pass through this process; a rank of 1M entries a side
    appends 1.3 GB) where it can, else read and written here (another system, or a file system that
    does not copy)."""
    target.flush()
    at, to, done = source.tell(), target.tell(), 0
    with contextlib.suppress(AttributeError, OSError):  # (what is left is copied below)
        while done < size:
            copied = os.copy_file_range(source.fileno(), target.fileno(), size - done, at + done, to + done)
            if not copied:
                break
            done += copied
    source.seek(at + done)
    target.seek(to + done)
    target.write(source.read(size - done))


def finish_file(form: CsvForm, label: str, head: PartWritten, *parts: PartWritten) -> WrittenRank:
    """Make the complete file the result (none when the compare has no row); the rank's summary (its
    nodes: ``with_nodes``)."""
    asked = parts[0].summary is not None
    summary = merge_summaries(label, head.columns, [p.summary for p in parts if p.summary]) if asked else None
    nodes = () if asked else None
    tmp = part_file(head.path)
    rows = sum(p.rows for p in parts)
    spools = temporaries(head.path)[:3]  # (not the nodes folder: the process that runs the graph reads it)
    if _named(head.path):
        _remove(spools)
        return WrittenRank(label, head.path, summary, nodes)
    if not rows:
        _remove(spools)
        return WrittenRank(label, None, summary, nodes)
    try:
        with writing(head.path):
            with open(tmp, "r+b") as f:
                f.truncate(parts[-1].end)
                f.seek(parts[-1].end)
                f.write(form.tail)
            form.package(tmp, head.path, parts[-1].starts, rows)
    finally:
        _remove(spools)  # (the part file, named now or not to be, and the spools)
    return WrittenRank(label, head.path, summary, nodes)


def walk_ahead(label: str, tolerance: Tolerance, *parts: SpooledPart) -> Finding | Walk | None:
    """A rank alone in its job, the first-divergence analysis's walk through the nodes of its first
    table ``parts`` (summary.divergence.walk_ahead): by a task beside the rank's last table part, not
    after it in the process that runs the graph (S50k on 2 workers: the walk in the time the second
    worker waited for the last part)."""
    from msprobe_dask.summary.divergence import walk_ahead as walked

    # (a part left in a file is read when the walk reaches it: a rank of 1M entries, 105 parts of 2 MB)
    return walked(label, [p.nodes for p in parts if p.nodes is not None], tolerance)


def with_nodes(
    written: WrittenRank, parts: Sequence[SpooledPart], ahead: Finding | Walk | None = None
) -> WrittenRank:
    """The rank ``written``, with the divergence analysis's nodes of its table ``parts`` (when its summary
    was asked for), those left in files read (and their folder removed), and what was walked ``ahead``
    (``walk_ahead``): the parts it went through, all but the last, are not read again (a WalkedPart
    each; a rank of 1M entries, ~200 MB)."""
    if written.node_parts is None:
        return written
    from msprobe_dask.summary.divergence import WalkedPart

    def kept(nodes: NodePart | NodesFile, walked: bool) -> NodePart | WalkedPart:
        if walked:
            return WalkedPart(nodes.count, nodes.exceeds)
        return nodes.read() if isinstance(nodes, NodesFile) else nodes

    last = len(parts) - 1
    node_parts = tuple(
        kept(p.nodes, ahead is not None and k < last) for k, p in enumerate(parts) if p.nodes is not None
    )
    for folder in {p.nodes.path.parent for p in parts if isinstance(p.nodes, NodesFile)}:
        shutil.rmtree(folder, ignore_errors=True)
    return replace(written, node_parts=node_parts, ahead=ahead)
