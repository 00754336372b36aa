"""The report's data: what the HTML file shows, as plain JSON-able values, from compare tables.

A table is anything with ``columns``, ``rows`` (cells as the csv holds them or as the compare made
them) and ``entries`` (the dump entry of each row): a ``CompareTable`` or a csv read back
(``report.results``). For each (step, rank): the counts and message kinds of its summary, its first
divergent node, and one point per row whose plotted metric is a number (the csv cell as a number:
``12.5%`` is 0.125); for the job: the heat map of first divergences, the origin and its path, the
rows with the largest metric and the command that opens the graph viewer.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from msprobe_dask.analysis.findings import Divergence, Finding, step_and_rank, step_key
from msprobe_dask.columns import MAX_RELATIVE_ERR, NORM_RELATIVE_ERR, NPU_NAME, STACK_COLUMN, STAT_COLUMNS
from msprobe_dask.dump.stack_frames import stack_frames, user_frame
from msprobe_dask.summary.cells import as_float
from msprobe_dask.summary.model import RunSummary

PLOTTED = (NORM_RELATIVE_ERR, MAX_RELATIVE_ERR)  # statistics, tensor: the first a table has
SHOWN = tuple(STAT_COLUMNS)  # the summaries a point's tooltip shows
TOP = 10


def plotted_column(columns: Sequence[str]) -> str | None:
    return next((c for c in PLOTTED if c in columns), None)


def _value(cell: Any) -> float | str | None:
    """A plotted cell: a finite number, the text ``inf`` (drawn at the top), or None (not plotted)."""
    value = as_float(cell)
    if math.isnan(value):
        return None
    return value if math.isfinite(value) else "inf"


def _finding(finding: Finding | None, entries: Sequence[str]) -> dict[str, Any] | None:
    if finding is None:
        return None
    data = asdict(finding)
    data["row"] = entries.index(finding.node) if finding.node in entries else -1
    data["error"] = finding.error if math.isfinite(finding.error) else "inf"
    data["input_error"] = finding.input_error if math.isfinite(finding.input_error) else "inf"
    return data


def _group(label: str, table: Any, found: Divergence | None, summary: Any) -> dict[str, Any]:
    columns = list(table.columns)
    metric = plotted_column(columns)
    name_at = columns.index(NPU_NAME)
    shown = [(c, columns.index(c)) for c in SHOWN if c in columns]
    points = []
    if metric is not None:
        at = columns.index(metric)
        for i, row in enumerate(table.rows):
            value = _value(row[at])
            if value is not None:
                points.append([i, value, str(row[name_at]), str(row[at]), [str(row[j]) for _, j in shown]])
    step, rank = step_and_rank(label)
    first = found.first(step, rank) if found else None
    return {
        "label": label or "result",
        "step": step,
        "rank": rank,
        "metric": metric,
        "shown": [c for c, _ in shown],
        "points": points,
        "first": _finding(first, list(table.entries)),
        "analysed": bool(found and (step, rank) in found.nodes),
        "counts": [summary.total, summary.passed, summary.warnings, summary.errors, summary.others],
        "kinds": [[k.text, k.count, k.structural] for k in summary.kinds],
    }


def _top(labelled: Sequence[tuple[str, Any]]) -> list[dict[str, Any]]:
    """The rows with the largest plotted metric over the whole run, with their entry's stack line."""
    rows = []
    for label, table in labelled:
        columns = list(table.columns)
        metric = plotted_column(columns)
        if metric is None:
            continue
        at, name_at = columns.index(metric), columns.index(NPU_NAME)
        stack_at = columns.index(STACK_COLUMN) if STACK_COLUMN in columns else None
        stacks: dict[str, str] = {}
        for row, entry in zip(table.rows, table.entries):
            if stack_at is not None and entry not in stacks:
                stacks[entry] = user_frame(stack_frames(row[stack_at]))
            value = as_float(row[at])
            if not math.isnan(value) and value > 0:
                rows.append((value, label, str(row[name_at]), metric, str(row[at]), stacks.get(entry, "")))
    rows.sort(key=lambda r: -r[0])
    keys = ("label", "name", "metric", "text", "stack")
    return [dict(zip(keys, r[1:])) for r in rows[:TOP]]


def viewer_command(target: str, golden: str, origin: Finding | None) -> str:
    lines = [
        f"msprobe-dask graph_visualize -tp {target} -gp {golden} -o vis_out",
        "tensorboard --logdir vis_out    # then open the printed URL, the graph-ascend tab",
    ]
    if origin is not None:
        where = ", ".join(p for p in (origin.step, f"rank {origin.rank}") if p)
        lines.append(f"# in the viewer ({where}), search the node: {origin.node}")
    return "\n".join(lines)


def report_data(
    labelled: Sequence[tuple[str, Any]],
    summary: RunSummary,
    found: Divergence | None,
    *,
    title: str,
    target: str = "TARGET",
    golden: str = "GOLDEN",
) -> dict[str, Any]:
    """Everything the report shows. ``summary``'s groups are in ``labelled``'s order."""
    groups = [_group(label, table, found, s) for (label, table), s in zip(labelled, summary.groups)]
    origin = found.origin if found else None
    entries = {label: list(table.entries) for label, table in labelled}
    at_origin = [
        label for label, _ in labelled if origin and step_and_rank(label) == (origin.step, origin.rank)
    ]
    origin_label = at_origin[0] if at_origin else ""
    return {
        "title": title,
        "groups": groups,
        "steps": sorted({g["step"] for g in groups}, key=step_key),
        "ranks": sorted({g["rank"] for g in groups}),
        "origin": _finding(origin, entries.get(origin_label, [])),
        "origin_lines": found.lines() if found else [],
        "path": [_finding(hop, []) for hop in (found.path if found else ())],
        "tolerance": asdict(found.tolerance) if found else None,
        "top": _top(labelled),
        "viewer": viewer_command(target, golden, origin),
    }
