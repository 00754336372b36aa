"""The multi-rank communication-op workbook of ``merge_result`` (compare.md §8).

Input: the per-rank ``compare_result_rank{N}_{ts}.xlsx`` files of one multi-rank compare, ours or the
reference's. Output: one sheet per compare index, one row per selected entry row (union over ranks,
sorted by name), one column per rank; ``N/A``/``unsupported``/``Nan`` cells show the two maxima.

Cells are typed as the reference's pandas round trip types them: a column of a rank's sheet whose
every cell reads as a number becomes numeric (``'0.25'`` -> 0.25, ``'0'`` -> 0, ``'inf'`` -> inf),
any other column keeps its cells as they are (``'0'`` stays text); an infinite number is written as
the text ``inf``/``-inf`` and a missing one as an empty cell.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Any

from msprobe_dask.columns import (
    BASE_COLUMNS,
    DIFF_COLUMNS,
    MD5_COLUMNS,
    NA,
    NAN,
    NPU_NAME,
    STACK_COLUMN,
    STAT_COLUMNS,
    TAIL_COLUMNS,
    TENSOR_COLUMNS,
)
from msprobe_dask.dump.confine import check_dump_file
from msprobe_dask.errors import ConfigError, DumpError
from msprobe_dask.match.mapfile import load_yaml
from msprobe_dask.writers.atomic import atomic_path
from msprobe_dask.writers.cells import neutralise
from msprobe_dask.writers.workbook_rows import first_sheet_rows
from msprobe_dask.writers.xlsx_package import write_workbook

RESULT_NAME = re.compile(r"^compare_result_rank(\d+)(?:-rank\1)?_\d{14}\.xlsx$")
SKIPPED_NAME = re.compile(r"^compare_result_rank(?:_|-rank)")
GRAD_INDEX = TAIL_COLUMNS[0]  # Requires_grad Consistent
MODE_INDICES = {"statistics": [*DIFF_COLUMNS, GRAD_INDEX], "tensor": [*TENSOR_COLUMNS, GRAD_INDEX]}
MODE_HEADERS = {
    "statistics": BASE_COLUMNS + DIFF_COLUMNS + STAT_COLUMNS + TAIL_COLUMNS,
    "tensor": BASE_COLUMNS + TENSOR_COLUMNS + STAT_COLUMNS + TAIL_COLUMNS,
    "md5": BASE_COLUMNS + MD5_COLUMNS + TAIL_COLUMNS,
}
REPLACED = (NA, "unsupported", NAN)
_NOT_NUMBERS = ("nan", "+nan", "-nan")


@dataclass(frozen=True, slots=True)
class MergeConfig:
    apis: tuple[str, ...]
    indices: tuple[str, ...]  # empty: every index of the detected mode


@dataclass(frozen=True, slots=True)
class RankSheet:
    """The rows of one rank's result that the config selects: name -> {column: typed value}."""

    rank: int
    path: Path
    mode: str
    rows: dict[str, dict[str, Any]]


def load_config(path: str | Path) -> MergeConfig:
    doc = load_yaml(path, "config file")
    if not isinstance(doc, dict):
        raise ConfigError(path, "must be a mapping with 'api' and optionally 'compare_index'")
    apis = doc.get("api")
    if not isinstance(apis, list) or not apis or not all(isinstance(a, str) and a for a in apis):
        raise ConfigError(
            path, "The APIs required to merge data were not found: 'api' must be a non-empty list"
        )
    indices = doc.get("compare_index") or []
    if not isinstance(indices, list) or not all(isinstance(i, str) for i in indices):
        raise ConfigError(path, "'compare_index' must be a list of column names")
    return MergeConfig(tuple(apis), tuple(indices))


def result_files(folder: str | Path, warn: Any = print) -> list[tuple[int, Path]]:
    """The per-rank result workbooks of ``folder`` as (rank, path), sorted by rank."""
    folder = Path(folder)
    if not folder.is_dir():
        raise DumpError(folder, "is not a folder of compare results")
    found = []
    for path in sorted(folder.glob("*.xlsx")):
        match = RESULT_NAME.match(path.name)
        if match:
            check_dump_file(path)  # a FIFO, a symlink loop or a link out of the folder
            found.append((int(match.group(1)), path))
        elif SKIPPED_NAME.match(path.name):
            warn(f"warning: {path.name} has no rank number; skipped")
        else:
            raise DumpError(
                path, "Wrong compare result name: expected compare_result_rank{N}_{YYYYmmddHHMMSS}.xlsx"
            )
    if len(found) < 2:
        raise DumpError(folder, "Number of compare result is no more than 1, no need to merge.")
    return sorted(found)


