"""stack.json: one loader (dump/dumpjson.py:load_stack) for compare and graph_visualize, which skips a
malformed group as both references do.

The compare cases below were run with the reference (msprobe 26.2.0 compare, 2026-12-02): its csv equals
the L0_only reference csv with `N/A` as NPU_Stack_Info for every entry of a skipped group (case
"malformed"), and for every entry when the key "0" holds an empty group, which makes the file read as
the old format, where no entry name is a key (case "empty_first").

A group whose lines are a string (not a list) is kept, the string standing as its entries' stack (README
D33): the reference's graph_visualize keeps it so (its vis.db, checked on the same dump, equals ours),
while its compare stops with a traceback (``CompareException`` after "Expected stack_info to be a list,
but got str"), exit 1; ours writes the string as the NPU_Stack_Info cell."""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path

import pytest
from conftest import case_dir, read_csv, reference_file

from msprobe_dask.cli import main
from msprobe_dask.dump.dumpjson import load_stack
from msprobe_dask.errors import DumpError
from msprobe_dask.graph.build import build_graph
from msprobe_dask.graph.dump_files import GraphSource

LINES = ["File m.py, line 1, in f"]
STRING_LINES = "File m.py, line 2, in g"


def write(tmp_path: Path, doc: object) -> Path:
    path = tmp_path / "stack.json"
    path.write_text(json.dumps(doc))
    return path


def test_a_malformed_group_is_skipped(tmp_path: Path) -> None:
    doc = {
        "0": [["a", "b"], LINES],
        "1": [["c"], LINES, "third"],  # three items
        "2": "not a group",
        "3": [["d", 7, ["e"]], ["other"]],  # names that are not texts
        "4": ["f", LINES],  # names not a list
    }
    assert load_stack(write(tmp_path, doc)) == {"a": LINES, "b": LINES, "d": ["other"]}


def test_a_group_whose_lines_are_a_string_keeps_the_string(tmp_path: Path) -> None:
    doc = {"0": [["a"], LINES], "1": [["b", "c"], "File m.py, line 1, in f"]}
    assert load_stack(write(tmp_path, doc)) == {"a": LINES, "b": doc["1"][1], "c": doc["1"][1]}


def test_the_old_format_and_an_empty_first_group_are_read_as_they_are(tmp_path: Path) -> None:
    assert load_stack(write(tmp_path, {"x": LINES, "y": "text"})) == {"x": LINES, "y": "text"}
    doc = {"0": [], "1": [["a"], LINES]}
    assert load_stack(write(tmp_path, doc)) == doc


def test_a_stack_json_that_is_not_an_object_is_refused(tmp_path: Path) -> None:
    with pytest.raises(DumpError, match="must be a JSON object"):
        load_stack(write(tmp_path, [["a"], LINES]))


def dump_with_stack(tmp_path: Path, edit: str) -> tuple[Path, set[str] | None]:
    """L0_only with its target stack.json edited; the entries whose stack the references drop
    (None: all)."""
    for side in ("target", "golden"):
        shutil.copytree(case_dir("L0_only") / side, tmp_path / side)
    path = tmp_path / "target" / "stack.json"
    doc = json.loads(path.read_text())
    if edit == "malformed":
        dropped = set(doc["1"][0]) | set(doc["2"][0])
        doc["1"] = [*doc["1"], "third"]
        doc["2"] = "not a group"
    elif edit == "string":  # (the entries whose stack becomes STRING_LINES)
        dropped = set(doc["1"][0])
        doc["1"] = [doc["1"][0], STRING_LINES]
    else:
        dropped = None
        doc["0"] = []
    path.write_text(json.dumps(doc))
    return tmp_path, dropped


@pytest.mark.parametrize("edit", ["malformed", "empty_first", "string"])
def test_compare_gives_the_references_stack_cells(edit: str, tmp_path: Path) -> None:
    """The reference's cells ("string": ours, D33: the reference's compare stops)."""
    folder, dropped = dump_with_stack(tmp_path, edit)
    out = tmp_path / "out"
    args = ["compare", "-q", "-tp", str(folder / "target" / "dump.json")]
    assert main([*args, "-gp", str(folder / "golden" / "dump.json"), "-o", str(out)]) == 0
    (result,) = out.glob("*.csv")
    expected = read_csv(reference_file("L0_only", "compare_csv"))
    column = expected[0].index("NPU_Stack_Info")
    cut = 0
    for row in expected[1:]:
        entry = row[0].rsplit(".", 2)[0]
        if dropped is None or entry in dropped:
            cut += row[column] != "N/A"
            row[column] = STRING_LINES if edit == "string" and row[column] != "N/A" else "N/A"
    assert cut > 0  # the edit took stacks away
    assert read_csv(result) == expected


