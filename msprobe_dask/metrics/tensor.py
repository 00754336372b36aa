"""The six tensor-mode metrics (compare.md §4.2) of two tensor files, the entry points of the compare.

- tensors up to ``BIG_TENSOR_ELEMS`` elements: both are read whole and measured in one shot
  (``one_shot.py``), every cell bit-identical to the reference; a batch of small pairs is one task
  (:func:`measure_pairs`, one workspace for the batch);
- bigger ones: chunk by chunk (``chunked.py``), as a ``dask.array`` reduction whose tasks each read
  ``CHUNKS_PER_TASK`` chunks of each side (:func:`measure_pair_delayed`), so no whole tensor is ever in
  memory and the tasks of one pair run on every worker.

The rules both paths share (the cells, the pre-checks, the dtypes): ``tensor_cells.py``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from msprobe_dask.dump.tensor_dtypes import holds_numbers, native_name
from msprobe_dask.dump.tensor_file import TensorHandle, cut_error, open_tensor, pass_bytes, read_array
from msprobe_dask.errors import UserError
from msprobe_dask.metrics.chunked import (
    PARTIALS_RECORD,
    block_record,
    measure_chunked,
    merge_records,
    record_metrics,
)
from msprobe_dask.metrics.claims import Claim, pair_disagreement
from msprobe_dask.metrics.one_shot import Workspace, kernel_cells, kernel_kinds, measure_arrays
from msprobe_dask.metrics.tensor_cells import UNSUPPORTED, TensorMetrics, precheck, squeezed, unreadable

if TYPE_CHECKING:
    from dask.delayed import Delayed

PathLike = str | os.PathLike[str]

BIG_TENSOR_ELEMS = 8 * 1024 * 1024
"""Tensors with more elements than this take the chunked path."""
CHUNK_ELEMS = BIG_TENSOR_ELEMS
"""Elements per chunk of a big pair, the unit its partials are summed in (so its cells' last digits):
a chunk holds what a one-shot task of the biggest tensor it measures holds. Each task costs dask's
processes scheduler about 4 ms of CPU beside the chunk's pass (1 ms per 1M float32 pair): a 1G-element
float32 pair per side took 7.0 s of CPU in 1M-element chunks, 3.4 s in 8M-element ones (--workers 1;
3.6 s in 4M-element ones)."""
CHUNKS_PER_TASK = 2
"""Chunks of each side one task of a big pair's reduction reads, merging their partials as the reduction
merges the tasks' (exactly): the cells are those of one chunk a task, byte for byte, for half the tasks.
Between two tasks a worker of dask's processes scheduler waits 2.4-2.9 ms for the next (its result back,
the next task sent), a third of an 8M-element float32 chunk's 8.6 ms: on the 4 GB pair per side, 120
tasks of one chunk took 2.47 s of CPU (--workers 1) and 2.41 s (--workers 2), 60 of two 2.15 s and
2.19 s (medians of 3, load 3.9-5.7); peak RSS 223 MiB and 380 MiB, against 160 MiB and 266 MiB."""


def _open_pair(npu_path: PathLike, bench_path: PathLike) -> tuple[TensorHandle, TensorHandle] | TensorMetrics:
    """The two files' handles; the row of a pair that cannot be measured: a file that cannot be read, or
    that holds no numbers (strings, bytes, records, datetimes...: D27, whatever dump.json says)."""
    try:
        pair = open_tensor(Path(npu_path)), open_tensor(Path(bench_path))
    except (UserError, OSError) as exc:
        return unreadable(exc)
    problems = [
        f"{h.path}: the file holds {h.dtype.name} {list(h.shape)}, not numbers"
        for h in pair
        if not holds_numbers(h.element)
    ]
    return TensorMetrics.filled(UNSUPPORTED, "; ".join(problems), unreadable=True) if problems else pair


def _not_as_claimed(metrics: TensorMetrics, problem: str | None) -> TensorMetrics:
    """The row of a pair whose files are not what dump.json says (``claims.py``): its cells, an error."""
    if problem is None or metrics.unreadable:
        return metrics
    return TensorMetrics(metrics.cells, problem, unreadable=True)


def measure_pair(
    npu_path: PathLike,
    bench_path: PathLike,
    *,
    big_elems: int = BIG_TENSOR_ELEMS,
    chunk_elems: int = CHUNK_ELEMS,
    workspace: Workspace | None = None,
    claims: tuple[Claim, Claim] | None = None,
) -> TensorMetrics:
    """The six cells for two tensor files (``.npy`` or ``.pt``, in any combination).

    A file that is missing, truncated or refused gives ``unsupported`` cells and a one-line ``message``
    naming it; nothing is raised, so a run goes on. Tensors bigger than ``big_elems`` are measured chunk by
    chunk (see ``chunked.py`` for the precision of that path). ``claims``: what dump.json says of the two
    (dtype, shape); a file holding something else makes the row unreadable (``claims.py``).
    """
    pair = _open_pair(npu_path, bench_path)
    if isinstance(pair, TensorMetrics):
        return pair
    problem = pair_disagreement(*pair, claims)
    return _not_as_claimed(_measure_open(*pair, big_elems, chunk_elems, workspace), problem)


def _measure_open(
    npu: TensorHandle, bench: TensorHandle, big_elems: int, chunk_elems: int, workspace: Workspace | None
) -> TensorMetrics:
    early = precheck(squeezed(npu.shape), squeezed(bench.shape))
    if early is not None:
        return early
    if npu.size > big_elems and npu.size > 1:
        return measure_chunked(npu, bench, chunk_elems)
    return _measure_one_shot(npu, bench, workspace)


def _measure_one_shot(
    npu: TensorHandle, bench: TensorHandle, workspace: Workspace | None = None
) -> TensorMetrics:
    """A pair whose squeezed shapes agree (``precheck``), measured in one shot: a finite float pair the C
    pass takes straight from the files' bytes (its dtypes by name: no ml_dtypes for a bfloat16 pair;
    memory-mapped from 1 MB), any other as arrays read into the workspace (``measure_arrays``)."""
    workspace = workspace or Workspace()
    npu_buffer = workspace.array("npu_bytes", npu.nbytes, np.uint8)
    bench_buffer = workspace.array("bench_bytes", bench.nbytes, np.uint8)
    try:
        kinds = kernel_kinds(native_name(npu.element), native_name(bench.element)) if npu.size > 1 else None
        raw = (pass_bytes(npu, npu_buffer), pass_bytes(bench, bench_buffer)) if kinds else (None, None)
        if raw[0] is not None and raw[1] is not None:
            try:
                fast = kernel_cells(raw[0], raw[1], *kinds)  # type: ignore[misc]
            except BufferError:  # a memory-mapped file cut meanwhile
                raise cut_error(npu, bench) from None
            if fast is not None:
                return fast
        npu_array, bench_array = read_array(npu, npu_buffer), read_array(bench, bench_buffer)
    except (UserError, OSError) as exc:
        return unreadable(exc)
    return measure_arrays(npu_array, bench_array, workspace)


def measure_pairs(
    pairs: Sequence[tuple[PathLike, PathLike] | tuple[PathLike, PathLike, tuple[Claim, Claim] | None]],
    *,
    big_elems: int = BIG_TENSOR_ELEMS,
    chunk_elems: int = CHUNK_ELEMS,
) -> list[TensorMetrics]:
    """``measure_pair`` over a batch, in order, with one workspace: the body of one Dask task for many
    small tensors. A pair may carry the claims of its two files (``measure_pair``'s ``claims``)."""
    workspace = Workspace()
    results = []
    for n, b, *claims in pairs:
        claimed = claims[0] if claims else None
        results.append(
            measure_pair(
                n, b, big_elems=big_elems, chunk_elems=chunk_elems, workspace=workspace, claims=claimed
            )
        )
    return results


SPLIT_EVERY = 32
"""Records merged per combine task of the reduction tree."""


def measure_pair_delayed(
    npu_path: PathLike,
    bench_path: PathLike,
    claims: tuple[Claim, Claim] | None = None,
    *,
    big_elems: int | None = None,
    chunk_elems: int | None = None,
) -> Delayed:
    """A lazy ``TensorMetrics`` for a pair: for more than ``big_elems`` (``BIG_TENSOR_ELEMS``) elements, a
    ``dask.array`` reduction over the two flat tensors, else one task measuring it in one shot.

    Each task of aligned blocks (``CHUNKS_PER_TASK`` chunks of each side) reads them and gives one partials
    record (``map_blocks``; the chunk stays the unit the partials are summed in; a block whose files cannot
    be read, changed since their headers were read, makes the row unreadable), the records are merged by
    ``dask.array.reduction`` (chunk / combine / aggregate: :func:`merge_records`), and one task turns the
    merged record into the row. The blocks are independent tasks, so a big tensor is read and reduced on
    every worker at once. Headers are read now (to know the chunking); the data only when the graph runs.
    ``claims``: as ``measure_pair``'s.
    """
    from dask import delayed

    pair = _open_pair(npu_path, bench_path)
    if isinstance(pair, TensorMetrics):
        return delayed(pair)
    npu, bench = pair
    problem = pair_disagreement(npu, bench, claims)
    early = precheck(squeezed(npu.shape), squeezed(bench.shape))
    if early is not None:
        return delayed(_not_as_claimed(early, problem))
    big = BIG_TENSOR_ELEMS if big_elems is None else big_elems
    if npu.size <= max(big, 1):  # small after all (or 0-d): one shot, the reference's bits
        measured = delayed(_measure_one_shot)(npu, bench)
    else:
        # the reduction handed on as a Delayed of its own (to_delayed): a dask array given to a delayed
        # call is wrapped task by task against reuse (dask's ProhibitReuse), which imports distributed to
        # do so (0.5 s of CPU, before any task runs)
        reduced = _reduced_record(npu, bench, chunk_elems or CHUNK_ELEMS).to_delayed().item()
        measured = delayed(record_metrics)(reduced)
    return measured if problem is None else delayed(_not_as_claimed)(measured, problem)


def _reduced_record(npu: TensorHandle, bench: TensorHandle, chunk_elems: int) -> Any:
    """The merged partials record of a pair, a ``dask.array`` reduction over tasks that each read and
    measure ``CHUNKS_PER_TASK`` chunks of both files (``block_record``: a block that cannot be read gives a
    record saying so, which the row then says)."""
    import dask.array as da
    from dask.base import tokenize

    task_elems = chunk_elems * CHUNKS_PER_TASK
    tasks = -(-npu.size // task_elems)
    name = "partials-" + tokenize(_file_token(npu), _file_token(bench), npu, bench, chunk_elems, task_elems)
    records = da.map_blocks(
        _task_record, npu, bench, task_elems, chunk_elems,
        chunks=((1,) * tasks,), dtype=PARTIALS_RECORD, meta=np.empty((0,), PARTIALS_RECORD), name=name,
    )  # fmt: skip
    return da.reduction(
        records, merge_records, merge_records, combine=merge_records, dtype=PARTIALS_RECORD,
        split_every=SPLIT_EVERY, concatenate=True, meta=np.empty((), PARTIALS_RECORD),
    )  # fmt: skip


def _task_record(
    npu: TensorHandle, bench: TensorHandle, task_elems: int, chunk_elems: int, block_id: tuple[int]
) -> np.ndarray:
    start = block_id[0] * task_elems
    return block_record(npu, bench, start, min(start + task_elems, npu.size), chunk_elems)


def _file_token(handle: TensorHandle) -> tuple[int, int] | None:
    """What tells the file's versions apart in the tasks' names (a file changed since: other tasks);
    None when it cannot be told (reading it will say why)."""
    try:
        status = handle.path.stat()
    except OSError:
        return None
    return status.st_mtime_ns, status.st_size
