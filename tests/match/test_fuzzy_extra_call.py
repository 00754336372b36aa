"""D24: ``-fm`` in tensor mode when the target makes one extra call of an op with other arguments.

tests/data/fuzzy_extra_call: a small CNN dumped by msProbe in tensor mode; the target makes one extra
``F.conv2d(x, w, None, 2)`` between block1 and block2 (its ``Functional.conv2d.2``), so the target's
``conv2d.3`` is the golden's ``conv2d.2``. The reference's row queue pairs the extra call's first two
arguments with the golden ``conv2d.2``'s (a shape error on the wrong op) and leaves the real call's
first three arguments unmatched; ours leaves the extra call unmatched and pairs the real call whole.
Every other cell equals the reference's.
"""

from __future__ import annotations

from pathlib import Path

from conftest import read_csv, reference_file
from test_mapping_reference import run

EXTRA = "Functional.conv2d.2.forward"  # the target's extra call
REAL = "Functional.conv2d.3.forward"  # the target's next call, the golden's conv2d.2
GOLDEN_REAL = "Functional.conv2d.2.forward"
DIFFERENT = [f"{EXTRA}.input.0", f"{EXTRA}.input.1", f"{REAL}.input.0", f"{REAL}.input.1", f"{REAL}.input.2"]


def _by_name(rows: list[list[str]]) -> dict[str, dict[str, str]]:
    return {row[0]: dict(zip(rows[0], row)) for row in rows[1:]}


def test_extra_call_stays_unmatched_and_the_next_call_pairs_whole(tmp_path: Path) -> None:
    ours = read_csv(run("fuzzy_extra_call", tmp_path, "-fm"))
    ref = read_csv(reference_file("fuzzy_extra_call", "compare_fm_csv", "*.csv"))
    assert ours[0] == ref[0] and [r[0] for r in ours] == [r[0] for r in ref]
    for a, b in zip(ours[1:], ref[1:]):
        if a[0] not in DIFFERENT:
            assert a == b, a[0]
    mine, theirs = _by_name(ours), _by_name(ref)
    # ours: every row of the extra call unmatched, every row of the real call paired with its counterpart
    assert all(row["Bench Name"] == "N/A" for name, row in mine.items() if name.startswith(EXTRA + "."))
    for name, row in mine.items():
        if name.startswith(REAL + "."):
            assert row["Bench Name"] == GOLDEN_REAL + name[len(REAL) :]
    assert [mine[f"{REAL}.input.{i}"]["Cosine"] for i in range(3)] == ["1.0", "1.0", "1.0"]
    # the reference: the extra call's input.0/1 paired with the real call's, which lose theirs
    assert [theirs[f"{EXTRA}.input.{i}"]["Bench Name"] for i in range(2)] == [
        f"{GOLDEN_REAL}.input.0",
        f"{GOLDEN_REAL}.input.1",
    ]
    assert theirs[f"{EXTRA}.input.1"]["Cosine"] == "shape unmatched"
    assert [theirs[f"{REAL}.input.{i}"]["Bench Name"] for i in range(3)] == ["N/A", "N/A", "N/A"]
