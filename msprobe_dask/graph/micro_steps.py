"""Micro steps (graph_visualize.md §2.11): the root's children batched into micro steps, NPU side
first, and each node below taking its parent's (a Megatron construct.json gives them instead)."""

from __future__ import annotations

from msprobe_dask.errors import DumpError
from msprobe_dask.graph.model import MODULE, Graph, Node

MAX_MICRO_DEPTH = 500


def _propagate(node: Node) -> None:
    """Each node under ``node`` without a micro step takes its parent's (depth first)."""
    stack = [(node, 0)]
    while stack:
        n, depth = stack.pop()
        if depth > MAX_MICRO_DEPTH:
            raise DumpError(None, f"{n.id}: the model hierarchy is deeper than {MAX_MICRO_DEPTH} levels")
        for child in n.children:
            if child.micro is None:
                child.micro = n.micro
            stack.append((child, depth + 1))


def assign_micro_steps(g: Graph, bench: Graph | None = None) -> None:
    """§2.11: batch the root's children into micro steps and propagate down (NPU side first)."""
    if g.megatron:
        return
    batch, back = 0, False
    for child in g.root.children:
        if child.type == MODULE:
            if ".forward." in child.id:
                if back:
                    batch += 1
                    back = False
            else:
                back = True
        child.micro = batch
        if bench is not None and child.link:
            partner = bench.nodes.get(child.link[-1])
            if partner is not None:
                partner.micro = batch
    for child in g.root.children:
        _propagate(child)
    g.micro_steps = batch + 1
    if bench is not None:
        for child in bench.root.children:
            if child.micro is None:
                last = child.id.split(".")[-1]
                child.micro = int(last) if last.isdigit() else 0
        for child in bench.root.children:
            _propagate(child)
        bench.micro_steps = g.micro_steps
