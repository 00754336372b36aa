"""A graph built in a forked child and sent back flat (graph/codec.py) is the graph built here."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from msprobe_dask.dump.entries import DumpEntries
from msprobe_dask.errors import DumpError
from msprobe_dask.graph import api, forked
from msprobe_dask.graph.build import GraphSource, build_graph
from msprobe_dask.graph.codec import decode, encode
from msprobe_dask.graph.model import Graph

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
    assert dict(a.data) == dict(b.data)


@pytest.mark.parametrize("case", CASES)
def test_flat_graph_decodes_to_the_built_graph(case: str) -> None:
    g = build_graph(GraphSource(str(DATA / case), 1, 2), items=False)
    _same(decode(encode(g)), g)


def test_entries_go_without_the_bytes_the_receiver_holds() -> None:
    """Lazy entries read from the bytes the receiver holds come back without them, on those bytes; read
    from other bytes, they come with their own."""
    g = build_graph(GraphSource(str(DATA / "stat_mix" / "target")), items=False)
    text = Path(g.data._path).read_bytes()  # type: ignore[attr-defined]
    assert isinstance(g.data, DumpEntries)
    flat = encode(g, text)
    assert flat[-2]["data"] is None and flat[-1] is not None
    held = decode(flat, text)
    _same(held, g)
    assert held.data._text is text  # type: ignore[attr-defined]
    other = text.replace(b"torch", b"TORCH")
    flat = encode(g, other)
    assert flat[-1] is None and flat[-2]["data"] is g.data
    _same(decode(flat, other), g)
    with pytest.raises(ValueError, match="without the bytes"):
        decode(encode(g, text))


def test_a_graph_holding_more_than_a_build_sets_is_refused() -> None:
    g = build_graph(GraphSource(str(DATA / "stat_mix" / "target")), items=True)
    with pytest.raises(ValueError, match="more than a build sets"):
        encode(g)


def test_build_task_builds_in_a_child_while_another_build_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """A build task that starts while another runs is built by a forked child: the same graph."""
    monkeypatch.setattr(api, "FORK_BUILD_BYTES", 0)
    monkeypatch.setattr(forked, "usable_cpus", lambda: 2)
    decoded: list[Graph] = []
    monkeypatch.setattr(api, "decode", lambda flat, text: decoded.append(decode(flat, text)) or decoded[-1])
    folder = str(DATA / "transformer_big" / "target")
    monkeypatch.setattr(api, "_builds", 1)  # another build task is running
    in_child = api._build_task(folder, 0, 0, False)
    assert decoded == [in_child]
    assert isinstance(in_child.data, DumpEntries)
    monkeypatch.setattr(api, "_builds", 0)
    here = api._build_task(folder, 0, 0, False)
    assert len(decoded) == 1
    _same(in_child, here)


def test_a_build_alone_reads_dump_json_in_a_child(monkeypatch: pytest.MonkeyPatch) -> None:
    """A big build that runs alone reads dump.json's entries in a forked child while it builds the
    tree: the same graph, on the bytes it read itself."""
    monkeypatch.setattr(api, "FORK_BUILD_BYTES", 0)
    monkeypatch.setattr(forked, "usable_cpus", lambda: 2)
    children: list[object] = []
    start = api.start_in_child
    monkeypatch.setattr(api, "start_in_child", lambda fn, then=None: children.append(fn) or start(fn, then))
    folder = str(DATA / "transformer_big" / "target")
    alone = api._build_task(folder, 0, 0, False, True)
    assert len(children) == 1 and isinstance(alone.data, DumpEntries)
    _same(alone, build_graph(GraphSource(folder), items=False))


@pytest.mark.parametrize("ahead", [False, True])
@pytest.mark.parametrize("broken_stack", [False, True])
def test_a_build_alone_reports_a_bad_dump_json_as_a_build_here_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, broken_stack: bool, ahead: bool
) -> None:
    """The same error as a build here, and no child left behind holding a CPU (with ``ahead``, the
    scan child would go on making the rows' texts)."""
    monkeypatch.setattr(api, "FORK_BUILD_BYTES", 0)
    monkeypatch.setattr(forked, "usable_cpus", lambda: 2)
    folder = tmp_path / "dump"
    shutil.copytree(DATA / "stat_mix" / "target", folder)
    dump = folder / "dump.json"
    dump.write_bytes(dump.read_bytes()[:-40])  # truncated
    if broken_stack:
        (folder / "stack.json").write_text("[1,")
    with pytest.raises(DumpError) as here:
        build_graph(GraphSource(str(folder)), items=False)
    with pytest.raises(DumpError) as alone:
        api._build_task(str(folder), 0, 0, False, True, ahead)
    assert str(alone.value) == str(here.value) and "dump.json" in str(here.value)
    assert forked._children == 0


def test_a_bad_stack_json_stops_the_texts_made_ahead(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """dump.json is fine and its texts are being made ahead when stack.json turns out bad: the error
    is raised and the child is stopped."""
    monkeypatch.setattr(api, "FORK_BUILD_BYTES", 0)
    monkeypatch.setattr(forked, "usable_cpus", lambda: 2)
    folder = tmp_path / "dump"
    shutil.copytree(DATA / "transformer_big" / "target", folder)
    (folder / "stack.json").write_text("[1,")
    with pytest.raises(DumpError, match="stack.json"):
        api._build_task(str(folder), 0, 0, False, True, True)
    assert forked._children == 0
