"""Build one graph (one step, rank and side) from construct.json, dump.json and stack.json (§2)."""

from __future__ import annotations

import mmap
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from msprobe_dask.dump.confine import check_dump_file
from msprobe_dask.dump.dumpjson import read_json
from msprobe_dask.dump.entries import DumpEntries, read_dump_doc, read_whole_dump_doc
from msprobe_dask.dump.entry_shape import check_entries
from msprobe_dask.errors import DumpError
from msprobe_dask.graph import speedups
from msprobe_dask.graph.gcpause import collections_paused
from msprobe_dask.graph.items import entry_items
from msprobe_dask.graph.model import API, COLLECTION, MODULE, ROOT_ID, Graph, Node, node_type_of

BWD = re.compile(r"(\.backward\.)(\d+)$")
FWD = re.compile(r"(\.forward\.)(\d+)$")
FRAME = re.compile(r"File (.*?), line \d+, in ([^,]*)")  # a stack line's file and function
PARAMS_GRAD = re.compile(r"\.parameters_grad(?:\.\d+)?$")
NO_FORWARD_STACK = ["This backward node cannot find the forward node and cannot retrieve stack information."]
NO_STACK: list[str] = []  # the stack of the nodes stack.json has none for (shared: stacks are never changed)
MEGATRON_KEY = "megatron_micro_step_number"
MD5_TOKEN = b'"md5"'  # in the text of a dump.json whose entries may have an md5
MAX_MICRO_DEPTH = 500


@dataclass(frozen=True, slots=True)
class GraphSource:
    """Where one graph's three JSON files are, and where it goes in the db."""

    folder: str
    step: int = 0
    rank: int = 0

    @property
    def construct_json(self) -> Path:
        return Path(self.folder) / "construct.json"

    @property
    def dump_json(self) -> Path:
        return Path(self.folder) / "dump.json"

    @property
    def stack_json(self) -> Path:
        return Path(self.folder) / "stack.json"


# ------------------------------------------------------------------------------------ loading


def _check_file(path: Path) -> None:
    check_dump_file(path)
    if not path.is_file():
        raise DumpError(
            path, "does not exist (graph_visualize needs construct.json, dump.json and stack.json)"
        )


def load_stack_map(path: Path) -> dict[str, list[str]]:
    doc = read_json(path)
    if not isinstance(doc, dict):
        raise DumpError(path, "must be a JSON object")
    out: dict[str, list[str]] = {}
    if doc.get("0"):
        for group in doc.values():
            if isinstance(group, list) and len(group) == 2 and isinstance(group[0], list):
                for name in group[0]:
                    if isinstance(name, str):
                        out[name] = group[1]
        return out
    for name, lines in doc.items():
        out[name] = lines
    return out


def load_construct(path: Path) -> tuple[dict[str, str | None], dict[str, int], int | None]:
    """(parents, micro ids, K) where K is the Megatron micro step number or None."""
    doc = read_json(path)
    if not isinstance(doc, dict):
        raise DumpError(path, "must be a JSON object mapping node names to parents")
    if not doc:
        raise DumpError(path, "is empty ({}): dump with level L0 or mix to collect the model structure")
    if MEGATRON_KEY not in doc:
        _check_parents(path, doc)
        return doc, {}, None
    doc = dict(doc)
    k = doc.pop(MEGATRON_KEY)
    parents: dict[str, str | None] = {}
    micro: dict[str, int] = {}
    for sub, up in doc.items():
        if isinstance(up, list):
            if len(up) != 2:
                raise DumpError(path, f"cannot be parsed: {sub!r} must map to [parent, micro_step]")
            parents[sub], micro[sub] = up[0], up[1]
        else:
            parents[sub], micro[sub] = up, 0
    _check_parents(path, parents)
    return parents, micro, int(k)


def _check_parents(path: Path, parents: Mapping[str, Any]) -> None:
    """Each node's parent is a name or null (the reference crashes on anything else)."""
    for sub, up in parents.items():
        if up is not None and up.__class__ is not str:
            raise DumpError(
                path, f"cannot be parsed: {sub!r} must map to its parent's name or null, not {up!r}"
            )


def load_dump_doc(path: Path, lazy: bool = False) -> tuple[dict[str, Any], Mapping[str, Any]]:
    """(header, data) of dump.json. ``lazy``: data's entries are parsed when looked up (see
    dump/entries.py), so that a build without items parses none of them."""
    return read_dump_doc(path) if lazy else read_whole_dump_doc(path)


