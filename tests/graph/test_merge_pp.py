"""PP and VPP merge (graph_visualize.md §6.5, §6.6): hand-made graphs for each rule, and the real
Megatron pipeline dumps against the reference's merged vis.db.

The hand-made expectations were checked against the reference tool on dumps with the same trees and
statistics (root-level layers, three stages, three virtual chunks)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import pytest
from conftest import case_dir, reference_file

from msprobe_dask.errors import DumpError
from msprobe_dask.graph.build import build_graph
from msprobe_dask.graph.dump_files import GraphSource
from msprobe_dask.graph.item_text import format_items
from msprobe_dask.graph.merge.pp import PPResult, merge_pp_group
from msprobe_dask.graph.merge.vpp import merge_vpp
from msprobe_dask.graph.model import MODULE, ROOT_ID, Graph, Node, node_type_of

Spec = Sequence[tuple[str, str | None, float, float]]  # (id, parent id or None = root, input, output)


def _tensor(key: str, v: float) -> dict:
    return {
        "full_op_name": key,
        "type": "torch.Tensor",
        "dtype": "torch.float32",
        "shape": "[2]",
        "Max": v,
        "Min": v,
        "Mean": v,
        "Norm": abs(v),
        "data_name": "-1",
    }


def _graph(rank: int, spec: Spec) -> Graph:
    root = Node(ROOT_ID, MODULE)
    nodes = {ROOT_ID: root}
    for nid, parent, i, o in spec:
        node = Node(nid, node_type_of(nid))
        node.input_data = {f"{nid}.input.0": _tensor(f"{nid}.input.0", i)}
        node.output_data = {f"{nid}.output.0": _tensor(f"{nid}.output.0", o)}
        node.attach(nodes[parent] if parent else root)
        nodes[nid] = node
    return Graph(
        root=root, nodes=nodes, data={}, task="statistics", framework="pytorch", data_path=None, rank=rank
    )


def _merge(*specs: Spec) -> PPResult:
    return merge_pp_group([_graph(r, s) for r, s in enumerate(specs)])


def _ids(g: Graph, node_id: str) -> list[str]:
    return [c.id for c in g.nodes[node_id].children]


def _value(node: Node, kind: str) -> float:
    data = node.input_data if kind == "input" else node.output_data
    [(key, item)] = data.items()
    assert key == item["full_op_name"] == f"{node.id}.{kind}.0"
    return item["Max"]


def _assert_consistent(g: Graph) -> None:
    """The node map holds exactly the reachable nodes, each under its id, with its items keyed by it."""
    reachable = g.sorted_nodes()
    assert {id(n) for n in reachable} == {id(n) for n in g.nodes.values()}
    for node in reachable:
        assert g.nodes[node.id] is node
        for c in node.children:
            assert c.parent is node
        for key, item in (node.input_data | node.output_data).items():
            assert key.startswith(node.id + ".") and item["full_op_name"] == key


NET, BWD = "Module.model.Net.forward.0", "Module.model.Net.backward.0"


def _stage(r: int, first: bool = False, last: bool = False, layers: tuple[int, ...] = (0, 1)) -> list:
    """One pipeline stage: a Net holding local layers 0..n-1 (each with a Linear and an API)."""
    f = 10.0 * r
    spec: list = [(NET, None, 1.0, 2.0 + r)]
    if first:
        spec.append(("Module.model.emb.Emb.forward.0", NET, 1.0, 1.5))
    for i in layers:
        layer = f"Module.model.layers.{i}.Blk.forward.0"
        spec += [
            (layer, NET, f + i, f + i + 1),
            (f"Module.model.layers.{i}.fc.Lin.forward.0", layer, f + i, f + i + 1),
            (f"Tensor.mul.{i}.forward", f"Module.model.layers.{i}.fc.Lin.forward.0", f + i, f + i + 1),
        ]
    if last:
        spec += [("Module.model.head.Lin.forward.0", NET, 5.0, 6.0), ("Tensor.mul.9.forward", NET, 5.0, 6.0)]
    spec.append((BWD, None, 3.0 + r, 4.0))
    if last:
        spec.append(("Module.model.head.Lin.backward.0", BWD, 5.0, 6.0))
    for i in reversed(layers):
        layer = f"Module.model.layers.{i}.Blk.backward.0"
        spec += [(layer, BWD, 7.0, 7.0), (f"Module.model.layers.{i}.fc.Lin.backward.0", layer, 7.0, 7.0)]
    if first:
        spec.append(("Module.model.emb.Emb.backward.0", BWD, 1.0, 1.5))
    return spec


def _layer(i: int, d: str = "forward") -> str:
    return f"Module.model.layers.{i}.Blk.{d}.0"


def test_three_stages_forward_layers_renumbered_in_stage_order() -> None:
    g = _merge(_stage(0, first=True), _stage(1), _stage(2, last=True)).graph
    assert _ids(g, NET) == [
        "Module.model.emb.Emb.forward.0",
        *(_layer(i) for i in range(6)),
        "Module.model.head.Lin.forward.0",
        "Tensor.mul_rank2.9.forward",
    ]
    # a moved layer keeps its own data; its descendants follow its new index, its APIs get _rank{r}
    assert _value(g.nodes[_layer(3)], "input") == 11.0
    assert _ids(g, _layer(3)) == ["Module.model.layers.3.fc.Lin.forward.0"]
    assert _ids(g, "Module.model.layers.3.fc.Lin.forward.0") == ["Tensor.mul_rank1.1.forward"]
    assert _ids(g, "Module.model.layers.4.fc.Lin.forward.0") == ["Tensor.mul_rank2.0.forward"]
    assert _value(g.nodes["Tensor.mul_rank2.0.forward"], "output") == 21.0
    _assert_consistent(g)


def test_three_stages_backward_moved_first_by_descending_rank_and_numbered_from_the_end() -> None:
    result = _merge(_stage(0, first=True), _stage(1), _stage(2, last=True))
    g = result.graph
    assert _ids(g, BWD) == [
        "Module.model.head.Lin.backward.0",
        *(_layer(i, "backward") for i in (5, 4, 3, 2, 1, 0)),
        "Module.model.emb.Emb.backward.0",
    ]
    # backward layers are equal on every stage: they move because their forward twins did
    assert {n.id for n in result.merged} == {_layer(i, d) for i in (0, 1) for d in ("forward", "backward")}
    assert {n.id: r for n, r in result.moved.items()} == {
        **{_layer(i, d): 1 for i in (2, 3) for d in ("forward", "backward")},
        **{_layer(i, d): 2 for i in (4, 5) for d in ("forward", "backward")},
        "Module.model.head.Lin.forward.0": 2,
        "Tensor.mul_rank2.9.forward": 2,
        "Module.model.head.Lin.backward.0": 2,
    }
    _assert_consistent(g)


def test_forward_output_and_backward_input_come_from_the_last_stage() -> None:
    g = _merge(_stage(0, first=True), _stage(1), _stage(2, last=True)).graph
    # Net.forward: same input, different outputs -> the last stage's output (2.0 + 2)
    assert (_value(g.nodes[NET], "input"), _value(g.nodes[NET], "output")) == (1.0, 4.0)
    # Net.backward: different inputs, same output -> the last stage's input (3.0 + 2)
    assert (_value(g.nodes[BWD], "input"), _value(g.nodes[BWD], "output")) == (5.0, 4.0)


def test_forward_with_different_inputs_keeps_its_own_data_when_not_a_layer() -> None:
    main = [
        ("Module.a.A.forward.0", None, 1.0, 2.0),
        ("Module.a.b.B.forward.0", "Module.a.A.forward.0", 1.0, 2.0),
    ]
    other = [
        ("Module.a.A.forward.0", None, 3.0, 4.0),
        ("Module.a.b.B.forward.0", "Module.a.A.forward.0", 1.0, 9.0),
    ]
    g = _merge(main, other).graph
    a, b = g.nodes["Module.a.A.forward.0"], g.nodes["Module.a.b.B.forward.0"]
    assert (_value(a, "input"), _value(a, "output")) == (1.0, 2.0)
    assert (_value(b, "input"), _value(b, "output")) == (1.0, 9.0)  # recursion reached the child


def test_a_layer_needs_both_inputs_and_outputs_to_differ() -> None:
    main = [(NET, None, 1.0, 1.0), (_layer(0), NET, 1.0, 2.0)]
    other = [(NET, None, 1.0, 1.0), (_layer(0), NET, 1.0, 3.0)]
    result = _merge(main, other)
    assert _ids(result.graph, NET) == [_layer(0)]
    assert not result.merged and not result.moved
    assert _value(result.graph.nodes[_layer(0)], "output") == 3.0  # forward, outputs differ only


def test_children_only_on_another_stage_are_appended_even_if_the_id_exists_elsewhere() -> None:
    main = [(NET, None, 1.0, 1.0), (_layer(0), NET, 1.0, 2.0), ("Tensor.t.8.forward", _layer(0), 1.0, 1.0)]
    other = [(NET, None, 1.0, 1.0), ("Tensor.t.8.forward", NET, 5.0, 5.0)]
    g = _merge(main, other).graph
    assert _ids(g, NET) == [_layer(0), "Tensor.t_rank1.8.forward"]
    assert _ids(g, _layer(0)) == ["Tensor.t.8.forward"]
    assert _value(g.nodes["Tensor.t_rank1.8.forward"], "input") == 5.0
    _assert_consistent(g)


def test_nothing_below_a_node_missing_on_another_stage_is_merged() -> None:
    main = [
        ("Module.a.A.forward.0", None, 1.0, 1.0),
        ("Module.a.x.X.forward.0", "Module.a.A.forward.0", 1.0, 1.0),
    ]
    other = [
        ("Module.a.B.forward.0", None, 1.0, 1.0),
        ("Module.a.y.Y.forward.0", "Module.a.B.forward.0", 1.0, 1.0),
    ]
    g = _merge(main, other).graph
    assert [c.id for c in g.root.children] == ["Module.a.A.forward.0"]
    assert _ids(g, "Module.a.A.forward.0") == ["Module.a.x.X.forward.0"]


def test_optimizer_and_root_apis_are_not_merged() -> None:
    main = [
        ("optimizer", None, 1.0, 1.0),
        ("Tensor.add_.0.forward", "optimizer", 1.0, 1.0),
        ("Tensor.add.0.forward", None, 5.0, 6.0),
    ]
    other = [
        ("optimizer", None, 1.0, 1.0),
        ("Tensor.add_.1.forward", "optimizer", 1.0, 1.0),
        ("Tensor.add.0.forward", None, 5.0, 7.0),
    ]
    g = _merge(main, other).graph
    assert _ids(g, "optimizer") == ["Tensor.add_.0.forward"]
    assert _value(g.nodes["Tensor.add.0.forward"], "output") == 6.0


def test_root_layers_and_root_unique_nodes() -> None:
    """Layers at the root: moved layers are numbered first, then the other stage's root-only nodes
    follow in (position, rank) order, numbered after every layer now at the root; every layers
    pattern of a descendant id takes the new index."""
    inner = "Module.layers.0.inner.layer.0.Lin.forward.0"
    main = [
        ("Module.layers.0.Block.forward.0", None, 1.0, 2.0),
        (inner, "Module.layers.0.Block.forward.0", 1.0, 2.0),
        ("Module.layers.1.Block.forward.0", None, 2.0, 3.0),
    ]
    other = [
        ("Module.head.Lin.forward.0", None, 9.0, 9.5),
        ("Module.layers.0.Block.forward.0", None, 3.0, 4.0),
        (inner, "Module.layers.0.Block.forward.0", 3.0, 4.0),
        ("Module.layers.1.Block.forward.0", None, 4.0, 5.0),
        ("Apis_Between_Modules.0", None, 1.0, 1.0),
        ("Module.layers.7.Block.forward.0", None, 8.0, 8.5),
    ]
    g = _merge(main, other).graph
    assert [c.id for c in g.root.children] == [
        "Module.layers.0.Block.forward.0",
        "Module.layers.1.Block.forward.0",
        "Module.layers.2.Block.forward.0",
        "Module.layers.3.Block.forward.0",
        "Module.head.Lin.forward.0",
        "Module.layers.4.Block.forward.0",
    ]
    assert _ids(g, "Module.layers.2.Block.forward.0") == ["Module.layers.2.inner.layer.2.Lin.forward.0"]
    assert _value(g.nodes["Module.layers.4.Block.forward.0"], "input") == 8.0
    _assert_consistent(g)


def test_depth_limit() -> None:
    spec = [
        (f"Module.m{d}.M.forward.0", f"Module.m{d - 1}.M.forward.0" if d else None, 1.0, 1.0)
        for d in range(1003)
    ]
    with pytest.raises(DumpError, match="deeper than 1000"):
        _merge(spec, spec)
    _merge(spec[:1001], spec[:1001])


# ------------------------------------------------------------------------------------------ VPP


def _vpp_stage(r: int, vpp: int) -> list:
    """Chunk c of stage r holds global layer 2c+r as its local layers.0; the last chunk of the last
    stage also holds a norm."""
    spec: list = []
    for c in range(vpp):
        g, net, dec = 2 * c + r, f"Module.{c}.Net.forward.0", f"Module.{c}.dec.Dec.forward.0"
        spec += [
            (net, None, 1.0 + c, 2.0 + c + 0.1 * r),
            (dec, net, 1.0 + c, 2.0 + c + 0.1 * r),
            (f"Module.{c}.dec.layers.0.Blk.forward.0", dec, g, g + 1.0),
            (f"Tensor.mul.{c}.forward", f"Module.{c}.dec.layers.0.Blk.forward.0", g, g + 1.0),
        ]
        if r == 1 and c == vpp - 1:
            spec.append((f"Module.{c}.dec.norm.LN.forward.0", dec, 7.0, 8.0))
        spec.append((f"Module.{c}.other.O.forward.0", net, 1.0 + c, 2.0 + c + 0.1 * r))
    for c in reversed(range(vpp)):
        g, net, dec = 2 * c + r, f"Module.{c}.Net.backward.0", f"Module.{c}.dec.Dec.backward.0"
        spec += [(net, None, 3.0 + c + 0.1 * r, 4.0 + c), (dec, net, 3.0 + c + 0.1 * r, 4.0 + c)]
        if r == 1 and c == vpp - 1:
            spec.append((f"Module.{c}.dec.norm.LN.backward.0", dec, 7.0, 8.0))
        spec.append((f"Module.{c}.dec.layers.0.Blk.backward.0", dec, g, g + 1.0))
    return spec


def test_vpp_folds_the_chunks_into_chunk_0() -> None:
    result = _merge(_vpp_stage(0, 3), _vpp_stage(1, 3))
    merge_vpp(result, 3)
    g = result.graph
    assert [c.id for c in g.root.children] == ["Module.0.Net.forward.0", "Module.0.Net.backward.0"]
    fwd = [f"Module.0.dec.layers.{i}.Blk.forward.0" for i in range(6)]
    assert _ids(g, "Module.0.dec.Dec.forward.0") == [*fwd, "Module.0.dec.norm.LN.forward.0"]
    bwd = [f"Module.0.dec.layers.{i}.Blk.backward.0" for i in range(6)]
    assert _ids(g, "Module.0.dec.Dec.backward.0") == ["Module.0.dec.norm.LN.backward.0", *reversed(bwd)]
    for i in range(6):  # global layer i, wherever it came from
        assert _value(g.nodes[fwd[i]], "input") == _value(g.nodes[bwd[i]], "input") == i
    assert _ids(g, fwd[5]) == ["Tensor.mul_rank1.2.forward"]
    # the chunk-0 modules outside the layers take the last chunk's (PP-merged) data
    assert _value(g.nodes["Module.0.Net.forward.0"], "output") == 4.1
    assert _value(g.nodes["Module.0.other.O.forward.0"], "output") == 4.1
    assert _value(g.nodes["Module.0.Net.backward.0"], "input") == 5.1
    _assert_consistent(g)


# ------------------------------------------------------------------------------ real dumps


def _rows(case: str) -> list[tuple]:
    db = reference_file(case, "build_merge", "*.vis.db")
    with sqlite3.connect(db) as con:
        return con.execute(
            "SELECT node_name, up_node, sub_nodes, input_data, output_data FROM tb_nodes "
            "WHERE data_source = 'NPU' ORDER BY node_order"
        ).fetchall()


def _stats(data: str | None) -> dict:
    return {
        k: {s: v.get(s) for s in ("Max", "Min", "Mean", "Norm")} for k, v in json.loads(data or "{}").items()
    }


def _ours(node: Node) -> tuple:
    fmt = [_stats(json.dumps(format_items(d, False, False))) for d in (node.input_data, node.output_data)]
    return node.id, node.parent.id if node.parent else None, [c.id for c in node.children], *fmt


def _theirs(row: tuple) -> tuple:
    name, up, subs, ins, outs = row
    return name, up or None, json.loads(subs) if subs else [], _stats(ins), _stats(outs)


def _build(case: str, ranks: Sequence[int]) -> list[Graph]:
    target = case_dir(case) / "target"
    return [build_graph(GraphSource(str(Path(target, f"rank{r}")), rank=r)) for r in ranks]


def _without_collections(rows: list[tuple]) -> list[tuple]:
    """Rows outside the API collections (merged by the driver, not by PP/VPP)."""
    coll = "Apis_Between_Modules"
    out = []
    for name, up, subs, *data in rows:
        if not name.startswith(coll) and not (up or "").startswith(coll):
            out.append((name, up, [s for s in subs if not s.startswith(coll)], *data))
    return out


def test_pp_merge_equals_reference() -> None:
    g = merge_pp_group(_build("pp_merge", (0, 1))).graph
    ours = [_ours(n) for n in g.sorted_nodes()]
    theirs = [_theirs(r) for r in _rows("pp_merge")]
    assert len(ours) == len(theirs) == 967
    for a, b in zip(ours, theirs):
        assert a == b, b[0]
    assert sum("_rank1." in n.id for n in g.nodes.values()) == 332
    _assert_consistent(g)


def test_tp_pp_merge_first_pp_group_has_the_reference_structure() -> None:
    """Before TP, the pp group [0, 2] already has the merged tree (the stats are TP-merged later)."""
    g = merge_pp_group(_build("tp_pp_merge", (0, 2))).graph
    ours = [_ours(n)[:3] for n in g.sorted_nodes()]
    theirs = [_theirs(r)[:3] for r in _rows("tp_pp_merge")]
    assert ours == theirs
    assert sum("_rank2." in n.id for n in g.nodes.values()) == 350


def test_vpp_merge_equals_reference() -> None:
    result = merge_pp_group(_build("vpp_merge", (0, 1)))
    merge_vpp(result, 2)
    g = result.graph
    ours = _without_collections([_ours(n) for n in g.sorted_nodes()])
    theirs = _without_collections([_theirs(r) for r in _rows("vpp_merge")])
    assert len(ours) == len(theirs) == 1732
    for a, b in zip(ours, theirs):
        assert a == b, b[0]
    assert not any(n.id.startswith("Module.1.") for n in g.nodes.values())
