"""The static-graph kernel compare as a Dask graph, and its Python API (returns tables; writes nothing).

    open_dump(target), open_dump(golden)        (rank, step) -> leaf folders, on the coordinator
      -> per common (rank, step):  list tensors -> pair on (key, occurrence) -> statistics + metrics
                                   (one task each; .npy files memory-mapped, big ones measured in chunks)
      -> KernelTable per (rank, step)

Tasks never raise a user error (those do not survive pickling between processes): a tensor file that
does not load, or a malformed statistic.csv, comes back as the result's ``problem`` and the coordinator
raises it, before anything is written.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from msprobe_dask.dump.kernel import (
    NPY_MODE,
    KernelTensor,
    StatisticLine,
    leaf_mode,
    leaves_by_rank_step,
    npy_tensors,
    read_statistic_csv,
)
from msprobe_dask.dump.layouts import open_dump
from msprobe_dask.dump.source import DumpTree, one_side_warnings
from msprobe_dask.errors import DumpError, UserError, cannot
from msprobe_dask.pipeline.kernel_rows import npy_row, statistic_row
from msprobe_dask.pipeline.kernel_table import KernelTable
from msprobe_dask.pipeline.scheduler import RunOptions, computing


@dataclass(frozen=True, slots=True)
class KernelJob:
    """One (rank, step) to compare: the leaf folders of each side and their common format."""

    rank: int
    step: int
    mode: str
    npu_leaves: tuple[Path, ...]
    bench_leaves: tuple[Path, ...]


@dataclass
class KernelResult:
    rank: int
    step: int
    table: KernelTable | None = None
    warnings: list[str] = field(default_factory=list)
    problem: tuple[str | None, str] | None = None  # (path, problem) of a user error met by the task


def _side_mode(leaves: Iterable[Path]) -> str:
    modes = {leaf: leaf_mode(leaf) for leaf in leaves}
    if len(set(modes.values())) > 1:
        npy = next(leaf for leaf, mode in modes.items() if mode == NPY_MODE)
        other = next(leaf for leaf, mode in modes.items() if mode != NPY_MODE)
        raise DumpError(
            other, f"holds a statistic.csv while {npy} of the same rank and step holds .npy files"
        )
    return next(iter(modes.values()))


def _describe(pairs: Iterable[tuple[int, int]]) -> str:
    shown = sorted(pairs)
    return ", ".join(f"rank {r} step {s}" for r, s in shown) or "none"


def _unnumbered(tree: DumpTree) -> str:
    """Leaves whose path gives no rank or step (the reference reads them from the path), if any."""
    lost = [s.dump_json for s in tree.sources if int(s.rank) < 0 or int(s.step) < 0]
    if not lost:
        return ""
    folders = f"{len(lost)} folder{'s' if len(lost) > 1 else ''}"
    return f" ({folders} without a rank and step in the path, e.g. {lost[0]})"


def kernel_jobs(
    target: str | Path,
    golden: str | Path,
    ranks: Sequence[int] | None = None,
    steps: Sequence[int] | None = None,
    warn: Callable[[str], None] | None = None,
) -> list[KernelJob]:
    """The (rank, step) pairs present in both kernel dumps (and in ``ranks``/``steps`` when given)."""
    npu_tree, bench_tree = open_dump(target), open_dump(golden)
    for path, tree in ((target, npu_tree), (golden, bench_tree)):
        if tree.layout != "kernel":
            raise DumpError(path, f"is a {tree.layout} dump, not a MindSpore static-graph kernel dump")
    npu, bench = leaves_by_rank_step(npu_tree), leaves_by_rank_step(bench_tree)

    def wanted(key: tuple[int, int]) -> bool:
        return (ranks is None or key[0] in ranks) and (steps is None or key[1] in steps)

    common = sorted(k for k in npu.keys() & bench.keys() if wanted(k))
    if not common:
        flags = " within --rank/--step" if ranks is not None or steps is not None else ""
        found = [
            f"the {side} has {_describe(k for k in mine if wanted(k))}{_unnumbered(tree)}"
            for side, mine, tree in (("target", npu, npu_tree), ("golden", bench, bench_tree))
        ]
        raise DumpError(None, f"no (rank, step) is in both kernel dumps{flags}: {'; '.join(found)}")
    if warn is not None:
        keys = ({("", f"step{s}", f"rank{r}") for r, s in mine if wanted((r, s))} for mine in (npu, bench))
        for warning in one_side_warnings(*keys):
            warn(warning)
    jobs = []
    for rank, step in common:
        npu_mode, bench_mode = _side_mode(npu[rank, step]), _side_mode(bench[rank, step])
        if npu_mode != bench_mode:
            raise DumpError(
                bench[rank, step][0],
                f"holds {bench_mode} data but the target's rank {rank} step {step} holds {npu_mode} data",
            )
        jobs.append(KernelJob(rank, step, npu_mode, tuple(npu[rank, step]), tuple(bench[rank, step])))
    return jobs


Item = Any  # KernelTensor (npy) or StatisticLine


def _tensor(item: Item) -> KernelTensor:
    return item.tensor if isinstance(item, StatisticLine) else item


def pair_on_occurrence(npu: Sequence[Item], bench: Sequence[Item]) -> list[tuple[Item | None, Item | None]]:
    """Outer join on (compare key, occurrence in time-stamp order), sorted by key then occurrence."""

    def numbered(items: Sequence[Item]) -> dict[tuple[str, int], Item]:
        seen: dict[str, int] = defaultdict(int)
        out = {}
        for item in sorted(items, key=lambda i: (_tensor(i).timestamp, _tensor(i).name)):
            key = _tensor(item).key
            out[key, seen[key]] = item
            seen[key] += 1
        return out

    left, right = numbered(npu), numbered(bench)
    return [(left.get(k), right.get(k)) for k in sorted(left.keys() | right.keys())]


def compare_job(job: KernelJob) -> KernelResult:
    """The task of one (rank, step): list, pair, measure, and the table's rows."""
    result = KernelResult(job.rank, job.step)
    try:
        if job.mode == NPY_MODE:
            pairs = pair_on_occurrence(npy_tensors(job.npu_leaves), npy_tensors(job.bench_leaves))
            result.table = KernelTable(NPY_MODE, [npy_row(n, b) for n, b in pairs])
        else:
            sides = []
            for leaves in (job.npu_leaves, job.bench_leaves):
                lines: list[StatisticLine] = []
                for leaf in leaves:
                    lines += read_statistic_csv(leaf / "statistic.csv", result.warnings.append)
                sides.append(lines)
            pairs = pair_on_occurrence(*sides)
            result.table = KernelTable(job.mode, [statistic_row(n, b) for n, b in pairs])
    except UserError as exc:
        result.problem = (exc.path, exc.problem)
    except OSError as exc:
        result.problem = (getattr(exc, "filename", None), cannot("be read", exc))
    return result


def compare_kernels(
    target: str | Path,
    golden: str | Path,
    *,
    ranks: Sequence[int] | None = None,
    steps: Sequence[int] | None = None,
    run: RunOptions | None = None,
    warn: Callable[[str], None] | None = None,
) -> list[KernelResult]:
    """Compare two static-graph kernel dumps; one KernelResult per common (rank, step), in that order."""
    import dask

    jobs = kernel_jobs(target, golden, ranks, steps, warn)
    with computing(run or RunOptions()) as compute:
        results: list[KernelResult] = compute([dask.delayed(compare_job, pure=True)(job) for job in jobs])
    for result in results:
        if result.problem is not None:
            raise DumpError(*result.problem)
    return results