def _mentions(path: Path, token: bytes) -> bool:
    """Whether the file's bytes contain ``token`` (a quick scan that lets callers skip a walk of the
    parsed document)."""
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        return m.find(token) != -1


def graph_data_path(doc: Mapping[str, Any], construct_json: Path) -> str | None:
    d = doc.get("dump_data_dir", "")
    real = os.path.realpath(construct_json)
    if d and os.path.dirname(d) != os.path.dirname(real):
        return os.path.join(os.path.dirname(real), "dump_tensor_data")
    return d


# ------------------------------------------------------------------------------------ building


def _renamed(m: re.Match[str], word: str) -> str:
    r"""``m.string`` (``m`` a BWD or FWD match) with ``word`` for its direction: what
    ``BWD.sub(r".forward.\2", m.string)`` gives for "forward", without re's template expansion
    (a Python call per substitution)."""
    s = m.string
    return f"{s[: m.start(1)]}.{word}.{s[m.start(2) :]}"


def _backward_of(node_id: str) -> str:
    r"""``FWD.sub(r".backward.\2", node_id)``."""
    m = FWD.search(node_id)
    return node_id if m is None else _renamed(m, "backward")


def _repair_parent(sub: str, up: str | None, construct: Mapping[str, str | None]) -> str | None:
    if ".backward" not in sub:  # only backward nodes are repaired: most nodes leave here
        return up
    if sub.endswith(".backward"):  # an API's backward node; a module's (X.backward.N) matches BWD
        if up is None:
            fp = construct.get(sub.replace("backward", "forward"))
            if fp:
                cand = fp.replace("forward", "backward")
                if cand in construct:
                    return cand
        return up
    m = BWD.search(sub)
    if m is None:
        return up
    if up is None:
        fp = construct.get(_renamed(m, "forward"))
        if fp:
            cand = _backward_of(fp)
            if cand in construct:
                return cand
        return up
    sp, upp = sub.split("."), up.split(".")
    if len(sp) >= 5 and len(upp) >= 4 and ".".join(sp[:-4]) != ".".join(upp[:-3]):
        fwd = _renamed(m, "forward")
        if fwd in construct:
            fp = construct[fwd]
            if fp is None:
                return None
            cand = _backward_of(fp)
            if cand in construct:
                return cand
    return up


class _Builder:
    def __init__(
        self,
        data: Mapping[str, Any],
        stacks: Mapping[str, list[str]],
        micro: Mapping[str, int] | None,
        items: bool = True,
        folder: str = "",
    ):
        self.data = data
        self.folder = folder  # the dump folder (its dump.json is named in errors)
        self.stacks = stacks
        self.micro = micro
        self.items = items
        self.root = Node(ROOT_ID, MODULE)
        self.nodes: dict[str, Node] = {ROOT_ID: self.root}

    def _stack_for(self, node_id: str) -> list[str]:
        """Its stack.json lines; a backward node without any shows its forward twin's
        (``X.backward``: ``X.forward``'s, ``X.backward.N``: ``X.forward.0``'s)."""
        stack = self.stacks.get(node_id, NO_STACK)
        if stack or ".backward" not in node_id:
            return stack
        if node_id.endswith(".backward"):
            twin_id = node_id.replace("backward", "forward")
        else:
            m = BWD.search(node_id)
            if m is None:
                return stack
            twin_id = f"{node_id[: m.start()]}.forward.0{node_id[m.end() :]}"
        twin = self.nodes.get(twin_id)
        return twin.stack if twin is not None else NO_FORWARD_STACK

    def get(self, node_id: str) -> Node:
        node = self.nodes.get(node_id)
        return node if node is not None else self.new(node_id)

    def new(self, node_id: str) -> Node:
        inputs, outputs = _items(node_id, self.data, self.folder) if self.items else ({}, {})
        micro = self.micro.get(node_id, 0) if self.micro is not None else None
        stack = self._stack_for(node_id)
        # positional: a third faster than keywords, for every node of the graph
        node = Node(node_id, node_type_of(node_id), None, [], inputs, outputs, stack, micro)
        self.nodes[node_id] = node
        return node


def _attach_all(b: _Builder, construct: Mapping[str, str | None]) -> None:
    """Each node of construct.json under its (repaired) parent, made if new, in construct.json's
    order: the loop of a build, once per node."""
    for sub, up in construct.items():
        if ".backward" in sub:  # (_repair_parent leaves other nodes' parents alone)
            up = _repair_parent(sub, up, construct)
        _attach(b, sub, up)


