"""The same compare graph on a real cluster: a ``dask scheduler`` and two ``dask worker`` processes
on 127.0.0.1, started here and stopped by pid; results are byte-identical to the local run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import case_dir, openblas_dots, read_csv, run_cli

from msprobe_dask.cli import main

DASK = [sys.executable, "-m", "dask"]


def scheduler_command(scheduler_file: Path) -> list[str]:
    """A ``dask scheduler`` on 127.0.0.1, on a free port written to ``scheduler_file``."""
    where = ["--host", "127.0.0.1", "--port", "0", "--scheduler-file", str(scheduler_file)]
    return [*DASK, "scheduler", *where, "--no-dashboard"]


def _wait_for(path: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists() or not path.read_text().strip():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} not written in {timeout} s")
        time.sleep(0.2)


def _wait_for_workers(address: str, count: int, timeout: float) -> None:
    from distributed import Client

    with Client(address, timeout="20s") as client:
        client.wait_for_workers(count, timeout=timeout)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("cluster")
    scheduler_file = folder / "scheduler.json"
    env = {**os.environ, "DASK_DISTRIBUTED__WORKER__DAEMON": "False"}
    procs = [
        subprocess.Popen(
            scheduler_command(scheduler_file),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
        )
    ]
    try:
        _wait_for(scheduler_file, 60)
        address = json.loads(scheduler_file.read_text())["address"]
        for _ in range(2):
            procs.append(
                subprocess.Popen(
                    [*DASK, "worker", address, "--nthreads", "1", "--no-dashboard", "--host", "127.0.0.1"],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    env=env,
                )
            )
        _wait_for_workers(address, 2, 60)
        yield address
    finally:
        for proc in reversed(procs):
            os.kill(proc.pid, signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()


def _result(case: str, out: Path, *extra: str) -> bytes:
    folder = case_dir(case)
    args = ["compare", "-q", "-tp", str(folder / "target"), "-gp", str(folder / "golden"), "-o", str(out)]
    assert main([*args, *extra]) == 0
    (path,) = [p for p in out.iterdir() if not p.name.startswith(".")]
    return path.read_bytes()


@pytest.mark.parametrize("case", ["stat_mix", "tensor_mix"])
def test_cluster_result_is_byte_identical(cluster: str, case: str, tmp_path: Path) -> None:
    local = _result(case, tmp_path / "local")
    remote = _result(case, tmp_path / "remote", "--scheduler", cluster)
    assert remote == local


def test_unreachable_scheduler_is_a_clear_error(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "msprobe_dask",
            "compare",
            "-tp",
            str(case_dir("stat_mix") / "target"),
            "-gp",
            str(case_dir("stat_mix") / "golden"),
            "-o",
            str(tmp_path / "out"),
            "--scheduler",
            "tcp://127.0.0.1:9",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "cannot reach the dask scheduler" in proc.stderr and "Traceback" not in proc.stderr


def _visdb(out: Path, *args: str) -> Path:
    assert main(["graph_visualize", *args, "-o", str(out)]) == 0
    (path,) = out.glob("*.vis.db")
    return path


@pytest.mark.parametrize(
    ("case", "extra"),
    [
        ("multirank", ()),  # every (step, rank) pair in its own tasks, then cross-rank linking
        ("tp_merge", ("--rank_size", "2", "1", "--tp", "2", "1", "--pp", "1", "1")),  # merge tasks
    ],
)
def test_cluster_visdb_equals_the_local_one(cluster: str, case: str, extra: tuple, tmp_path: Path) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "graph"))
    from visdb_diff import diff_visdb

    folder = case_dir(case)
    args = ["-tp", str(folder / "target"), "-gp", str(folder / "golden"), *extra]
    local = _visdb(tmp_path / "local", *args)
    remote = _visdb(tmp_path / "remote", *args, "--scheduler", cluster)
    assert diff_visdb(str(remote), str(local)) == []


def test_cluster_merge_of_replicas_writes_the_local_visdb(cluster: str, tmp_path: Path) -> None:
    """A TP+PP merge compare of two data-parallel replicas a side: on the cluster each replica is built,
    merged and compared in its own task and its rows written by the vis.db's write chain
    (graph/merge/plan.py); the vis.db is the local run's, byte for byte but the header's file change
    counter (offsets 24 and 92), which counts the chain's commits."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "workflows"))
    from gen_merge_replicas import write_replicas

    folder, target, golden = case_dir("tp_pp_merge"), tmp_path / "target", tmp_path / "golden"
    write_replicas(folder / "target", target, tp=2, pp=2, dp=2)
    write_replicas(folder / "golden", golden, tp=1, pp=1, dp=2)
    args = ["-q", "-tp", str(target), "-gp", str(golden), "--rank_size", "8", "2", "--tp", "2", "1"]
    args += ["--pp", "2", "1"]
    local = _visdb(tmp_path / "local", *args)
    remote = _visdb(tmp_path / "remote", *args, "--scheduler", cluster)
    ours, theirs = remote.read_bytes(), local.read_bytes()
    assert ours[:24] + ours[28:92] + ours[96:] == theirs[:24] + theirs[28:92] + theirs[96:]


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (("--workers", "-1"), ("--workers", "got -1")),  # -1 processes never start
        (("--scheduler", "localhost"), ("localhost", "cannot reach the dask scheduler", "port")),
    ],
    ids=["negative-workers", "address-without-port"],
)
def test_bad_cluster_option_is_a_clear_error(
    flags: tuple[str, str], words: tuple[str, ...], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stat = case_dir("stat_mix")
    out = tmp_path / "out"
    assert (
        main(["compare", "-tp", str(stat / "target"), "-gp", str(stat / "golden"), "-o", str(out), *flags])
        == 2
    )
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and all(w in lines[0] for w in words), lines
    assert not out.exists()


def test_one_rank_spreads_over_both_workers_and_writes_the_local_visdb(
    cluster: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """graph_visualize of ONE rank cut into many chunk tasks (graph/chunks.py): both workers run
    chunk tasks of that rank (the scheduler's task stream says where each ran), and the vis.db is the
    local run's, table by table and cell by cell, rowids included."""
    from distributed import Client

    from msprobe_dask.graph import chunks

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "graph"))
    from visdb_diff import diff_visdb

    monkeypatch.setattr(chunks, "CHUNK_BYTES", 1)  # (the plan, made here, cuts the graphs)
    folder = case_dir("transformer_big")
    args = ["-q", "-tp", str(folder / "target"), "-gp", str(folder / "golden")]
    local = _visdb(tmp_path / "local", *args)
    with Client(cluster, timeout="20s") as client:
        client.get_task_stream()  # the scheduler records the tasks from now on
        begun = time.time()
        remote = _visdb(tmp_path / "remote", *args, "--scheduler", cluster)
        stream = client.get_task_stream(start=begun)
    where: dict[str, set[str]] = {}
    for record in stream:
        key = record["key"] if isinstance(record["key"], str) else str(record["key"])
        where.setdefault(key.rsplit("-", 1)[0] if key.startswith("rows-") else key, set()).add(
            record["worker"]
        )
    assert len(where["rows-0-0"]) == 2, where
    assert diff_visdb(str(remote), str(local)) == []
    assert _rowids(remote) == _rowids(local)