def _numeric(value: Any) -> float | int | None:
    """The number a cell reads as in a numeric column, None if it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, str):
        text = value.strip()
        if not text or text.lower() in _NOT_NUMBERS:
            return None
        try:
            return int(text)
        except ValueError:
            pass
        try:
            return float(text)
        except ValueError:
            return None
    return None


def type_column(values: Sequence[Any]) -> list[Any]:
    """Type one column as pandas' reader does: all numbers -> numbers (ints if all are), else as is."""
    if values and all(isinstance(v, bool) for v in values):
        return list(values)
    numbers = [_numeric(v) for v in values]
    if values and all(n is not None for n in numbers):
        if all(isinstance(n, int) for n in numbers):
            return numbers
        return [float(n) for n in numbers]  # type: ignore[arg-type]
    return ["" if v is None else v for v in values]


def read_rank_sheet(rank: int, path: Path, apis: Sequence[str]) -> RankSheet:
    """Read one result workbook and keep the rows whose NPU Name contains ``api + '.'``."""
    rows = [list(r) for r in first_sheet_rows(path)]
    if not rows:
        raise DumpError(path, "is empty")
    header = [str(h) for h in rows[0]]
    stacked = header[-1] == STACK_COLUMN
    core = header[:-1] if stacked else header
    mode = next((m for m, columns in MODE_HEADERS.items() if core == columns), "")
    body = [r + [None] * (len(header) - len(r)) for r in rows[1:]]
    columns = {name: type_column([r[i] for r in body]) for i, name in enumerate(header)}
    selected: dict[str, dict[str, Any]] = {}
    prefixes = tuple(f"{api}." for api in apis)
    names = columns.get(NPU_NAME, [])
    for i, name in enumerate(names):
        if isinstance(name, str) and any(p in name for p in prefixes):
            selected[name] = {column: values[i] for column, values in columns.items()}
    return RankSheet(rank, path, mode, selected)


def _text(value: Any) -> str:
    if isinstance(value, float) and value.is_integer() and not math.isinf(value):
        return repr(value)
    return str(value)


def merge_sheets(
    sheets: Iterable[RankSheet], config: MergeConfig, warn: Any = print
) -> tuple[list[str], dict[str, list[list[Any]]]]:
    """(rank column names, {index: rows of [name, value per rank]}); raises if nothing is mergeable."""
    usable = []
    indices: list[str] = list(config.indices)
    for sheet in sheets:
        if sheet.mode not in MODE_INDICES:
            what = "md5 compare results are" if sheet.mode == "md5" else "an unknown header is"
            warn(f"warning: {sheet.path.name}: {what} not supported by merge_result; skipped")
            continue
        wanted = indices or MODE_INDICES[sheet.mode]
        invalid = [i for i in wanted if i not in MODE_INDICES[sheet.mode]]
        if invalid:
            warn(
                f"warning: {sheet.path.name}: compare_index is not consistent with its {sheet.mode} mode; "
                f"The invalid compare indexes: {invalid}; skipped"
            )
            continue
        usable.append(sheet)
        indices = list(wanted)
    if not usable:
        raise DumpError(None, "Nothing to merge.")
    names = sorted({name for sheet in usable for name in sheet.rows})
    workbook: dict[str, list[list[Any]]] = {}
    for index in indices:
        table = []
        for name in names:
            row: list[Any] = [name]
            for sheet in usable:
                record = sheet.rows.get(name)
                if record is None:
                    row.append(None)
                    continue
                value = record.get(index)
                if isinstance(value, str) and value in REPLACED:
                    value = f"NPU:{_text(record.get('NPU max'))}  Bench:{_text(record.get('Bench max'))}"
                row.append(value)
            table.append(row)
        workbook[index] = table
    return [f"rank{sheet.rank}" for sheet in usable], workbook


def _cell(value: Any) -> Any:
    if isinstance(value, float):
        if math.isnan(value):
            return None
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
    if value == "":
        return None
    if isinstance(value, str):
        return neutralise(value)  # D9: a spreadsheet would run it as a formula
    return value


def write_merge(path: Path, ranks: Sequence[str], workbook: Mapping[str, list[list[Any]]]) -> Path:
    header = [NPU_NAME, *ranks]
    sheets = [
        (index[:31], len(header), chain([(header, None)], (([_cell(v) for v in row], None) for row in rows)))
        for index, rows in workbook.items()
    ]
    with atomic_path(path) as tmp:
        write_workbook(tmp, sheets)
    return path
