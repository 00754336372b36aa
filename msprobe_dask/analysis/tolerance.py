"""The first divergence's tolerances (analysis/divergence.py), and their command-line options: apart from
the analysis, so that a command that only offers the options (graph_visualize) does not import it."""

from __future__ import annotations

import argparse
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


def add_tolerance_options(p: argparse.ArgumentParser) -> None:
    defaults = Tolerance()
    p.add_argument(
        "--atol",
        type=float,
        default=defaults.atol,
        help=f"first divergence: differences up to this are none (near-zero values; default {defaults.atol})",
    )
    p.add_argument(
        "--rtol",
        type=float,
        default=defaults.rtol,
        help=f"first divergence: error a node may add to its inputs' (default {defaults.rtol})",
    )
