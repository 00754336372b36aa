"""Where dumps live on disk: a ``DumpSource`` per (step, rank), grouped in a ``DumpTree``.

Nothing here parses JSON: locating files is cheap and happens on the coordinator, parsing is a task.
Each layout of the reference's dump trees has one small reader in ``layouts.py``; ``open_dump`` picks it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

DUMP_FILE_NAMES = ("dump.json", "debug.json")


@dataclass(frozen=True, slots=True)
class DumpSource:
    """One rank of one step: the dump.json (or debug.json) and the files beside it."""

    dump_json: Path
    rank: str = ""  # folder name as the reference names outputs: "rank0", "proc111", "" for a single dump
    step: str = ""

    @property
    def folder(self) -> Path:
        return self.dump_json.parent

    @property
    def tensor_dir(self) -> Path:
        return self.folder / "dump_tensor_data"

    @property
    def stack_json(self) -> Path:
        return self.folder / "stack.json"

    @property
    def construct_json(self) -> Path:
        return self.folder / "construct.json"

    @property
    def is_debug(self) -> bool:
        return self.dump_json.name == "debug.json"


@dataclass(frozen=True, slots=True)
class DumpTree:
    """All (step, rank) dumps below one input path, in the order the reference visits them."""

    root: Path
    layout: str
    sources: tuple[DumpSource, ...] = field(default_factory=tuple)

    @property
    def is_single(self) -> bool:
        return self.layout == "single"
