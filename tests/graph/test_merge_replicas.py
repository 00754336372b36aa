"""A merge compare of two data-parallel replicas a side (tests/data/pp_merge/ref/vis_merge_dp2): the
golden side's tp groups are single ranks (nothing to TP-merge, no parallel_merge_info), and each
replica's Bench graph is named by its NPU graph's rank, as the reference names them; so in this
process, on one worker process and on two (graph/merge/plan.py: a task builds, merges and compares a
replica, the vis.db written replica by replica), where no graph and no rows pass through the run's own
process."""

from __future__ import annotations

import gzip
import json
import pickle
import sqlite3
import sys
from pathlib import Path

import pytest
from dask.callbacks import Callback

from msprobe_dask.cli import main

DATA = Path(__file__).resolve().parents[1] / "data" / "pp_merge"
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "workflows"))

from gen_merge_replicas import write_replicas  # noqa: E402

SMALL_BYTES = 16 << 10
"""The most a task's result pickles to on worker processes (the names of held graphs and rows, the
run's summary); one rank graph of this input pickles to about 0.5 MB."""


@pytest.mark.parametrize("flags", [[], ["--workers", "1"], ["--workers", "2"]], ids=["here", "w1", "w2"])
def test_merge_compare_of_two_replicas_a_side_is_the_references(tmp_path: Path, flags: list[str]) -> None:
    target, golden = tmp_path / "target", tmp_path / "golden"
    write_replicas(DATA / "target", target, tp=1, pp=2, dp=2)
    write_replicas(DATA / "golden", golden, tp=1, pp=1, dp=2)
    argv = ["graph_visualize", "-q", "-tp", str(target), "-gp", str(golden), "-o", str(tmp_path / "out")]
    results: dict[str, int] = {}  # on worker processes, each task's result as this process gets it, pickled

    def got(key: object, result: object, *_: object) -> None:
        if flags:  # (in this process the vis.db's writer passes open from task to task: not pickled)
            results[str(key)] = len(pickle.dumps(result))

    with Callback(posttask=got):
        assert main([*argv, "--rank_size", "4", "2", "--tp", "1", "1", "--pp", "2", "1", *flags]) == 0
    if flags:
        assert max(results.values()) < SMALL_BYTES, results
    ref = json.loads(gzip.decompress((DATA / "ref" / "vis_merge_dp2" / "cells.json.gz").read_bytes()))
    [db] = (tmp_path / "out").glob("*.vis.db")
    assert [p.name for p in (tmp_path / "out").iterdir()] == [db.name]  # (no spool folder left)
    con = sqlite3.connect(db)
    nodes = con.execute(f"SELECT {', '.join(ref['columns'])} FROM tb_nodes ORDER BY rowid").fetchall()
    ours = {
        "tb_nodes": [list(r) for r in nodes],
        "tb_stack": [r[0] for r in con.execute("SELECT id FROM tb_stack ORDER BY rowid")],
        "tb_config": [list(r) for r in con.execute("SELECT * FROM tb_config")],
    }
    con.close()
    for table in ("tb_config", "tb_stack", "tb_nodes"):
        assert len(ours[table]) == len(ref[table]), table
        bad = [(o, r) for o, r in zip(ours[table], ref[table]) if o != r]
        assert not bad, f"{table}: {len(bad)} rows differ, the first: {bad[0]}"
