"""The shortcuts taken for speed give the plain computation's answers: the JSON encoder, the decimal
formatting pre-check, the md5 scan, the node type and direction renames of the build, the garbage
collector context and the vis.db journal."""

from __future__ import annotations

import gc
import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from export_rule import text_by_the_rule
from hypothesis import given
from hypothesis import strategies as st

from msprobe_dask.graph.build import (
    BWD,
    FWD,
    NO_FORWARD_STACK,
    _backward_of,
    _Builder,
    _renamed,
    build_graph,
)
from msprobe_dask.graph.compare import data_has_md5
from msprobe_dask.graph.dump_files import GraphSource
from msprobe_dask.graph.gcpause import THRESHOLDS, rare_collections_from_now, rare_full_collections
from msprobe_dask.graph.item_text import format_str
from msprobe_dask.graph.jsontext import dumps
from msprobe_dask.graph.model import API, MODULE, Node, node_type_of

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
    assert format_str(s) == text_by_the_rule(s)


def test_md5_scan_agrees_with_the_walk() -> None:
    for case in ("md5_mix", "stat_mix", "transformer_big"):
        g = build_graph(GraphSource(str(DATA / case / "target")), items=False)
        assert (not g.no_md5) == data_has_md5(g.data), case


_PREFIXES = (
    "Module Cell optimizer clip_grad DefaultModel Tensor Torch Functional NPU VF Distributed Aten Mint "
    "Primitive Jit MintFunctional MindSpeed Mo Mi".split()
)
# node ids made of the pieces the type and direction rules look at: a prefix, the character after it,
# a middle, a direction and a call number
_ids = st.tuples(
    st.sampled_from([*_PREFIXES, ""]),
    st.sampled_from([".", "\n", "", "x"]),
    st.sampled_from(["", "relu.0", "layer.backward.forward.1", "a.backward"]),
    st.sampled_from(["", ".forward", ".backward", ".forward.", ".backward.", "backward"]),
    st.sampled_from(["", "0", "3", "12", "1\n", "x"]),
).map("".join)


@given(_ids)
def test_node_type_shortcut(node_id: str) -> None:
    module = re.match(r"^(Module.|Cell.|optimizer|clip_grad|DefaultModel)", node_id)
    api = re.match(
        r"^(Tensor.|Torch.|Functional.|NPU.|VF.|Distributed.|Aten.|Mint.|Primitive.|Jit.|MintFunctional.|"
        r"MindSpeed.)",
        node_id,
    )
    assert node_type_of(node_id) == (API if api and not module else MODULE)


@given(_ids)
def test_direction_renames_are_the_regex_substitutions(node_id: str) -> None:
    assert _backward_of(node_id) == FWD.sub(r".backward.\2", node_id)
    m = BWD.search(node_id)
    if m:
        assert _renamed(m, "forward") == BWD.sub(r".forward.\2", node_id)


def _plain_stack(b: _Builder, node_id: str) -> list[str]:
    stack = b.stacks.get(node_id, [])
    if stack:
        return stack
    if BWD.search(node_id):
        twin = b.nodes.get(BWD.sub(".forward.0", node_id))
        return twin.stack if twin is not None else NO_FORWARD_STACK
    if node_id.endswith(".backward"):
        twin = b.nodes.get(node_id.replace("backward", "forward"))
        return twin.stack if twin is not None else NO_FORWARD_STACK
    return stack


@given(_ids, st.booleans())
def test_a_backward_node_shows_its_forward_twins_stack(node_id: str, with_twins: bool) -> None:
    b = _Builder({}, {}, None, items=False)
    if with_twins:
        for twin in {BWD.sub(".forward.0", node_id), node_id.replace("backward", "forward")} - {node_id}:
            b.nodes[twin] = Node(twin, MODULE, stack=[f"{twin}'s line"])
    assert b.new(node_id).stack == _plain_stack(b, node_id)


def test_gc_thresholds_raised_inside_and_restored() -> None:
    before = gc.get_threshold()
    with rare_full_collections():
        assert all(t >= want for t, want in zip(gc.get_threshold(), THRESHOLDS))
    assert gc.get_threshold() == before


