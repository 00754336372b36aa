"""Variants of multirank/step0 for first-diff analysis: the target is copied from the golden run (or
from the real target) and a few output statistics are scaled. The reference's answer for each is in
multirank/ref/da_variants/<name>/ (made by tests/analysis/make_da_variants.py with the oracle)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

# name -> (base of the target: "target" or "golden", [(rank, entry, output index, factor)], golden ranks
# copied over the target)
VARIANTS: dict[str, tuple[str, list[tuple[int, str, int, float]], list[int]]] = {
    "none": ("golden", [], []),
    "pre_two_ranks": (
        "golden",
        [(3, "Module.fc1.Linear.forward.0", 0, 2.0), (0, "Functional.relu.0.forward", 0, 2.0)],
        [],
    ),
    "during_compute": ("target", [], [1]),
    "sub_layer": ("target", [(0, "Tensor.__add__.4.forward", 0, 2.0)], [1]),
    "comm_layers": (
        "golden",
        [
            (0, "Distributed.all_reduce.0.forward", 0, 2.0),
            (3, "Distributed.reduce_scatter.0.forward", 0, 2.0),
        ],
        [],
    ),
    "recv": (
        "golden",
        [(2, "Distributed.recv.0.forward", 0, 2.0), (1, "Distributed.irecv.0.forward", 0, 2.0)],
        [],
    ),
    "post": ("golden", [(3, "Tensor.add_.5.forward", 0, 2.0)], []),
    "grad_sync": (
        "golden",
        [(1, "Distributed.all_reduce.5.forward", 0, 2.0), (3, "Tensor.div_.2.forward", 0, 2.0)],
        [],
    ),
    "same_layer_two_ranks": (
        "golden",
        [(0, "Distributed.all_reduce.0.forward", 0, 2.0), (2, "Distributed.all_reduce.0.forward", 0, 3.0)],
        [],
    ),
    # rank3 has no broadcast on either side: its all_gather is its first communication op, but it is
    # linked with the other ranks' all_gather, one layer after rank0's broadcast
    "linked_layers": (
        "golden",
        [(0, "Distributed.broadcast.0.forward", 0, 2.0), (3, "Distributed.all_gather.0.forward", 0, 2.0)],
        [],
    ),
}
# name -> [(rank, entry)] removed from both the target and the golden dump
DROPPED: dict[str, list[tuple[int, str]]] = {"linked_layers": [(3, "Distributed.broadcast.0.forward")]}


def build_variant(case_root: Path, name: str, dest: Path) -> tuple[Path, Path]:
    """Write the variant's target tree below ``dest``; return (target, golden) step folders."""
    base, scaled, golden_ranks = VARIANTS[name]
    golden = case_root / "golden" / "step0"
    target = dest / "target_step0"
    shutil.copytree(case_root / base / "step0", target)
    if name in DROPPED:
        shutil.copytree(golden, dest / "golden_step0")
        golden = dest / "golden_step0"
        for rank, entry in DROPPED[name]:
            for root in (target, golden):
                path = root / f"rank{rank}" / "dump.json"
                doc = json.loads(path.read_text())
                del doc["data"][entry]
                path.write_text(json.dumps(doc, indent=1))
    for rank in golden_ranks:
        shutil.copy(golden / f"rank{rank}" / "dump.json", target / f"rank{rank}" / "dump.json")
    for rank, entry, index, factor in scaled:
        path = target / f"rank{rank}" / "dump.json"
        doc = json.loads(path.read_text())
        leaf = doc["data"][entry]["output"][index]
        leaf = leaf[0] if isinstance(leaf, list) else leaf  # all_gather's output 0 is a list of tensors
        leaf["Max"] *= factor
        path.write_text(json.dumps(doc, indent=1))
    return target, golden
