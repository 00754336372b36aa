"""Where dumps live on disk: a ``DumpSource`` per (step, rank), grouped in a ``DumpTree``.

Nothing here parses JSON: locating files is cheap and happens on the coordinator, parsing is a task.
Each layout of the reference's dump trees has one small reader in ``layouts.py``; ``open_dump`` picks it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from msprobe_dask.dump.confine import check_dump_file
from msprobe_dask.errors import DumpError

DUMP_FILE_NAMES = ("dump.json", "debug.json")


@dataclass(frozen=True, slots=True)
class DumpSource:
    """One rank of one step: the dump.json (or debug.json) and the files beside it."""

    dump_json: Path  # for a static-graph kernel dump: the folder of .npy files or statistic.csv
    rank: str = ""  # folder name as the reference names outputs: "rank0", "proc111", "" for a single dump
    step: str = ""  # step folder name ("step0"), "" when the tree has no step level
    group: str = ""  # MindSpore mixed trees: "graph" or "pynative"; "" otherwise

    @property
    def folder(self) -> Path:
        return self.dump_json.parent

    @property
    def tensor_dir(self) -> Path:
        return self.folder / "dump_tensor_data"

    @property
    def stack_json(self) -> Path:
        return self.folder / "stack.json"

    def has_stack(self) -> bool:
        """Whether the rank has a stack.json (compare's NPU_Stack_Info column); one that is there but is
        not a regular file inside the dump (a FIFO, a folder, a link out of it) is refused (DumpError)."""
        check_dump_file(self.stack_json)
        return self.stack_json.is_file()

    @property
    def construct_json(self) -> Path:
        return self.folder / "construct.json"

    @property
    def is_debug(self) -> bool:
        return self.dump_json.name == "debug.json"

    @property
    def rank_id(self) -> int:
        """The number in the rank folder name (``rank`` alone is -1, as the reference sorts it first)."""
        return rank_number(self.rank)

    @property
    def key(self) -> tuple[str, str, str]:
        """What pairs a target source with its golden one: (group, step, rank)."""
        return (self.group, self.step, self.rank)

    @property
    def output_label(self) -> str:
        """Where its results go below ``-o``: sub-folders, then the rank folder name
        (``graph/step0/rank0``)."""
        return "/".join(part for part in (self.group, self.step, self.rank) if part)


@dataclass(frozen=True, slots=True)
class DumpTree:
    """All (step, rank) dumps below one input path, in the order the reference visits them."""

    root: Path
    layout: str
    sources: tuple[DumpSource, ...] = field(default_factory=tuple)
    missing: tuple[DumpSource, ...] = field(default_factory=tuple)  # rank folders without a dump.json

    @property
    def is_single(self) -> bool:
        return self.layout == "single"

    @property
    def ranks(self) -> list[str]:
        return sorted({s.rank for s in self.sources}, key=rank_number)

    @property
    def steps(self) -> list[str]:
        return sorted({s.step for s in self.sources}, key=step_number)


def rank_number(name: str) -> int:
    """``rank12`` -> 12, ``rank`` -> -1, ``proc111`` -> 111, anything else -> -1."""
    digits = name.lstrip("abcdefghijklmnopqrstuvwxyz_")
    return int(digits) if digits.isdigit() else -1


def step_number(name: str) -> tuple[int, str]:
    digits = name.lstrip("abcdefghijklmnopqrstuvwxyz_")
    return (int(digits), name) if digits.isdigit() else (-1, name)


SourcePair = tuple[str, DumpSource, DumpSource]


def one_side_only(npu: set[tuple[str, str, str]], bench: set[tuple[str, str, str]]) -> list[str]:
    """``step0/rank3, step1/rank3 only in the target`` for the (group, step, rank) keys of each side
    that the other side lacks."""
    problems = []
    for side, mine, other in (("target", npu, bench), ("golden", bench, npu)):
        extra = sorted(mine - other, key=lambda k: (k[0], step_number(k[1]), rank_number(k[2])))
        if extra:
            names = ", ".join("/".join(p for p in key if p) for key in extra)
            problems.append(f"{names} only in the {side}")
    return problems


def not_compared(problem: str) -> str:
    """The warning of what a run leaves out (``step2 only in the target; not compared``): one wording for
    compare and graph_visualize, every layout (the reference says nothing of them)."""
    return f"{problem}; not compared"


def log_warning(message: str) -> None:
    """``message`` (a ``one_side_warnings`` line) shown as every command shows it: the package's logger."""
    logging.getLogger("msprobe_dask").warning(message)


def one_side_warnings(npu: set[tuple[str, str, str]], bench: set[tuple[str, str, str]]) -> list[str]:
    """The warnings of the (group, step, rank) keys one side holds and the other not, a line a side."""
    return [not_compared(problem) for problem in one_side_only(npu, bench)]


def pair_trees(
    npu: DumpTree, bench: DumpTree, skip_missing: bool = False, warn: Callable[[str], None] | None = None
) -> list[SourcePair]:
    """Pair the dumps of two trees by (group, step, rank id), never by position (D5).

    Returns ``(output label, target source, golden source)`` in target order. Steps present on one
    side only are skipped with a warning (``one_side_warnings``; the reference skips them silently).
    Ranks present on one side only, or rank folders without a dump.json, are an error naming them all;
    with ``skip_missing`` they are skipped with a warning each instead. A step holding a single ``proc*``
    folder on each side pairs the two whatever their process ids (the output is named after the
    target's folder, as the reference names it).
    """
    warn = warn or (lambda message: None)
    if npu.layout != bench.layout:
        raise DumpError(bench.root, f"is a {bench.layout} dump but the target is a {npu.layout} dump")
    if npu.layout == "kernel":
        raise DumpError(
            npu.root,
            "is a MindSpore static-graph kernel dump: pair it with "
            "msprobe_dask.pipeline.kernel_compare.compare_kernels (the compare command does)",
        )
    if npu.is_single:
        npu_src, bench_src = npu.sources[0], bench.sources[0]
        if npu_src.is_debug != bench_src.is_debug:
            raise DumpError(bench_src.dump_json, "one side is a debug.json and the other a dump.json")
        return [("", npu_src, bench_src)]

    def steps(tree: DumpTree) -> set[tuple[str, str]]:
        return {(s.group, s.step) for s in (*tree.sources, *tree.missing)}

    common_steps = steps(npu) & steps(bench)
    for warning in one_side_warnings(*({(g, s, "") for g, s in steps(t)} for t in (npu, bench))):
        warn(warning)
    if not common_steps:
        raise DumpError(bench.root, "has no step in common with the target")

    def keyed(sources: tuple[DumpSource, ...]) -> dict[tuple[str, str, str], DumpSource]:
        return {_pair_key(s): s for s in sources if (s.group, s.step) in common_steps}

    npu_keys, bench_keys = keyed(npu.sources), keyed(bench.sources)
    problems = one_side_only(set(npu_keys), set(bench_keys))
    for side, tree in (("target", npu), ("golden", bench)):
        empty = [m for m in tree.missing if (m.group, m.step) in common_steps]
        if empty:
            problems.append(f"{', '.join(str(m.folder) for m in empty)} ({side}) without dump.json")
    if problems:
        message = "ranks cannot be paired: " + "; ".join(problems)
        if not skip_missing:
            raise DumpError(None, message + " (--skip-missing-ranks compares the others)")
        for problem in problems:
            warn(not_compared(problem))
    pairs = []
    for key, npu_src in npu_keys.items():
        if key in bench_keys:
            pairs.append((npu_src.output_label, npu_src, bench_keys[key]))
    return pairs


def _pair_key(source: DumpSource) -> tuple[str, str, str]:
    rank = source.rank
    if rank.startswith("proc"):  # one proc folder per step: pair whatever the process id
        rank = "proc"
    return (source.group, source.step, rank)
