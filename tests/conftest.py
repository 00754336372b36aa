"""Shared fixtures: the real dumps and the reference tool's outputs copied into tests/data."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

# The reference outputs in tests/data were made on a machine whose OpenBLAS ran its Haswell kernels.
# A BLAS dot sums in a kernel-dependent order, so the reference itself gives another last digit of
# EucDist (np.linalg.norm) on an AVX-512 machine. Pin the kernel the outputs were made with (any x86-64
# with AVX2 runs it; set here, before numpy is imported, and inherited by the CLI runs in subprocesses).
if "avx2" in (Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""):
    os.environ.setdefault("OPENBLAS_CORETYPE", "Haswell")
assert "numpy" not in sys.modules, "numpy was imported before the BLAS kernel was pinned (a pytest plugin?)"

import pytest  # noqa: E402 (after the BLAS pin above)

DATA = Path(__file__).parent / "data"
# the slow tests (`make test-fast` leaves them out): cell-for-cell reference runs, the real TensorBoard
# plugin and viewer, real dask clusters
SLOW_FILES = ("_reference.py", "test_plugin.py", "test_view.py", "test_cluster.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.name.endswith(SLOW_FILES):
            item.add_marker(pytest.mark.slow)


def case_dir(case: str) -> Path:
    return DATA / case


def reference_file(case: str, run: str, pattern: str = "*") -> Path:
    """The single output file of one reference run (ref/<run>/), e.g. ('stat_mix', 'compare_csv')."""
    files = sorted((DATA / case / "ref" / run).glob(pattern))
    assert len(files) == 1, f"expected one reference output in {case}/ref/{run}, found {files}"
    return files[0]


def read_csv(path: Path) -> list[list[str]]:
    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.reader(f))


@pytest.fixture
def data_dir() -> Path:
    return DATA


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``python -m msprobe_dask ARGS`` in a fresh process, its output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", "msprobe_dask", *args], capture_output=True, text=True, timeout=timeout
    )


OPENBLAS_DOTS = """
import sys, numpy as np
for path in sys.argv[1:]:
    x, y = np.load(path)
    print(repr(float(np.dot(x, y))), repr(float(np.linalg.norm(x - y))))
"""


def openblas_dots(paths: list[Path], threads: int) -> list[tuple[float, float]]:
    """(x . y, ||x - y||) of each saved (2, n) float64 array, as numpy computes them in a fresh process
    whose OpenBLAS runs ``threads`` threads (the reference's computation on a machine of that many CPUs)."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": str(threads)}
    out = subprocess.run(
        [sys.executable, "-c", OPENBLAS_DOTS, *map(str, paths)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return [(float(a), float(b)) for a, b in (line.split() for line in out.splitlines())]


def light_node(node: Any, rtol: float, receives: bool = True) -> tuple[Any, ...] | None:
    """``node`` (an analysis.flow.Node) as the divergence walk reads it when no rule can find it (no
    tensor's error over ``rtol``; not a communication node, or one that receives nothing (not
    ``receives``) and whose api cannot leave a row unsettled, its rows holding no P2POp op): its
    LightNode, as flow.walk_nodes makes it."""
    from msprobe_dask.analysis.unsettled import NONBLOCKING, OUTPUT_BUFFER_ARG

    tensors = node.inputs + node.outputs
    comm = node.comm
    if comm is not None and (receives or comm.api in NONBLOCKING or comm.api in OUTPUT_BUFFER_ARG):
        return None
    if any(t.error > rtol for t in tensors):
        return None
    own = max((t.error for t in node.inputs), default=None)
    return node.name, own, tuple(t.signature for t in tensors if t.signature is not None)


def walk_view(items: Any) -> list[Any]:
    """What the divergence walk reads of ``items`` (Nodes, LightNodes and QuietRuns, as flow.walk_nodes
    makes them): each Node as it is, and each stretch of the others between two Nodes as the input
    error each of its nodes leaves for the nodes after it (its own or 0.0), the name and own input
    error of its last nodes from the last that has an input (what they hand on to a node without
    inputs), and its tensors' signatures (in any order)."""
    from msprobe_dask.analysis.flow import Node
    from msprobe_dask.analysis.quiet_rows import QuietRun

    view: list[Any] = []
    stretch: list[tuple[str, Any]] = []
    signatures: set[Any] = set()
    quiet = object()  # (a QuietRun's node before its tail: an input error of 0.0 or none)

    def close() -> None:
        if stretch:
            last = max((k for k, (_, own) in enumerate(stretch) if own is not None), default=0)
            tail = stretch[last:]
            assert all(own is not quiet for _, own in tail)
            left = [(name, 0.0 if own is quiet else own or 0.0) for name, own in stretch]
            view.append((left, tail, sorted(map(repr, signatures))))
            stretch.clear()
            signatures.clear()

    for item in items:
        if isinstance(item, Node):
            close()
            view.append(item)
        elif isinstance(item, QuietRun):
            stretch.extend((name, quiet) for name in item.names)
            stretch.extend(item.tail)
            signatures.update(item.signatures)
        else:
            name, own, tensors = item
            stretch.append((name, own))
            signatures.update(tensors)
    close()
    return view
