"""Edge cases of the mapping options on small hand-made dumps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from msprobe_dask.cli import main
from msprobe_dask.errors import ConfigError
from msprobe_dask.match.api_mapping import api_keys, builtin_key, builtin_table, parse_api_pairs
from msprobe_dask.match.cell_mapping import cell_key
from msprobe_dask.match.layer_mapping import entry_pairs, load_layer_yaml
from msprobe_dask.pipeline.pairing import MatchOptions


def _leaf(dtype: str, value: float) -> dict:
    return {
        "type": "torch.Tensor",
        "dtype": dtype,
        "shape": [2],
        "Max": value,
        "Min": value,
        "Mean": value,
        "Norm": value,
        "requires_grad": False,
    }


def _dump(path: Path, framework: str, entries: dict[str, float], dtype: str) -> Path:
    data = {
        name: {"input_args": [_leaf(dtype, v)], "input_kwargs": {}, "output": [_leaf(dtype, v)]}
        for name, v in entries.items()
    }
    path.mkdir(parents=True, exist_ok=True)
    (path / "dump.json").write_text(
        json.dumps(
            {"task": "statistics", "level": "L1", "framework": framework, "dump_data_dir": None, "data": data}
        )
    )
    return path / "dump.json"


def _pairs(
    tmp_path: Path, *extra: str, npu: dict[str, float], bench: dict[str, float], framework: str = "mindspore"
) -> dict[str, str]:
    target = _dump(tmp_path / "t", framework, npu, "Float32" if framework == "mindspore" else "torch.float32")
    golden = _dump(tmp_path / "g", "pytorch", bench, "torch.float32")
    out = tmp_path / "out"
    assert main(["compare", "-q", "-tp", str(target), "-gp", str(golden), "-o", str(out), *extra]) == 0
    (path,) = out.glob("*.csv")
    import csv

    with open(path, newline="") as f:
        return {row[0]: row[1] for row in list(csv.reader(f))[1:]}


def _yaml(tmp_path: Path, text: str, name: str = "map.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# --- data mapping -----------------------------------------------------------------------------------


def test_dm_two_target_rows_on_one_golden_row(tmp_path: Path) -> None:
    mapping = _yaml(
        tmp_path,
        "Functional.a.0.forward.input.0: Functional.b.0.forward.input.0\n"
        "Functional.a.1.forward.input.0: Functional.b.0.forward.input.0\n",
    )
    pairs = _pairs(
        tmp_path,
        "-dm",
        str(mapping),
        npu={"Functional.a.0.forward": 1, "Functional.a.1.forward": 2},
        bench={"Functional.b.0.forward": 1},
    )
    assert (
        pairs["Functional.a.0.forward.input.0"]
        == pairs["Functional.a.1.forward.input.0"]
        == "Functional.b.0.forward.input.0"
    )
    assert pairs["Functional.a.0.forward.output.0"] == "N/A"


def test_dm_names_missing_from_the_dump_warn_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mapping = _yaml(
        tmp_path,
        "X.nope.0.forward.input.0: Functional.b.0.forward.input.0\n"
        "X.nope.1.forward.input.0: Functional.b.0.forward.input.0\n",
    )
    pairs = _pairs(
        tmp_path,
        "-dm",
        str(mapping),
        npu={"Functional.b.0.forward": 1},
        bench={"Functional.b.0.forward": 1},
        framework="pytorch",
    )
    assert pairs["Functional.b.0.forward.input.0"] == "Functional.b.0.forward.input.0"
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "2 data mapping name(s)" in warnings[0] and "map.yaml" in warnings[0]


@pytest.mark.parametrize("flag", ["-dm", "-cm", "-lm", "-am"])
def test_empty_yaml_is_an_empty_mapping(
    flag: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = _yaml(tmp_path, "# nothing\n")
    pairs = _pairs(
        tmp_path, flag, str(empty), npu={"Functional.b.0.forward": 1}, bench={"Functional.b.0.forward": 1}
    )
    assert pairs["Functional.b.0.forward.input.0"] == "Functional.b.0.forward.input.0"
    assert "empty" in capsys.readouterr().err


def test_empty_am_yaml_on_two_pytorch_dumps_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The refusal of -am there is the only line: no warning that its file is empty before it."""
    empty = _yaml(tmp_path, "# nothing\n")
    target = _dump(tmp_path / "t", "pytorch", {"Functional.b.0.forward": 1}, "torch.float32")
    golden = _dump(tmp_path / "g", "pytorch", {"Functional.b.0.forward": 1}, "torch.float32")
    argv = ["compare", "-q", "-tp", str(target), "-gp", str(golden), "-o", str(tmp_path / "o")]
    assert main([*argv, "-am", str(empty)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "-am" in err[0] and "two PyTorch dumps" in err[0], err


@pytest.mark.parametrize("flag", ["-dm", "-cm", "-lm", "-am"])
def test_yaml_that_is_not_a_mapping_is_one_clear_error(
    flag: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = _yaml(tmp_path, "just a string\n" if flag == "-am" else "- a\n- b\n", "bad.yaml")
    target = _dump(tmp_path / "t", "mindspore", {"Functional.b.0.forward": 1}, "Float32")
    golden = _dump(tmp_path / "g", "pytorch", {"Functional.b.0.forward": 1}, "torch.float32")
    code = main(
        ["compare", "-q", "-tp", str(target), "-gp", str(golden), "-o", str(tmp_path / "o"), flag, str(bad)]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "bad.yaml" in err[0]


def test_invalid_yaml_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="broken.yaml.*not valid yaml"):
        MatchOptions(data_mapping=str(_yaml(tmp_path, "a: [b\n", "broken.yaml")))


def test_missing_mapping_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        MatchOptions(cell_mapping=str(tmp_path / "none.yaml"))


# --- cell mapping -----------------------------------------------------------------------------------


def test_cell_mapping_exact_key_wins_over_substrings() -> None:
    table = {"dense1.Dense": "fc1.Linear", "Dense": "Linear", "layers.0.dense1.Dense": "blocks.0.fc9.Linear"}
    name = "Cell.layers.0.dense1.Dense.forward.0.input.0"
    assert cell_key(name, table) == "Module.blocks.0.fc9.Linear.forward.0.input.0"
    # no exact key: every pair replaces its first occurrence, in yaml order
    assert (
        cell_key("Cell.layers.1.dense1.Dense.forward.0.input.0", table)
        == "Module.layers.1.fc1.Linear.forward.0.input.0"
    )
    assert (
        cell_key("Cell.layers.1.dense1.Dense.forward.0.input.0", {})
        == "Module.layers.1.dense1.Dense.forward.0.input.0"
    )
    assert (
        cell_key("Cell.x.Dense.parameters_grad.0.weight", {"Dense": "Linear"})
        == "Module.x.Linear.parameters_grad.0.weight"
    )
    assert cell_key("Cell.x.Dense.weird.0", {}) == "N/A"


def test_cell_mapping_unused_names_warn_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mapping = _yaml(tmp_path, "nope1.Dense: fc.Linear\nnope2: fc\n")
    pairs = _pairs(
        tmp_path,
        "-cm",
        str(mapping),
        npu={"Cell.fc.Dense.forward.0": 1},
        bench={"Module.fc.Dense.forward.0": 1},
    )
    assert pairs["Cell.fc.Dense.forward.0.input.0"] == "Module.fc.Dense.forward.0.input.0"
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "2 cell mapping" in warnings[0]


# --- api mapping ------------------------------------------------------------------------------------


def test_builtin_api_table() -> None:
    table = builtin_table()
    assert len(table) == 399 and table["Functional.abs"] == "Torch.abs"
    assert builtin_key("Mint.matmul.0.forward.input.0", table) == "Torch.matmul.0.forward.input.0"
    assert (
        builtin_key("MintFunctional.linear.0.forward.output.0", table)
        == "Functional.linear.0.forward.output.0"
    )
    assert builtin_key("Functional.abs.3.backward.input.0", table) == "Torch.abs.3.backward.input.0"
    assert (
        builtin_key("Functional.not_in_table.0.forward.input.0", table)
        == "Functional.not_in_table.0.forward.input.0"
    )


def test_api_yaml_selects_arguments() -> None:
    pairs = parse_api_pairs(
        "m.yaml",
        {
            "ms_api": "Functional.foo",
            "pt_api": "Torch.bar",
            "ms_args": [0, 2],
            "pt_args": [1, 0],
            "ms_outputs": [0],
            "pt_outputs": [0],
        },
    )
    rows = [(f"Functional.foo.0.forward.input.{i}", "Functional.foo.0.forward", "input") for i in range(3)]
    rows.append(("Functional.foo.0.forward.output.0", "Functional.foo.0.forward", "output"))
    bench = [(f"Torch.bar.0.forward.input.{i}", "Torch.bar.0.forward", "input") for i in range(2)]
    keys = api_keys(rows, {"Torch.bar.0.forward"}, bench, pairs)
    assert keys == [
        "Torch.bar.0.forward.input.1",
        "Functional.foo.0.forward.input.1abandoned",
        "Torch.bar.0.forward.input.0",
        "Torch.bar.0.forward.output.0",
    ]


@pytest.mark.parametrize(
    ("item", "problem"),
    [
        ({"ms_args": [0, 0], "pt_args": [0, 1]}, "twice"),
        ({"ms_args": [0, 1], "pt_args": [0]}, "has 2 numbers but pt_args has 1"),
        ({"ms_args": [-1], "pt_args": [0]}, "negative"),
        ({"ms_args": ["a"], "pt_args": [0]}, "list of argument numbers"),
        ({"ms_args": [0]}, "pt_args is missing"),
        ({"ms_output": [0], "ms_outputs": [1], "pt_output": [0]}, "disagree"),
    ],
)
def test_api_yaml_bad_index_lists(item: dict, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        parse_api_pairs("m.yaml", [{"ms_api": "Functional.foo", "pt_api": "Torch.bar", **item}])


def test_api_yaml_index_out_of_range() -> None:
    pairs = parse_api_pairs(
        "m.yaml", [{"ms_api": "Functional.foo", "pt_api": "Torch.bar", "ms_args": [0, 5], "pt_args": [0, 1]}]
    )
    rows = [("Functional.foo.0.forward.input.0", "Functional.foo.0.forward", "input")]
    with pytest.raises(ConfigError, match="out of range"):
        api_keys(
            rows,
            {"Torch.bar.0.forward"},
            [("Torch.bar.0.forward.input.1", "Torch.bar.0.forward", "input")],
            pairs,
            "m.yaml",
        )


def test_api_yaml_naming_missing_apis_warns_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mapping = _yaml(
        tmp_path,
        "- {ms_api: Functional.nope, pt_api: Torch.nope, ms_args: [0], pt_args: [0]}\n"
        "- {ms_api: Functional.none, pt_api: Torch.none, ms_args: [0], pt_args: [0]}\n",
    )
    pairs = _pairs(
        tmp_path, "-am", str(mapping), npu={"Functional.abs.0.forward": 1}, bench={"Torch.abs.0.forward": 1}
    )
    assert pairs["Functional.abs.0.forward.input.0"] == "Torch.abs.0.forward.input.0"
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "2 api mapping" in warnings[0]


def test_api_yaml_empty_uses_builtin(tmp_path: Path) -> None:
    pairs = _pairs(
        tmp_path,
        "-am",
        str(_yaml(tmp_path, "")),
        npu={"Functional.abs.0.forward": 1},
        bench={"Torch.abs.0.forward": 1},
    )
    assert pairs["Functional.abs.0.forward.output.0"] == "Torch.abs.0.forward.output.0"


# --- layer mapping ----------------------------------------------------------------------------------


def test_layer_mapping_renames_children_and_pairs_in_order() -> None:
    npu = [
        "MintFunctional.linear.0.forward",
        "Cell.blk.dense1.Dense.forward.0",
        "MintFunctional.linear.1.forward",
        "Cell.blk.dense1.Dense.forward.1",
        "Cell.blk.Block.forward.0",
    ]
    npu_parents = {
        "MintFunctional.linear.0.forward": "Cell.blk.dense1.Dense.forward.0",
        "MintFunctional.linear.1.forward": "Cell.blk.dense1.Dense.forward.1",
        "Cell.blk.dense1.Dense.forward.0": "Cell.blk.Block.forward.0",
        "Cell.blk.dense1.Dense.forward.1": "Cell.blk.Block.forward.0",
        "Cell.blk.Block.forward.0": None,
    }
    bench = [
        "Functional.linear.5.forward",
        "Module.blk.fc1.Linear.forward.0",
        "Functional.linear.6.forward",
        "Module.blk.fc1.Linear.forward.1",
        "Module.blk.Block.forward.0",
    ]
    bench_parents = {
        "Functional.linear.5.forward": "Module.blk.fc1.Linear.forward.0",
        "Functional.linear.6.forward": "Module.blk.fc1.Linear.forward.1",
        "Module.blk.fc1.Linear.forward.0": "Module.blk.Block.forward.0",
        "Module.blk.fc1.Linear.forward.1": "Module.blk.Block.forward.0",
        "Module.blk.Block.forward.0": None,
    }
    pairs = entry_pairs(npu, npu_parents, bench, bench_parents, {"Block": {"dense1": "fc1"}})
    assert pairs == dict(zip(npu, bench))
    assert entry_pairs(npu, npu_parents, bench, bench_parents, {}) == {
        "Cell.blk.Block.forward.0": "Module.blk.Block.forward.0"
    }


def test_layer_yaml_checks(tmp_path: Path) -> None:
    assert load_layer_yaml(_yaml(tmp_path, "Cell:\n  net: module\nBlock:\n  a: b\n")) == {
        "TopLayer": {"net": "module"},
        "Block": {"a": "b"},
    }
    with pytest.raises(ConfigError, match="Block"):
        load_layer_yaml(_yaml(tmp_path, "Block: [a, b]\n"))
