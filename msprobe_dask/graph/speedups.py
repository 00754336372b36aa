"""``native``: the C versions of the per-node hot path of graph_visualize (``_speedups.c``), or None
where the extension was not built or ``MSPROBE_DASK_PURE_PYTHON`` is set.

The Python path stays the definition: every C function answers None, or calls back into Python, for
the values it does not handle, and tests/graph/test_native.py checks that both paths agree."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

native: ModuleType | None = None
if not os.environ.get("MSPROBE_DASK_PURE_PYTHON"):
    try:
        native = importlib.import_module("msprobe_dask.graph._speedups")
    except ImportError:  # installed without a C compiler
        native = None
