"""A rank's marks read from its construct.json and dump.json's entries (graph/merge/marks.py) are those
group discovery reads of its built graph (strategy.rank_marks), on every rank of the merge cases."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from msprobe_dask.dump.dumpjson import load_construct
from msprobe_dask.graph.merge import marks
from msprobe_dask.graph.merge.marks import node_order, read_marks
from msprobe_dask.graph.merge.strategy import RankMarks, rank_marks
from msprobe_dask.graph.model import ROOT_ID
from msprobe_dask.graph.tasks import build_task

DATA = Path(__file__).resolve().parents[1] / "data"
RANKS = sorted(
    p for case in ("tp_merge", "pp_merge", "tp_pp_merge", "vpp_merge") for p in (DATA / case).glob("*/rank*")
)


def _built(folder: Path, rank: int) -> RankMarks:
    return rank_marks(build_task(str(folder), 0, rank, items=False))


@pytest.mark.parametrize("folder", RANKS, ids=lambda p: f"{p.parts[-3]}-{p.parts[-2]}-{p.name}")
def test_marks_read_are_the_built_graphs(folder: Path) -> None:
    rank = int(folder.name[4:])
    assert read_marks(str(folder), 0, rank) == _built(folder, rank)


def test_the_merge_cases_have_marks() -> None:
    found = [read_marks(str(f), 0, int(f.name[4:])) for f in RANKS]
    assert any(m.tp_group for m in found) and any(m.pp_target is not None for m in found)


def test_node_order_is_the_builds() -> None:
    folder = DATA / "tp_pp_merge" / "target" / "rank0"
    construct, _, _ = load_construct(folder / "construct.json")  # (the Megatron form)
    built = list(build_task(str(folder), 0, 0, items=False).nodes)
    assert node_order(construct) == built[: len(node_order(construct))]
    # a parent named before its own pair is made with that pair; a repaired parent where repaired
    order = node_order(
        {"A": "M", "M": None, "X.backward.0": None, "X.forward.0": "F.forward.0", "F.backward.0": None}
    )
    assert order == [ROOT_ID, "M", "A", "F.backward.0", "X.backward.0", "F.forward.0", "X.forward.0"]


def _p2p_free(src: Path, dest: Path) -> tuple[Path, dict, dict]:
    """A copy of the rank ``src`` without its Distributed.* nodes and entries (construct.json, data)."""
    folder = shutil.copytree(src, dest)
    construct, _, _ = load_construct(folder / "construct.json")
    doc = json.loads((folder / "dump.json").read_text())
    construct = {k: v for k, v in construct.items() if not k.startswith("Distributed.")}
    doc["data"] = {k: v for k, v in doc["data"].items() if not k.startswith("Distributed.")}
    return folder, construct, doc


@pytest.mark.parametrize("node", [True, False], ids=["a-parameters_grad-node", "no-node"])
def test_an_entry_no_construct_key_names_that_could_mark_builds_the_rank(
    node: bool, tmp_path: Path, monkeypatch
) -> None:
    # X.parameters_grad (no construct.json key) is a node the build adds after construct.json's, read
    # only if none of those gives the mark: an unnamed entry that could give one makes the rank be built
    folder, construct, doc = _p2p_free(DATA / "pp_merge" / "target" / "rank0", tmp_path / "rank0")
    if node:
        construct["Distributed.send.9.backward.0"] = None
    doc["data"]["Distributed.send.9.parameters_grad"] = {"input_kwargs": {"dst": {"type": "int", "value": 1}}}
    (folder / "construct.json").write_text(json.dumps(construct, indent=1))
    (folder / "dump.json").write_text(json.dumps(doc, indent=1))
    built: list[int] = []
    monkeypatch.setattr(marks, "build_task", lambda *args, **kw: built.append(1) or build_task(*args, **kw))
    assert read_marks(str(folder), 0, 0) == _built(folder, 0)
    assert built and _built(folder, 0).pp_target == (1 if node else None)