def _attach(b: _Builder, sub: str, up: str | None) -> None:
    """``b.get(sub).attach(b.get(up))``, the root for no parent."""
    parent = b.root if up is None else b.get(up)
    b.get(sub).attach(parent)


def _stack_shows_recompute(lines: list[str]) -> bool:
    frames = []
    for line in lines:
        m = FRAME.match(line)
        if m:
            frames.append((m.group(1), m.group(2).strip()))
    for i, (path, func) in enumerate(frames):
        if func == "recompute_fn" and path.endswith("torch/utils/checkpoint.py"):
            return True
        if func == "backward" or (func == "checkpoint_function_backward" and "megatron" in path):
            for j in (i + 1, i + 2):
                if j < len(frames) and frames[j][0].endswith("torch/autograd/function.py"):
                    return True
    return False


def _is_abnormal(segs: list[str]) -> bool:
    n = len(segs)
    if n > 7:
        return True
    if n == 7:
        return not (segs[1].isdigit() and segs[3].isdigit())
    if n == 6:
        return not segs[1].isdigit()
    return False


def _handle_recompute(b: _Builder, framework: str) -> None:
    root = b.root
    cands: list[Node] = []
    for c in root.children:
        if c.type != MODULE:
            continue
        if framework == "pytorch":
            stack = c.stack
            m = BWD.search(c.id)
            if m:
                fwd = _renamed(m, "forward")
                twin = b.nodes.get(fwd)
                stack = twin.stack if twin is not None else b.stacks.get(fwd, [])
            if not _stack_shows_recompute(stack):
                continue
        cands.append(c)
    if not cands:
        return
    root_ids = {c.id for c in root.children}
    cached: set[str] = set()
    recompute: list[Node] = []
    for c in cands:
        segs = c.id.split(".")
        if c.id in cached:
            recompute.append(c)
            continue
        if _is_abnormal(segs) and len(segs) >= 2:
            twin_segs = list(segs)
            twin_segs[-2] = "backward" if segs[-2] == "forward" else "forward"
            twin_id = ".".join(twin_segs)
            if twin_id in root_ids:
                cached.add(twin_id)
                recompute.append(c)
    if not recompute:
        return
    prefixes = {".".join(c.id.split(".")[:-2]) for c in recompute}
    refs: dict[str, tuple[list[Node], list[Node]]] = {}
    for node in b.nodes.values():
        if node.type != MODULE or not FWD.search(node.id):
            continue
        if node.parent is None or node.parent is root:
            continue
        prefix = FWD.sub("", node.id)
        if prefix in prefixes:
            fw, bw = refs.setdefault(prefix, ([], []))
            fw.append(node)
            bw.append(node)
    for fw, bw in refs.values():
        fw.reverse()
        bw.reverse()
    removed: list[int] = []
    for c in recompute:
        prefix = ".".join(c.id.split(".")[:-2])
        lists = refs.get(prefix)
        if not lists:
            continue
        lst = lists[0] if ".forward" in c.id else lists[1]
        if not lst:
            continue
        ref = lst.pop()
        if ref.parent is None:
            continue
        new_parent = b.nodes.get(_backward_of(ref.parent.id))
        if new_parent is None or c.id in new_parent.ancestors() or new_parent is c:
            continue
        idx = root.children.index(c)
        c.parent = new_parent
        new_parent.children.append(c)
        removed.append(idx)
    for idx in sorted(removed, reverse=True):
        del root.children[idx]


def _wrap_api_collections(b: _Builder) -> None:
    root = b.root
    out: list[Node] = []
    run: list[Node] = []
    k = 0

    def flush() -> None:
        nonlocal k
        if len(run) >= 2:
            coll = Node(f"Apis_Between_Modules.{k}", COLLECTION, parent=root)
            k += 1
            coll.micro = run[0].micro
            for child in run:
                child.parent = coll
                coll.children.append(child)
            b.nodes[coll.id] = coll
            out.append(coll)
        else:
            out.extend(run)
        run.clear()

    for child in root.children:
        if child.type == API:
            run.append(child)
        else:
            flush()
            out.append(child)
    flush()
    root.children[:] = out


