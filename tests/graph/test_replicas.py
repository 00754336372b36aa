"""graph_visualize of ONE rank on a LocalCluster of two workers (``--workers 2``): each worker builds and
prepares its own replica of the rank's graphs and makes the chunks of its replica, so that no prepared
graph (about twice dump.json's size) and no chunk's rows go from worker to worker for them (each chunk's
rows are inserted into the vis.db where they were made); the vis.db is the one of a run in this
process, rowids included."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from visdb_diff import diff_visdb, rowids

from msprobe_dask.graph import api, chunks
from msprobe_dask.pipeline import scheduler
from msprobe_dask.pipeline.scheduler import RunOptions

DATA = Path(__file__).resolve().parents[1] / "data"


def test_each_worker_makes_the_chunks_of_its_own_replica(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from distributed import get_client, get_task_stream

    monkeypatch.setattr(chunks, "CHUNK_BYTES", 1)  # (the plan, made here, cuts the graphs: 32 chunks)
    case = DATA / "transformer_big"
    sides = (case / "target", case / "golden")
    local = Path(api.graph_visualize(*sides, output_path=tmp_path / "local", run=RunOptions(workers=0)))
    streams = []
    computing = scheduler.computing

    def recording(options: RunOptions):  # noqa: ANN202
        with computing(options) as compute:

            def compute_recorded(objs):  # noqa: ANN001, ANN202
                with get_task_stream(get_client()) as stream:
                    results = compute(objs)
                streams.append(stream.data)
                return results

            yield compute_recorded

    monkeypatch.setattr(api, "computing", contextlib.contextmanager(recording))
    remote = Path(api.graph_visualize(*sides, output_path=tmp_path / "workers", run=RunOptions(workers=2)))
    (stream,) = streams
    where = {str(t["key"]): t["worker"] for t in stream}
    prepared = {k: w for k, w in where.items() if k.startswith("prepare-")}
    assert sorted(prepared) == ["prepare-0-0-0", "prepare-0-0-1"] and len(set(prepared.values())) == 2
    rows = {int(k.rsplit("-", 1)[1]): w for k, w in where.items() if k.startswith("rows-")}
    assert len(rows) == 32, where
    assert all(w == prepared[f"prepare-0-0-{api.replica_of(k, 2)}"] for k, w in rows.items()), where
    assert len({w for k, w in rows.items() if k < 2 * api.CHUNKS_PER_TURN}) == 2  # (turns of chunks)
    fetched = {str(t["key"]) for t in stream if any(s["action"] == "transfer" for s in t["startstops"])}
    assert not {k for k in fetched if k.startswith("rows-")}, fetched
    # each turn's rows are inserted where they were made (the insert fetches only the writer before it)
    inserts = {int(k.rsplit("-", 1)[1]): w for k, w in where.items() if k.startswith("insert-")}
    assert inserts == {k: w for k, w in rows.items() if k in dict(api.turns(len(rows)))}, where
    assert diff_visdb(str(remote), str(local)) == []
    assert rowids(remote) == rowids(local)
