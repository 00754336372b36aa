"""The shortcuts taken for speed give the plain computation's answers: the JSON encoder, the decimal
formatting pre-check, the md5 scan, the garbage collector context and the vis.db journal."""

from __future__ import annotations

import gc
import json
import sqlite3
from pathlib import Path

from export_rule import text_by_the_rule
from hypothesis import given
from hypothesis import strategies as st

from msprobe_dask.graph.build import GraphSource, build_graph
from msprobe_dask.graph.compare import data_has_md5
from msprobe_dask.graph.gcpause import THRESHOLDS, rare_full_collections
from msprobe_dask.graph.items import _fmt_str
from msprobe_dask.graph.jsontext import dumps

DATA = Path(__file__).resolve().parents[1] / "data"

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(_json)
def test_dumps_is_json_dumps(obj) -> None:
    assert dumps(obj) == json.dumps(obj)


@given(st.text(alphabet="0123456789.%'Nonea-\n\u0663", max_size=24))
def test_decimal_formatting_shortcut(s: str) -> None:
    assert _fmt_str(s) == text_by_the_rule(s)


def test_md5_scan_agrees_with_the_walk() -> None:
    for case in ("md5_mix", "stat_mix", "transformer_big"):
        g = build_graph(GraphSource(str(DATA / case / "target")), items=False)
        assert (not g.no_md5) == data_has_md5(g.data), case


def test_gc_thresholds_raised_inside_and_restored() -> None:
    before = gc.get_threshold()
    with rare_full_collections():
        assert all(t >= want for t, want in zip(gc.get_threshold(), THRESHOLDS))
    assert gc.get_threshold() == before


def test_visdb_is_left_in_wal_mode_without_side_files(tmp_path: Path) -> None:
    from msprobe_dask.graph.api import graph_visualize

    path = Path(graph_visualize(DATA / "stat_mix" / "target", output_path=tmp_path))
    assert [p.name for p in tmp_path.iterdir()] == [path.name]
    con = sqlite3.connect(path)
    assert con.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    con.close()
