"""Fuzzy matching -fm (D1): the documented rule in every mode, tested on the `fuzzy` dumps.

The reference crashes on `fuzzy -fm` in statistics mode and pairs nothing when the sides are swapped;
we pair by the documented rule: same name and level, call count ignored, in order.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from conftest import case_dir, read_csv, reference_file

from msprobe_dask.cli import main
from msprobe_dask.match.fuzzy import KeyTable, uncounted_name


def _compare(target: Path, golden: Path, out: Path, *extra: str) -> list[list[str]]:
    assert main(["compare", "-q", "-tp", str(target), "-gp", str(golden), "-o", str(out), *extra]) == 0
    (path,) = [p for p in out.iterdir() if p.suffix == ".csv"]
    return read_csv(path)


def _linear_shift(name: str, by: int) -> str:
    return re.sub(
        r"^Functional\.linear\.(\d+)\.", lambda m: f"Functional.linear.{int(m.group(1)) + by}.", name
    )


def test_uncounted_names() -> None:
    assert uncounted_name("Functional.linear.3.forward") == "Functional.linear.forward"
    assert uncounted_name("Module.fc.Linear.backward.1") == "Module.fc.Linear.backward"
    assert uncounted_name("Cell.fc.Dense.parameters_grad.0") == "Cell.fc.Dense.parameters_grad"
    assert uncounted_name("Cell.fc.Dense.parameters_grad") == "Cell.fc.Dense.parameters_grad"


def test_pairs_by_order_inside_the_parent() -> None:
    table = KeyTable()
    npu = table.entry_keys(
        ["F.add.0.forward", "F.add.1.forward", "F.add.2.forward", "M.a.A.forward.0"],
        {"F.add.0.forward": None, "F.add.1.forward": "M.a.A.forward.0", "F.add.2.forward": "M.a.A.forward.0"},
    )
    bench = table.entry_keys(
        ["F.add.7.forward", "F.add.8.forward", "M.a.A.forward.0"],
        {"F.add.7.forward": "M.a.A.forward.0", "F.add.8.forward": "M.a.A.forward.0"},
    )
    # the extra top-level call has no partner; the two calls inside M.a pair in order
    assert npu["F.add.0.forward"] not in bench.values()
    assert npu["F.add.1.forward"] == bench["F.add.7.forward"]
    assert npu["F.add.2.forward"] == bench["F.add.8.forward"]
    assert npu["M.a.A.forward.0"] == bench["M.a.A.forward.0"]


def test_two_candidates_pair_first_with_first() -> None:
    table = KeyTable()
    npu = table.entry_keys(["T.mul.4.forward"], {})
    bench = table.entry_keys(["T.mul.0.forward", "T.mul.1.forward"], {})
    assert npu["T.mul.4.forward"] == bench["T.mul.0.forward"] != bench["T.mul.1.forward"]


def test_statistics_mode_pairs_by_the_rule_d1(tmp_path: Path) -> None:
    """Target makes one extra top-level F.linear call: its rows stay unmatched, every later
    Functional.linear.N pairs with golden Functional.linear.N-1, everything else with its own name."""
    base = case_dir("fuzzy")
    rows = _compare(base / "target" / "dump.json", base / "golden" / "dump.json", tmp_path, "-fm")
    golden = json.loads((base / "golden" / "dump.json").read_text())["data"]
    golden_rows = {
        r[0]
        for r in _compare(base / "golden" / "dump.json", base / "golden" / "dump.json", tmp_path / "self")[1:]
    }
    assert golden_rows
    unmatched_extra = 0
    for row in rows[1:]:
        npu, bench = row[0], row[1]
        if npu.startswith("Functional.linear.0.forward."):
            assert bench == "N/A"
            unmatched_extra += 1
            continue
        expected = _linear_shift(npu, -1) if npu.startswith("Functional.linear.") else npu
        assert bench == (expected if expected in golden_rows else "N/A"), npu
    assert unmatched_extra == 3
    assert "Functional.linear.0.forward" in golden


def test_statistics_pairs_measure_like_exact_names(tmp_path: Path) -> None:
    """Each fuzzy pair's cells equal those of an exact-name compare of the same two entries (the golden
    entries renamed to their partners' names)."""
    base = case_dir("fuzzy")
    fm = _compare(base / "target" / "dump.json", base / "golden" / "dump.json", tmp_path / "fm", "-fm")
    target_doc = json.loads((base / "target" / "dump.json").read_text())
    golden_doc = json.loads((base / "golden" / "dump.json").read_text())
    partner = {}
    for name in target_doc["data"]:
        if name.startswith("Functional.linear.0.forward"):
            continue
        other = _linear_shift(name, -1) if name.startswith("Functional.linear.") else name
        if other in golden_doc["data"]:
            partner[name] = other
    paired_target = {**target_doc, "data": {n: target_doc["data"][n] for n in partner}}
    renamed_golden = {**golden_doc, "data": {n: golden_doc["data"][partner[n]] for n in partner}}
    for side, doc in (("t", paired_target), ("g", renamed_golden)):
        (tmp_path / side).mkdir()
        (tmp_path / side / "dump.json").write_text(json.dumps(doc))
    exact = _compare(tmp_path / "t" / "dump.json", tmp_path / "g" / "dump.json", tmp_path / "exact")
    header = fm[0]
    skip = {header.index("Bench Name"), header.index("NPU_Stack_Info")}
    exact_rows = {r[0]: r for r in exact[1:]}
    checked = 0
    for row in fm[1:]:
        if row[1] == "N/A" or row[0] not in exact_rows:
            continue
        for i, (x, y) in enumerate(zip(row, exact_rows[row[0]][: len(row)])):
            if i not in skip and x != y:
                assert _same_number(x, y), f"{row[0]} {header[i]}: fuzzy {x!r}, exact {y!r}"
        checked += 1
    assert checked > 600


