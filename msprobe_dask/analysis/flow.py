"""The divergence analysis's view of one rank: its dump entries in execution order, each with the error
of every input and output tensor, made from compare rows.

The rows come column by column (``row_errors.RowColumns``); without the optional columns
``api_origin_name`` (the dump entry) and ``state``, the entry and state are read from the row's name.

Each tensor's error is ``row_errors``'.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Iterator, Sequence
from dataclasses import dataclass
from operator import attrgetter, itemgetter
from typing import Any, TypeVar, cast

from msprobe_dask.analysis.comm_apis import (
    COMM_PREFIXES,
    POINT_TO_POINT,
    api_of,
    exchange,
    is_communication,
    peer_rank,
)
from msprobe_dask.analysis.quiet_rows import QuietRows, QuietRun
from msprobe_dask.analysis.row_entries import (
    INPUT_ROLES,
    Signature,
    entry_and_state,
    entry_spans,
    row_entries,
    tensor_signature,
)
from msprobe_dask.analysis.row_errors import RowColumns
from msprobe_dask.analysis.unsettled import argument_index, is_settled, is_unsettled
from msprobe_dask.columns import NPU_DTYPE, NPU_MAX, NPU_MD5, NPU_NAME, NPU_P2P_OP, NPU_P2P_PEER, STACK_COLUMN
from msprobe_dask.dump.markers import BATCH_P2P, ISEND
from msprobe_dask.dump.stack_frames import stack_frames, user_frame

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

    def moved(self, by: int) -> Node:
        """The node ``by`` places later in its rank's order (a part's node in its rank's; faster than
        ``dataclasses.replace``)."""
        return Node(self.rank, self.index + by, self.name, self.inputs, self.outputs, self.stack, self.comm)

    @property
    def code_line(self) -> str:
        """The stack's first frame in the user's code."""
        return user_frame(stack_frames(self.stack))


_COMM_CELLS = itemgetter(NPU_NAME, NPU_P2P_PEER, NPU_MAX, NPU_DTYPE)  # (of RowColumns.cells)


def _comm(entry: str, rows: RowColumns, start: int, end: int, rank: int, seen: dict[Comm, Comm]) -> Comm:
    """What the communication node of rows ``start`` to ``end`` (its dump entry ``entry``) exchanges: the
    one of ``seen`` equal to it (added if none is)."""
    made = _comm_of(entry, rows, start, end, rank)
    return seen.setdefault(made, made)


def _comm_of(entry: str, rows: RowColumns, start: int, end: int, rank: int) -> Comm:
    names, p2p_peers, highs, dtypes = _COMM_CELLS(rows.cells)
    api = api_of(entry)
    cells = zip(names[start:end], p2p_peers[start:end], highs[start:end], dtypes[start:end])
    peers, root = exchange(api, cells, rank)
    if api == BATCH_P2P and not peers:  # a csv read back does not hold the P2POp peers
        return Comm(api, None)
    return Comm(api, peers, None if api in POINT_TO_POINT else root)


def column_nodes(rows: RowColumns, rank: int, atol: float) -> list[Node]:
    """The nodes of one rank, in execution (dump) order, from its compare rows."""
    return list(iter_column_nodes(rows, rank, atol))


def iter_column_nodes(rows: RowColumns, rank: int, atol: float) -> Iterator[Node]:
    """``column_nodes``, each node made when it is asked for (a walk that stops at a rank's first
    origin makes no node after it)."""
    return cast(Iterator[Node], _column_nodes(rows, rank, atol, None))


@dataclass(frozen=True, slots=True)
class PartNodes:
    """What a table part tells the divergence walk of its rows (``part_nodes``)."""

    count: int  # how many nodes ``column_nodes`` makes of them
    # the communication nodes of ``column_nodes`` (each with its index among all) as the links across
    # ranks read them (``links.link``: a node's rank, index, name, Comm and inputs): without outputs or
    # stack, whose rows are not read; none unless linked
    comms: list[Node]
    # the one QuietRun that ``walk_nodes`` (with an rtol of 0 or more) makes of all of them when none
    # received something from a peer: where every row is quiet (``QuietRows``: an error of 0.0, or none)
    # and no communication node may have an unsettled row (``is_settled``); None where it makes others, or
    # where they are linked (their nodes may receive: the walk then reads them from their rows)
    quiet: QuietRun | None
    extremes: tuple[Iterable[float], Iterable[float]]  # the QuietRun's signatures: NPU max, NPU min


def part_nodes(
    rows: RowColumns, rank: int, atol: float, linked: bool, indexes: Sequence[int] | None = None
) -> PartNodes:
    """What a table part tells the divergence walk of ``rows`` (``summary.divergence.NodePart``: the walk
    reads a part that is one QuietRun without its rows, as most parts of a rank whose divergence is far
    in): its communication nodes where the rank's are ``linked`` to others', else its QuietRun (a rank
    of a job of one rank: its nodes receive nothing, its walk reads no communication node). ``indexes``:
    each of the rows' entries' index among the rank's nodes (None: among the rows' own entries)."""
    entries = row_entries(rows)
    spans = entry_spans(entries)
    seen: dict[Comm, Comm] = {}  # (one Comm of each value: see _column_nodes)
    comms: list[Node] = []
    settled = True
    for index, (start, end) in enumerate(spans):
        entry = entries[start]
        if entry.startswith(COMM_PREFIXES) and is_communication(entry):  # (most are not)
            if linked:
                comm = _comm(entry, rows, start, end, rank, seen)
                at = index if indexes is None else indexes[index]
                comms.append(_node(rows, rank, at, entry, start, end, comm, atol, None, False))
            elif settled:
                settled = is_settled(rows, entry, start, end)
    quiet = None if linked or not (spans and settled) else QuietRows.of(rows, atol, whole=True)
    if quiet is None:
        return PartNodes(len(spans), comms, None, ((), ()))
    run = quiet.run(entries, spans, 0, len(spans))
    return PartNodes(len(spans), comms, run, quiet.extremes(0, len(rows.md5_only)))


LightNode = tuple[str, float | None, tuple[Signature, ...]]
"""A node that cannot diverge, as the divergence walk reads it: its name, its inputs' largest error (None:
it has no inputs) and the signatures of its tensors, inputs first (``walk_nodes``)."""


def walk_nodes(
    rows: RowColumns, rank: int, atol: float, rtol: float, receiving: Container[int] = ()
) -> Iterator[Node | LightNode | QuietRun]:
    """``iter_column_nodes``, but each node that no rule of the divergence walk can find as its LightNode,
    made from the rows without a Node, and a run of such nodes whose tensors' errors are all 0.0 (or
    none) as one QuietRun: a node none of whose tensors' error exceeds ``rtol`` (an origin's input
    exceeds ``rtol``; an output must exceed ``Tolerance.limit(...)``, never below ``rtol``; what arrived
    from a peer must exceed ``rtol``) and that received nothing: not a communication node, or one whose
    index is not among ``receiving`` (the nodes a peer sent something, ``links.Links.received``) and
    none of whose rows is unsettled (``is_unsettled``: its tensors are then the Node's). The walk of a
    diverging rank reads tens of thousands of them."""
    return _column_nodes(rows, rank, atol, rtol, receiving)


def _column_nodes(
    rows: RowColumns,
    rank: int,
    atol: float,
    light_below: float | None,
    receiving: Container[int] = (),
) -> Iterator[Node | LightNode | QuietRun]:
    """``iter_column_nodes``, or ``walk_nodes`` if ``light_below`` is its ``rtol``."""
    entries = row_entries(rows)
    spans = entry_spans(entries)
    # one Comm of each value: pickled once with a part's nodes (each all_reduce of a rank has the same)
    seen: dict[Comm, Comm] = {}
    # (the rows whose error is 0 or none, known without measuring them: with no rtol below 0)
    quiet = None if light_below is None or light_below < 0 else QuietRows.of(rows, atol)
    # (every row's NPU max and min: converted at once where every row is read, else each row read alone)
    extremes = None
    if quiet is None:
        highs, lows = rows.numbers()[:2]
        extremes = highs, lows
    after = 0  # (the first node not yet read)
    for index in range(len(spans)) if quiet is None else quiet.loud(entries, spans, receiving):
        if index > after:
            yield quiet.run(entries, spans, after, index)  # type: ignore[union-attr]
        after = index + 1
        start, end = spans[index]
        entry = entries[start]
        communication = is_communication(entry)
        if light_below is not None and (
            not communication or index not in receiving and is_settled(rows, entry, start, end)
        ):
            light = _light_node(rows, entry, start, end, atol, light_below, extremes)
            if light is not None:
                yield light
                continue
        comm = _comm(entry, rows, start, end, rank, seen) if communication else None
        yield _node(rows, rank, index, entry, start, end, comm, atol, extremes, True)
    if quiet is not None and len(spans) > after:
        yield quiet.run(entries, spans, after, len(spans))


def _node(
    rows: RowColumns,
    rank: int,
    index: int,
    entry: str,
    start: int,
    end: int,
    comm: Comm | None,
    atol: float,
    extremes: tuple[Sequence[float | None], Sequence[float | None]] | None,
    whole: bool,
) -> Node:
    """The Node of ``entry`` (rows ``start`` to ``end``); ``extremes``: every row's NPU max and min as
    numbers (None: each row's converted alone); not ``whole``: its inputs only (no outputs, no stack)."""
    cells = rows.cells
    names, given_states, ops = cells[NPU_NAME], cells["state"], cells[NPU_P2P_OP]
    md5s, peers = cells[NPU_MD5], cells[NPU_P2P_PEER]
    inputs: list[TensorError] = []
    outputs: list[TensorError] = []
    for i in range(start, end):
        name = str(names[i])
        state = str(given_states[i] or entry_and_state(name)[1])
        is_input = state in INPUT_ROLES
        if not (is_input or whole):
            continue
        numbers = None if extremes else rows.row_numbers(i)
        error = rows.error(i, atol, numbers)
        if error is None:
            continue
        op = str(ops[i])
        if comm and is_unsettled(comm.api, op, state, argument_index(name, entry, state)):
            continue
        sent_to = peer_rank(peers[i]) if op == ISEND else None
        high, low = (extremes[0][i], extremes[1][i]) if extremes else numbers[:2]  # type: ignore[index]
        tensor = TensorError(name, error, tensor_signature(high, low, md5s[i]), sent_to)
        (inputs if is_input else outputs).append(tensor)
    stacks = cells[STACK_COLUMN]
    stack = next((stacks[i] for i in range(start, end) if stacks[i]), None) if whole else None
    return Node(rank, index, entry, tuple(inputs), tuple(outputs), stack, comm)


def _measured(
    rows: RowColumns, start: int, end: int, atol: float, converted: bool
) -> Iterator[tuple[int, float, list[float | None] | None]]:
    """(row, its error, its ``row_numbers`` unless ``converted``) of each row from ``start`` to ``end``
    that has an error (a node's tensors)."""
    for i in range(start, end):
        numbers = None if converted else rows.row_numbers(i)
        error = rows.error(i, atol, numbers)
        if error is not None:
            yield i, error, numbers


def _light_node(
    rows: RowColumns,
    entry: str,
    start: int,
    end: int,
    atol: float,
    rtol: float,
    extremes: tuple[Sequence[float | None], Sequence[float | None]] | None,
) -> LightNode | None:
    """The LightNode of ``entry`` (rows ``start`` to ``end``; a communication node only where it receives
    nothing and no row of it may be unsettled: its Node's tensors are then these), None where a
    tensor's error exceeds ``rtol`` (see ``walk_nodes``): the tensors the Node would hold, in its order;
    ``extremes``: every row's NPU max and min as numbers (None: each row's converted alone)."""
    cells = rows.cells
    names, given_states, md5s = cells[NPU_NAME], cells["state"], cells[NPU_MD5]
    input_errors: list[float] = []
    inputs: list[Signature] = []
    outputs: list[Signature] = []
    for i, error, numbers in _measured(rows, start, end, atol, extremes is not None):
        if error > rtol:
            return None
        state = str(given_states[i] or entry_and_state(str(names[i]))[1])
        high, low = (extremes[0][i], extremes[1][i]) if extremes else numbers[:2]  # type: ignore[index]
        signature = tensor_signature(high, low, md5s[i])
        if state in INPUT_ROLES:
            input_errors.append(error)
            if signature is not None:
                inputs.append(signature)
        elif signature is not None:
            outputs.append(signature)
    return entry, max(input_errors) if input_errors else None, (*inputs, *outputs)