def _place_parameters_grad(b: _Builder) -> None:
    groups: dict[str, list[str]] = {}
    for key in b.data:
        if key in b.nodes:
            continue
        m = PARAMS_GRAD.search(key)
        if m:
            groups.setdefault(key[: m.start()], []).append(key[m.start() :])
    if not groups:
        return
    max_call: dict[str, int] = {}
    for node_id in b.nodes:
        m = BWD.search(node_id)
        if m:
            prefix = node_id[: m.start()]
            n = int(m.group(2))
            if n > max_call.get(prefix, -1):
                max_call[prefix] = n
    for prefix, suffixes in groups.items():
        parent = b.nodes.get(f"{prefix}.backward.{max_call.get(prefix, 0)}")
        if parent is None:
            continue
        for suffix in suffixes:
            node_id = prefix + suffix
            node = Node(node_id, MODULE, parent=parent)
            if b.items:
                node.input_data, node.output_data = _items(node_id, b.data, b.folder)
            parent.children.append(node)
            b.nodes[node_id] = node


def _items(node_id: str, data: Mapping[str, Any], folder: str) -> tuple[dict[str, dict], dict[str, dict]]:
    """The node's items from its entry; an entry the items cannot be made of is refused naming the
    dump.json of ``folder``."""
    return _entry_items(node_id, data.get(node_id), folder)


def _entry_items(node_id: str, entry: Any, folder: str) -> tuple[dict[str, dict], dict[str, dict]]:
    try:
        return entry_items(node_id, entry)
    except DumpError as exc:
        if exc.path is not None:
            raise
        raise DumpError(Path(folder) / "dump.json", exc.problem) from None


def _parse_unused(data: Mapping[str, Any], nodes: Mapping[str, Node]) -> None:
    """Parse the entries no node holds, so that a malformed one is refused as the full parse would
    refuse it (the others are parsed with their nodes' items); real dumps have few or none."""
    for key in data:
        if key not in nodes:
            data[key]


def parse_items(g: Graph, nodes: Iterable[Node]) -> None:
    """Give ``nodes`` their items, if ``g`` was built without (``items_pending``); nodes that already
    hold some keep them."""
    if not g.items_pending:
        return
    for node in nodes:
        if node is not g.root and node.type != COLLECTION and not (node.input_data or node.output_data):
            node.input_data, node.output_data = _items(node.id, g.data, g.folder)


def export_texts(g: Graph, nodes: list[Node]) -> list[tuple[str, str] | None] | None:
    """For each of ``nodes``, the JSON texts of its exported (input_data, output_data) made by the C
    code straight from the text of its dump.json entry (csrc/entry_text.c), as rows.chunk_rows makes
    them from the items parse_items would give (md5 left out), or None for a node whose items must
    be parsed; None for all of them without the C code or where ``g``'s entries are not read by span.
    """
    native = speedups.native
    spans = g.data.spans() if g.items_pending and isinstance(g.data, DumpEntries) else None
    if native is None or spans is None:
        return None
    return native.node_texts(nodes, g.root, COLLECTION, *spans)  # type: ignore[no-any-return]


def parse_all_items(g: Graph) -> None:
    parse_items(g, g.nodes.values())
    g.items_pending = False


def build_graph(src: GraphSource, items: bool = True) -> Graph:
    """Read one dump folder and build its hierarchy (no compare, no micro steps yet).

    ``items=False`` leaves the nodes' items to ``parse_items`` (the parse is most of the build, and
    graph/chunks.py does it in chunk tasks)."""
    for p in (src.construct_json, src.dump_json, src.stack_json):
        _check_file(p)
    construct, micro, k = load_construct(src.construct_json)
    header, data = load_dump_doc(src.dump_json, lazy=not items)
    check_entries(src.dump_json, data)
    stacks = load_stack_map(src.stack_json)
    micro_of = micro if k is not None else None
    b = _Builder(data, stacks, micro_of, items, str(src.folder))
    with collections_paused():
        _attach_all(b, construct)
    framework = header.get("framework") or "pytorch"
    _handle_recompute(b, framework)
    _wrap_api_collections(b)
    _place_parameters_grad(b)
    if not items:
        _parse_unused(data, b.nodes)
    g = Graph(
        root=b.root,
        nodes=b.nodes,
        data=data,
        task=str(header.get("task") or ""),
        framework=framework,
        data_path=graph_data_path(header, src.construct_json),
        header=header,
        folder=str(src.folder),
        step=src.step,
        rank=src.rank,
        no_md5=not (
            data.mentions(MD5_TOKEN) if isinstance(data, DumpEntries) else _mentions(src.dump_json, MD5_TOKEN)
        ),
        items_pending=not items,
    )
    if k is not None:
        g.megatron = True
        g.micro_steps = k + 1
    return g


# ------------------------------------------------------------------------------------ micro steps


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
