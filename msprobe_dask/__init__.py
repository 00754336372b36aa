"""msprobe_dask: msProbe's compare and graph_visualize, same answers, as a lazy Dask graph.

    import msprobe_dask as mp
    res = mp.compare("run_a/dump.json", "run_b/dump.json")   # typed result, nothing written
    g = mp.graph("run_a", "run_b")                            # node-level view of the graphs

The API (``msprobe_dask.api``) is imported on first use, so that ``import msprobe_dask`` and the CLI's
start stay light.
"""

import importlib
import sys
import types
from typing import Any

__version__ = "0.1.0"
__all__ = ["compare", "graph", "__version__"]


class _GraphEntry:
    """``msprobe_dask.graph``: called, the API's ``graph(target, golden, ...)``; otherwise the
    ``msprobe_dask.graph`` subpackage, whose names it hands on (``msprobe_dask.graph.api``...)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from msprobe_dask.api import graph

        return graph(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(importlib.import_module("msprobe_dask.graph"), name)

    def __repr__(self) -> str:
        return "<msprobe_dask.graph: the graph API function and subpackage>"


class _Package(types.ModuleType):
    """The package module: its ``graph`` name stays the entry above when the subpackage is imported
    (the import system sets the parent's attribute; the subpackage itself is in sys.modules)."""

    @property
    def graph(self) -> _GraphEntry:
        return _GRAPH

    @graph.setter
    def graph(self, module: types.ModuleType) -> None:
        pass


_GRAPH = _GraphEntry()
sys.modules[__name__].__class__ = _Package


def __getattr__(name: str) -> Any:
    if name == "compare":
        from msprobe_dask.api import compare

        return compare
    raise AttributeError(f"module 'msprobe_dask' has no attribute {name!r}")
