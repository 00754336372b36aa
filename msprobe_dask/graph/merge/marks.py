"""A rank's marks (strategy.RankMarks: what group discovery reads) from its construct.json and the few
dump.json entries they are in, without building the rank (a third of a build): the nodes a build
makes of construct.json come first in its graph, in construct.json's order (graph/build.py), so the
first of them that gives a mark is the graph's first. The nodes a build adds after them
(``Apis_Between_Modules``, parameters_grad: dump.json entries construct.json does not name) give none,
unless an entry construct.json does not name could (strategy.may_mark): that rank is built."""

from __future__ import annotations

from collections.abc import Mapping

from msprobe_dask.dump.dumpjson import load_construct
from msprobe_dask.graph.build import repair_parent
from msprobe_dask.graph.chunks import let_go
from msprobe_dask.graph.dump_files import GraphSource, check_graph_file, load_dump_doc
from msprobe_dask.graph.merge.strategy import RankMarks, marks_in, may_mark, rank_marks
from msprobe_dask.graph.model import ROOT_ID
from msprobe_dask.graph.node_items import node_items
from msprobe_dask.graph.tasks import build_task


def node_order(construct: Mapping[str, str | None]) -> list[str]:
    """The ids of the nodes a build makes of ``construct``, in the order it makes them: each pair's
    (repaired) parent, then the child, each when first named."""
    made = dict.fromkeys([ROOT_ID])
    for sub, up in construct.items():
        if ".backward" in sub:
            up = repair_parent(sub, up, construct)
        if up is not None:
            made.setdefault(up)
        made.setdefault(sub)
    return list(made)


def read_marks(folder: str, step: int, rank: int) -> RankMarks:
    """The marks of the rank in ``folder``, as ``rank_marks`` reads them of its graph."""
    src = GraphSource(folder, step, rank)
    for path in (src.construct_json, src.dump_json):
        check_graph_file(path)
    construct, _, _ = load_construct(src.construct_json)
    _, data = load_dump_doc(src.dump_json, lazy=True)
    ids = node_order(construct)
    named = set(ids)
    if any(may_mark(key) for key in data if key not in named):
        g = build_task(folder, step, rank, items=False)
        marks = rank_marks(g)
        let_go([g])
        return marks
    return marks_in(rank, ids, lambda node_id: node_items(node_id, data, folder)[0])
