"""A compare's typed result: one ``ResultTable`` per (step, rank), inside a ``CompareResult``.

Metric and statistics columns hold floats (NaN where the cell says ``N/A``, ``unsupported``...;
percentages as fractions, ``12.5%`` -> 0.125); ``Err_message`` holds the list of messages; the other
columns keep the cells the csv is written from. ``source`` is that table, for the writers.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from msprobe_dask.analysis.findings import Divergence
from msprobe_dask.columns import DIFF_COLUMNS, ERR_MESSAGE, STAT_COLUMNS, TENSOR_METRIC_COLUMNS
from msprobe_dask.results.display import summary_html
from msprobe_dask.results.frames import data_frame
from msprobe_dask.summary.cells import as_float
from msprobe_dask.summary.divergence import analyse_tables
from msprobe_dask.summary.first_divergence import apply_divergence
from msprobe_dask.summary.kinds import messages
from msprobe_dask.summary.model import GroupSummary, NodeRef, RunSummary
from msprobe_dask.summary.table import summarise_table
from msprobe_dask.summary.text import summary_lines

NUMERIC_COLUMNS = frozenset([*DIFF_COLUMNS, *STAT_COLUMNS, *TENSOR_METRIC_COLUMNS])
MESSAGE_COLUMN = ERR_MESSAGE


def typed_column(name: str, cells: Sequence[Any]) -> list[Any]:
    if name in NUMERIC_COLUMNS:
        return [as_float(cell) for cell in cells]
    if name == MESSAGE_COLUMN:
        return [messages(cell) for cell in cells]
    return list(cells)


@dataclass(frozen=True)
class ResultTable:
    """The compare of one (step, rank): typed columns, its summary, and the table as written."""

    label: str  # "step0/rank1"; "" for two single dumps
    mode: str  # statistics, tensor, md5; "kernel npy" / "kernel statistic" for static-graph kernel dumps
    columns: tuple[str, ...]
    data: dict[str, list[Any]]
    summary: GroupSummary
    source: Any = field(repr=False)  # the CompareTable the writers take

    @classmethod
    def of(cls, label: str, mode: str, table: Any) -> ResultTable:
        """From a CompareTable (its columns, rows of cells and dump entries)."""
        data = {name: typed_column(name, table.column(name)) for name in table.columns}
        summary = summarise_table(label, table.columns, table.rows, table.entries)
        return cls(label, mode, tuple(table.columns), data, summary, table)

    def __len__(self) -> int:
        return self.summary.total

    def column(self, name: str) -> list[Any]:
        return self.data[name]

    def records(self) -> Iterator[dict[str, Any]]:
        """One dict per row, keyed by column name, typed."""
        for i in range(len(self)):
            yield {name: values[i] for name, values in self.data.items()}

    def to_pandas(self) -> Any:
        return data_frame(self.data)

    def write(self, path: str | Path) -> Path:
        """Write the table as the CLI does (``.xlsx`` by the suffix, else csv), its folder made if missing."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix == ".xlsx":
            from msprobe_dask.writers.xlsx_writer import write_xlsx

            return write_xlsx(self.source, path)
        from msprobe_dask.writers.csv_writer import write_csv

        return write_csv(self.source, path)


@dataclass(frozen=True)
class CompareResult:
    """All the (step, rank) tables of one compare, in the order compared."""

    tables: tuple[ResultTable, ...]
    warnings: tuple[str, ...] = ()

    def __len__(self) -> int:
        return len(self.tables)

    def __iter__(self) -> Iterator[ResultTable]:
        return iter(self.tables)

    def __getitem__(self, key: int | str) -> ResultTable:
        """By position, or by label (``res["step0/rank1"]``)."""
        if isinstance(key, int):
            return self.tables[key]
        for table in self.tables:
            if table.label == key:
                return table
        raise KeyError(f"{key!r}: the labels are {[t.label for t in self.tables]}")

    def summary(self) -> RunSummary:
        summary = RunSummary("compare", [table.summary for table in self.tables])
        apply_divergence(summary, self.divergence())
        return summary

    def divergence(self) -> Divergence | None:
        """The cross-rank first-divergence analysis (``analysis.divergence``); None for kernel dumps."""
        return self._divergence

    @cached_property
    def _divergence(self) -> Divergence | None:
        return analyse_tables((t.label, t.source) for t in self.tables)

    def first_divergence(self) -> NodeRef | None:
        """Where the job first diverges: the earliest origin over every rank and step, by
        ``analysis.divergence`` (kernel dumps: the first row not pass for a numeric reason)."""
        return self.summary().first_divergence

    def to_pandas(self) -> Any:
        """Every table's rows, with a first column ``label`` naming its (step, rank)."""
        columns: dict[str, list[Any]] = {"label": []}
        total = 0
        for table in self.tables:
            columns["label"].extend([table.label] * len(table))
            for name, values in table.data.items():
                columns.setdefault(name, [float("nan") if name in NUMERIC_COLUMNS else None] * total)
                columns[name].extend(values)
            total += len(table)
            for name, values in columns.items():
                if len(values) < total:
                    values.extend([float("nan") if name in NUMERIC_COLUMNS else None] * (total - len(values)))
        return data_frame(columns)

    def __repr__(self) -> str:
        return "\n".join(
            [f"<CompareResult: {len(self.tables)} table(s)>", *summary_lines(self.summary())[1:]]
        )

    def _repr_html_(self) -> str:
        return summary_html(f"CompareResult: {len(self.tables)} table(s)", self.summary())
