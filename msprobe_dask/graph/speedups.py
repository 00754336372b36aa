"""``native``: the C versions of the per-node hot path of graph_visualize (sources in ``csrc/``, built
as ``msprobe_dask.graph._speedups``), or None where the extension was not built, was built from other
sources (a checkout updated without reinstalling), or ``MSPROBE_DASK_PURE_PYTHON`` is set.

The Python path stays the definition: every C function answers None, or calls back into Python, for
the values it does not handle, and tests/graph/test_native.py checks that both paths agree."""

from __future__ import annotations

from types import ModuleType

from msprobe_dask.analysis.row_errors import NORM_STAT, SCALE_STATS
from msprobe_dask.dump.markers import LEAF_KEYS, STATS
from msprobe_dask.native import load

API = 31  # SPEEDUPS_API in csrc/speedups.h

native: ModuleType | None = load("msprobe_dask.graph._speedups", API)
if native is not None:  # (the keys every kernel reads a leaf and its statistics by: before any rules)
    native.configure_keys(LEAF_KEYS)
    native.configure_stats(STATS)
    native.configure_errors(SCALE_STATS, NORM_STAT)  # (the first divergence's test of a compared pair)
