"""The summary as the lines printed at the end of a run (before the result path line)."""

from __future__ import annotations

import math

from msprobe_dask.summary.model import GroupSummary, NodeRef, RunSummary


def _value(ref: NodeRef) -> str:
    if not ref.metric:
        return ""
    if math.isnan(ref.value):
        return f"  {ref.metric} N/A"
    return f"  {ref.metric} {ref.value:.6g}"


def node_line(ref: NodeRef) -> str:
    result = f"  [{ref.result}]" if ref.result else ""
    stack = f"\n        at {ref.stack}" if ref.stack else ""
    name = ref.name.rpartition("/")[2]  # a kernel dump's row is named by its file's path
    return f"{name}{result}{_value(ref)}{stack}"


def group_lines(group: GroupSummary) -> list[str]:
    head = group.label or "result"
    counts = f"{group.passed:,} pass, {group.warnings:,} warning, {group.errors:,} error"
    if group.others:
        counts += f", {group.others:,} not judged"
    lines = [f"{head}: {group.total:,} {group.unit}: {counts}"]
    for kind in group.kinds:
        tag = "  (structure)" if kind.structural else ""
        lines.append(f"    {kind.count:>7,} x {kind.text}{tag}")
    if group.first_divergence is not None:
        lines.append(f"  first divergence: {node_line(group.first_divergence)}")
    elif group.errors or group.warnings:
        lines.append("  first divergence: none (every difference is a dtype/shape/structure kind)")
    if group.worst:
        lines.append("  worst:")
        lines.extend(f"    {node_line(ref)}" for ref in group.worst)
    return lines


def summary_lines(summary: RunSummary) -> list[str]:
    lines = [f"Summary of {summary.command}:"]
    for group in summary.groups:
        lines.extend(group_lines(group))
    return lines + summary.origin_lines


def print_run_end(summary: RunSummary, path_lines: list[str], quiet: bool) -> None:
    """The summary (unless ``quiet``), then the result path lines, unchanged and last (scripts parse them)."""
    if not quiet and summary.groups:
        print("\n".join(summary_lines(summary)))
    for line in path_lines:
        print(line)


def unreadable_line(problems: list[str]) -> str:
    """The last line of a run with rows whose tensor files could not be read (exit code 1)."""
    return (
        f"msprobe-dask: {len(problems)} row(s) could not be read (Result error, Err_message says why), "
        f"the first: {problems[0]}"
    )
