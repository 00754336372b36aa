"""Done-when 1 of issue 19: the summary printed at the end of compare and graph_visualize counts what
the written files hold (the csv's Result and Err_message columns; the vis.db's NPU nodes)."""

from __future__ import annotations

import json
import re
import sqlite3
from collections import Counter
from pathlib import Path

import pytest
from conftest import case_dir, read_csv, run_cli

from msprobe_dask.cli import main
from msprobe_dask.summary.kinds import kind_key

HEAD = re.compile(
    r"^(\S+): ([\d,]+) (rows|nodes): ([\d,]+) pass, ([\d,]+) warning, ([\d,]+) error"
    r"(?:, ([\d,]+) not judged)?$"
)
KIND = re.compile(r"^ +([\d,]+) x (.*?)(?:  \(structure\))?$")
PATH = re.compile(r"^The result file path is: (.*)\.$")


def _int(text: str | None) -> int:
    return int(text.replace(",", "")) if text else 0


def parse_summary(stdout: str, path_lines: bool = True) -> tuple[list[dict], list[Path]]:
    """The printed groups (label, counts, kinds) and the result paths, in the order printed."""
    groups: list[dict] = []
    paths = []
    lines = stdout.splitlines()
    for line in lines:
        if m := HEAD.match(line):
            counts = dict(zip(("pass", "warning", "error", "other"), map(_int, m.group(4, 5, 6, 7))))
            groups.append({"label": m[1], "total": _int(m[2]), "counts": counts, "kinds": {}})
        elif (m := KIND.match(line)) and groups:
            groups[-1]["kinds"][m[2]] = _int(m[1])
        elif m := PATH.match(line):
            paths.append(Path(m[1]))
    if path_lines:
        assert paths and all(PATH.match(line) for line in lines[-len(paths) :]), "the path lines are not last"
    return groups, paths


def csv_counts(path: Path) -> tuple[Counter, Counter]:
    """(results, rows per message kind) of a written compare csv."""
    rows = read_csv(path)
    header, body = rows[0], rows[1:]
    kernel = "Accuracy Reached or Not" in header
    result_at = header.index("Accuracy Reached or Not" if kernel else "Result")
    message_at = header.index("Err_message")
    results: Counter = Counter()
    kinds: Counter = Counter()
    for row in body:
        result = row[result_at]
        if kernel:
            result = {"Yes": "pass", "No": "error"}.get(result, "other")
        results[result] += 1
        cell = row[message_at]
        texts = json.loads(cell) if not kernel else [t.strip() for t in cell.splitlines() if t.strip()]
        kinds.update({kind_key(t) for t in texts})
    return results, kinds


def check_group(group: dict, results: Counter, kinds: Counter) -> None:
    assert group["counts"] == {k: results.get(k, 0) for k in ("pass", "warning", "error", "other")}
    assert group["total"] == sum(results.values())
    shown = {kind_key(text): count for text, count in group["kinds"].items()}
    assert shown == {key: kinds[key] for key in shown}, "a message kind's count differs"
    assert sorted(shown.values(), reverse=True) == sorted(kinds.values(), reverse=True)[: len(shown)]


def _dump(case: str, side: str, file: bool) -> str:
    folder = case_dir(case) / side
    return str(folder / "dump.json") if file else str(folder)


COMPARE_CASES = [
    (case, True, [])
    for case in (
        "stat_mix",
        "tensor_mix",
        "md5_mix",
        "xor_mix",
        "L0_only",
        "L1_only",
        "fuzzy",
        "fuzzy_tensor",
        "transformer_big",
        "ms_vs_pt",
        "ms_vs_pt_tensor",
    )
] + [
    ("ms_vs_pt", True, ["-am"]),
    ("multistep", False, []),
    ("multirank", False, []),
    ("ms_da", False, []),
    ("kernel_npy", False, ["--rank", "0,1", "--step", "0,1"]),
    ("kernel_stat", False, []),
]


@pytest.mark.parametrize("case,file,extra", COMPARE_CASES)
def test_compare_summary_counts_the_csv(
    case: str, file: bool, extra: list[str], tmp_path: Path, capsys
) -> None:
    args = ["compare", "-tp", _dump(case, "target", file), "-gp", _dump(case, "golden", file)]
    assert main([*args, "-o", str(tmp_path), *extra]) == 0
    groups, paths = parse_summary(capsys.readouterr().out)
    assert len(groups) == len(paths) >= 1
    for group, path in zip(groups, paths):
        check_group(group, *csv_counts(path))


def test_quiet_prints_only_the_path_lines(tmp_path: Path, capsys) -> None:
    args = [
        "compare",
        "-q",
        "-tp",
        _dump("stat_mix", "target", True),
        "-gp",
        _dump("stat_mix", "golden", True),
    ]
    assert main([*args, "-o", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 and PATH.match(lines[0])


def visdb_counts(path: Path) -> dict[str, tuple[Counter, Counter]]:
    """Per 'step{s}/rank{r}': (NPU nodes by precision, nodes per message kind), read with SQL."""
    names = {0: "pass", 0.5: "warning", 1: "error", None: "other"}
    out: dict[str, tuple[Counter, Counter]] = {}
    with sqlite3.connect(path) as db:
        for step, rank, precision, count in db.execute(
            "SELECT step, rank, precision_index, COUNT(*) FROM tb_nodes"
            " WHERE data_source='NPU' GROUP BY 1, 2, 3"
        ):
            out.setdefault(f"step{step}/rank{rank}", (Counter(), Counter()))[0][names[precision]] += count
        for step, rank, inputs, outputs in db.execute(
            "SELECT step, rank, input_data, output_data FROM tb_nodes WHERE data_source='NPU'"
        ):
            keys = set()
            for text in (inputs, outputs):
                for item in json.loads(text or "{}").values():
                    keys.update(kind_key(m) for m in json.loads(item.get("Err_message", "[]")))
            out[f"step{step}/rank{rank}"][1].update(keys)
    return out


@pytest.mark.parametrize("case", ["stat_mix", "tensor_mix", "md5_mix", "multirank", "multistep", "fuzzy"])
def test_graph_summary_counts_the_visdb(case: str, tmp_path: Path, capsys) -> None:
    args = ["graph_visualize", "-tp", _dump(case, "target", False), "-gp", _dump(case, "golden", False)]
    assert main([*args, "-o", str(tmp_path)]) == 0
    groups, _ = parse_summary(capsys.readouterr().out, path_lines=False)
    (db,) = tmp_path.glob("*.vis.db")
    counts = visdb_counts(db)
    assert [g["label"] for g in groups] == list(counts)
    for group in groups:
        check_group(group, *counts[group["label"]])


def test_the_summary_leaves_no_side_files_beside_the_visdb(tmp_path: Path) -> None:
    """graph_visualize leaves nothing beside its vis.db (no -wal or -shm file), also in a folder whose
    name needs quoting in a URI."""
    out = tmp_path / "out #1 ?%"
    stat_mix = case_dir("stat_mix")
    run = run_cli(
        "graph_visualize", "-tp", str(stat_mix / "target"), "-gp", str(stat_mix / "golden"), "-o", str(out)
    )
    assert run.returncode == 0, run.stderr
    names = [p.name for p in out.iterdir()]
    assert len(names) == 1 and names[0].endswith(".vis.db"), names
