"""Write small statistics dumps (one or more ranks and steps) with a fault planted at a known op.

    python workflows/gen_divergence_dumps.py OUT --case send_recv [--steps 1]
    python workflows/gen_divergence_dumps.py OUT --list

Each rank runs the same little network on 16 values: linear, relu, layer_norm, a point-to-point ring
exchange (``send``/``recv``, or ``batch_isend_irecv``), an ``all_reduce`` over the world, add, linear
(forward only). The values are really computed, so every tensor's Max/Min/Mean/Norm follows from its
inputs'. The target run is the golden run with a relative rounding noise of 2e-3 on every op's output
(as bf16 against fp32) and the case's fault: one op's output (or one weight) scaled by 1.5 on one rank,
from there on. Every layer_norm's mean is 0.0 in the target and a few 1e-9 in the golden run.
OUT/target and OUT/golden get ``step{S}/rank{R}/`` folders (a single dump.json folder for one rank
and one step), level mix with every node at the top of construct.json (graph_visualize draws them);
``CASES[case].answer`` is the (rank, op) the first divergence must name.
"""

from __future__ import annotations

import argparse
import json
import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

WIDTH = 16
NOISE = 2e-3
STACK = "File /workspace/train.py, line {line}, in forward, \n {code}"


@dataclass(frozen=True)
class Case:
    ranks: int
    fault_rank: int | None  # None: no fault (the answer is "no divergence")
    fault_op: str  # the dump entry whose output (or, with weight=True, weight input) is scaled
    weight: bool = False
    exchange: str = "send_recv"  # "batch" (batch_isend_irecv), "" (no point-to-point exchange)
    description: str = ""

    @property
    def answer(self) -> tuple[int, str] | None:
        return None if self.fault_rank is None else (self.fault_rank, self.fault_op)


CASES = {
    "single": Case(1, 0, "Functional.relu.0.forward", description="one rank, relu's output scaled"),
    "single_weight": Case(1, 0, "Functional.linear.1.forward", weight=True, description="one rank, a weight"),
    "send_recv": Case(4, 2, "Tensor.__add__.0.forward", description="rank 2's fault, to rank 3 by send/recv"),
    "all_reduce": Case(4, 1, "Tensor.__add__.0.forward", exchange="", description="rank 1's, by all_reduce"),
    "batch": Case(4, 2, "Tensor.__add__.0.forward", exchange="batch", description="by batch_isend_irecv"),
    "near_zero": Case(2, None, "", description="no fault; layer_norm means 0.0 against 3.7e-9"),
}


def _summary(values: list[float]) -> dict[str, Any]:
    return {
        "type": "torch.Tensor",
        "dtype": "torch.float32",
        "shape": [len(values)],
        "Max": max(values),
        "Min": min(values),
        "Mean": sum(values) / len(values),
        "Norm": math.sqrt(sum(v * v for v in values)),
        "requires_grad": False,
    }


class _Run:
    """One rank of one side: computes the ops in order and records their dump entries."""

    def __init__(self, case: Case, rank: int, step: int, target: bool) -> None:
        self.case, self.rank, self.target = case, rank, target
        self.noise = random.Random(f"{rank}/{step}/noise")
        self.data: dict[str, Any] = {}
        self.stacks: dict[str, list[str]] = {}
        self.faulty = target and case.fault_rank == rank

    def _noisy(self, values: list[float]) -> list[float]:
        if not self.target:
            return values
        return [v * (1 + self.noise.uniform(-NOISE, NOISE)) for v in values]

    def op(
        self,
        name: str,
        inputs: list[list[float]],
        compute: Callable[..., list[float]],
        extra: dict[str, Any] | None = None,
    ) -> list[float]:
        if self.faulty and self.case.weight and name == self.case.fault_op:
            inputs = inputs[:1] + [[v * 1.5 for v in inputs[1]]] + inputs[2:]
        out = self._noisy(compute(*inputs))
        if self.faulty and not self.case.weight and name == self.case.fault_op:
            out = [v * 1.5 for v in out]
        entry = {
            "input_args": [_summary(v) for v in inputs],
            "input_kwargs": extra or {},
            "output": [_summary(out)],
        }
        if name.startswith("Functional.layer_norm"):
            entry["output"][0]["Mean"] = 0.0 if self.target else 3.7e-9
        self.data[name] = entry
        self.stacks[name] = [STACK.format(line=10 + len(self.data), code=name.split(".")[1])]
        return out

    def record(self, name: str, entry: dict[str, Any]) -> None:
        self.data[name] = entry
        self.stacks[name] = [STACK.format(line=10 + len(self.data), code=name.split(".")[1])]


def _weights(seed: str) -> list[float]:
    rng = random.Random(seed)
    return [rng.uniform(0.5, 1.5) for _ in range(WIDTH)]


def _layer_norm(x: list[float]) -> list[float]:
    mean = sum(x) / len(x)
    std = math.sqrt(sum((v - mean) ** 2 for v in x) / len(x)) or 1.0
    return [(v - mean) / std for v in x]


def _int(value: int) -> dict[str, Any]:
    return {"type": "int", "value": value}


