"""TP merge corner cases, checked against a reference run on a patched copy of tp_merge/target.

``patch_tp_dump`` edits a few entries of the two ranks' dump.json (the edits are listed in PATCHES,
each with the rule it exercises); tests/data/merge_oracle/ref/build_tp_patched holds what msprobe
26.2.0 wrote for ``graph_visualize -tp <patched> --rank_size 2 --tp 2 --pp 1`` on that copy.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from visdb_diff import diff_visdb

from msprobe_dask.cli import main as cli_main

DATA = Path(__file__).resolve().parents[1] / "data"
INF, NAN = float("inf"), float("nan")
L1 = "Module.module.module.decoder.layers.1."

# (rank or None for both, node id, path inside the entry, new value): which params count as different
PATCHES: list[tuple[int | None, str, tuple[Any, ...], Any]] = [
    # a main param of a non-listed dtype is skipped, the later listed ones are still merged
    (None, "Functional.embedding.0.forward", ("input_args", 0, "dtype"), "torch.bool"),
    # Mean: inf and -inf count as equal; nan differs from a number
    (0, "Tensor.__add__.0.forward", ("input_args", 0, "Mean"), INF),
    (1, "Tensor.__add__.0.forward", ("input_args", 0, "Mean"), -INF),
    (0, "Tensor.__add__.2.forward", ("input_args", 0, "Mean"), NAN),
    # the other rank's param of a non-listed dtype is not compared
    (1, "Tensor.__add__.3.forward", ("input_args", 0, "dtype"), "torch.bool"),
    (1, "Tensor.__add__.3.forward", ("input_args", 0, "Max"), 123.0),
    # Mean relative difference 2e-6 differs; a non-numeric Max counts as equal
    (1, "Tensor.__add__.5.forward", ("input_args", 0, "Mean"), 0.000901200226508081 * (1 + 2e-6)),
    (1, "Tensor.__add__.5.forward", ("input_args", 1, "Max"), "abc"),
    # main Mean 0: absolute difference 5e-7 is equal
    (0, "Tensor.__add__.6.forward", ("input_args", 0, "Mean"), 0.0),
    (1, "Tensor.__add__.6.forward", ("input_args", 0, "Mean"), 5e-7),
    # Max: inf == inf, nan != nan, inf != -inf, 1 == 1.0; Norm: inf != 5
    (None, "Tensor.__add__.8.forward", ("input_args", 0, "Max"), INF),
    (None, "Tensor.__add__.9.forward", ("input_args", 0, "Max"), NAN),
    (0, "Tensor.__add__.11.forward", ("input_args", 0, "Max"), INF),
    (1, "Tensor.__add__.11.forward", ("input_args", 0, "Max"), -INF),
    (0, "Tensor.__add__.12.forward", ("input_args", 0, "Norm"), INF),
    (1, "Tensor.__add__.12.forward", ("input_args", 0, "Norm"), 5.0),
    (0, "Tensor.__add__.14.forward", ("input_args", 0, "Max"), 1),
    (1, "Tensor.__add__.14.forward", ("input_args", 0, "Max"), 1.0),
    # merged values are rounded to the param's dtype: bf16, fp16; float64 is not rounded
    (None, "Tensor.t.1.forward", ("input_args", 0, "dtype"), "torch.bfloat16"),
    (None, "Tensor.t.3.forward", ("input_args", 0, "dtype"), "torch.float16"),
    (None, "Tensor.t.5.forward", ("input_args", 0, "dtype"), "torch.float64"),
]
# entries made equal on both ranks (rank 0's copied to rank 1): the first pass leaves them alone and
# the Column..Row second pass force-merges them, except the replicated tensors
SAME_ON_BOTH_RANKS = [
    L1 + "self_attention.linear_qkv.ColumnParallelLinear.forward.0",
    "Torch.matmul.4.forward",
    "Torch.baddbmm.1.forward",
    L1 + "self_attention.core_attention.DotProductAttention.forward.0",
    L1 + "self_attention.core_attention.scale_mask_softmax.FusedScaleMaskSoftmax.forward.0",
    L1 + "self_attention.linear_proj.RowParallelLinear.forward.0",
    "Functional.gelu.1.forward",
    "Tensor.__add__.10.forward",
    L1 + "mlp.linear_fc1.ColumnParallelLinear.forward.0",
    "Torch.matmul.6.forward",
    L1 + "mlp.linear_fc2.RowParallelLinear.forward.0",
]


def patch_tp_dump(dst: Path) -> Path:
    """A copy of tp_merge/target with PATCHES and SAME_ON_BOTH_RANKS applied."""
    shutil.copytree(DATA / "tp_merge" / "target", dst)
    docs = [json.loads((dst / f"rank{r}" / "dump.json").read_text()) for r in (0, 1)]
    for rank, node, path, value in PATCHES:
        for r in (0, 1) if rank is None else (rank,):
            target = docs[r]["data"][node]
            for p in path[:-1]:
                target = target[p]
            target[path[-1]] = value
    for node in SAME_ON_BOTH_RANKS:
        docs[1]["data"][node] = docs[0]["data"][node]
    for r, doc in enumerate(docs):
        (dst / f"rank{r}" / "dump.json").write_text(json.dumps(doc))
    return dst


def test_patched_tp_merge_equals_reference(tmp_path: Path) -> None:
    target = patch_tp_dump(tmp_path / "target")
    out = tmp_path / "out"
    assert (
        cli_main(
            [
                "graph_visualize",
                "-tp",
                str(target),
                "--rank_size",
                "2",
                "--tp",
                "2",
                "--pp",
                "1",
                "-o",
                str(out),
            ]
        )
        == 0
    )
    ref = next((DATA / "merge_oracle" / "ref" / "build_tp_patched").glob("*.vis.db"))
    problems = diff_visdb(str(next(out.glob("*.vis.db"))), str(ref))
    assert not problems, "\n".join(problems[:20])


def test_patches_reach_the_merge(tmp_path: Path) -> None:
    """The reference shows what the patches are for: force-merged equal values, rounded values."""
    import sqlite3

    ref = next((DATA / "merge_oracle" / "ref" / "build_tp_patched").glob("*.vis.db"))
    con = sqlite3.connect(ref)
    info = {
        n: json.loads(p) for n, p in con.execute("SELECT node_name, parallel_merge_info FROM tb_nodes") if p
    }
    con.close()
    assert "Tensor.__add__.0.forward" not in info and "Tensor.__add__.2.forward" in info
    assert "Tensor.__add__.3.forward" not in info and "Tensor.__add__.6.forward" not in info
    assert "Tensor.__add__.9.forward" in info and "Tensor.__add__.14.forward" not in info
    assert any("input.1" in line for line in info["Functional.embedding.0.forward"])
    assert not any("input.0" in line for line in info["Functional.embedding.0.forward"])
    assert any("max(0.0, 0.0)" in line for line in info["Torch.baddbmm.1.forward"])  # forced
    column = info[L1 + "self_attention.linear_qkv.ColumnParallelLinear.forward.0"]
    assert not any("input.0" in line for line in column)
