"""Write ms_da/target and ms_da/golden: multirank/{target,golden}/step0 as a MindSpore dumper labels it,
then run the reference's ``compare -da`` on them into ms_da/ref/ (not a test; run by hand):

    /work/venv/bin/python tests/data/ms_da/make_ms_da.py [/path/to/msprobe]

What changes (compare.md §7, and the real MindSpore dump of ms_vs_pt): ``framework: mindspore``;
``Module.`` entries become ``Cell.``, ``Distributed.`` ones ``MintDistributed.`` (mindspore.mint
.distributed); tensors are ``mindspore.Tensor`` with ``Float32``/``Int64`` dtypes and no
``requires_grad``; a reduce op is the text MindSpore passes (``sum``), a process group its name, and
P2POp is MindSpore's class. The statistics are unchanged, so the first divergence is the same.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SOURCE = HERE.parent / "multirank"
SHIM = Path("kernel_npy/ref/shim")  # below tests/data
DTYPES = {
    "torch.float32": "Float32",
    "torch.int64": "Int64",
    "torch.float16": "Float16",
    "torch.bool": "Bool",
}


def name(text: str) -> str:
    for old, new in (("Module.", "Cell."), ("Distributed.", "MintDistributed.")):
        if text.startswith(old):
            return new + text[len(old) :]
    return text


def value(node: Any) -> Any:
    if isinstance(node, list):
        return [value(v) for v in node]
    if not isinstance(node, dict):
        return node
    kind = node.get("type")
    if kind == "torch.distributed.ReduceOp":
        return {"type": "str", "value": "sum"}
    if kind == "torch.ProcessGroup":
        return {"type": "str", "value": "hccl_world_group"}
    out = {}
    for key, item in node.items():
        if key == "requires_grad":
            continue
        if key == "type" and item == "torch.Tensor":
            item = "mindspore.Tensor"
        elif key == "dtype" and item in DTYPES:
            item = DTYPES[item]
        elif key == "class_type" and item == "torch.distributed.P2POp":
            item = "mindspore.mint.distributed.P2POp"
        out[key] = value(item)
    return out


def relabel(src: Path, dst: Path) -> None:
    dump = json.loads((src / "dump.json").read_text())
    dump["framework"] = "mindspore"
    dump["data"] = {name(k): value(v) for k, v in dump["data"].items()}
    construct = json.loads((src / "construct.json").read_text())
    stack = json.loads((src / "stack.json").read_text())
    stack = {k: [[name(n) for n in names], lines] for k, (names, lines) in stack.items()}
    dst.mkdir(parents=True, exist_ok=True)
    (dst / "dump.json").write_text(json.dumps(dump, indent=1))
    (dst / "construct.json").write_text(
        json.dumps({name(k): v and name(v) for k, v in construct.items()}, indent=1)
    )
    (dst / "stack.json").write_text(json.dumps(stack, indent=1))


def main(msprobe: str | None) -> None:
    for side in ("target", "golden"):
        shutil.rmtree(HERE / side, ignore_errors=True)
        for rank in sorted((SOURCE / side / "step0").iterdir()):
            relabel(rank, HERE / side / rank.name)
    if msprobe is None:
        return
    data = HERE.parent
    env = {**os.environ, "PYTHONPATH": str(data / SHIM)}
    lines = [
        "# Reference: mindstudio-probe 26.2.0, cwd = tests/data, on the inputs written by make_ms_da.py,",
        f"# with PYTHONPATH={SHIM} (an import shim standing in for MindSpore, which is not installed;",
        "# with it the reference's compare of ms_vs_pt is byte-identical to the corpus's (real MindSpore).",
        "",
    ]
    for run, extra in (("compare_da", ["-da"]), ("compare_csv", [])):
        out = HERE / "ref" / run
        shutil.rmtree(out, ignore_errors=True)
        argv = [
            msprobe,
            "compare",
            "-tp",
            "ms_da/target",
            "-gp",
            "ms_da/golden",
            *extra,
            "-o",
            f"ms_da/ref/{run}",
        ]
        done = subprocess.run(argv, cwd=data, env=env, capture_output=True, text=True, check=False)
        (HERE / "ref" / "logs").mkdir(parents=True, exist_ok=True)
        (HERE / "ref" / "logs" / f"{run}.log").write_text(done.stdout + done.stderr)
        outputs = sorted(p.name for p in out.glob("*")) if out.is_dir() else []
        lines += [f"[{run}]", " ".join(["msprobe", *argv[1:]]), f"  rc={done.returncode}",
                  f"  outputs: {', '.join(outputs)}", ""]  # fmt: skip
    (HERE / "ref" / "commands.txt").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