def _exchange(run: _Run, h: list[float], incoming: list[float], world: int) -> list[float]:
    """Rank r sends h to r+1 and receives from r-1 (the values the other rank sent)."""
    nxt, prev = (run.rank + 1) % world, (run.rank - 1) % world
    if run.case.exchange == "batch":

        def p2p(op: str, values: list[float], peer: int) -> dict[str, Any]:
            return {"class_type": "torch.distributed.P2POp", "tensor": _summary(values), "op": op,
                    "peer": peer, "tag": 0, "group_id": "g0"}  # fmt: skip

        buffer = [0.0] * WIDTH
        run.record(
            "Distributed.batch_isend_irecv.0.forward",
            {
                "input_args": [[p2p("isend", h, nxt), p2p("irecv", buffer, prev)]],
                "input_kwargs": {},
                "output": [[p2p("isend", h, nxt), p2p("irecv", buffer, prev)]],  # read before it arrived
            },
        )
        return incoming
    send = {"input_args": [_summary(h)], "input_kwargs": {"dst": _int(nxt)}, "output": [None]}
    recv = {
        "input_args": [None],
        "input_kwargs": {"src": _int(prev)},
        "output": [_summary(incoming), _int(prev)],
    }
    order = [("Distributed.send.0.forward", send), ("Distributed.recv.0.forward", recv)]
    for name, entry in order if run.rank % 2 == 0 else order[::-1]:
        run.record(name, entry)
    return incoming


def _first_half(run: _Run) -> list[float]:
    x = [math.sin(1.7 * i + run.rank) for i in range(WIDTH)]
    w0, b0 = _weights("w0"), [0.1] * WIDTH
    y = run.op(
        "Functional.linear.0.forward", [x, w0, b0], lambda a, w, b: [u * v + c for u, v, c in zip(a, w, b)]
    )
    y = run.op("Functional.relu.0.forward", [y], lambda a: [max(v, 0.0) for v in a])
    y = run.op("Functional.layer_norm.0.forward", [y], _layer_norm)
    return run.op("Tensor.__add__.0.forward", [y, x], lambda a, b: [u + v for u, v in zip(a, b)])


def _second_half(run: _Run, h: list[float], received: list[float], reduced: list[float]) -> None:
    run.record(
        "Distributed.all_reduce.0.forward",
        {"input_args": [_summary(h)], "input_kwargs": {}, "output": [_summary(reduced)]},
    )
    z = run.op("Tensor.__add__.1.forward", [reduced, received], lambda a, b: [u + v for u, v in zip(a, b)])
    w1, b1 = _weights("w1"), [0.0] * WIDTH
    run.op(
        "Functional.linear.1.forward", [z, w1, b1], lambda a, w, b: [u * v + c for u, v, c in zip(a, w, b)]
    )


def step_dumps(case: Case, step: int, target: bool) -> list[_Run]:
    """Every rank of one side and step, the exchanges done with the values each rank really sent."""
    runs = [_Run(case, rank, step, target) for rank in range(case.ranks)]
    halves = [_first_half(run) for run in runs]
    world = case.ranks
    if world > 1 and case.exchange:
        for run in runs:
            _exchange(run, halves[run.rank], halves[(run.rank - 1) % world], world)
    received = [
        halves[(r - 1) % world] if world > 1 and case.exchange else [0.0] * WIDTH for r in range(world)
    ]
    reduced = [sum(values) for values in zip(*halves)]
    for run, h, got in zip(runs, halves, received):
        _second_half(run, h, got, reduced)
    return runs


def write_case(out: Path, name: str, steps: int = 1) -> Case:
    """OUT/target and OUT/golden of one case; returns the case (its ``answer``)."""
    case = CASES[name]
    for side in ("target", "golden"):
        for step in range(steps):
            for run in step_dumps(case, step, side == "target"):
                folder = out / side
                if case.ranks > 1 or steps > 1:
                    folder = folder / f"step{step}" / f"rank{run.rank}"
                folder.mkdir(parents=True, exist_ok=True)
                dump = {"task": "statistics", "level": "mix", "framework": "pytorch", "dump_data_dir": None,
                        "data": run.data}  # fmt: skip
                stack = {str(i): [[n], lines] for i, (n, lines) in enumerate(run.stacks.items())}
                construct = dict.fromkeys(run.data)  # every node at the top of the model (graph_visualize)
                for file, doc in (("dump.json", dump), ("stack.json", stack), ("construct.json", construct)):
                    (folder / file).write_text(json.dumps(doc, indent=1))
    return case


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, nargs="?")
    parser.add_argument("--case", choices=sorted(CASES), default="send_recv")
    parser.add_argument("--steps", type=int, default=1)
    parser.add_argument("--list", action="store_true", help="list the cases and their answers")
    args = parser.parse_args()
    if args.list or args.out is None:
        for name, case in CASES.items():
            print(f"{name:14} {case.answer}  {case.description}")
        return
    case = write_case(args.out, args.case, args.steps)
    print(f"wrote {args.out}/target and {args.out}/golden; the first divergence is {case.answer}")


if __name__ == "__main__":
    main()
