"""The rows' texts made ahead (graph/texts_ahead.py, graph/csrc/ahead.c): node_texts answers the same
with the texts a child made ahead, wherever it was stopped, as it does making them all itself."""

from __future__ import annotations

import pickle
import random
import struct
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from msprobe_dask.dump.entries import scan_dump_doc
from msprobe_dask.errors import DumpError
from msprobe_dask.graph import forked, speedups
from msprobe_dask.graph.build import GraphSource, build_graph
from msprobe_dask.graph.model import COLLECTION, Graph
from msprobe_dask.graph.texts_ahead import TextsAhead

NATIVE = speedups.native
pytestmark = pytest.mark.skipif(NATIVE is None, reason="the C extension is not built")
DATA = Path(__file__).resolve().parents[1] / "data"
HEADER, ROW = 32, 24  # bytes (csrc/ahead.c)
NONE, LATER = -1, -2


def _graphs() -> Iterator[Graph]:
    """The lazily built graph of every dump of tests/data that builds."""
    for path in sorted(DATA.rglob("dump.json")):
        try:
            g = build_graph(GraphSource(str(path.parent)), items=False)
        except DumpError:
            continue  # (tests/graph/test_bad_inputs.py)
        if g.data.spans() is not None:  # type: ignore[attr-defined]
            yield g


def _texts(g: Graph, region: object = None) -> list[object]:
    assert NATIVE is not None
    spans = g.data.spans()  # type: ignore[attr-defined]
    return NATIVE.node_texts(g.sorted_nodes(), g.root, COLLECTION, *spans, region)  # type: ignore[no-any-return]


def _done(region: object) -> int:
    return struct.unpack_from("<q", region, 0)[0]  # type: ignore[arg-type]


def _rows(region: object) -> list[tuple[int, int, int, int]]:
    """(start, data, in_len, out_len) of the rows made."""
    return [struct.unpack_from("<qqii", region, HEADER + ROW * i) for i in range(_done(region))]  # type: ignore[arg-type]


def test_the_texts_made_ahead_are_the_ones_made_here_however_many() -> None:
    """Every test dump: all its entries' rows made ahead, then as few as a killed child leaves."""
    assert NATIVE is not None
    rng = random.Random(5)
    kinds = {"made": 0, NONE: 0, LATER: 0}
    graphs = 0
    for g in _graphs():
        graphs += 1
        spans = g.data.spans()  # type: ignore[attr-defined]
        expected = _texts(g)
        ahead = TextsAhead(len(spans[2]))
        assert NATIVE.make_texts_ahead(ahead.region, *spans) == len(spans[0]) == _done(ahead.region)
        for _, _, in_len, _ in _rows(ahead.region):
            kinds[in_len if in_len < 0 else "made"] += 1
        count = len(spans[0])
        for done in {0, 1, count // 2, count - 1, count, *(rng.randrange(count + 1) for _ in range(3))}:
            struct.pack_into("<q", ahead.region, 0, max(done, 0))
            assert _texts(g, ahead.region) == expected, (g.folder, done)
        ahead.close()
    assert graphs > 60
    assert kinds["made"] > 20_000 and kinds[NONE] > 1_000 and kinds[LATER] > 10


def test_the_texts_are_taken_from_the_region() -> None:
    """What node_texts gives is read from the region, not made again."""
    assert NATIVE is not None
    g = build_graph(GraphSource(str(DATA / "transformer_big" / "target")), items=False)
    spans = g.data.spans()  # type: ignore[attr-defined]
    ahead = TextsAhead(len(spans[2]))
    NATIVE.make_texts_ahead(ahead.region, *spans)
    start, data, in_len, _ = next(r for r in _rows(ahead.region) if r[2] > 1)
    ahead.region[data : data + 1] = b"X"  # type: ignore[index]
    name = next(n for n, (s, _) in spans[0].items() if s == start)
    node = g.nodes[name]
    (texts,) = NATIVE.node_texts([node], g.root, COLLECTION, *spans, ahead.region)
    assert texts[0].startswith("X") and texts[0][1:] == _texts(g)[g.sorted_nodes().index(node)][0][1:]
    ahead.close()


def test_a_full_region_leaves_the_rest_to_the_jobs() -> None:
    assert NATIVE is not None
    g = build_graph(GraphSource(str(DATA / "transformer_big" / "target")), items=False)
    spans = g.data.spans()  # type: ignore[attr-defined]
    count = len(spans[0])
    import mmap

    region = mmap.mmap(-1, HEADER + ROW * count + 5_000)
    made = NATIVE.make_texts_ahead(region, *spans)
    assert 0 < made < count and _done(region) == made
    assert _texts(g, region) == _texts(g)
    assert (
        NATIVE.make_texts_ahead(mmap.mmap(-1, HEADER + ROW * count - 1), *spans) == 0
    )  # no room for the rows


def test_spans_out_of_file_order_end_the_texts() -> None:
    """The rows are looked up by their start: they must increase."""
    assert NATIVE is not None
    g = build_graph(GraphSource(str(DATA / "transformer_big" / "target")), items=False)
    spans, small, text = g.data.spans()  # type: ignore[attr-defined]
    names = list(spans)
    shuffled = {names[1]: spans[names[1]], names[0]: spans[names[0]], **spans}
    ahead = TextsAhead(len(text))
    assert NATIVE.make_texts_ahead(ahead.region, shuffled, small, text) == 1
    assert _texts(g, ahead.region) == _texts(g)


@pytest.fixture
def two_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(forked, "usable_cpus", lambda: 2)


@pytest.mark.skipif(not forked.can_fork(), reason="forked children are used on Linux only")
@pytest.mark.parametrize("delay", [0, 0.002, 0.01, 0.03, 0.1, 1.0])
@pytest.mark.usefixtures("two_cpus")
def test_a_child_stopped_anywhere_leaves_texts_to_take(delay: float) -> None:
    """The scan child goes on making the texts; killed at any moment, it leaves a complete prefix."""
    folder = DATA / "transformer_big" / "target"
    g = build_graph(GraphSource(str(folder)), items=False)
    text = (folder / "dump.json").read_bytes()
    ahead = TextsAhead(len(text))
    started = forked.start_in_child(
        partial(scan_dump_doc, folder / "dump.json", text), partial(ahead.make, text)
    )
    assert started is not None and started[0] is not None
    ahead.going_on(started[1])
    time.sleep(delay)
    ahead.stop()
    assert forked._children == 0
    spans = g.data.spans()  # type: ignore[attr-defined]
    assert _done(ahead.region) <= len(spans[0])
    if delay >= 1.0:
        assert _done(ahead.region) == len(spans[0])
    assert _texts(g, ahead.region) == _texts(g)
    ahead.close()


@pytest.mark.skipif(not forked.can_fork(), reason="forked children are used on Linux only")
@pytest.mark.usefixtures("two_cpus")
def test_closing_stops_the_child_and_frees_the_region() -> None:
    ahead = TextsAhead(1000)
    started = forked.start_in_child(lambda: 1, lambda _: time.sleep(60))
    assert started is not None
    ahead.going_on(started[1])
    ahead.close()
    assert ahead.region is None and forked._children == 0
    ahead.close()


def test_pickled_they_are_none() -> None:
    """A graph sent to another process has no texts made ahead: the region is this machine's."""
    assert pickle.loads(pickle.dumps(TextsAhead(1000))) is None
