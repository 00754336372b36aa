"""Properties over generated dumps (hypothesis, bounded so CI stays fast): a dump compared with itself
is all pass, one row per leaf; its vis.db has one node per construct.json node and the root; and no
mutation of a valid dump.json's bytes lets anything escape but a one-line user error."""

from __future__ import annotations

import json
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from msprobe_dask.errors import UserError
from msprobe_dask.graph.api import build_graphs, graph_visualize
from msprobe_dask.pipeline.compare import compare
from msprobe_dask.pipeline.scheduler import RunOptions

FAST = settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
LOCAL = RunOptions(address=None)

finite = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e6, max_value=1e6)


@st.composite
def tensor(draw: st.DrawFn) -> dict[str, Any]:
    values = sorted(draw(st.lists(finite, min_size=2, max_size=2)))
    return {
        "type": "torch.Tensor",
        "dtype": draw(st.sampled_from(["torch.float32", "torch.float16", "torch.bfloat16"])),
        "shape": draw(st.lists(st.integers(1, 8), min_size=0, max_size=3)),
        "Max": values[1],
        "Min": values[0],
        "Mean": (values[0] + values[1]) / 2,
        "Norm": abs(values[1]),
        "requires_grad": draw(st.booleans()),
    }


scalar = st.one_of(
    st.builds(lambda v: {"type": "float", "value": v}, finite),
    st.builds(lambda v: {"type": "int", "value": v}, st.integers(-(10**6), 10**6)),
    st.builds(lambda v: {"type": "bool", "value": v}, st.booleans()),
)
leaf = st.one_of(tensor(), scalar, st.none())
argument = st.one_of(leaf, st.lists(leaf, min_size=1, max_size=3))


@st.composite
def dump(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any], int]:
    """(dump.json, construct.json, rows): modules nest under earlier modules; every API sits in a
    module (an API between modules would be wrapped in a node of the graph's own)."""
    modules: list[str] = []
    construct: dict[str, Any] = {}
    data: dict[str, Any] = {}
    counts: dict[str, int] = {}
    rows = 0
    for _ in range(draw(st.integers(1, 3))):
        name = f"Module.m{len(modules)}.Linear.forward.0"
        construct[name] = draw(st.sampled_from([None, *modules]))
        modules.append(name)
    for _ in range(draw(st.integers(1, 10))):
        op = draw(st.sampled_from(["linear", "relu", "add", "matmul"]))
        counts[op] = counts.get(op, -1) + 1
        name = f"Functional.{op}.{counts[op]}.forward"
        args = draw(st.lists(argument, max_size=3))
        kwargs = draw(st.dictionaries(st.sampled_from(["alpha", "dim", "keepdim"]), leaf, max_size=2))
        output = draw(st.lists(tensor(), min_size=1, max_size=2))
        data[name] = {"input_args": args, "input_kwargs": kwargs, "output": output}
        construct[name] = draw(st.sampled_from(modules))
        rows += sum(len(a) if isinstance(a, list) else 1 for a in args) + len(kwargs) + len(output)
    for name in modules:
        data[name] = {
            "input_args": [draw(tensor())],
            "input_kwargs": {},
            "output": [draw(tensor())],
        }
        rows += 2
    doc = {
        "task": "statistics",
        "level": "mix",
        "framework": "pytorch",
        "dump_data_dir": None,
        "data": data,
    }
    return doc, construct, rows


def test_an_int_argument_compared_with_itself_passes(tmp_path: Path) -> None:
    stats = dict(zip(("Max", "Min", "Mean", "Norm"), (4.25, -1.0, 0.5, 9.75)))
    leaf = {
        "type": "torch.Tensor",
        "dtype": "torch.float16",
        "shape": [3, 1],
        **stats,
        "requires_grad": False,
    }
    data = {
        "Functional.add.0.forward": {
            "input_args": [leaf, {"type": "int", "value": 3}],
            "output": [leaf],
        }
    }
    doc = {"task": "statistics", "level": "mix", "framework": "pytorch", "data": data}
    folder = write(tmp_path / "run", doc, {"Functional.add.0.forward": None})
    (result,) = compare(folder, folder, run=LOCAL)
    assert all(r["Result"] == "pass" for r in result.table.records())


def write(
    folder: Path,
    doc: dict[str, Any],
    construct: dict[str, Any],
    text: bytes | None = None,
) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "dump.json").write_bytes(json.dumps(doc, indent=1).encode() if text is None else text)
    (folder / "construct.json").write_text(json.dumps(construct))
    (folder / "stack.json").write_text(json.dumps({"0": [list(construct), ["File m.py, line 1, in f"]]}))
    return folder


@FAST
@given(dump())
def test_a_dump_compared_with_itself_is_all_pass_one_row_per_leaf(
    generated: tuple[Any, ...],
) -> None:
    doc, construct, rows = generated
    with tempfile.TemporaryDirectory() as tmp:
        folder = write(Path(tmp) / "run", doc, construct)
        (result,) = compare(folder, folder, run=LOCAL)
    records = result.table.records()
    assert len(records) == rows
    assert all(r["Result"] == "pass" for r in records), [r["Err_message"] for r in records]


@FAST
@given(dump())
def test_the_vis_db_has_a_node_per_construct_node_and_the_root(
    generated: tuple[Any, ...],
) -> None:
    doc, construct, _ = generated
    with tempfile.TemporaryDirectory() as tmp:
        folder = write(Path(tmp) / "run", doc, construct)
        path = graph_visualize(folder, output_path=Path(tmp) / "out", run=LOCAL)
        with sqlite3.connect(path) as db:
            (nodes,) = db.execute("SELECT count(*) FROM tb_nodes").fetchone()
    assert nodes == len(construct) + 1


@FUZZ
@given(
    dump(),
    st.lists(st.tuples(st.floats(0, 1), st.integers(0, 8), st.binary(max_size=4)), max_size=4),
)
def test_no_mutation_of_dump_json_escapes_as_anything_but_a_user_error(
    generated: tuple[Any, ...], edits: list[tuple[float, int, bytes]]
) -> None:
    doc, construct, _ = generated
    text = bytearray(json.dumps(doc, indent=1).encode())
    for (
        where,
        cut,
        insert,
    ) in edits:  # replace `cut` bytes at a relative position with `insert`
        at = int(where * len(text))
        text[at : at + cut] = insert
    with tempfile.TemporaryDirectory() as tmp:
        golden = write(Path(tmp) / "golden", doc, construct)
        target = write(Path(tmp) / "target", doc, construct, bytes(text))
        for run in (
            lambda: compare(target, golden, run=LOCAL),
            lambda: build_graphs(target, golden, run=LOCAL),
        ):
            try:
                run()
            except UserError as exc:
                assert "\n" not in str(exc) and str(exc)
