"""How results show in a notebook: ``_repr_html_`` tables of the summary's groups."""

from __future__ import annotations

import html
import math

from msprobe_dask.summary.model import NodeRef, RunSummary

HEADER = ("step/rank", "total", "pass", "warning", "error", "not judged", "top message", "first divergence")


def _node(ref: NodeRef | None) -> str:
    if ref is None:
        return ""
    value = "" if not ref.metric or math.isnan(ref.value) else f" ({ref.metric} {ref.value:.4g})"
    return f"{ref.name}{value}"


def summary_html(title: str, summary: RunSummary) -> str:
    cells = [f"<th>{html.escape(h)}</th>" for h in HEADER]
    rows = ["<tr>" + "".join(cells) + "</tr>"]
    for g in summary.groups:
        top = f"{g.kinds[0].count:,} x {g.kinds[0].text}" if g.kinds else ""
        values = (
            g.label or "-",
            g.total,
            g.passed,
            g.warnings,
            g.errors,
            g.others,
            top,
            _node(g.first_divergence),
        )
        rows.append("<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in values) + "</tr>")
    return f"<div><b>{html.escape(title)}</b><table>{''.join(rows)}</table></div>"
