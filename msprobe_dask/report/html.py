"""The report as one self-contained HTML file: the data as JSON inside it, drawn by inline JavaScript
into inline SVG. It loads nothing: its Content-Security-Policy forbids every request (no CDN, no
font, no image), so it opens offline and shows the same thing everywhere."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from msprobe_dask.writers.atomic import atomic_path

CSP = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'"

STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1200px}
h1{font-size:22px}h2{font-size:18px;margin-top:32px;border-bottom:1px solid #ccc}
pre{background:#f5f5f5;padding:8px;overflow-x:auto;white-space:pre-wrap}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;
vertical-align:top}th{background:#eee}td.num{text-align:right}
.heat td.cell{min-width:140px;font-size:12px}.origin{background:#e74c3c;color:#fff}
.received{background:#f5b041}.clean{background:#abebc6}.none{background:#ddd}
svg.plot{border:1px solid #ddd;background:#fff}svg .pt{fill:#2471a3}svg .inf{fill:#c0392b}
svg .first{stroke:#e74c3c;stroke-dasharray:4 3}svg .axis{stroke:#999}svg text{font-size:11px;fill:#555}
.muted{color:#777}td.kinds{white-space:pre-line}
"""

SCRIPT = r"""
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("report-data").textContent);
  var NS = "http://www.w3.org/2000/svg";
  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    for (var k in attrs || {}) node.setAttribute(k, attrs[k]);
    if (text !== undefined) node.textContent = text;
    return node;
  }
  function svg(tag, attrs, text) {
    var node = document.createElementNS(NS, tag);
    for (var k in attrs || {}) node.setAttribute(k, attrs[k]);
    if (text !== undefined) node.textContent = text;
    return node;
  }
  function section(title, id) {
    var div = el("section", {id: id});
    div.appendChild(el("h2", {}, title));
    document.getElementById("report").appendChild(div);
    return div;
  }
  function fmt(v) { return typeof v === "number" ? v.toPrecision(4) : String(v); }
  function where(f) { return (f.step ? f.step + "/" : "") + "rank" + f.rank; }

  var top = section("First divergence", "origin");
  top.appendChild(el("pre", {id: "origin-lines"}, data.origin_lines.join("\n") || "not analysed"));
  if (data.tolerance) {
    top.appendChild(el("p", {"class": "muted"}, "tolerance: atol " + data.tolerance.atol + ", rtol " +
      data.tolerance.rtol + " (see the README's First divergence section)"));
  }

  var heat = section("First divergence per rank and step", "heatmap");
  var table = el("table", {"class": "heat"});
  var head = el("tr");
  head.appendChild(el("th", {}, "rank \\ step"));
  data.steps.forEach(function (s) { head.appendChild(el("th", {}, s || "(single step)")); });
  table.appendChild(head);
  data.ranks.forEach(function (rank) {
    var tr = el("tr");
    tr.appendChild(el("th", {}, "rank " + rank));
    data.steps.forEach(function (step) {
      var g = data.groups.filter(function (x) { return x.rank === rank && x.step === step; })[0];
      var f = g && g.first;
      var kind = !g || !g.analysed ? "none" : f ? f.kind : "clean";
      var text = !g ? "not compared" : !g.analysed ? "not analysed" : f ? f.node : "no divergence";
      if (f && f.kind === "received") text += " (from rank " + f.received_from + ")";
      var td = el("td", {"class": "cell " + kind, "data-step": step, "data-rank": rank}, text);
      td.title = f ? f.reason + (f.stack ? "\n" + f.stack : "") : text;
      tr.appendChild(td);
    });
    table.appendChild(tr);
  });
  heat.appendChild(table);

  var plots = section("Error along execution order", "plots");
  plots.appendChild(el("p", {"class": "muted"}, "One point per row of the result table, in its order " +
    "(execution order); log scale; 0 on the bottom line, inf on the top line; hover a point for its row."));
  var W = 1100, H = 230, L = 60, R = 10, T = 10, B = 30;
  data.groups.forEach(function (g) {
    var box = el("div", {"class": "plot-box", "data-label": g.label});
    box.appendChild(el("h3", {}, g.label + (g.metric ? " - " + g.metric : " - no numeric metric")));
    plots.appendChild(box);
    if (!g.metric) return;
    var n = Math.max(1, g.counts[0]);
    var positive = g.points.map(function (p) { return p[1]; })
      .filter(function (v) { return typeof v === "number" && v > 0; });
    var lo = positive.length ? Math.log10(Math.min.apply(null, positive)) : -6;
    var hi = positive.length ? Math.log10(Math.max.apply(null, positive)) : 0;
    lo = Math.floor(lo); hi = Math.max(lo + 1, Math.ceil(hi));
    var plot = svg("svg", {"class": "plot", width: W, height: H + 20, "data-label": g.label});
    function x(i) { return L + (W - L - R) * (n > 1 ? i / (n - 1) : 0.5); }
    function y(v) {
      if (v === "inf") return T;
      if (v <= 0) return H - B + 12;
      return T + 12 + (H - B - T - 12) * (hi - Math.log10(v)) / (hi - lo);
    }
    plot.appendChild(svg("line", {"class": "axis", x1: L, x2: W - R, y1: H - B + 12, y2: H - B + 12}));
    for (var e = lo; e <= hi; e++) {
      plot.appendChild(svg("text", {x: 4, y: y(Math.pow(10, e)) + 4}, "1e" + e));
      plot.appendChild(svg("line", {"class": "axis", x1: L - 4, x2: L, y1: y(Math.pow(10, e)),
        y2: y(Math.pow(10, e))}));
    }
    plot.appendChild(svg("text", {x: 4, y: H - B + 16}, "0"));
    plot.appendChild(svg("text", {x: 4, y: T + 4}, "inf"));
    plot.appendChild(svg("text", {x: L, y: H + 12}, "row 0"));
    plot.appendChild(svg("text", {x: W - R - 60, y: H + 12}, "row " + (n - 1)));
    if (g.first && g.first.row >= 0) {
      plot.appendChild(svg("line", {"class": "first", x1: x(g.first.row), x2: x(g.first.row), y1: T,
        y2: H - B + 12}));
      plot.appendChild(svg("text", {x: x(g.first.row) + 4, y: H - 2}, "first divergence: " + g.first.node));
    }
    g.points.forEach(function (p) {
      var inf = p[1] === "inf";
      var mark = inf
        ? svg("rect", {"class": "pt inf", x: x(p[0]) - 3, y: y(p[1]) - 3, width: 6, height: 6})
        : svg("circle", {"class": "pt", cx: x(p[0]), cy: y(p[1]), r: 2.5});
      mark.setAttribute("data-row", p[0]);
      mark.setAttribute("data-value", inf ? "inf" : String(p[1]));
      var lines = [p[2], g.metric + ": " + p[3]];
      g.shown.forEach(function (c, i) { lines.push(c + ": " + p[4][i]); });
      mark.appendChild(svg("title", {}, lines.join("\n")));
      plot.appendChild(mark);
    });
    box.appendChild(plot);
  });

  var sum = section("Summary", "summary");
  var st = el("table", {id: "summary-table"});
  var hr = el("tr");
  ["step/rank", "rows", "pass", "warning", "error", "not judged", "most frequent messages",
    "first divergence"].forEach(function (h) { hr.appendChild(el("th", {}, h)); });
  st.appendChild(hr);
  data.groups.forEach(function (g) {
    var tr = el("tr");
    tr.appendChild(el("td", {}, g.label));
    g.counts.forEach(function (c) { tr.appendChild(el("td", {"class": "num"}, String(c))); });
    tr.appendChild(el("td", {"class": "kinds"}, g.kinds.map(function (k) { return k[1] + " x " + k[0]; })
      .join("\n")));
    var f = g.first;
    tr.appendChild(el("td", {}, f ? f.node + " [" + (f.kind === "received" ? "received from rank " +
      f.received_from : f.kind) + "]" : (g.analysed ? "none" : "not analysed")));
    st.appendChild(tr);
  });
  sum.appendChild(st);

  var worst = section("Top rows", "top");
  var tt = el("table", {id: "top-table"});
  var th = el("tr");
  ["step/rank", "row", "metric", "value", "code"].forEach(function (h) { th.appendChild(el("th", {}, h)); });
  tt.appendChild(th);
  data.top.forEach(function (r) {
    var tr = el("tr");
    [r.label || "result", r.name, r.metric, r.text, r.stack].forEach(function (c) {
      tr.appendChild(el("td", {}, c));
    });
    tt.appendChild(tr);
  });
  worst.appendChild(tt);

  var view = section("Open the graph viewer at the first divergence", "viewer");
  view.appendChild(el("pre", {id: "viewer-command"}, data.viewer));
  document.body.setAttribute("data-rendered", "yes");
})();
"""

TEMPLATE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{csp}">
<title>{title}</title><style>{style}</style></head>
<body><h1>{title}</h1><div id="report"></div>
<script type="application/json" id="report-data">{data}</script>
<script>{script}</script>
</body></html>
"""


def render(data: dict[str, Any]) -> str:
    """The HTML text of the report of ``data`` (``report.model.report_data``)."""
    text = json.dumps(data, allow_nan=False, separators=(",", ":"))
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return TEMPLATE.format(
        csp=CSP, title=html.escape(str(data.get("title", "report"))), style=STYLE, data=text, script=SCRIPT
    )


def write_report(path: Path, data: dict[str, Any]) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_text(render(data), encoding="utf-8")
    return path