def _rowids(path: Path) -> list[list[tuple[int, str]]]:
    import sqlite3

    with sqlite3.connect(path) as con:
        return [
            con.execute(f"SELECT rowid, id FROM {t} ORDER BY rowid").fetchall()
            for t in ("tb_nodes", "tb_stack")
        ]


def test_one_big_tensor_pair_spreads_over_both_workers(
    cluster: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A compare whose tensors are one big pair: its chunk tasks (the dask.array reduction's, one per pair
    of chunks) run on both workers, and the csv is the local run's, byte for byte."""
    import numpy as np
    from distributed import Client
    from test_tensor_reduction import tensor_dump

    import msprobe_dask.metrics.tensor as tensor_metrics

    rng = np.random.default_rng(5)
    npu = rng.standard_normal((64, 4096)).astype(np.float32)
    bench = (npu * (1 + rng.normal(0, 1e-3, npu.shape))).astype(np.float32)
    target, golden = tensor_dump(tmp_path / "target", npu), tensor_dump(tmp_path / "golden", bench)
    monkeypatch.setattr(tensor_metrics, "BIG_TENSOR_ELEMS", 10_000)  # (the plan, made here, chunks it)
    monkeypatch.setattr(tensor_metrics, "CHUNK_ELEMS", 8_192)
    args = ["compare", "-q", "-tp", str(target), "-gp", str(golden)]
    assert main([*args, "-o", str(tmp_path / "local")]) == 0
    with Client(cluster, timeout="20s") as client:
        client.get_task_stream()
        begun = time.time()
        assert main([*args, "-o", str(tmp_path / "remote"), "--scheduler", cluster]) == 0
        stream = client.get_task_stream(start=begun)
    chunk_workers = {r["worker"] for r in stream if str(r["key"]).startswith("('merge_records-")}
    chunk_tasks = [r for r in stream if str(r["key"]).startswith("('merge_records-")]
    tasks = npu.size // (8_192 * tensor_metrics.CHUNKS_PER_TASK)
    assert len(chunk_tasks) >= tasks and len(chunk_workers) == 2, stream
    ((local,), (remote,)) = (list((tmp_path / d).glob("*.csv")) for d in ("local", "remote"))
    assert remote.read_bytes() == local.read_bytes()


def test_one_rank_runs_on_both_workers(cluster: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One rank cut into parts: tasks of that rank run on both dask workers, and the csv is the
    local run's, byte for byte."""
    from distributed import Client, get_task_stream

    from msprobe_dask.pipeline import part_scan

    monkeypatch.setattr(part_scan, "PART_BYTES", 100_000)  # transformer_big: 17 target and 17 golden parts
    local = _result("transformer_big", tmp_path / "local")
    with Client(cluster, timeout="20s") as client, get_task_stream(client) as stream:
        remote = _result("transformer_big", tmp_path / "remote", "--scheduler", cluster)
    assert remote == local
    workers = {
        name: {t["worker"] for t in stream.data if str(t["key"]).startswith(name)}
        for name in ("spooled_parse", "spooled_part")
    }
    assert all(len(ran_on) == 2 for ran_on in workers.values()), workers


def test_a_pair_over_10000_elements_gives_the_reference_s_digits_on_a_worker(
    cluster: str, tmp_path: Path
) -> None:
    """dask workers run BLAS on one thread (OPENBLAS_NUM_THREADS=1), a fresh local process on all CPUs; the
    reference's EucDist of a dot over 10,000 elements depends on that: both runs give the same csv, with
    the reference's digits (numpy's on two BLAS threads, the corpus machine's)."""
    import numpy as np
    from distributed import Client
    from test_tensor_reduction import tensor_dump

    with Client(cluster, timeout="20s") as client:
        assert set(client.run(lambda: os.environ.get("OPENBLAS_NUM_THREADS")).values()) == {"1"}
    rng = np.random.default_rng(2)
    npu = rng.standard_normal(65_537).astype(np.float32)
    bench = (npu * (1 + rng.normal(0, 1e-3, npu.shape))).astype(np.float32)
    target, golden = tensor_dump(tmp_path / "target", npu), tensor_dump(tmp_path / "golden", bench)
    args = ["compare", "-q", "-tp", str(target), "-gp", str(golden)]
    assert run_cli(*args, "-o", str(tmp_path / "local")).returncode == 0
    assert main([*args, "-o", str(tmp_path / "remote"), "--scheduler", cluster]) == 0
    ((local,), (remote,)) = (list((tmp_path / d).glob("*.csv")) for d in ("local", "remote"))
    assert remote.read_bytes() == local.read_bytes()
    np.save(tmp_path / "pair.npy", np.stack([npu, bench]).astype(np.float64))
    ((_, euclidean),) = openblas_dots([tmp_path / "pair.npy"], 2)
    ((_, one_thread),) = openblas_dots([tmp_path / "pair.npy"], 1)
    assert one_thread != euclidean  # (this pair does show BLAS's thread count)
    header, row = read_csv(local)
    assert float(row[header.index("EucDist")]) == euclidean
