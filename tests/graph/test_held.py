"""graph_visualize of ONE rank on two local worker processes (``--workers 2``, dask's processes
scheduler): both processes make chunks of the rank, each from the pair it prepared itself from the
graphs built by either (graph/held.py), and only names and small values pass through the run's own
process (no graph, no prepared pair, no chunk's rows); the vis.db is the one of a run in this process,
rowids included, and the run's spool folder is gone."""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any

import pytest
from dask.callbacks import Callback
from visdb_diff import diff_visdb, rowids

from msprobe_dask.graph import api, chunks, held
from msprobe_dask.pipeline.scheduler import RunOptions

DATA = Path(__file__).resolve().parents[1] / "data"
SMALL = 16 << 10  # bytes: the most a task's result other than the last takes pickled


def test_both_worker_processes_make_chunks_of_one_rank_and_only_names_travel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 1)  # (the plan, made here, cuts the graphs: 32 chunks)
    case = DATA / "transformer_big"
    sides = (case / "target", case / "golden")
    made = tmp_path / "made"
    chunk_task = held.chunk_task

    def logged(p: chunks.Prepared, k: int) -> Any:  # (run in the worker processes, forked with it)
        with open(made, "a") as f:
            f.write(f"{os.getpid()} {k}\n")
        return chunk_task(p, k)

    monkeypatch.setattr(held, "chunk_task", logged)
    remote, sizes = _on_two_workers(sides, tmp_path)
    lines = [line.split() for line in made.read_text().splitlines()]
    assert sorted(int(k) for _, k in lines) == list(range(32))
    assert len({pid for pid, _ in lines}) == 2 and str(os.getpid()) not in {pid for pid, _ in lines}
    assert {k for k in sizes if k.startswith("rows-")}
    _as_in_this_process(remote, sides, tmp_path, sizes)


def _on_two_workers(sides: tuple[Path, Path], tmp_path: Path) -> tuple[Path, dict[str, int]]:
    """The vis.db of ``sides`` made on two worker processes, and each task's result as this process got
    it, pickled: its size by key."""
    sizes: dict[str, int] = {}

    class Sizes(Callback):  # (in this process, as each result comes back)
        def _posttask(self, key: Any, result: Any, dsk: Any, state: Any, worker: Any) -> None:
            sizes[str(key)] = len(pickle.dumps(result))

    with Sizes():
        remote = Path(
            api.graph_visualize(*sides, output_path=tmp_path / "workers", run=RunOptions(workers=2))
        )
    return remote, sizes


def _as_in_this_process(
    remote: Path, sides: tuple[Path, Path], tmp_path: Path, sizes: dict[str, int]
) -> None:
    """``remote`` is the vis.db of a run in this process, rowids included, the run's spool folder is
    gone, and every task's result but the last pickled small (``sizes``)."""
    assert "write-visdb" in sizes
    big = {k: n for k, n in sizes.items() if n > SMALL and k != "write-visdb"}
    assert not big, big
    local = Path(api.graph_visualize(*sides, output_path=tmp_path / "local", run=RunOptions(workers=0)))
    assert diff_visdb(str(remote), str(local)) == []
    assert rowids(remote) == rowids(local)
    assert [p.name for p in remote.parent.iterdir()] == [remote.name]


def test_a_result_that_cannot_be_spooled_names_its_file(tmp_path: Path) -> None:
    """A shared result whose spool file cannot be written (a full disk, a file size limit; here a folder
    in its place) is the run's output error naming the file, not an internal error."""
    from msprobe_dask.errors import OutputError

    spool = held.Spool(str(tmp_path), shared=True, window=0)
    (tmp_path / "run-graph").mkdir()
    with pytest.raises(OutputError, match=r"run-graph: cannot be written: Is a directory"):
        held.hold(spool, held.RUN, "graph", [1, 2])


def test_a_shared_result_is_pickled_by_pickle_and_by_cloudpickle_where_pickle_cannot(tmp_path: Path) -> None:
    """A held result's spool file has pickle's bytes (the same as cloudpickle's, made faster); one that
    pickle cannot take (a function made at run time) is cloudpickle's, and loads."""
    spool = held.Spool(str(tmp_path), shared=True, window=0)
    value = {"rows": [1, 2.5, "x"], "packed": b"\x00" * 100}
    plain = held.hold(spool, held.RUN, "plain", value)
    assert Path(plain.path).read_bytes() == pickle.dumps(value, pickle.HIGHEST_PROTOCOL)
    assert plain.loaded() == value
    offset = 3
    made = held.hold(spool, held.RUN, "made", lambda x: x + offset)
    with pytest.raises((pickle.PicklingError, AttributeError)):
        pickle.dumps(lambda x: x + offset)
    assert made.loaded()(1) == 4


def test_more_ranks_than_worker_processes_one_task_a_rank_and_only_names_travel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """8 (step, rank)s on two worker processes: one task makes each, in one process (no graph, no
    chunk's rows through the run's own process)."""
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 1)  # (several chunks a rank, inserted turn by turn)
    case = DATA / "multirank"
    sides = (case / "target", case / "golden")
    remote, sizes = _on_two_workers(sides, tmp_path)
    stages = {key.split("-")[0] for key in sizes}
    assert len([k for k in sizes if k.startswith("rank-")]) == 8
    assert "rows" not in stages and "build" not in stages and "prepare" not in stages
    _as_in_this_process(remote, sides, tmp_path, sizes)
