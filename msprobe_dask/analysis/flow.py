"""The divergence analysis's view of one rank: its dump entries in execution order, each with the error
of every input and output tensor, made from compare rows.

A compare row is a mapping keyed by the compare table's column names: a ``CompareTable`` record, a
row read back from a written csv, or a ``-da`` record item. Values may be numbers or the texts the csv
holds. Optional keys: ``api_origin_name`` (the dump entry), ``state``, ``NPU P2POp op`` and
``NPU P2POp peer``; without them the entry and state are read from the row's name.

A tensor's *error* is dimensionless: the largest difference of its summaries (Max, Min, Mean; Norm;
with tensor dumps also MaxAbsErr and EucDist) beyond an absolute floor ``atol``, relative to the
tensor's magnitude (``max(|Bench max|, |Bench min|)``, the Bench norm for Norm and EucDist). A mean of
0.0 against 3.7e-9 in a tensor whose values reach 2 is an error of 2e-9, not 100%.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any, TypeVar

from msprobe_dask.analysis.first_diff import api_of, is_communication
from msprobe_dask.columns import STACK_COLUMN, STAT_COLUMNS
from msprobe_dask.dump.markers import BATCH_P2P, PARAMETERS_GRAD, PROCESS_GROUP
from msprobe_dask.dump.stack_frames import stack_frames, user_frame

NPU_STATS = tuple(STAT_COLUMNS[:4])
BENCH_STATS = tuple(STAT_COLUMNS[4:])
INPUT_ROLES = ("input", "parameters")
_ENTRY = re.compile(r"^(.+?\.(?:forward|backward)(?:\.\d+)?)\.(input|output|parameters)(?:\.|$)")
_GRAD_ENTRY = re.compile(rf"^(.+?\.{re.escape(PARAMETERS_GRAD)}(?:\.\d+)?)(?:\.|$)")
_RANKS = re.compile(r"-?\d+")
# communication arguments that are buffers the op writes (their content before the call means
# nothing): the argument's index, per api
OUTPUT_BUFFER_ARG = {
    "recv": 0,
    "irecv": 0,
    "all_gather": 0,
    "all_gather_into_tensor": 0,
    "_all_gather_base": 0,
    "reduce_scatter": 0,
    "reduce_scatter_tensor": 0,
    "_reduce_scatter_base": 0,
    "all_to_all": 0,
    "all_to_all_single": 0,
    "scatter": 0,
    "gather": 1,
}
NONBLOCKING = ("isend", "irecv", BATCH_P2P)


Signature = tuple[object, object]
_Class = TypeVar("_Class", bound=type)


def _pickled_flat(cls: _Class) -> _Class:
    """Pickle a slotted dataclass's instances as the class and its fields' values: a rank's nodes are
    pickled in parts and read back one by one, and dataclasses' own slots pickling asks ``fields()``
    for every object (3x slower)."""
    values = attrgetter(*cls.__slots__)  # type: ignore[attr-defined]

    def reduce(self: object) -> tuple[type, tuple[Any, ...]]:
        return cls, values(self)

    cls.__reduce__ = reduce  # type: ignore[assignment]
    return cls


@_pickled_flat
@dataclass(frozen=True, slots=True)
class TensorError:
    """One input or output of a node: its row name, error and (for matching producers) NPU max/min."""

    name: str
    role: str  # input | parameters | output | parameters_grad
    error: float
    signature: Signature | None  # an earlier node's tensor with the same one is this tensor
    sent_to: int | None = None  # a P2POp isend's peer


@_pickled_flat
@dataclass(frozen=True, slots=True)
class Comm:
    """What a communication node exchanges: its api and the ranks it talks to (None: the world, or,
    for ``batch_isend_irecv``, every rank that makes a batch: its peers are not known)."""

    api: str
    peers: frozenset[int] | None
    root: int | None = None  # a collective's src/dst argument


@_pickled_flat
@dataclass(frozen=True, slots=True)
class Node:
    """One dump entry of one rank, in execution order."""

    rank: int
    index: int
    name: str
    inputs: tuple[TensorError, ...]
    outputs: tuple[TensorError, ...]
    stack: Any = None  # the first NPU_Stack_Info cell of its rows (a list, or its text)
    comm: Comm | None = None

    @property
    def code_line(self) -> str:
        """The stack's first frame in the user's code."""
        return user_frame(stack_frames(self.stack))


def number(value: Any) -> float | None:
    """A compare cell as a float (numbers and their csv texts, ``inf``, ``nan``); None otherwise."""
    kind = type(value)
    if kind is float:
        return value  # type: ignore[no-any-return]
    if kind is int:
        return float(value)
    if kind is str:
        try:
            return float(value)
        except ValueError:
            return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def entry_and_state(name: str) -> tuple[str, str]:
    """``Module.fc1.Linear.forward.0.input.0`` -> (``Module.fc1.Linear.forward.0``, ``input``)."""
    match = _ENTRY.match(name)
    if match:
        return match.group(1), match.group(2)
    match = _GRAD_ENTRY.match(name)
    if match:
        return match.group(1), PARAMETERS_GRAD
    return name, "output"


def _relative(npu: float, bench: float, scale: float, atol: float) -> float:
    if npu == bench or npu != npu and bench != bench:  # (equal, or both NaN)
        return 0.0
    if not (-math.inf < npu < math.inf and -math.inf < bench < math.inf):
        return math.inf
    excess = abs(npu - bench) - atol
    if excess <= 0:
        return 0.0
    return excess / scale if scale > 0 else math.inf


def _finite(value: float | None) -> bool:
    return value is not None and -math.inf < value < math.inf


def tensor_error(row: Mapping[str, Any], atol: float) -> float | None:
    """The row's error (see the module's doc); None for a row without two comparable summaries."""
    get = row.get
    if "NPU MD5" in row and "BENCH MD5" in row and "NPU max" not in row:
        return 0.0 if row["NPU MD5"] == row["BENCH MD5"] else 1.0
    # (a float cell, what a compare table holds, is taken as it is: number() only for the rest)
    npu = [v if v.__class__ is float else number(v) for v in map(get, NPU_STATS)]
    bench = [v if v.__class__ is float else number(v) for v in map(get, BENCH_STATS)]
    if npu == bench and None not in npu and get("MaxAbsErr") in (None, 0, 0.0, "0", "0.0"):
        return 0.0  # the same summaries (NaN aside, which is never equal): no error
    high, low, norm_value = bench[0], bench[1], bench[3]
    scale = max(abs(high) if _finite(high) else 0.0, abs(low) if _finite(low) else 0.0)  # type: ignore[arg-type]
    norm = abs(norm_value) if _finite(norm_value) else None  # type: ignore[arg-type]
    worst: float | None = None
    for a, b, base in zip(npu, bench, (scale, scale, scale, norm)):
        if a is None or b is None or base is None:
            continue
        error = _relative(a, b, base, atol)
        worst = error if worst is None or error > worst else worst
    for column, base in (("MaxAbsErr", scale), ("EucDist", norm)):
        cell = get(column)
        value = None if cell is None else number(cell)
        if value is not None and base is not None and value == value:
            error = _relative(value, 0.0, base, atol)
            worst = error if worst is None or error > worst else worst
    return worst


def _signature(row: Mapping[str, Any]) -> Signature | None:
    """What identifies the tensor on the NPU side: its max and min (unchanged by views, reshapes and
    copies), or its md5 in an md5 dump."""
    high, low = (v if v.__class__ is float else number(v) for v in (row.get("NPU max"), row.get("NPU min")))
    if high is not None and low is not None:
        return (high, low)
    md5 = row.get("NPU MD5")
    return ("md5", str(md5)) if md5 not in (None, "N/A") else None


def _argument_index(name: str, entry: str, state: str) -> int | None:
    """The n of ``{entry}.{state}.{n}...``: which argument (or output) of the call the row is."""
    rest = name[len(entry) :].split(".")
    return int(rest[2]) if len(rest) > 2 and rest[1] == state and rest[2].isdigit() else None


def _peer(value: Any) -> int | None:
    number_ = number(value)
    return int(number_) if number_ is not None and number_.is_integer() else None


def _comm(entry: str, rows: Sequence[Mapping[str, Any]], rank: int) -> Comm:
    api = api_of(entry)
    peers: set[int] = set()
    root: int | None = None
    group: frozenset[int] | None = None
    for row in rows:
        name = str(row.get("NPU Name", ""))
        peer = _peer(row.get("NPU P2POp peer"))
        if peer is not None:
            peers.add(peer)
        if name.rsplit(".", 1)[-1] in ("src", "dst", "group_src", "group_dst"):
            root = _peer(row.get("NPU max"))
            if root is not None:
                peers.add(root)
        if row.get("NPU Dtype") == PROCESS_GROUP:
            group = frozenset(int(m) for m in _RANKS.findall(str(row.get("NPU max", ""))))
    if api == BATCH_P2P and not peers:  # a csv read back does not hold the P2POp peers
        return Comm(api, None)
    if api in ("send", "recv", "isend", "irecv", BATCH_P2P):
        return Comm(api, frozenset(peers - {rank}))
    return Comm(api, None if group is None else frozenset(group - {rank}), root)


def _unsettled(api: str, op: str, state: str, argument: int | None) -> bool:
    """A communication row whose values are no evidence: a non-blocking op's outputs (read when the call
    returned, before a receive completed: a race; what it sends is its input), a P2POp receive buffer,
    or a buffer that a blocking op writes, read before the call."""
    if (api in NONBLOCKING and state == "output") or op == "irecv":
        return True
    return state == "input" and argument is not None and argument == OUTPUT_BUFFER_ARG.get(api)


def _tensors(
    entry: str, rows: Sequence[Mapping[str, Any]], comm: Comm | None, atol: float
) -> tuple[list[TensorError], list[TensorError]]:
    inputs: list[TensorError] = []
    outputs: list[TensorError] = []
    for row in rows:
        name = str(row.get("NPU Name", ""))
        state = str(row.get("state") or entry_and_state(name)[1])
        error = tensor_error(row, atol)
        if error is None:
            continue
        op = str(row.get("NPU P2POp op", ""))
        if comm and _unsettled(comm.api, op, state, _argument_index(name, entry, state)):
            continue
        sent_to = _peer(row.get("NPU P2POp peer")) if op == "isend" else None
        tensor = TensorError(name, state, error, _signature(row), sent_to)
        (inputs if state in INPUT_ROLES else outputs).append(tensor)
    return inputs, outputs


def _entries(rows: Iterable[Mapping[str, Any]]) -> Iterator[tuple[str, list[Mapping[str, Any]]]]:
    """Consecutive rows of one dump entry, in order."""
    current: str | None = None
    group: list[Mapping[str, Any]] = []
    for row in rows:
        entry = str(row.get("api_origin_name") or entry_and_state(str(row.get("NPU Name", "")))[0])
        if entry != current and group:
            yield str(current), group
            group = []
        current = entry
        group.append(row)
    if group:
        yield str(current), group


def rank_nodes(rows: Iterable[Mapping[str, Any]], rank: int, atol: float) -> list[Node]:
    """The nodes of one rank, in execution (dump) order, from its compare rows."""
    nodes: list[Node] = []
    for entry, group in _entries(rows):
        comm = _comm(entry, group, rank) if is_communication(entry) else None
        inputs, outputs = _tensors(entry, group, comm, atol)
        stack = next((r.get(STACK_COLUMN) for r in group if r.get(STACK_COLUMN)), None)
        nodes.append(Node(rank, len(nodes), entry, tuple(inputs), tuple(outputs), stack, comm))
    return nodes
