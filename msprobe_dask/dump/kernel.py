"""MindSpore static-graph kernel dumps (compare.md §2.5): the layout reader and the two leaf formats.

A kernel dump is a tree whose lowest-level folders ("leaves") each hold one iteration of one graph:

- ``*.npy`` files named ``{op_type}.{op_name}.{task_id}.{stream_id}.{timestamp}.{input|output}.{slot}
  .{format}[.{dtype}].npy`` (one tensor each), or
- ``statistic.csv``: one line per tensor, with at least the 13 columns MindSpore writes by default.

Rank and step come from the leaf's path: ``.../rank_{R}/{net}/{graph}/{step}`` or, without ``rank_``,
``.../{R}/{net}/{graph}/{step}`` (the third-from-last component when the fourth is not a number). The
reference pools every leaf of one (rank, step): several graphs of a step are compared as one.

Files are listed here; tensors are never read (that is a task of the compare pipeline). A folder holding
both formats is an ``npy`` leaf, as for the reference. ``mapping.csv`` (GE's table of shortened file
names) has no observable effect on the reference's results and is ignored.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from msprobe_dask.dump.confine import listed
from msprobe_dask.dump.source import DumpSource, DumpTree
from msprobe_dask.dump.tensor_file import resolve_data_file
from msprobe_dask.errors import DumpError, cannot

STATISTIC_CSV = "statistic.csv"
NPY_MODE, STATISTIC_MODE = "npy", "statistic"
MIN_STATISTIC_COLUMNS = 13
STAT_COLUMNS = ("Max Value", "Min Value", "Avg Value", "L2Norm Value")  # max, min, mean, l2norm
DTYPE_COLUMN, SHAPE_COLUMN = "Data Type", "Shape"
# statistic.csv columns read by position, as the reference reads them (the names vary between versions)
OP_NAME, TASK_ID, TIMESTAMP, IO, SLOT = 1, 2, 4, 5, 6


@dataclass(frozen=True, slots=True)
class KernelTensor:
    """One dumped tensor of a kernel launch: where it is and what it pairs on."""

    key: str  # op_name.task_id.{input|output}.slot: the compare key
    timestamp: int
    name: str  # file name (npy) or the compare key (statistic.csv): breaks timestamp ties
    path: Path  # the .npy file, or the statistic.csv holding the line


def npy_tensor(path: Path) -> KernelTensor | None:
    """The tensor a kernel ``.npy`` file name describes; None for any other file name."""
    parts = path.name.split(".")
    if len(parts) not in (9, 10) or parts[-1] != "npy":
        return None
    _op_type, op_name, task_id, stream_id, timestamp, io, slot = parts[:7]
    if io not in ("input", "output") or not all(p.isdigit() for p in (task_id, stream_id, timestamp, slot)):
        return None
    return KernelTensor(f"{op_name}.{task_id}.{io}.{slot}", int(timestamp), path.name, path)


def _is_kernel_npy(name: str) -> bool:
    return name.endswith(".npy") and npy_tensor(Path(name)) is not None


def leaf_mode(folder: Path) -> str:
    """``npy`` when the folder holds kernel .npy files, else ``statistic``."""
    return NPY_MODE if any(_is_kernel_npy(n) for n in listed(folder)) else STATISTIC_MODE


def npy_tensors(leaves: Iterable[Path]) -> list[KernelTensor]:
    tensors = []
    for leaf in leaves:
        for name in sorted(os.listdir(leaf)):
            tensor = npy_tensor(leaf / name) if name.endswith(".npy") else None
            if tensor is not None:
                resolve_data_file(leaf, name)  # a symlink out of its folder is refused
                tensors.append(tensor)
    return tensors


# ---------------------------------------------------------------------------------------------------------
# statistic.csv


@dataclass(frozen=True, slots=True)
class StatisticLine:
    """One line of a statistic.csv: the tensor, its dtype and shape texts and its four statistics.

    A column the file lacks (``Avg Value`` is not in MindSpore's default set) reads as missing: None for
    the texts, NaN for the statistics, which are float32 as the reference reads them.
    """

    tensor: KernelTensor
    dtype: str | None
    shape: str | None
    stats: tuple[np.float32, np.float32, np.float32, np.float32]


def _float32(text: str, path: Path, line: int, column: str) -> np.float32:
    try:
        with np.errstate(over="ignore"):  # beyond float32: inf, as the reference reads it
            return np.float32(float(text))
    except ValueError:
        raise DumpError(path, f"line {line}: {column} {text!r} is not a number") from None


def read_statistic_csv(path: Path, warn: Callable[[str], None] | None = None) -> list[StatisticLine]:
    """Every line of one statistic.csv; a malformed file raises DumpError naming the line."""
    warn = warn or (lambda message: None)
    resolve_data_file(path.parent, path.name)  # a symlink out of its folder is refused
    try:
        with open(path, encoding="utf-8", newline="") as f:
            rows = list(csv.reader(f))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise DumpError(path, cannot("be read", exc)) from None
    if not rows:
        raise DumpError(path, "is empty (a statistic.csv starts with a header line)")
    header = rows[0]
    if len(header) < MIN_STATISTIC_COLUMNS:
        raise DumpError(
            path, f"has {len(header)} columns; a MindSpore statistic.csv has at least {MIN_STATISTIC_COLUMNS}"
        )
    where = {
        name: header.index(name) for name in (*STAT_COLUMNS, DTYPE_COLUMN, SHAPE_COLUMN) if name in header
    }
    if not where:  # a data line first: every value would read as missing
        names = ", ".join((*STAT_COLUMNS, DTYPE_COLUMN, SHAPE_COLUMN))
        raise DumpError(path, f"line 1 is not a header: it names none of the columns {names}")
    for name in (DTYPE_COLUMN, SHAPE_COLUMN, *STAT_COLUMNS):
        if name not in where:
            warn(f"{path}: no {name!r} column; that value is left empty")
    lines = []
    for number, row in enumerate(rows[1:], start=2):
        if len(row) != len(header):
            raise DumpError(path, f"line {number} has {len(row)} fields, the header has {len(header)}")
        try:
            timestamp = int(row[TIMESTAMP])
        except ValueError:
            raise DumpError(path, f"line {number}: Timestamp {row[TIMESTAMP]!r} is not an integer") from None
        key = f"{row[OP_NAME]}.{row[TASK_ID]}.{row[IO]}.{row[SLOT]}"
        stats = tuple(
            _float32(row[where[name]], path, number, name) if name in where else np.float32("nan")
            for name in STAT_COLUMNS
        )
        dtype = row[where[DTYPE_COLUMN]] if DTYPE_COLUMN in where else None
        shape = row[where[SHAPE_COLUMN]] if SHAPE_COLUMN in where else None
        lines.append(StatisticLine(KernelTensor(key, timestamp, key, path), dtype, shape, stats))  # type: ignore[arg-type]
    return lines


# ---------------------------------------------------------------------------------------------------------
# The layout


def _int_or(text: str, default: int = -1) -> int:
    return int(text) if text.isdigit() else default


def kernel_rank_step(leaf: Path) -> tuple[int, int]:
    """Rank and step of a leaf folder, read from its absolute path (-1 when not a number)."""
    absolute = os.path.abspath(leaf)
    parts = Path(absolute).parts
    step = _int_or(parts[-1])
    if "rank_" in absolute:
        return _int_or(parts[-4].rsplit("_", 1)[-1]) if len(parts) >= 4 else -1, step
    rank = _int_or(parts[-4]) if len(parts) >= 4 else -1
    if rank == -1 and len(parts) >= 3:
        rank = _int_or(parts[-3])
    return rank, step


def _kernel_leaves(root: Path) -> list[Path]:
    """Lowest-level folders below ``root`` (or ``root`` itself) holding kernel data, in path order."""
    leaves = []
    for folder, dirs, files in os.walk(root):
        if dirs:
            continue
        if STATISTIC_CSV in files or any(_is_kernel_npy(name) for name in files):
            leaves.append(Path(folder))
    return sorted(leaves)


def read_kernel_tree(path: Path) -> DumpTree | None:
    """The ``kernel`` layout reader of ``open_dump``: one DumpSource per leaf, labelled rank and step.

    Leaves whose rank or step is not a number (``constants/``, a folder named after the net...) are
    kept with -1, as the reference computes them; pairing skips them.
    """
    if not path.is_dir():
        return None
    leaves = _kernel_leaves(path)
    if not leaves:
        return None
    sources = []
    for leaf in leaves:
        rank, step = kernel_rank_step(leaf)
        sources.append(DumpSource(leaf, rank=str(rank), step=str(step)))
    return DumpTree(root=path, layout="kernel", sources=tuple(sources))


def leaves_by_rank_step(tree: DumpTree) -> dict[tuple[int, int], list[Path]]:
    """The leaves of a kernel tree grouped by (rank, step); leaves without a numeric rank or step dropped."""
    grouped: dict[tuple[int, int], list[Path]] = {}
    for source in tree.sources:
        rank, step = int(source.rank), int(source.step)
        if rank >= 0 and step >= 0:
            grouped.setdefault((rank, step), []).append(source.dump_json)
    return grouped


def shape_text(shape: tuple[int, ...] | str) -> str:
    """The reference's shape cell: the tuple (or statistic.csv) text with brackets, ``(3,)`` -> ``[3,]``."""
    return str(shape).replace("(", "[").replace(")", "]")
