"""Where graph_visualize runs without flags: chosen by ``computing()`` for the input's size (its
dump.json files) and the CPUs; a big input on local worker processes, one per CPU, where there is more
than one CPU, unless it is too big for the workers' memory; else in this process."""

from __future__ import annotations

from pathlib import Path

import pytest

from msprobe_dask.graph import api, run_setup
from msprobe_dask.pipeline import scheduler
from msprobe_dask.pipeline.scheduler import GRAPH_PROCESSES_FROM_BYTES, GRAPH_PROCESSES_TO_BYTES, RunOptions

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture
def cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scheduler, "_cpus", lambda: 2)


def _graph_options(size: int, **flags: object) -> RunOptions:
    return run_setup.graph_run(RunOptions(input_bytes=size, **flags), DATA / "multirank" / "target", None)  # type: ignore[arg-type]


@pytest.mark.usefixtures("cpus")
def test_a_big_graph_input_runs_on_a_worker_process_of_every_cpu() -> None:
    for size in (GRAPH_PROCESSES_FROM_BYTES, GRAPH_PROCESSES_TO_BYTES - 1):
        big = _graph_options(size)
        assert big.holds_graphs and big.local_processes == 2 and not big.shares_results
    small = _graph_options(GRAPH_PROCESSES_FROM_BYTES - 1)
    assert small.in_this_process and small.local_processes == 0


@pytest.mark.usefixtures("cpus")
def test_a_graph_input_too_big_for_the_workers_memory_runs_in_this_process() -> None:
    """(Each worker holds the rank's graphs: see GRAPH_PROCESSES_TO_BYTES.) A compare's
    input of the same size still goes to worker processes."""
    assert _graph_options(GRAPH_PROCESSES_TO_BYTES).in_this_process
    assert RunOptions(input_bytes=GRAPH_PROCESSES_TO_BYTES).local_processes == 2


@pytest.mark.usefixtures("cpus")
def test_a_tree_of_ranks_each_small_enough_for_the_workers_memory_runs_on_them() -> None:
    """What a worker process holds is one (step, rank)'s graphs at a time (its rank window), whatever
    the ranks in all (``held_bytes``)."""
    many = RunOptions(input_bytes=8 * GRAPH_PROCESSES_TO_BYTES, held_bytes=GRAPH_PROCESSES_TO_BYTES - 1)
    assert run_setup.graph_run(many, "t", None).local_processes == 2
    one_big = RunOptions(input_bytes=8 * GRAPH_PROCESSES_TO_BYTES, held_bytes=GRAPH_PROCESSES_TO_BYTES)
    assert run_setup.graph_run(one_big, "t", None).in_this_process


@pytest.mark.usefixtures("cpus")
def test_flags_override_the_size() -> None:
    assert _graph_options(1, workers=2).local_processes == 2
    assert _graph_options(GRAPH_PROCESSES_FROM_BYTES, workers=1).local_processes == 1
    assert _graph_options(GRAPH_PROCESSES_FROM_BYTES, address="tcp://127.0.0.1:1").local_processes == 0


def test_one_cpu_runs_a_big_graph_in_this_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scheduler, "_cpus", lambda: 1)
    assert _graph_options(GRAPH_PROCESSES_FROM_BYTES).in_this_process


@pytest.mark.parametrize("golden", [None, "multirank/golden"])
def test_graph_visualize_sizes_its_input_by_its_dump_json_files(
    golden: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[RunOptions] = []
    compute = api.computed
    monkeypatch.setattr(
        api, "computed", lambda obj, client, run: seen.append(run) or compute(obj, client, run)
    )
    target = DATA / "multirank" / "target"
    api.graph_visualize(target, DATA / golden if golden else None, output_path=tmp_path, run=RunOptions())
    sides = [target] + ([DATA / golden] if golden else [])
    folders = {p.relative_to(target).parent for p in target.rglob("dump.json")}  # step*/rank*
    sizes = [sum((side / f / "dump.json").stat().st_size for side in sides) for f in folders]
    (run,) = seen
    assert run.input_bytes == sum(sizes) > 0 and run.holds_graphs and run.in_this_process
    assert run.held_bytes == max(sizes) < sum(sizes)


@pytest.mark.usefixtures("cpus")
@pytest.mark.parametrize("big", [False, True])
def test_a_merge_is_sized_by_all_its_rank_folders(
    big: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A merge builds every rank of both sides (4 + 1 here, where a rank-by-rank compare would pair 1):
    a big one runs on worker processes, each holding a replica of each side at a time (graph/merge/plan.py,
    docs/performance.md section 5): here one, of all the bytes; with --rank_size 4 --tp 2 --pp 1 (two
    replicas), half of them."""
    from msprobe_dask.graph.merge import DEFAULT_ORDER
    from msprobe_dask.graph.merge.strategy import parse_params

    target, golden = DATA / "tp_pp_merge" / "target", DATA / "tp_pp_merge" / "golden"
    size = sum(p.stat().st_size for side in (target, golden) for p in side.rglob("dump.json"))
    monkeypatch.setattr(scheduler, "GRAPH_PROCESSES_FROM_BYTES", size if big else size + 1)
    seen: list[RunOptions] = []
    compute = api.computed
    monkeypatch.setattr(
        api, "computed", lambda obj, client, run: seen.append(run) or compute(obj, client, run)
    )
    merge = parse_params([4, 1], [2, 1], [2, 1], None, [DEFAULT_ORDER], True)
    api.graph_visualize(target, golden, output_path=tmp_path, parallel=merge, run=RunOptions())
    (run,) = seen
    assert run.input_bytes == size and run.held_bytes == size and run.local_processes == (2 if big else 0)
    two = parse_params([4, 1], [2, 1], [1, 1], None, [DEFAULT_ORDER], True)
    assert run_setup.graph_run(None, target, golden, two).held_bytes == size // 2
