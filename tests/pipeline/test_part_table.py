"""A rank's stack.json split into its npu parts' stacks (part_table.split_stacks): read in pieces where it
is big (stack_pieces.read_in_pieces), parsed whole where it is not, each part gets the stacks of its own
entries, the same either way, each distinct stack one object (its table part prints it once)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import case_dir

from msprobe_dask.dump import entry_index, stack_pieces
from msprobe_dask.dump.dumpjson import load_stack
from msprobe_dask.dump.entry_index import read_names
from msprobe_dask.dump.source import DumpSource
from msprobe_dask.pipeline.part_scan import scan_side
from msprobe_dask.pipeline.part_table import part_stacks, split_stacks


def _one_name_a_group(tmp_path: Path) -> Path:
    """md5_mix's target dump with a stack.json of one name a group, three stacks in turn (equal stacks
    in other groups: not one object as the file is parsed)."""
    folder = tmp_path / "dump"
    folder.mkdir()
    shutil.copy(case_dir("md5_mix") / "target" / "dump.json", folder)
    names = list(json.loads((folder / "dump.json").read_text())["data"])
    stacks = [[f"File model.py, line {n}, in forward, \n x = f(x)"] for n in range(3)]
    groups = {str(i): [[name], stacks[i % 3]] for i, name in enumerate(names)}
    (folder / "stack.json").write_text(json.dumps(groups, indent=1))
    return folder / "dump.json"


@pytest.mark.parametrize("case", ["md5_mix", "transformer_big", "one_name_a_group"])
def test_a_stack_json_in_pieces_or_whole_gives_each_part_its_entries_stacks(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dump = (
        _one_name_a_group(tmp_path) if case == "one_name_a_group" else case_dir(case) / "target" / "dump.json"
    )
    source = DumpSource(dump)
    scan, *parts = scan_side(source, 3)
    whole = load_stack(source.stack_json)
    assert not stack_pieces.read_in_pieces(source.stack_json)
    split = [part_stacks(stacks) for stacks in split_stacks(scan, None, *parts)]
    monkeypatch.setattr(entry_index, "BLOCK_BYTES", 256)  # (read in blocks and chunks of a few entries)
    monkeypatch.setattr(stack_pieces, "STACK_CHUNK", 7)
    assert stack_pieces.read_in_pieces(source.stack_json)
    assert stack_pieces.read_stack(source.stack_json, None) is not None  # (laid out for it)
    in_pieces = [part_stacks(stacks) for stacks in split_stacks(scan, tmp_path, *parts)]
    assert in_pieces == split
    for part, stacks in zip(parts, split):
        own = {name: whole[name] for name in read_names(source.dump_json, part) if name in whole}
        assert stacks == own and own
        distinct = {repr(stack) for stack in stacks.values()}  # (parsed whole: each one object)
        assert len({id(stack) for stack in stacks.values()}) == len(distinct) < len(stacks)