def _same_number(x: str, y: str) -> bool:
    try:
        return float(x) == float(y)  # 57 and 57.0: the golden column is float once a row is unmatched
    except ValueError:
        return False


def test_swapped_sides_d1(tmp_path: Path) -> None:
    """The reference leaves every row unmatched (all golden columns N/A); we pair them. Target-side
    cells are the reference's."""
    base = case_dir("fuzzy")
    ours = _compare(base / "golden" / "dump.json", base / "target" / "dump.json", tmp_path, "-fm")
    ref = read_csv(reference_file("fuzzy", "compare_fm_swapped_csv"))
    assert ours[0] == ref[0] and len(ours) == len(ref)
    header = ref[0]
    npu_cols = [i for i, h in enumerate(header) if h.startswith("NPU")]
    matched = 0
    for a, b in zip(ours[1:], ref[1:]):
        assert [a[i] for i in npu_cols] == [b[i] for i in npu_cols]
        assert b[1] == "N/A"
        if a[1] != "N/A":
            matched += 1
            expected = _linear_shift(a[0], 1) if a[0].startswith("Functional.linear.") else a[0]
            assert a[1] == expected
    assert matched > 0.95 * (len(ours) - 1)


def test_md5_mode_pairs_d1(tmp_path: Path) -> None:
    """The reference leaves both MD5 columns empty under -fm; on dumps with equal call counts fuzzy
    pairing equals exact pairing, md5 columns included."""
    base = case_dir("md5_mix")
    exact = _compare(base / "target" / "dump.json", base / "golden" / "dump.json", tmp_path / "e")
    fuzzy = _compare(base / "target" / "dump.json", base / "golden" / "dump.json", tmp_path / "f", "-fm")
    assert fuzzy == exact
    assert any(r[exact[0].index("BENCH MD5")] not in ("", "N/A") for r in fuzzy[1:])
