"""``load(name, api)``: one of the package's optional C modules (built by setup.py), or None where it
was not built (no C compiler), was built from other sources than the Python next to it (a checkout
updated without reinstalling: a warning says so), or ``MSPROBE_DASK_PURE_PYTHON`` is set. Each C
module has a Python path that gives the same answers; ``api`` is the version of the functions the
Python side expects, which the module exports as ``API``."""

from __future__ import annotations

import importlib
import os
import warnings
from types import ModuleType


def load(name: str, api: int) -> ModuleType | None:
    if os.environ.get("MSPROBE_DASK_PURE_PYTHON"):
        return None
    try:
        module = importlib.import_module(name)
    except ImportError:  # installed without a C compiler (or a library the module needs)
        return None
    if getattr(module, "API", None) != api:
        warnings.warn(
            f"{name} was built from other sources: reinstall (pip install -e .) to use it; running the "
            "Python path",
            stacklevel=2,
        )
        return None
    return module
