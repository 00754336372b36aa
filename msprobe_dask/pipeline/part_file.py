"""A rank's csv file written by a chain of tasks: the header, each table part's csv text appended in the
reference's order, the complete file renamed to its name; the rank's summary and nodes gathered."""

from __future__ import annotations

import contextlib
import pickle
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from msprobe_dask.analysis.flow import Node
from msprobe_dask.errors import OutputError
from msprobe_dask.pipeline.part_match import PlanHead
from msprobe_dask.pipeline.part_table import TablePart
from msprobe_dask.summary.divergence import joined_nodes
from msprobe_dask.summary.kinds import KindCounter
from msprobe_dask.summary.model import GroupSummary
from msprobe_dask.summary.table import merge_summaries
from msprobe_dask.writers.atomic import publish, set_result_mode
from msprobe_dask.writers.csv_writer import header_line


@dataclass(frozen=True, slots=True)
class PartWritten:
    """A part once its lines are in the file (the lines are not kept): what the rank's result needs."""

    path: Path
    columns: list[str]
    rows: int = 0
    summary: tuple[GroupSummary, KindCounter] | None = None
    nodes: bytes | None = None


@dataclass(frozen=True, slots=True)
class WrittenRank:
    """One rank compared into its csv file (``path`` None: no row to write, no file)."""

    label: str
    path: Path | None
    summary: GroupSummary | None  # when asked for
    # the divergence analysis's nodes of each part, with the summary: pickled until the analysis reads
    # them (a few objects per row: as Python objects, they took 5x the memory of the rank's packed rows)
    node_parts: tuple[bytes, ...] | None

    @property
    def nodes(self) -> list[Node] | None:
        """The divergence analysis's nodes of the rank (decoded at each call)."""
        if self.node_parts is None:
            return None
        return joined_nodes(pickle.loads(part) for part in self.node_parts)


def part_file(path: Path) -> Path:
    """Where the rank's csv is written before it is renamed to ``path``."""
    return path.with_name(f".{path.name}.part")


def begin_file(path: Path, head: PlanHead) -> PartWritten:
    with _writing(path), open(part_file(path), "wb") as f:
        f.write(header_line(head.columns))
    return PartWritten(path, head.columns)


def append_part(previous: PartWritten, part: TablePart) -> PartWritten:
    with _writing(previous.path), open(part_file(previous.path), "ab") as f:
        f.write(part.csv)
    return PartWritten(previous.path, previous.columns, part.rows, part.summary, part.nodes)


@contextlib.contextmanager
def _writing(path: Path) -> Iterator[None]:
    """A write to the rank's temporary file that fails (a full disk) removes it and names ``path``."""
    try:
        yield
    except OSError as exc:
        part_file(path).unlink(missing_ok=True)
        raise OutputError(path, f"cannot be written: {exc.strerror or exc}") from None


def finish_file(label: str, head: PartWritten, *parts: PartWritten) -> WrittenRank:
    """Rename the complete file (none when the compare has no row); the rank's summary and nodes."""
    asked = parts[0].summary is not None
    summary = merge_summaries(label, head.columns, [p.summary for p in parts if p.summary]) if asked else None
    nodes = tuple(p.nodes for p in parts if p.nodes is not None) if asked else None
    tmp = part_file(head.path)
    if not sum(p.rows for p in parts):
        tmp.unlink()
        return WrittenRank(label, None, summary, nodes)
    try:
        with _writing(head.path):
            set_result_mode(tmp)
            publish(tmp, head.path)
    finally:
        tmp.unlink(missing_ok=True)
    return WrittenRank(label, head.path, summary, nodes)
