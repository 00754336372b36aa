"""``native``: the C versions of the per-node hot path of graph_visualize (sources in ``csrc/``, built
as ``msprobe_dask.graph._speedups``), or None where the extension was not built, was built from other
sources (a checkout updated without reinstalling), or ``MSPROBE_DASK_PURE_PYTHON`` is set.

The Python path stays the definition: every C function answers None, or calls back into Python, for
the values it does not handle, and tests/graph/test_native.py checks that both paths agree."""

from __future__ import annotations

import importlib
import os
import warnings
from types import ModuleType

API = 4  # SPEEDUPS_API in csrc/speedups.h

native: ModuleType | None = None
if not os.environ.get("MSPROBE_DASK_PURE_PYTHON"):
    try:
        native = importlib.import_module("msprobe_dask.graph._speedups")
    except ImportError:  # installed without a C compiler
        native = None
    if native is not None and getattr(native, "API", None) != API:
        warnings.warn(
            "msprobe_dask.graph._speedups was built from other sources: reinstall (pip install -e .) to "
            "use it; running the Python path",
            stacklevel=1,
        )
        native = None
