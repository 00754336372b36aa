"""Parallel-merge parameters: validation (§6.1), strategy (§6.2) and tp/pp group discovery (§6.3).

The default groups follow Megatron's rank generator: the ranks are laid out along the dimensions of
``order`` (first = fastest varying) and a group of a dimension is the set of ranks that differ only
along that dimension.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from msprobe_dask.dump.markers import BATCH_P2P, GROUP_RANKS, ISEND, LEAF_KEYS, P2P_KEYS, PROCESS_GROUP
from msprobe_dask.errors import ConfigError
from msprobe_dask.graph.merge import DEFAULT_ORDER
from msprobe_dask.graph.model import Graph
from msprobe_dask.graph.node_items import parse_items

NO_PARALLEL, TP, PP, VPP, TP_PP, FULL = "NoParallel", "TP", "PP", "VPP", "TPPP", "Full"
_ORDER_RE = re.compile(r"^[a-z\-]+$")
_TP_APIS = ("reduce_scatter", "all_reduce")


@dataclass(frozen=True, slots=True)
class ParallelParams:
    """One side's parallel sizes. ``side`` is ``NPU`` or ``Bench`` (used in messages)."""

    rank_size: int
    tp: int
    pp: int
    vpp: int = 1
    order: str = DEFAULT_ORDER
    side: str = "NPU"

    @property
    def strategy(self) -> str:
        if self.tp == self.pp == self.rank_size == 1:
            return NO_PARALLEL
        if self.tp == self.rank_size:
            return TP
        if self.pp == self.rank_size:
            return PP if self.vpp == 1 else VPP
        if self.pp == 1:
            return TP
        if self.tp == 1:
            return PP if self.vpp == 1 else VPP
        if self.tp * self.pp == self.rank_size:
            return TP_PP
        return FULL

    def error(self, option: str, problem: str) -> ConfigError:
        return ConfigError(option, f"[{self.side}] {problem}")


def _pick(values: Sequence, i: int, count: int, default):
    return values[i] if len(values) == count else default


def parse_params(
    rank_size: Sequence[int] | None,
    tp: Sequence[int] | None,
    pp: Sequence[int] | None,
    vpp: Sequence[int] | None,
    order: Sequence[str] | None,
    compare: bool,
) -> list[ParallelParams]:
    """The command line's lists -> one ParallelParams per side (NPU, then Bench in a compare)."""
    if not rank_size or not tp or not pp:
        raise ConfigError(
            "--rank_size/--tp/--pp", "a graph merge needs all three of --rank_size, --tp and --pp"
        )
    count = 2 if compare else 1
    task = "a merge compare takes two values (NPU, Bench)" if compare else "a merge build takes one value"
    for name, values in (("--rank_size", rank_size), ("--tp", tp), ("--pp", pp)):
        if len(values) != count:
            raise ConfigError(name, f"{task}, got {len(values)}")
    vpp = list(vpp or [1])
    order = list(order or [DEFAULT_ORDER])
    sides = ("NPU", "Bench")[:count]
    out = []
    for i, side in enumerate(sides):
        v = vpp[0] if not compare and vpp else _pick(vpp, i, 2, 1)
        o = order[0] if not compare and order else _pick(order, i, 2, DEFAULT_ORDER)
        out.append(ParallelParams(rank_size[i], tp[i], pp[i], v, o, side))
    return out


def validate(params: ParallelParams, rank_count: int) -> None:
    """§6.1 checks of one side against the number of its rank folders."""
    p = params
    if p.rank_size != rank_count:
        raise p.error("--rank_size", f"you set {p.rank_size} but the dump holds {rank_count} rank folders")
    for name, value in (("--rank_size", p.rank_size), ("--tp", p.tp), ("--pp", p.pp), ("--vpp", p.vpp)):
        if value <= 0:
            raise p.error(name, f"must be greater than 0, got {value}")
    for name, value in (("--tp", p.tp), ("--pp", p.pp)):
        if value > p.rank_size:
            raise p.error(name, f"{value} is greater than --rank_size {p.rank_size}")
        if p.rank_size % value:
            raise p.error(name, f"--rank_size {p.rank_size} is not divisible by {value}")
    if p.tp * p.pp > p.rank_size:
        raise p.error("--tp/--pp", f"tp*pp = {p.tp * p.pp} is greater than --rank_size {p.rank_size}")
    if p.vpp > 1 and p.pp < 2:
        raise p.error("--vpp", f"vpp {p.vpp} needs --pp of at least 2, got {p.pp}")
    if not _ORDER_RE.match(p.order):
        raise p.error("--order", f"{p.order!r} must consist only of lowercase letters and '-'")


# ------------------------------------------------------------------------------------ default groups


def _prefix_product(sizes: Sequence[int]) -> list[int]:
    out = [1]
    for s in sizes:
        out.append(out[-1] * s)
    return out