def test_the_command_raises_the_thresholds_before_its_imports_and_restores_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """graph_visualize's command collects rarely from its start: the modules it imports then (dask, the
    graph's) and the plan are long-lived objects that young-generation passes would only walk (T: 56
    passes, 7 ms, one middle-generation pass of them 8.9 ms); the thresholds come back at its end."""
    from msprobe_dask.cli import main
    from msprobe_dask.graph import api

    seen: list[tuple[int, int, int]] = []
    visualize = api.visualize

    def noting(*args: Any, **kwargs: Any) -> Any:
        seen.append(gc.get_threshold())
        return visualize(*args, **kwargs)

    monkeypatch.setattr(api, "visualize", noting)
    before = gc.get_threshold()
    argv = ["graph_visualize", "-tp", str(DATA / "multirank/target"), "-o", str(tmp_path), "-q"]
    assert main(argv) == 0
    assert len(seen) == 1 and all(t >= want for t, want in zip(seen[0], THRESHOLDS))
    assert gc.get_threshold() == before


def test_a_worker_keeps_the_raised_thresholds_and_a_run_here_restores_them() -> None:
    """A graph task raises the thresholds for the rest of a worker process's life; inside a run in this
    process (rare_full_collections) it changes nothing, and the run's end restores them."""
    before = gc.get_threshold()
    try:
        with rare_full_collections():
            raised = gc.get_threshold()
            rare_collections_from_now()
            assert gc.get_threshold() == raised
        assert gc.get_threshold() == before
        gc.set_threshold(700, 10, 10)
        rare_collections_from_now()
        assert gc.get_threshold() == THRESHOLDS
        gc.set_threshold(THRESHOLDS[0] * 2, 10, 10)
        rare_collections_from_now()
        assert gc.get_threshold() == (THRESHOLDS[0] * 2, *THRESHOLDS[1:])  # never lowered
    finally:
        gc.set_threshold(*before)


def test_visdb_is_left_in_wal_mode_without_side_files(tmp_path: Path) -> None:
    from msprobe_dask.graph.api import graph_visualize

    path = Path(graph_visualize(DATA / "stat_mix" / "target", output_path=tmp_path))
    assert [p.name for p in tmp_path.iterdir()] == [path.name]
    con = sqlite3.connect(path)
    assert con.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    con.close()


def test_tree_walk_is_the_post_order_dfs() -> None:
    """sorted_nodes' walk for trees gives the DFS's order, and hands over to it on shared nodes and
    cycles."""
    for case in ("transformer_big/target", "multirank/target/step0/rank1", "stat_mix/golden"):
        g = build_graph(GraphSource(str(DATA / case)), items=False)
        assert g._tree_post_order() == g._post_order() == g.sorted_nodes(), case
    g = build_graph(GraphSource(str(DATA / "stat_mix" / "target")), items=False)
    first = g.root.children[0]
    g.root.children.append(first)  # one node under the root twice
    assert g._tree_post_order() is None
    assert g.sorted_nodes() == g._post_order() and g.sorted_nodes().count(first) == 1
    g.root.children.pop()
    first.children.append(g.root)  # a cycle
    assert g._tree_post_order() is None
    assert g.sorted_nodes() == g._post_order() and g.sorted_nodes()[-1] is g.root


def test_a_worker_process_frees_the_graphs_of_finished_tasks() -> None:
    """Outside the run's own context (a dask worker process), a graph task unfreezes what earlier
    tasks froze: a graph's nodes form reference cycles and would otherwise never be freed."""
    import subprocess
    import sys

    code = f"""
import gc, weakref
from msprobe_dask.graph.build import build_graph
from msprobe_dask.graph.dump_files import GraphSource
from msprobe_dask.graph.gcpause import collections_paused, rare_collections_from_now
class Cycle:
    pass
g = build_graph(GraphSource({str(DATA / "stat_mix" / "target")!r}), items=False)
assert gc.get_freeze_count() > 0  # the build froze its nodes
with collections_paused():  # made and frozen as the nodes are
    made = Cycle()
    made.self = made
probe = weakref.ref(made)
del g, made
gc.collect()
assert probe() is not None  # frozen: no collection sees it
rare_collections_from_now()  # the next graph task in this worker
assert gc.get_freeze_count() == 0, gc.get_freeze_count()
gc.collect()
assert probe() is None
print("freed")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "freed", out.stderr
