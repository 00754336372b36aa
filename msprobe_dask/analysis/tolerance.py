"""The first divergence's tolerances (analysis/divergence.py), and their command-line options: apart from
the analysis, so that a command that only offers the options (graph_visualize) does not import it."""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Tolerance:
    """``atol``: differences up to this, in the tensor's units, are no difference (near-zero values);
    ``rtol``: how much a node's error may exceed its inputs' (a fraction of the tensor's magnitude)."""

    atol: float = 1e-6
    rtol: float = 0.1

    def limit(self, received: float) -> float:
        """The largest error a node may show when its inputs bring ``received``."""
        return (1 + self.rtol) * received + self.rtol


def tolerance_problem(value: float) -> str | None:
    """Why ``value`` cannot be a command line's tolerance (None: it can): a negative one would count every
    node, even one that adds no error, as diverging; NaN none. (A Tolerance made in Python takes any float:
    the kernels answer alike for each, tests/graph/test_pair_exceeds.py.)"""
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
        return f"must be a finite number, 0 or more, got {value!r}"
    return None


DEFAULT_TOLERANCE = Tolerance()
"""The tolerance of a run that gives no ``--atol``/``--rtol`` (and of the Python API's default)."""


def add_tolerance_options(p: argparse.ArgumentParser) -> None:
    """``--atol``/``--rtol``; read them with ``tolerance_of`` (None: not given)."""
    defaults = DEFAULT_TOLERANCE
    p.add_argument(
        "--atol",
        type=float,
        help=f"first divergence: differences up to this are none (near-zero values; default {defaults.atol})",
    )
    p.add_argument(
        "--rtol",
        type=float,
        help=f"first divergence: error a node may add to its inputs' (default {defaults.rtol})",
    )


def tolerance_of(args: argparse.Namespace, unused: str | None = None) -> Tolerance:
    """The tolerance of ``--atol``/``--rtol`` (the defaults where not given). ``unused``: why this run
    reads neither (then one given is refused: a flag parsed and ignored); one that cannot be a tolerance
    (tolerance_problem) is refused too."""
    given = [
        (flag, value) for flag, value in (("--atol", args.atol), ("--rtol", args.rtol)) if value is not None
    ]
    for flag, value in given:
        problem = unused or tolerance_problem(value)
        if problem:
            from msprobe_dask.errors import ConfigError

            raise ConfigError(flag, problem)
    defaults = DEFAULT_TOLERANCE
    return Tolerance(
        defaults.atol if args.atol is None else args.atol, defaults.rtol if args.rtol is None else args.rtol
    )