def _decompose(index: int, shape: Sequence[int]) -> list[int]:
    stride = _prefix_product(shape)
    return [(index // d) % s for s, d in zip(shape, stride)]


def default_groups(params: ParallelParams, token: str) -> list[list[int]]:
    """Megatron's rank groups of dimension ``token`` (``tp`` or ``pp``) for ``params.order``."""
    p = params
    if p.rank_size % (p.tp * p.pp):
        raise p.error(
            "--tp/--pp",
            f"--rank_size {p.rank_size} is not divisible by tp x pp = {p.tp} x {p.pp} (the default groups)",
        )
    dp = p.rank_size // (p.tp * p.pp)
    sizes = {"tp": p.tp, "pp": p.pp, "dp": dp, "cp": 1, "ep": 1}
    names = p.order.split("-")
    if "ep" in names and "ep-dp" not in p.order and "dp-ep" not in p.order:
        raise p.error("--order", f"{p.order!r}: ep must be next to dp")
    for name, size in sizes.items():
        if name not in names:
            if size != 1:
                raise p.error(
                    "--order", f"{p.order!r} must name every parallel dimension of size > 1 ({name})"
                )
            names.append(name)
    try:
        shape = [sizes[n] for n in names]
    except KeyError as exc:
        raise p.error("--order", f"{p.order!r} names an unknown dimension {exc.args[0]!r}") from None
    mask = [n == token for n in names]
    stride = _prefix_product(shape)
    masked = [s for s, m in zip(shape, mask) if m]
    unmasked = [s for s, m in zip(shape, mask) if not m]
    masked_stride = [d for d, m in zip(stride, mask) if m]
    unmasked_stride = [d for d, m in zip(stride, mask) if not m]
    size = _prefix_product(masked)[-1]
    groups = []
    for g in range(p.rank_size // size):
        gi = _decompose(g, unmasked)
        base = sum(a * b for a, b in zip(gi, unmasked_stride))
        groups.append(
            [base + sum(a * b for a, b in zip(_decompose(r, masked), masked_stride)) for r in range(size)]
        )
    return groups


# ------------------------------------------------------------------------------------ discovery


class RankMarks(NamedTuple):
    """What group discovery reads of one rank graph: the ``group_ranks`` of its first
    reduce-scatter/all-reduce (None: none, or without a group), the rank its first p2p send goes to."""

    rank: int
    tp_group: list[int] | None
    pp_target: int | None


Inputs = Callable[[str], dict]  # a node's input items, by its id


def _tp_api(node_id: str) -> bool:
    return any(api in node_id for api in _TP_APIS)


def _p2p_api(node_id: str) -> bool:
    return node_id.startswith("Distributed.")


def may_mark(node_id: str) -> bool:
    """Whether a node of this id could give a mark (the nodes ``marks_in`` reads)."""
    return _tp_api(node_id) or _p2p_api(node_id)


def _first_group_ranks(ids: Sequence[str], inputs: Inputs) -> list[int] | None:
    for node_id in ids:
        if _tp_api(node_id):
            for key, item in inputs(node_id).items():
                if key.endswith(".group") or item.get(LEAF_KEYS.type) == PROCESS_GROUP:
                    ranks = item.get(GROUP_RANKS)
                    if isinstance(ranks, list):
                        return ranks
            return None
    return None


_ISEND_CALL = f".{ISEND}."  # (in the name of an isend's node)


def _p2p_target(rank: int, node_id: str, inputs: Inputs) -> int | None:
    if BATCH_P2P in node_id:
        for item in inputs(node_id).values():
            peer = item.get(P2P_KEYS.peer)
            if item.get(P2P_KEYS.op) == ISEND and isinstance(peer, int) and peer != rank:
                return peer
        return None
    if ".send." in node_id or _ISEND_CALL in node_id:
        for key, item in inputs(node_id).items():
            if key.endswith(".dst"):
                value = item.get(LEAF_KEYS.value)
                return value if isinstance(value, int) else None
    return None


def _first_p2p_target(rank: int, ids: Sequence[str], inputs: Inputs) -> int | None:
    for node_id in ids:
        if _p2p_api(node_id):
            t = _p2p_target(rank, node_id, inputs)
            if t is not None:
                return t
    return None


def marks_in(rank: int, ids: Sequence[str], inputs: Inputs) -> RankMarks:
    """The marks of the rank whose nodes are ``ids``, in its graph's order."""
    return RankMarks(rank, _first_group_ranks(ids, inputs), _first_p2p_target(rank, ids, inputs))


def rank_marks(g: Graph) -> RankMarks:
    """The marks of ``g``, built with its items or without (graph/build.py: the same nodes in the same
    order)."""

    def inputs(node_id: str) -> dict:
        node = g.nodes[node_id]
        parse_items(g, [node])  # (a graph built without its items: this node's alone)
        return node.input_data

    return marks_in(g.rank, list(g.nodes), inputs)


def tp_groups(marks: Sequence[RankMarks], params: ParallelParams) -> list[list[int]]:
    """Distinct ``group_ranks`` of each rank's first reduce-scatter/all-reduce (``marks`` by rank),
    else the defaults."""
    found: list[list[int]] = []
    for m in marks:
        if m.tp_group is not None and m.tp_group not in found:
            found.append(m.tp_group)
    if not found or len(found[0]) != params.tp:
        return default_groups(params, "tp")
    return found


def pp_groups(marks: Sequence[RankMarks], params: ParallelParams) -> list[list[int]]:
    """Chains of send targets (rank -> the rank it sends to; ``marks`` by rank), else the defaults."""
    targets = {m.rank: m.pp_target for m in marks if m.pp_target is not None}
    chains: list[list[int]] = []
    seen: set[int] = set()
    for start in targets:
        if start in seen:
            continue
        chain = []
        r: int | None = start
        while r is not None and r not in seen:
            seen.add(r)
            chain.append(r)
            r = targets.get(r)
        chains.append(chain)
    if not chains or len(chains[0]) != params.pp:
        return default_groups(params, "pp")
    return chains
