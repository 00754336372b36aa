"""Build one graph (one step, rank and side) from construct.json, dump.json and stack.json (§2)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from sys import intern
from typing import Any

from msprobe_dask.dump.dumpjson import load_construct
from msprobe_dask.dump.entries import DumpEntries
from msprobe_dask.dump.entry_shape import check_entries
from msprobe_dask.dump.markers import PARAMETERS_GRAD
from msprobe_dask.dump.stack_pieces import read_stack_map
from msprobe_dask.errors import DumpError
from msprobe_dask.graph import dump_files
from msprobe_dask.graph.gcpause import collections_paused
from msprobe_dask.graph.model import (
    API,
    API_COLLECTION,
    COLLECTION,
    MODULE,
    NO_ITEMS,
    NO_LINES,
    ROOT_ID,
    Graph,
    Node,
    node_type_of,
)
from msprobe_dask.graph.node_items import node_items, parse_unused

BWD = re.compile(r"(\.backward\.)(\d+)$")
FWD = re.compile(r"(\.forward\.)(\d+)$")
FRAME = re.compile(r"File (.*?), line \d+, in ([^,]*)")  # a stack line's file and function
PARAMS_GRAD = re.compile(rf"\.{re.escape(PARAMETERS_GRAD)}(?:\.\d+)?$")
NO_FORWARD_STACK = ["This backward node cannot find the forward node and cannot retrieve stack information."]
NO_STACK: list[str] = []  # the stack of the nodes stack.json has none for (shared: stacks are never changed)


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


def repair_parent(sub: str, up: str | None, construct: Mapping[str, str | None]) -> str | None:
    """The parent a build gives ``sub``, named ``up`` in ``construct`` (§2.3: parent repair)."""
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
        # a big dump's entry names are interned (entries_scan.scan_entries): its node ids are those strings
        self.interned = isinstance(data, DumpEntries) and not data.held
        self.root = Node(ROOT_ID, MODULE)
        self.nodes: dict[str, Node] = {ROOT_ID: self.root}

    def _twin_stack(self, node_id: str, stack: Any) -> Any:
        """The stack a backward node shows whose stack.json lines are ``stack`` (none): its forward
        twin's (``X.backward``: ``X.forward``'s, ``X.backward.N``: ``X.forward.0``'s); ``stack`` if it has
        no twin."""
        if node_id.endswith(".backward"):
            twin_id = node_id.replace("backward", "forward")
        else:
            m = BWD.search(node_id)
            if m is None:
                return stack
            twin_id = f"{node_id[: m.start()]}.forward.0{node_id[m.end() :]}"
        twin = self.nodes.get(twin_id)
        return twin.stack if twin is not None else NO_FORWARD_STACK

    def new(self, node_id: str) -> Node:
        if self.interned:
            node_id = intern(node_id)
        inputs, outputs = node_items(node_id, self.data, self.folder) if self.items else (NO_ITEMS, NO_ITEMS)
        micro = self.micro.get(node_id, 0) if self.micro is not None else None
        stack = self.stacks.get(node_id, NO_STACK)
        if not stack and ".backward" in node_id:
            stack = self._twin_stack(node_id, stack)
        # positional: a third faster than keywords, for every node of the graph
        node = Node(
            node_id,
            node_type_of(node_id),
            None,
            [],
            inputs,
            outputs,
            stack,
            micro,
            NO_LINES,
            None,
            None,
            NO_LINES,
        )
        self.nodes[node_id] = node
        return node


def _attach_all(b: _Builder, construct: Mapping[str, str | None]) -> None:
    """Each node of construct.json under its (repaired) parent (the root for none), each made when
    first named, in construct.json's order: the loop of a build, once per node (its lookups inline)."""
    get, new, root = b.nodes.get, b.new, b.root
    for sub, up in construct.items():
        if ".backward" in sub:  # (repair_parent leaves other nodes' parents alone)
            up = repair_parent(sub, up, construct)
        if up is None:
            parent = root
        else:
            found = get(up)
            parent = found if found is not None else new(up)
        node = get(sub)
        if node is None:
            node = new(sub)
        node.attach(parent)


def _stack_shows_recompute(lines: list[Any]) -> bool:
    # (the frames looked for are of functions named recompute_fn, backward or checkpoint_function_backward:
    # a stack whose lines hold neither word shows none, and its lines need not be matched one by one)
    if not any(isinstance(line, str) and ("backward" in line or "recompute_fn" in line) for line in lines):
        return False
    frames = []
    for line in lines:
        m = FRAME.match(line) if isinstance(line, str) else None  # (a hostile stack.json's numbers)
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
            coll = Node(f"{API_COLLECTION}.{k}", COLLECTION, parent=root)
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


def _place_parameters_grad(b: _Builder, unused: list[str]) -> None:
    """The parameters_grad entries among ``unused`` (the entries no node holds) as nodes."""
    groups: dict[str, list[str]] = {}
    for key in unused:
        m = PARAMS_GRAD.search(key) if PARAMETERS_GRAD in key else None  # (the regex for few entries)
        if m:
            groups.setdefault(key[: m.start()], []).append(key[m.start() :])
    if not groups:
        return
    max_call: dict[str, int] = {}
    for node_id in b.nodes:
        if ".backward." not in node_id:  # (BWD matches none of them: most ids leave here, before the regex)
            continue
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
                node.input_data, node.output_data = node_items(node_id, b.data, b.folder)
            parent.children.append(node)
            b.nodes[node_id] = node


def build_graph(src: dump_files.GraphSource, items: bool = True) -> Graph:
    """Read one dump folder and build its hierarchy (no compare, no micro steps yet).

    ``items=False`` leaves the nodes' items to ``node_items.parse_items`` (the parse is most of the build, and
    graph/chunks.py does it in chunk tasks)."""
    for p in (src.construct_json, src.dump_json, src.stack_json):
        dump_files.check_graph_file(p)
    construct, micro, k = load_construct(src.construct_json)
    if not construct and k is None:
        raise DumpError(
            src.construct_json, "is empty ({}): dump with level L0 or mix to collect the model structure"
        )
    header, data = dump_files.load_dump_doc(src.dump_json, lazy=not items)
    check_entries(src.dump_json, data)
    micro_of = micro if k is not None else None
    # (no collection while the stacks are parsed, as while the nodes are made: containers that live on;
    # S200k's stack.json parsed in blocks set off 3% of a build in collections)
    with collections_paused():
        stacks = read_stack_map(src.stack_json, dump_files.find_entries)
        b = _Builder(data, stacks, micro_of, items, str(src.folder))
        _attach_all(b, construct)
    framework = header.get("framework") or "pytorch"
    _handle_recompute(b, framework)
    _wrap_api_collections(b)
    unused = [key for key in data if key not in b.nodes]
    _place_parameters_grad(b, unused)
    if not items:
        parse_unused(data, [key for key in unused if key not in b.nodes])
    g = Graph(
        root=b.root,
        nodes=b.nodes,
        data=data,
        task=str(header.get("task") or ""),
        framework=framework,
        data_path=dump_files.graph_data_path(header, src.construct_json),
        header=header,
        folder=str(src.folder),
        step=src.step,
        rank=src.rank,
        no_md5=not (
            data.mentions(dump_files.MD5_TOKEN)
            if isinstance(data, DumpEntries)
            else dump_files.mentions(src.dump_json, dump_files.MD5_TOKEN)
        ),
        items_pending=not items,
    )
    if k is not None:
        g.megatron = True
        g.micro_steps = k + 1
    return g
