"""Where ``entry_pairs`` places entries in the layer tree (shared by ``compare -lm`` and graph ``-lm``).

Each rule below was seen with the reference (graph_visualize -lm) on renamed copies of real dumps:
pp_merge rank 1 with its TransformerBlock renamed ParallelTransformer and its layers renumbered,
stat_mix with renamed children, transformer_big for the backward API twin.
"""

from __future__ import annotations

from msprobe_dask.match.layer_mapping import entry_pairs

Tree = dict[str, str | None]


def _pairs(npu: Tree, bench: Tree, table: dict | None = None) -> dict[str, str]:
    """Entries in construct order (dump order follows it closely enough here)."""
    return entry_pairs(list(npu), npu, list(bench), bench, table or {})


def _stage(container_cls: str, layers: list[int], api: str, prefix: str = "Module.dec") -> Tree:
    """A transformer holding ``layers.N`` (one linear call each, numbered from ``api``'s index)."""
    top = f"{prefix}.{container_cls}.forward.0"
    tree: Tree = {top: None}
    for k, n in enumerate(layers):
        layer = f"{prefix}.layers.{n}.Layer.forward.0"
        tree[layer] = top
        name, index = api.rsplit(".", 1)
        tree[f"{name}.{int(index) + k}.forward"] = layer
    return tree


def test_parallel_transformer_layers_count_from_the_first_layer_of_the_stage() -> None:
    npu = _stage("ParallelTransformer", [12, 13], "Functional.linear.0")
    bench = _stage("ParallelTransformer", [0, 1], "Functional.linear.5")
    assert _pairs(npu, bench) == {
        "Module.dec.ParallelTransformer.forward.0": "Module.dec.ParallelTransformer.forward.0",
        "Module.dec.layers.12.Layer.forward.0": "Module.dec.layers.0.Layer.forward.0",
        "Functional.linear.0.forward": "Functional.linear.5.forward",
        "Module.dec.layers.13.Layer.forward.0": "Module.dec.layers.1.Layer.forward.0",
        "Functional.linear.1.forward": "Functional.linear.6.forward",
    }


def test_only_a_parallel_transformer_renumbers_its_layers() -> None:
    for cls in ("TransformerBlock", "MyParallelTransformer", "ParallelTransformerX"):
        npu = _stage(cls, [12, 13], "Functional.linear.0")
        bench = _stage(cls, [0, 1], "Functional.linear.5")
        assert list(_pairs(npu, bench)) == [f"Module.dec.{cls}.forward.0"], cls


def test_each_parallel_transformer_counts_from_its_own_first_layer() -> None:
    npu = {
        **_stage("ParallelTransformer", [2], "Functional.linear.0"),
        **_stage("ParallelTransformer", [7], "Functional.gelu.0", "Module.enc"),
    }
    bench = {
        **_stage("ParallelTransformer", [0], "Functional.linear.0"),
        **_stage("ParallelTransformer", [5], "Functional.gelu.0", "Module.enc"),
    }
    pairs = _pairs(npu, bench)
    assert pairs["Module.dec.layers.2.Layer.forward.0"] == "Module.dec.layers.0.Layer.forward.0"
    assert pairs["Module.enc.layers.7.Layer.forward.0"] == "Module.enc.layers.5.Layer.forward.0"


def test_a_container_known_only_from_construct_does_not_renumber() -> None:
    """The reference takes the ParallelTransformer from the dump.json entries, not from construct.json."""
    npu = _stage("ParallelTransformer", [12], "Functional.linear.0")
    bench = _stage("ParallelTransformer", [0], "Functional.linear.0")
    entries = [e for e in npu if "ParallelTransformer" not in e]
    assert "Module.dec.layers.12.Layer.forward.0" not in entry_pairs(entries, npu, list(bench), bench, {})


def test_a_backward_module_sits_where_its_forward_call_does() -> None:
    """Megatron's construct.json gives backward modules no parent; they still follow the forward tree."""
    npu: Tree = {
        "Module.blk.Block.forward.0": None,
        "Module.blk.dense.Dense.forward.0": "Module.blk.Block.forward.0",
        "Module.blk.dense.Dense.backward.0": None,
    }
    bench: Tree = {
        "Module.blk.Block.forward.0": None,
        "Module.blk.fc.Linear.forward.0": "Module.blk.Block.forward.0",
        "Module.blk.fc.Linear.backward.0": None,
    }
    pairs = _pairs(npu, bench, {"Block": {"dense": "fc"}})
    assert pairs["Module.blk.dense.Dense.backward.0"] == "Module.blk.fc.Linear.backward.0"


def test_a_backward_api_takes_its_forward_parent_even_when_that_is_the_top() -> None:
    npu: Tree = {"Tensor.float.0.forward": None, "Tensor.float.0.backward": None}
    bench: Tree = {"Tensor.float.0.forward": None, "Tensor.float.0.backward": "Module.head.Linear.backward.0"}
    assert _pairs(npu, bench)["Tensor.float.0.backward"] == "Tensor.float.0.backward"


def _mlp(fc: str) -> Tree:
    return {
        "Module.h.0.Block.forward.0": None,
        "Module.h.0.mlp.MLP.forward.0": "Module.h.0.Block.forward.0",
        f"Module.h.0.mlp.{fc}.Linear.forward.0": "Module.h.0.mlp.MLP.forward.0",
        f"Module.h.0.mlp.{fc}.Linear.parameters_grad.0": None,  # construct.json never lists these
    }


def test_parameters_grad_follows_renamed_ancestors() -> None:
    bench = {k.replace(".mlp.", ".ffn."): v and v.replace(".mlp.", ".ffn.") for k, v in _mlp("c_fc").items()}
    pairs = _pairs(_mlp("c_fc"), bench, {"Block": {"mlp": "ffn"}})
    assert (
        pairs["Module.h.0.mlp.c_fc.Linear.parameters_grad.0"]
        == "Module.h.0.ffn.c_fc.Linear.parameters_grad.0"
    )


def test_parameters_grad_of_a_renamed_layer_pairs_with_nothing() -> None:
    renamed = _pairs(_mlp("c_fc"), _mlp("fc_in"), {"MLP": {"c_fc": "fc_in"}})
    assert renamed["Module.h.0.mlp.c_fc.Linear.forward.0"] == "Module.h.0.mlp.fc_in.Linear.forward.0"
    assert "Module.h.0.mlp.c_fc.Linear.parameters_grad.0" not in renamed
    same = _pairs(_mlp("c_fc"), _mlp("c_fc"), {"MLP": {"c_fc": "c_fc"}})
    assert (
        same["Module.h.0.mlp.c_fc.Linear.parameters_grad.0"] == "Module.h.0.mlp.c_fc.Linear.parameters_grad.0"
    )
