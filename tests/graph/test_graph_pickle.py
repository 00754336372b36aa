"""A Graph pickles flat (model.Graph.__reduce__), as it goes to a dask worker: the same graph comes back."""

from __future__ import annotations

import pickle
from fractions import Fraction
from pathlib import Path

import pytest

from msprobe_dask.graph.build import build_graph
from msprobe_dask.graph.compare import compare_graphs
from msprobe_dask.graph.dump_files import GraphSource
from msprobe_dask.graph.micro_steps import assign_micro_steps
from msprobe_dask.graph.model import Graph, Node

DATA = Path(__file__).resolve().parents[1] / "data"
CASES = ["stat_mix/target", "md5_mix/golden", "transformer_big/target", "multirank/target/step0/rank1"]


def _shape(g: Graph) -> list[tuple]:
    """Everything a build sets, node by node, with links as ids."""
    return [
        (
            key,
            n.id,
            n.type,
            n.parent.id if n.parent is not None else None,
            [c.id for c in n.children],
            n.stack,
            n.micro,
        )
        for key, n in g.nodes.items()
    ]


def _same(a: Graph, b: Graph) -> None:
    assert _shape(a) == _shape(b)
    assert a.root.id == b.root.id and a.root is a.nodes[a.root.id]
    assert (a.task, a.framework, a.data_path, a.micro_steps, a.megatron, a.step, a.rank) == (
        b.task,
        b.framework,
        b.data_path,
        b.micro_steps,
        b.megatron,
        b.step,
        b.rank,
    )
    assert (a.header, a.folder, a.no_md5, a.items_pending) == (b.header, b.folder, b.no_md5, b.items_pending)
    assert repr(dict(a.data)) == repr(dict(b.data))  # (repr: NaN values are not equal to themselves)


def _state(g: Graph) -> list[tuple]:
    """What a compare sets besides the build, node by node."""
    return [
        (n.input_data, n.output_data, n.link, n.precision, n.overflow, n.merge_info) for n in g.nodes.values()
    ]


@pytest.mark.parametrize("case", CASES)
def test_a_built_graph_pickles_to_the_same_graph(case: str) -> None:
    g = build_graph(GraphSource(str(DATA / case), 1, 2), items=False)
    _same(pickle.loads(pickle.dumps(g)), g)


def test_a_compared_graph_keeps_its_items_links_and_results() -> None:
    """Equal stacks stay one list, so the stack numbers (rows.number_stacks) are those of the original."""
    npu = build_graph(GraphSource(str(DATA / "stat_mix" / "target")))
    bench = build_graph(GraphSource(str(DATA / "stat_mix" / "golden")))
    compare_graphs(npu, bench, "summary")
    assign_micro_steps(npu, bench)
    copy = pickle.loads(pickle.dumps(npu))
    _same(copy, npu)
    assert repr(_state(copy)) == repr(_state(npu))
    assert any(n.link for n in copy.nodes.values()) and any(n.precision == 0 for n in npu.nodes.values())
    assert len({id(n.stack) for n in copy.nodes.values()}) == len({id(n.stack) for n in npu.nodes.values()})


def test_a_node_outside_the_graph_is_pickled_as_it_is() -> None:
    g = build_graph(GraphSource(str(DATA / "stat_mix" / "target")), items=False)
    stray = Node("stray", 0)
    stray.attach(g.root)
    copy = pickle.loads(pickle.dumps(g))
    assert copy.root.children[-1].id == "stray" and "stray" not in copy.nodes
    _same(copy, g)


def test_a_value_marshal_does_not_take_is_pickled() -> None:
    """The nodes' lists travel marshalled; a value of another type (here a node's item) pickled."""
    g = build_graph(GraphSource(str(DATA / "stat_mix" / "target")))
    node = next(n for n in g.nodes.values() if n.input_data)
    node.input_data = {**node.input_data, "odd": {"value": Fraction(1, 3)}}
    copy = pickle.loads(pickle.dumps(g))
    assert copy.nodes[node.id].input_data["odd"] == {"value": Fraction(1, 3)}
    _same(copy, g)
