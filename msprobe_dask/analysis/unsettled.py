"""The communication rows whose values are no evidence of a divergence: buffers an op writes, read
before the call, and what a non-blocking op hands back before it completes."""

from __future__ import annotations

from msprobe_dask.analysis.comm_apis import api_of
from msprobe_dask.analysis.row_errors import RowColumns
from msprobe_dask.columns import NPU_P2P_OP
from msprobe_dask.dump.markers import BATCH_P2P, IRECV, ISEND

# communication arguments that are buffers the op writes (their content before the call means
# nothing): the argument's index, per api
OUTPUT_BUFFER_ARG = {
    "recv": 0,
    IRECV: 0,
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
NONBLOCKING = (ISEND, IRECV, BATCH_P2P)


def is_unsettled(api: str, op: str, state: str, argument: int | None) -> bool:
    """A communication row whose values are no evidence: a non-blocking op's outputs (read when the call
    returned, before a receive completed: a race; what it sends is its input), a P2POp receive buffer,
    or a buffer that a blocking op writes, read before the call."""
    if (api in NONBLOCKING and state == "output") or op == IRECV:
        return True
    return state == "input" and argument is not None and argument == OUTPUT_BUFFER_ARG.get(api)


def is_settled(rows: RowColumns, entry: str, start: int, end: int) -> bool:
    """Whether no row of the communication node ``entry`` (rows ``start`` to ``end``) can be unsettled
    (``is_unsettled``), whatever its state and argument."""
    api = api_of(entry)
    if api in NONBLOCKING or api in OUTPUT_BUFFER_ARG:
        return False
    ops = rows.cells[NPU_P2P_OP]
    return not any(str(ops[i]) == IRECV for i in range(start, end))


def argument_index(name: str, entry: str, state: str) -> int | None:
    """The n of ``{entry}.{state}.{n}...``: which argument (or output) of the call the row is."""
    rest = name[len(entry) :].split(".")
    return int(rest[2]) if len(rest) > 2 and rest[1] == state and rest[2].isdigit() else None
