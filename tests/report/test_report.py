"""The HTML report (msprobe_dask.report) of a 4-rank x 2-step compare: one self-contained file whose
plotted points equal the csv's values, that loads in a real headless Chromium with no console error
and no network request. Where Chromium is not installed (``.ci/run`` installs it with apt when it can),
the browser test is skipped with a notice; the parsing test checks every element and data point."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from conftest import read_csv

from msprobe_dask.cli import main
from msprobe_dask.report.results import read_results
from msprobe_dask.summary.cells import as_float

sys.path.insert(0, str(Path(__file__).parents[2] / "workflows"))
from gen_divergence_dumps import write_case  # noqa: E402

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
FLAGS = (
    "--headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking "
    "--disable-component-update --disable-sync --virtual-time-budget=5000"
).split()
# run first in the page: record errors, console errors, CSP violations and every resource fetched
PROBE = """<script>
window.__probe = {errors: [], violations: []};
window.addEventListener("error", function (e) { window.__probe.errors.push(String(e.message)); });
document.addEventListener("securitypolicyviolation", function (e) {
  window.__probe.violations.push(e.blockedURI); });
var __error = console.error;
console.error = function () {
  window.__probe.errors.push([].join.call(arguments, " ")); __error.apply(console, arguments); };
window.addEventListener("load", function () { setTimeout(function () {
  var pre = document.createElement("pre"); pre.id = "probe";
  window.__probe.resources = performance.getEntriesByType("resource").map(function (r) { return r.name; });
  pre.textContent = JSON.stringify(window.__probe); document.body.appendChild(pre); }, 100); });
</script>"""


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(report, output folder) of a compare --report of 4 ranks x 2 steps with a fault on rank 2."""
    root = tmp_path_factory.mktemp("report")
    write_case(root, "send_recv", steps=2)
    out = root / "out"
    args = [
        "compare",
        "-q",
        "--report",
        "-tp",
        str(root / "target"),
        "-gp",
        str(root / "golden"),
        "-o",
        str(out),
    ]
    assert main(args) == 0
    [report] = out.glob("report_*.html")
    return report, out


def _csv_points(out: Path) -> dict[str, list[tuple[int, Any]]]:
    """label -> (row, value) of every row whose NormRelativeErr is a number, read from the csv files."""
    points = {}
    for path in sorted(out.glob("step*/compare_result_*.csv")):
        label = f"{path.parent.name}/{path.name.split('_')[2]}"
        rows = read_csv(path)
        at = rows[0].index("NormRelativeErr")
        values = [(i, as_float(row[at])) for i, row in enumerate(rows[1:])]
        points[label] = [(i, v if math.isfinite(v) else "inf") for i, v in values if not math.isnan(v)]
    return points


