"""VPP after the PP merge of one pp group (graph_visualize.md §6.6).

Contract, for the merge driver::

    merge_vpp(merge_pp_group(graphs), vpp)

With virtual pipeline parallelism each rank holds ``vpp`` model chunks, dumped as root modules
``Module.{c}.*``. After the PP merge, chunk ``c`` of the main graph holds the layers of chunk ``c`` of
every stage. This step makes one model of them, in place in ``result.graph``:

1. chunk-0 modules that were not PP-merged take the data of their twin in the last chunk (forward:
   outputs, backward: inputs), since the model's result comes out of the last chunk;
2. the children of each chunk-c layer container are moved into the chunk-0 container (appended in
   forward, prepended in backward), the emptied chunk-c trees are dropped from the graph, and the
   moved modules are renamed to chunk 0 with their layer renumbered in model order.
"""

from __future__ import annotations

from msprobe_dask.graph.merge.pp import LAYERS, PPResult, is_backward, is_forward, subtree, with_layer_index
from msprobe_dask.graph.merge.rename import rename_items, rename_node
from msprobe_dask.graph.model import MODULE, Graph, Node


def in_chunk(node_id: str, chunk: int) -> str:
    """The id with part 1 (the chunk index of ``Module.{c}.…``) set to ``chunk``."""
    parts = node_id.split(".")
    if len(parts) > 1:
        parts[1] = str(chunk)
    return ".".join(parts)


def _chunk_of(node: Node) -> str | None:
    parts = node.id.split(".")
    return parts[1] if node.type == MODULE and len(parts) > 1 else None


def _take_last_chunk_data(result: PPResult, vpp: int) -> None:
    g = result.graph
    pp_nodes = result.merged | result.moved.keys()
    for top in g.root.children:
        if _chunk_of(top) != "0":
            continue
        for node in subtree(top, skip=pp_nodes):
            if node.type != MODULE:
                continue
            last = g.nodes.get(in_chunk(node.id, vpp - 1))
            if last is None:
                continue
            if is_forward(node.id):
                node.output_data = last.output_data
                rename_items(node, last.id)
            elif is_backward(node.id):
                node.input_data = last.input_data
                rename_items(node, last.id)


def _layer_containers(result: PPResult) -> list[Node]:
    """The chunk-0 parents of PP-merged layers and of renumbered (moved) layers, in map order."""
    found = {n.parent for n in result.merged} | {n.parent for n in result.moved if LAYERS.search(n.id)}
    return [n for n in result.graph.nodes.values() if n in found and _chunk_of(n) == "0"]


def _drop_tree(g: Graph, node: Node) -> None:
    """Remove ``node``'s root-level ancestor and everything still under it from ``g``."""
    top = node
    while top.parent is not None and top.parent is not g.root:
        top = top.parent
    if top in g.root.children:
        g.root.children.remove(top)
    for n in list(subtree(top)):
        if g.nodes.get(n.id) is n:
            del g.nodes[n.id]


def _rename_moved(g: Graph, top: Node, layer: int | None) -> None:
    for n in list(subtree(top)):
        if n.type != MODULE:
            continue
        new_id = in_chunk(n.id, 0)
        if layer is not None:
            new_id = with_layer_index(new_id, layer)
        rename_node(g.nodes, n, new_id)


def _merge_chunks(g: Graph, container: Node, vpp: int) -> list[Node]:
    """Move the chunk-c twins' children into ``container``; return the emptied twins."""
    backward = is_backward(container.id)
    moved: set[Node] = set()
    emptied = []
    for chunk in range(1, vpp):
        other = g.nodes.get(in_chunk(container.id, chunk))
        if other is None:
            continue
        children = list(other.children)
        other.children.clear()
        for c in children:
            c.parent = container
        moved.update(children)
        container.children[:] = children + container.children if backward else container.children + children
        emptied.append(other)
    counter = -1
    for c in list(reversed(container.children) if backward else container.children):
        is_layer = bool(LAYERS.search(c.id))
        if is_layer:
            counter += 1
        if c in moved:
            _rename_moved(g, c, counter if is_layer else None)
    return emptied


def merge_vpp(result: PPResult, vpp: int) -> None:
    """Fold the ``vpp`` model chunks of ``result.graph`` into chunk 0 (see the module docstring)."""
    _take_last_chunk_data(result, vpp)
    emptied = []
    for container in _layer_containers(result):
        emptied += _merge_chunks(result.graph, container, vpp)
    for node in emptied:
        _drop_tree(result.graph, node)