def test_graph_visualize_builds_without_the_malformed_groups(tmp_path: Path) -> None:
    folder, dropped = dump_with_stack(tmp_path, "malformed")
    assert dropped
    graph = build_graph(GraphSource(str(folder / "target")))
    kept = json.loads((case_dir("L0_only") / "target" / "stack.json").read_text())["0"]
    for name in kept[0]:
        assert graph.nodes[name].stack == kept[1]
    assert all(graph.nodes[name].stack == [] for name in dropped if name in graph.nodes)


def test_graph_visualize_keeps_a_string_as_the_stack(tmp_path: Path) -> None:
    folder, edited = dump_with_stack(tmp_path, "string")
    graph = build_graph(GraphSource(str(folder / "target")))
    assert edited and all(graph.nodes[name].stack == STRING_LINES for name in edited)


DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.mark.parametrize(
    "doc",
    [
        {
            "0": [["a", "b"], LINES],
            "1": [["c"], LINES, "third"],
            "2": "x",
            "3": [["d", 7], ["o"]],
            "4": ["f", []],
        },
        {"x": LINES, "y": "text", "z": {}},
        {"0": [], "1": [["a"], LINES]},
        {"1": [["a"], ["one"]], "0": [["b", "a"], LINES], "2": [["a"], LINES]},  # "0" not first; a again
        {"0": [["a"], LINES], "1": [["a"], ["later"]]},
        {"x": [12345678901234567890123, 1.5], "y": [float("inf"), "t"], "z": LINES},  # (json's, not orjson's)
        {
            "0": [["a"], LINES],
            "1": [["b"], [12345678901234567890123, "t"]],
            "2": [["c", 12345678901234567890123], LINES],
        },
        {"0": [["a"], LINES], "1": [["b"], STRING_LINES], "2": [["c"], LINES]},
    ],
    ids=[
        "malformed",
        "old",
        "empty_first",
        "zero_later",
        "later_wins",
        "numbers",
        "numbers_in_groups",
        "string_lines",
    ],
)
def test_stack_json_read_block_by_block_is_load_stacks(
    doc: dict[str, object], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The chunked read of stack.json (``stack_pieces.read_stack``, as split_stacks reads it for a rank's
    parts: in pieces, a later piece's name winning) gives load_stack's map of the wanted names, however its
    blocks and chunks fall; a file not laid out for it, or not valid, is left to load_stack."""
    from msprobe_dask.dump import entry_index, stack_pieces

    monkeypatch.setattr(entry_index, "BLOCK_BYTES", 5)
    monkeypatch.setattr(stack_pieces, "STACK_CHUNK", 2)
    files = [tmp_path / "indented.json", tmp_path / "two.json", tmp_path / "none.json"]
    files[0].write_text(json.dumps(doc, indent=1))
    files[1].write_text(json.dumps(doc, indent=2))
    files[2].write_text(json.dumps({}, indent=1))  # (a dump without stacks: no entries, read as none)
    files += DATA.glob("*/target/stack.json")
    for path in files:
        whole = load_stack(path)
        wanted = set(list(whole)[::2]) | {"absent"}
        assert _read_stack(path, wanted) == {n: v for n, v in whole.items() if n in wanted}, path
        _check_stack_map(path, whole)
    write(tmp_path, doc)  # compact: not laid out for blocks
    assert stack_pieces.read_stack(tmp_path / "stack.json", {"a"}) is None
    _check_stack_map(tmp_path / "stack.json", load_stack(tmp_path / "stack.json"))
    files[0].write_text(json.dumps(doc, indent=1).replace("[", "[[", 1))  # does not parse
    assert stack_pieces.read_stack(files[0], {"a"}) is None
    for block in (entry_index.BLOCK_BYTES, 1 << 30):
        monkeypatch.setattr(entry_index, "BLOCK_BYTES", block)
        with pytest.raises(DumpError, match="not valid JSON"):
            stack_pieces.read_stack_map(files[0])


def _check_stack_map(path: Path, whole: dict[str, object]) -> None:
    """graph_visualize's read of stack.json (``stack_pieces.read_stack_map``, its lines found by the C
    scan or by Python's) is load_stack's map, each distinct stack one object where it is read in
    pieces."""
    from msprobe_dask.dump import entry_index, stack_pieces
    from msprobe_dask.graph.dump_files import find_entries

    distinct = {json.dumps(lines) for lines in whole.values()}
    for block, find in itertools.product((entry_index.BLOCK_BYTES, 1 << 30), (None, find_entries)):
        with pytest.MonkeyPatch.context() as patch:  # (in pieces, where laid out for them; parsed whole)
            patch.setattr(entry_index, "BLOCK_BYTES", block)
            stacks = stack_pieces.read_stack_map(path, find)
        assert list(stacks.items()) == list(whole.items()), path
        if block < 1 << 30 and stack_pieces.read_stack(path, None) is not None:
            assert len({id(lines) for lines in stacks.values()}) == len(distinct), path


def _read_stack(path: Path, wanted: set[str]) -> dict[str, object] | None:
    from msprobe_dask.dump import stack_pieces

    pieces = stack_pieces.read_stack(path, wanted)
    if pieces is None:
        return None
    merged: dict[str, object] = {}
    for piece in pieces:
        merged.update(piece)
    return merged


@pytest.mark.parametrize("case", ["transformer_big", "L0_only", "multirank"])
@pytest.mark.parametrize("parts", [1, 3])
@pytest.mark.parametrize("in_files", [True, False])
def test_split_stacks_leaves_each_part_its_entries_stacks(
    case: str, parts: int, in_files: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rank's stacks split by its parts (into files, or bytes), stack.json read in chunks of 2 entries,
    read back (part_table.part_stacks) as load_stack's map of each part's entries."""
    from msprobe_dask.dump import stack_pieces
    from msprobe_dask.dump.entry_index import read_names
    from msprobe_dask.dump.layouts import pair_dumps
    from msprobe_dask.pipeline.part_scan import scan_side
    from msprobe_dask.pipeline.part_table import part_stacks, split_stacks

    monkeypatch.setattr(stack_pieces, "STACK_CHUNK", 2)
    for _, source, _ in pair_dumps(case_dir(case) / "target", case_dir(case) / "golden", False):
        scan, *spans = scan_side(source, parts)
        files = split_stacks(scan, tmp_path / "spool" if in_files else None, *spans)
        whole = load_stack(source.stack_json)
        for file, span in zip(files, spans):
            assert file is not None
            own = read_names(source.dump_json, span)
            assert part_stacks(file) == {name: whole[name] for name in own if name in whole}


@pytest.mark.parametrize("repeated", ["0", "1"])
def test_a_name_given_twice_leaves_the_blocks_to_load_stack(
    repeated: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A group named twice (json keeps the last one) in one block or in two: ``read_grouped`` reads
    none of it, and graph_visualize's map is load_stack's; named otherwise, the blocks are read."""
    from msprobe_dask.dump import entry_index, stack_pieces

    path = tmp_path / "stack.json"

    def write_groups(*names: str) -> None:  # (json.dump's indent=1, a name allowed twice)
        lines = [["x"], ["y"], ["z"]]
        groups = (
            f" {json.dumps(k)}: " + json.dumps([[*"abc"[: i + 1]], lines[i]], indent=1)
            for i, k in enumerate(names)
        )
        path.write_text("{\n" + ",\n".join(g.replace("\n", "\n ") for g in groups) + "\n}")

    write_groups("0", "1", repeated)
    whole = load_stack(path)
    assert whole == (
        {"a": ["y"], "b": ["y"], "c": ["z"]} if repeated == "0" else {"a": ["z"], "b": ["z"], "c": ["z"]}
    )
    for block in (5, path.stat().st_size - 1):  # (a block an entry; all in one block)
        monkeypatch.setattr(entry_index, "BLOCK_BYTES", block)
        assert stack_pieces.read_grouped(path) is None
        assert list(stack_pieces.read_stack_map(path).items()) == list(whole.items())
        write_groups("0", "1", "2")
        grouped = stack_pieces.read_grouped(path)
        assert grouped is not None and list(grouped.items()) == list(load_stack(path).items())
        write_groups("0", "1", repeated)
