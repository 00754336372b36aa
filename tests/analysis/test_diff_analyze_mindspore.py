"""``compare`` and ``compare -da`` on a MindSpore multi-rank dump (tests/data/ms_da: multirank/step0 as
the MindSpore dumper labels it, written by ms_da/make_ms_da.py, reference outputs in ms_da/ref/).

The plain compare equals the reference cell for cell. Its ``-da`` does not: the reference's MindSpore
path drops the flag, writes the ordinary csv files and reports no diff node (D18); ours writes the per-rank
json files and finds the same first divergence as on the PyTorch original.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from conftest import case_dir, read_csv
from test_diff_analyze import assert_same_json

from msprobe_dask.cli import main

STAMP = re.compile(r"_\d{14}(?=\.(csv|json)$)")
MS = case_dir("ms_da")


def _compare(out: Path, *extra: str) -> int:
    return main(
        ["compare", "-q", "-tp", str(MS / "target"), "-gp", str(MS / "golden"), "-o", str(out), *extra]
    )


def _files(folder: Path, pattern: str) -> dict[str, Path]:
    return {STAMP.sub("", p.name): p for p in folder.glob(pattern)}


def test_mindspore_multirank_compare_equals_reference(tmp_path: Path) -> None:
    assert _compare(tmp_path) == 0
    ours, ref = _files(tmp_path, "*.csv"), _files(MS / "ref" / "compare_csv", "*.csv")
    assert sorted(ours) == sorted(ref) == [f"compare_result_rank{r}.csv" for r in range(4)]
    for name in ref:
        assert read_csv(ours[name]) == read_csv(ref[name]), name


def _as_mindspore(node: dict[str, Any]) -> dict[str, Any]:
    """A node of the reference's PyTorch diff_analyze as it reads on the MindSpore labels: the op is
    ``MintDistributed.``; MindSpore's P2POp is not unpacked (the reference's own MindSpore csv names those
    rows ``...tensor``), so the rows carry no peer."""
    rows = node["data_info"]
    return {
        **node,
        "op_name": "Mint" + node["op_name"],
        "data_info": {
            state: {f"Mint{name}.tensor": {**info, "NPU P2POp peer": "None"} for name, info in items.items()}
            for state, items in rows.items()
        },
    }


def test_mindspore_first_divergence(tmp_path: Path) -> None:
    """D18: the reference's -da wrote the same csv files as its plain compare and found nothing."""
    ref_da, ref_csv = _files(MS / "ref" / "compare_da", "*"), _files(MS / "ref" / "compare_csv", "*")
    assert sorted(ref_da) == sorted(ref_csv)
    assert all(ref_da[n].read_bytes() == ref_csv[n].read_bytes() for n in ref_da)
    assert "Cannot find any diff node" in (MS / "ref" / "logs" / "compare_da.log").read_text()

    assert _compare(tmp_path, "-da") == 0
    assert sorted(_files(tmp_path, "compare_result_*.json")) == [
        f"compare_result_rank{r}.json" for r in range(4)
    ]
    [ours] = tmp_path.glob("diff_analyze_*.json")
    [pytorch] = (case_dir("multirank") / "ref" / "compare_step0_da").glob("diff_analyze_*.json")
    expected = {
        rank: [_as_mindspore(n) for n in nodes] for rank, nodes in json.loads(pytorch.read_text()).items()
    }
    assert_same_json(json.loads(ours.read_text()), expected)
    tables = _files(tmp_path, "*.csv")  # the csv files the reference's -da wrote, too (D23)
    assert sorted(tables) == sorted(ref_csv)
    for name in ref_csv:
        assert read_csv(tables[name]) == read_csv(ref_csv[name]), name
