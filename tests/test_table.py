"""The compare table model (msprobe_dask/table.py)."""

from __future__ import annotations

import random
from collections.abc import Sequence

from msprobe_dask.dump.rows import LeafRow
from msprobe_dask.table import stat_kinds

_VALUES = [1.0, -0.0, float("nan"), float("inf"), 3, 10**400, True, False, "None", "True", "N/A", 2.5e-300]


def _row(stats: tuple[object, ...]) -> LeafRow:
    return LeafRow("a.input.0", "a", "input", "torch.float32", "[]", "N/A", stats, "00000000", "-1")  # type: ignore[arg-type]


def _kinds(column: Sequence[object]) -> tuple[bool, bool]:
    """(every value a number, not a bool, and not NaN; one a float), value by value."""
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) and v == v for v in column)
    return numbers, any(isinstance(v, float) for v in column)


def test_stat_kinds_of_every_mix_of_classes() -> None:
    """stat_kinds decides the usual columns (ints and floats only) by maps: the same kinds as value by
    value, NaN, infinities, huge ints, bools and texts mixed in."""
    rng = random.Random(16)
    for _ in range(5000):
        pool = rng.sample(_VALUES, rng.randrange(1, 4))
        rows = [_row(tuple(rng.choice(pool) for _ in range(4))) for _ in range(rng.randrange(5))]
        kinds = [_kinds([row.stats[i] for row in rows]) for i in range(4)]
        assert stat_kinds(rows) == (len(rows), tuple(k[0] for k in kinds), tuple(k[1] for k in kinds))
