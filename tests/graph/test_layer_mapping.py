"""``-lm`` in graph_visualize: the NPU entry -> Bench entry mapping on the MindSpore-vs-PyTorch dumps.

Whole vis.db files are checked against the reference in test_visdb_reference.py (runs vis_lm,
vis_lm_noyaml, vis_lm_unknown_class, vis_lm_bad_yaml of ms_vs_pt, vis_lm / vis_lm_swap of stat_mix);
these tests pin the mapping itself, so a failure says which pair went wrong.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from msprobe_dask.graph.build import build_graph
from msprobe_dask.graph.dump_files import GraphSource
from msprobe_dask.graph.mapping import layer_mapping
from msprobe_dask.graph.model import Graph

DATA = Path(__file__).resolve().parents[1] / "data"
CASE = DATA / "ms_vs_pt"


@pytest.fixture(scope="module")
def graphs() -> tuple[Graph, Graph]:
    return build_graph(GraphSource(str(CASE / "target"))), build_graph(GraphSource(str(CASE / "golden")))


def test_yaml_renames_pair_dense_with_linear(graphs: tuple[Graph, Graph]) -> None:
    npu, bench = graphs
    m = layer_mapping(npu, bench, str(CASE / "layer_mapping.yaml"))
    assert list(m) == list(npu.data)  # every dump entry, in dump order; nodes like DefaultModel are absent
    assert m["Cell.layers.0.dense1.Dense.forward.0"] == "Module.layers.0.fc1.Linear.forward.0"
    assert m["Cell.layers.1.dense2.Dense.backward.0"] == "Module.layers.1.fc2.Linear.backward.0"
    assert m["MintFunctional.linear.3.forward"] == "Functional.linear.3.forward"
    assert m["Mint.matmul.1.backward"] == "Torch.matmul.1.backward"
    # no counterpart: MindSpore's casts and its own layer_norm primitive
    assert m["Tensor.to.0.forward"] == "N/A"
    assert m["Primitive.layer_norm.LayerNorm.0.forward"] == "N/A"
    # parameters_grad: the reference pairs it unless the yaml renames the layer itself
    assert m["Cell.head.Dense.parameters_grad.0"] == "Module.head.Linear.parameters_grad.0"
    assert (
        m["Cell.layers.0.norm.LayerNorm.parameters_grad.0"]
        == "Module.layers.0.norm.LayerNorm.parameters_grad.0"
    )
    assert m["Cell.layers.0.dense1.Dense.parameters_grad.0"] == "N/A"


def test_without_yaml_only_same_named_layers_pair(graphs: tuple[Graph, Graph]) -> None:
    npu, bench = graphs
    m = layer_mapping(npu, bench, True)
    assert m["Cell.layers.0.dense1.Dense.forward.0"] == "N/A"
    assert m["MintFunctional.linear.0.forward"] == "N/A"  # its layer (dense1) has no partner
    assert m["Cell.layers.0.act.GELU.forward.0"] == "Module.layers.0.act.GELU.forward.0"
    assert m["Functional.gelu.1.backward"] == "Functional.gelu.1.backward"
    assert m["MintFunctional.softmax.0.forward"] == "Functional.softmax.0.forward"


def test_d19_stack_frames_play_no_part(graphs: tuple[Graph, Graph], tmp_path: Path) -> None:
    """D19: with old-format (per-entry) stack.json files whose frames differ on the two sides (each
    entry called from another framework function), the pairs are those of the grouped stack.json."""
    sides = []
    for side, caller in (("target", "_run_forward_pre_hook"), ("golden", "_call_impl")):
        folder = shutil.copytree(CASE / side, tmp_path / side)
        entries = json.loads((folder / "dump.json").read_text(encoding="utf-8"))["data"]
        frames = {
            name: [f"File /site-packages/framework.py, line {i}, in {caller}, \n x = f()"]
            for i, name in enumerate(entries)
        }
        (folder / "stack.json").write_text(json.dumps(frames), encoding="utf-8")
        sides.append(build_graph(GraphSource(str(folder))))
        assert any(caller in "".join(node.stack) for node in sides[-1].nodes.values())  # (the frames read)
    yaml = str(CASE / "layer_mapping.yaml")
    assert layer_mapping(*sides, yaml) == layer_mapping(*graphs, yaml)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (None, "not found"),
        ("", "empty"),
        ("Block: [dense1, fc1]\n", "Block"),
        ("- Block\n", "mapping"),
        ("Block:\n", "Block"),
        ("Block:\n  dense1: 3\n", "Block"),
        ("Block:\n  0: fc1\n", "Block"),
        ("Block: {dense1: [fc1\n", "not valid yaml"),
    ],
    ids=[
        "missing",
        "empty",
        "list-of-children",
        "top-level-list",
        "no-children",
        "number",
        "int-key",
        "syntax",
    ],
)
def test_unusable_yaml_warns_and_maps_nothing(
    graphs: tuple[Graph, Graph],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    text: str | None,
    problem: str,
) -> None:
    """The reference logs "The layer mapping file parsing failed ... mapping is not effective" and goes
    on with an empty mapping (nodes then match by their own names, without the ancestor check)."""
    npu, bench = graphs
    path = tmp_path / "lm.yaml"
    if text is not None:
        path.write_text(text)
    assert layer_mapping(npu, bench, str(path)) == {}
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(path) in err and problem in err and "not used" in err, err


def test_yaml_that_is_a_folder_says_so(
    graphs: tuple[Graph, Graph], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    npu, bench = graphs
    assert layer_mapping(npu, bench, str(tmp_path)) == {}
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{tmp_path}: is a folder, not a mapping file" in err, err
