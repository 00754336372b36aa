"""``graph_visualize --file_type json`` (merge builds): our step{s}/rank{r}/*.json equal the reference's,
key for key and value for value (and in fact byte for byte)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from msprobe_dask.cli import main as cli_main

DATA = Path(__file__).resolve().parents[1] / "data"


def _json_runs() -> list[tuple[str, str, list[str]]]:
    out = []
    for commands in sorted(DATA.glob("*/ref/commands.json")):
        for cmd in json.loads(commands.read_text()):
            argv = cmd["argv"]
            if argv[:2] == ["msprobe", "graph_visualize"] and cmd["rc"] == 0 and "json" in argv:
                out.append((commands.parent.parent.name, cmd["name"], argv[2:]))
    return out


RUNS = _json_runs()


def json_diff(ours: Any, ref: Any, path: str = "") -> list[str]:
    """Every difference between two JSON documents: key sets, key order, list lengths, values."""
    if isinstance(ref, dict) and isinstance(ours, dict):
        if list(ours) != list(ref):
            only_ours = [k for k in ours if k not in ref][:5]
            only_ref = [k for k in ref if k not in ours][:5]
            problems = [f"{path}: keys differ (ours only {only_ours}, ref only {only_ref}, or order)"]
        else:
            problems = []
        for k in ours:
            if k in ref:
                problems += json_diff(ours[k], ref[k], f"{path}/{k}")
        return problems
    if isinstance(ref, list) and isinstance(ours, list):
        problems = [f"{path}: {len(ours)} items vs {len(ref)}"] if len(ours) != len(ref) else []
        for i, (a, b) in enumerate(zip(ours, ref)):
            problems += json_diff(a, b, f"{path}[{i}]")
        return problems
    same_nan = isinstance(ours, float) and isinstance(ref, float) and math.isnan(ours) and math.isnan(ref)
    if type(ours) is not type(ref) or (ours != ref and not same_nan):
        return [f"{path}: {ours!r} vs {ref!r}"]
    return []


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


@pytest.mark.parametrize(("case", "name", "argv"), RUNS, ids=[f"{c}-{n}" for c, n, _ in RUNS])
def test_same_merged_json_as_reference(case: str, name: str, argv: list[str], tmp_path: Path) -> None:
    args = list(argv)
    args[args.index("-o") + 1] = str(tmp_path / "out")
    args[args.index("-tp") + 1] = str(DATA / args[args.index("-tp") + 1])
    assert cli_main(["graph_visualize", *args]) == 0
    ours, ref = tmp_path / "out", DATA / case / "ref" / name
    assert _files(ours) == _files(ref)
    for rel in _files(ref):
        a, b = (ours / rel).read_text(), (ref / rel).read_text()
        problems = json_diff(json.loads(a), json.loads(b))
        assert not problems, f"{rel}:\n" + "\n".join(problems[:20])
        assert a == b, f"{rel}: same content, different text layout"


def test_every_merge_case_has_a_json_run() -> None:
    assert {c for c, _, _ in RUNS} >= {"tp_merge", "pp_merge", "tp_pp_merge", "vpp_merge"}


def test_json_diff_reports_values_keys_and_order() -> None:
    ref = {"a": 1, "b": [1.0, {"c": True}]}
    assert json_diff(ref, ref) == []
    assert json_diff({"a": 1, "b": [1.0, {"c": False}]}, ref) == ["/b[1]/c: False vs True"]
    assert json_diff({"b": [1.0, {"c": True}], "a": 1}, ref)[0].startswith(": keys differ")
    assert json_diff({"a": 1.0, "b": [1.0, {"c": True}]}, ref) == ["/a: 1.0 vs 1"]
    assert json_diff({"a": 1, "b": [1.0]}, ref) == ["/b: 1 items vs 2"]
