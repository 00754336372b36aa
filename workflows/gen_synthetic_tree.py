"""Write a synthetic multi-rank, multi-step dump tree in the reference's format (statistics mode).

    python workflows/gen_synthetic_tree.py OUT [--ranks 16] [--steps 1] [--layers 200] [--seed 0]

OUT/target/step{S}/rank{R}/ and OUT/golden/step{S}/rank{R}/ each get a dump.json, stack.json and
construct.json like msprobe's PyTorch dumper writes them: per layer a Module entry with parameters, the
Functional/Tensor APIs inside it, an all_reduce over the world group, and the matching backward
entries. The target equals the golden run except that rank ``R // 2`` drifts from layer ``L // 2`` on,
so that ``compare -da`` has a first divergence to find.
"""

from __future__ import annotations

import argparse
import json
import math
import random
from pathlib import Path
from typing import Any

STACK = [
    "File /workspace/train.py, line {line}, in forward, \n h = self.layers[{i}](h)",
    "File /opt/venv/lib/python3.11/site-packages/torch/nn/modules/module.py, line 1789, "
    "in _call_impl, \n return forward_call(*args, **kwargs)",
]


def _tensor(rng: random.Random, shape: list[int], scale: float = 1.0, grad: bool = True) -> dict[str, Any]:
    n = math.prod(shape)
    mean = rng.gauss(0, 0.1) * scale
    spread = abs(rng.gauss(1, 0.2)) * scale
    return {
        "type": "torch.Tensor",
        "dtype": "torch.float32",
        "shape": shape,
        "Max": mean + 3 * spread,
        "Min": mean - 3 * spread,
        "Mean": mean,
        "Norm": math.sqrt(n) * spread,
        "requires_grad": grad,
    }


def _scaled(leaf: Any, factor: float) -> Any:
    if isinstance(leaf, dict) and leaf.get("type") == "torch.Tensor":
        return {**leaf, **{k: leaf[k] * factor for k in ("Max", "Min", "Mean", "Norm")}}
    if isinstance(leaf, dict):
        return {k: _scaled(v, factor) for k, v in leaf.items()}
    if isinstance(leaf, list):
        return [_scaled(v, factor) for v in leaf]
    return leaf


def rank_dump(rank: int, world: int, layers: int, seed: int, drift: float) -> tuple[dict, dict, dict]:
    """(dump.json, stack.json, construct.json) of one rank; ``drift`` scales layers >= layers // 2."""
    rng = random.Random(seed * 1_000_003 + rank)
    data: dict[str, Any] = {}
    stacks: dict[str, list[str]] = {}
    construct: dict[str, str | None] = {}
    hidden = [8, 64]
    backward: list[tuple[str, Any]] = []
    for i in range(layers):
        factor = drift if i >= layers // 2 else 1.0
        module = f"Module.layers.{i}.Block.forward.0"
        x = _tensor(rng, hidden)
        weight, bias = _tensor(rng, [64, 64], 0.1), _tensor(rng, [64], 0.1)
        y = _scaled(_tensor(rng, hidden), factor)
        entries = {
            f"Functional.linear.{i}.forward": {
                "input_args": [x, weight, bias],
                "input_kwargs": {},
                "output": [y],
            },
            f"Functional.gelu.{i}.forward": {
                "input_args": [y],
                "input_kwargs": {"approximate": {"type": "str", "value": "none"}},
                "output": [_scaled(_tensor(rng, hidden), factor)],
            },
            f"Tensor.__add__.{i}.forward": {
                "input_args": [y, x],
                "input_kwargs": {},
                "output": [_scaled(_tensor(rng, hidden), factor)],
            },
            f"Distributed.all_reduce.{i}.forward": {
                "input_args": [_scaled(_tensor(rng, hidden), factor)],
                "input_kwargs": {"group": {"type": "torch.ProcessGroup", "group_ranks": list(range(world))}},
                "output": [_scaled(_tensor(rng, hidden), factor)],
            },
        }
        data[module] = {
            "input_args": [x],
            "input_kwargs": {},
            "output": [_scaled(_tensor(rng, hidden), factor)],
            "parameters": {"weight": weight, "bias": bias},
        }
        construct[module] = None
        stacks[module] = [line.format(line=100 + i, i=i) for line in STACK]
        for name, body in entries.items():
            data[name] = body
            construct[name] = module
            stacks[name] = [line.format(line=200 + i, i=i) for line in STACK]
        backward.append(
            (
                f"Functional.linear.{i}.backward",
                {
                    "input": [_tensor(rng, hidden, factor)],
                    "output": [_tensor(rng, hidden, factor), None, None],
                },
            )
        )
        backward.append(
            (
                f"Module.layers.{i}.Block.parameters_grad.0",
                {
                    "weight": [_tensor(rng, [64, 64], 0.01 * factor)],
                    "bias": [_tensor(rng, [64], 0.01 * factor)],
                },
            )
        )
    for name, body in reversed(backward):
        data[name] = body
    dump = {"task": "statistics", "level": "mix", "framework": "pytorch", "dump_data_dir": None, "data": data}
    stack_json = {str(k): [[name], lines] for k, (name, lines) in enumerate(stacks.items())}
    return dump, stack_json, construct


def write_tree(out: Path, ranks: int, steps: int, layers: int, seed: int = 0) -> Path:
    for side in ("target", "golden"):
        for step in range(steps):
            for rank in range(ranks):
                drift = 1.5 if side == "target" and rank == ranks // 2 else 1.0
                dump, stack, construct = rank_dump(rank, ranks, layers, seed + step, drift)
                folder = out / side / f"step{step}" / f"rank{rank}"
                folder.mkdir(parents=True, exist_ok=True)
                for name, doc in (("dump.json", dump), ("stack.json", stack), ("construct.json", construct)):
                    (folder / name).write_text(json.dumps(doc, indent=1))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--ranks", type=int, default=16)
    parser.add_argument("--steps", type=int, default=1)
    parser.add_argument("--layers", type=int, default=200, help="layers per rank (6 forward entries each)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    write_tree(args.out, args.ranks, args.steps, args.layers, args.seed)
    print(f"wrote {args.ranks} ranks x {args.steps} steps x {args.layers} layers below {args.out}")


if __name__ == "__main__":
    main()
