"""``-tensor_log``: msprobe's per-row tensor compare log, the reference's lines for compare and
graph_visualize (tests/data/tensor_mix/ref/tensor_log, graph_visualize.md §3.3, §8.2); README D37."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import pytest

from msprobe_dask.cli import main

CASE = Path(__file__).resolve().parent / "data" / "tensor_mix"
PREFIX = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \(\d+\) \[INFO\] ")
NUMBERS = re.compile(r"Compare result: Cosine [0-9]")


def _lines(err: str) -> list[str]:
    """The tensor log's lines, without msprobe's prefix (which each must have)."""
    found = []
    for line in err.splitlines():
        text = PREFIX.sub("", line)
        if text.startswith("start compare: ") or " Compare result: " in text:
            assert text != line, f"no msprobe log prefix: {line!r}"
            found.append(text.rstrip())
    return found


@pytest.mark.parametrize(
    ("command", "target", "golden", "ref"),
    [
        ("compare", "target/dump.json", "golden/dump.json", "compare.txt.gz"),
        ("graph_visualize", "target", "golden", "vis.txt.gz"),
    ],
)
def test_tensor_log_is_the_references(
    command: str, target: str, golden: str, ref: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [command, "-tp", str(CASE / target), "-gp", str(CASE / golden), "-o", str(tmp_path), "-q"]
    assert main([*argv, "-tensor_log"]) == 0
    ours = _lines(capsys.readouterr().err)
    theirs = gzip.decompress((CASE / "ref" / "tensor_log" / ref).read_bytes()).decode().splitlines()
    starts = [line for line in theirs if line.startswith("start compare: ")]
    assert [line for line in ours if line.startswith("start compare: ")] == starts  # every row, in order
    measured = [line for line in theirs if NUMBERS.search(line)]  # the rows with numbers: every cell
    assert len(measured) > 500 and [line for line in ours if NUMBERS.search(line)] == measured
    # D37: a row without numbers logs its cells, where the reference logs its engine's message
    # ("NPU does not have data file.", a 0-d tensor's text four times)
    results = [line for line in ours if " Compare result: " in line]
    assert len(results) == len(starts) and all(" Compare result: Cosine " in line for line in results)


def test_without_the_flag_no_tensor_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["graph_visualize", "-tp", str(CASE / "target"), "-gp", str(CASE / "golden"), "-o", str(tmp_path)]
    assert main([*argv, "-q"]) == 0
    assert _lines(capsys.readouterr().err) == []