class _Elements(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: dict[str, str] = {}
        self._open: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._open = dict(attrs).get("id")

    def handle_data(self, data: str) -> None:
        if self._open:
            self.text[self._open] = self.text.get(self._open, "") + data


def _parse(text: str) -> _Elements:
    parser = _Elements()
    parser.feed(text)
    return parser


def test_report_is_self_contained_and_holds_the_csv_values(run: tuple[Path, Path]) -> None:
    report, out = run
    page = _parse(report.read_text(encoding="utf-8"))
    for tag, attrs in page.tags:  # nothing to fetch: no src, no link, no external reference
        assert "src" not in attrs and tag not in ("link", "img", "iframe", "object", "embed"), (tag, attrs)
        assert not any(str(v).startswith(("http:", "https:", "//")) for v in attrs.values()), (tag, attrs)
    csp = [
        a["content"] for t, a in page.tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy"
    ]
    assert csp and "default-src 'none'" in str(csp[0])
    data = json.loads(page.text["report-data"])
    expected = _csv_points(out)
    assert sorted(g["label"] for g in data["groups"]) == sorted(expected) and len(expected) == 8
    for group in data["groups"]:
        assert [(p[0], p[1]) for p in group["points"]] == expected[group["label"]], group["label"]
    assert data["origin"]["rank"] == 2 and data["origin"]["node"] == "Tensor.__add__.0.forward"
    heat = {(g["step"], g["rank"]): (g["first"] or {}).get("kind") for g in data["groups"]}
    assert heat[("step0", 2)] == "origin" and heat[("step1", 3)] == "received"
    assert "graph_visualize" in data["viewer"] and "Tensor.__add__.0.forward" in data["viewer"]
    assert data["top"] and all(row["stack"] for row in data["top"])


def test_report_command_reads_the_written_results(
    run: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    report, out = run
    assert main(["report", str(out)]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith("The report file path is: ") and line.endswith(".html.")
    again = json.loads(
        _parse(Path(line[len("The report file path is: ") : -1]).read_text()).text["report-data"]
    )
    first = json.loads(_parse(report.read_text()).text["report-data"])
    assert [g["points"] for g in again["groups"]] == [g["points"] for g in first["groups"]]
    assert again["origin"] == first["origin"]
    assert [label for label, _ in read_results(out)][:2] == ["step0/rank0", "step0/rank1"]


def test_report_command_bad_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(tmp_path / "missing")]) == 2
    assert "is not a folder of compare results" in capsys.readouterr().err
    assert main(["report", str(tmp_path)]) == 2
    assert "holds no compare_result" in capsys.readouterr().err


needs_chromium = pytest.mark.skipif(
    CHROMIUM is None,
    reason="Chromium is not installed (apt-get install chromium): the report was checked by parsing only "
    "(test_report_is_self_contained_and_holds_the_csv_values)",
)


def _load(html: str, folder: Path) -> _Elements:
    """The DOM Chromium made of ``html`` (with the probe run first), after its scripts ran."""
    probed = folder / "probed.html"
    probed.write_text(html.replace("<head>", "<head>" + PROBE, 1), encoding="utf-8")
    command = [str(CHROMIUM), *FLAGS, f"--user-data-dir={folder / 'profile'}", "--dump-dom", probed.as_uri()]
    return _parse(subprocess.run(command, capture_output=True, text=True, timeout=120, check=True).stdout)


@needs_chromium
def test_the_probe_sees_errors_and_requests(tmp_path: Path) -> None:
    """The browser check can fail: a page with a script error and a blocked request is caught."""
    from msprobe_dask.report.html import CSP

    bad = (
        f'<!DOCTYPE html><html><head><meta http-equiv="Content-Security-Policy" content="{CSP}"></head>'
        '<body><img src="http://example.invalid/x.png"><script>console.error("oops"); undefined_name();'
        "</script></body></html>"
    )
    probe = json.loads(_load(bad, tmp_path).text["probe"])
    assert "oops" in probe["errors"] and any("undefined_name" in e for e in probe["errors"])
    assert probe["violations"] == ["http://example.invalid/x.png"]


@needs_chromium
def test_report_loads_in_headless_chromium(run: tuple[Path, Path], tmp_path: Path) -> None:
    report, out = run
    page = _load(report.read_text(encoding="utf-8"), tmp_path)
    probe = json.loads(page.text["probe"])
    assert probe["errors"] == [] and probe["violations"] == []
    assert probe["resources"] == []  # no request at all
    body = [a for t, a in page.tags if t == "body"]
    assert body[0].get("data-rendered") == "yes"
    drawn: dict[str, list[tuple[int, Any]]] = {}
    label = None
    for tag, attrs in page.tags:
        if tag == "svg" and attrs.get("data-label"):
            label = attrs["data-label"]
            drawn[label] = []
        elif tag in ("circle", "rect") and attrs.get("data-row") is not None:
            value = attrs["data-value"]
            drawn[str(label)].append(
                (int(str(attrs["data-row"])), value if value == "inf" else float(str(value)))
            )
    assert drawn == _csv_points(out)
    cells = [a for t, a in page.tags if t == "td" and a.get("data-rank") is not None]
    assert len(cells) == 8  # 4 ranks x 2 steps
    origin = [a for a in cells if "origin" in str(a.get("class"))]
    assert [(a["data-step"], a["data-rank"]) for a in origin] == [("step0", "2"), ("step1", "2")]


def test_graph_visualize_report(
    run: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report, _ = run
    root = report.parents[1]
    args = ["graph_visualize", "-q", "--report", "-tp", str(root / "target"), "-gp", str(root / "golden")]
    assert main([*args, "-o", str(tmp_path)]) == 0
    [ours] = tmp_path.glob("report_*.html")
    assert f"The report file path is: {ours.resolve()}." in capsys.readouterr().out
    graph = json.loads(_parse(ours.read_text()).text["report-data"])
    first = json.loads(_parse(report.read_text()).text["report-data"])
    assert [g["points"] for g in graph["groups"]] == [g["points"] for g in first["groups"]]
    assert graph["origin"] == first["origin"]
    assert main(["graph_visualize", "--report", "-tp", str(root / "target"), "-o", str(tmp_path / "b")]) == 2
    assert "--report: needs -gp GOLDEN" in capsys.readouterr().err


def test_report_command_prints_the_summary_unless_quiet(
    run: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """`report OUT` ends as compare does: the summary of the results it read, the first divergence of the
    whole job (rank 2's fault, step 0), then the path line; -q only the path line (it printed only that,
    with or without -q)."""
    _, out = run
    assert main(["report", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "Summary of compare:" and any(line.startswith("step1/rank3: ") for line in lines)
    assert [line for line in lines if line.startswith("First divergence: ")] == [
        "First divergence: step0/rank2 Tensor.__add__.0.forward"
    ]
    assert lines[-1].startswith("The report file path is: ")
    assert main(["report", "-q", str(out)]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith("The report file path is: ")


def test_graph_visualize_report_names_the_job_s_first_divergence(
    run: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """graph_visualize's own summary judges node by node, rank by rank; with --report the rows are
    compared and the job's first divergence (its rank, step and node) is printed before the path line."""
    report, _ = run
    root = report.parents[1]
    args = ["graph_visualize", "--report", "-tp", str(root / "target"), "-gp", str(root / "golden")]
    assert main([*args, "-o", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    at = lines.index("First divergence: step0/rank2 Tensor.__add__.0.forward")
    assert lines[at + 1 :][-1].startswith("The report file path is: ")
