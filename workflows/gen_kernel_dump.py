"""Write MindSpore static-graph kernel dumps (``*.npy`` per kernel tensor, or ``statistic.csv``).

    python workflows/gen_kernel_dump.py OUT --tree [--ranks 16] [--steps 1] [--layers 50] [--elems 4096]
                                            [--mode npy|statistic] [--layout rank|ge] [--seed 0]
    python workflows/gen_kernel_dump.py tests/data --fixtures [--reference /path/to/msprobe]

``--tree`` writes OUT/target and OUT/golden, one leaf folder per (rank, step), in the nesting MindSpore
uses: ``rank_{R}/{net}/{graph_id}/{iteration}/`` (``--layout rank``, Ascend O0/O1 and GPU/CPU) or
``{time}/{device_id}/{model_name}/{model_id}/{iteration}/`` (``--layout ge``, Ascend O2 after
conversion), beside the non-data folders a real dump holds (graphs/, execution_order/, constants/).
Tensor files are named ``{op_type}.{op_name}.{task_id}.{stream_id}.{timestamp}.{input|output}.{slot}
.{format}.npy``; statistic.csv has MindSpore's header. The target run is the golden one times
(1 + 1e-4 noise), except on rank ``ranks // 2``, where the second half of the kernels drifts by 5 %.

With ``--reference`` the reference is run on the fixtures (ref/ and ref/commands.txt of each case); it
needs MindSpore to reach its kernel compare, so it runs with the import shim of kernel_npy/ref/shim.

``--fixtures`` writes the reference-test inputs of tests/data/kernel_npy and tests/data/kernel_stat:
trees whose leaves hold the edge cases (unmatched and repeated kernels, 0-d and one-element arrays,
NaN/Inf, float16, ints, bools, shape and dtype mismatches, all-zero tensors, statistic.csv header
variants).
"""

from __future__ import annotations

import argparse
import csv
import math
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

NET = "Net"
GE_TIME = "20240601120000"
T0 = 1_717_200_000_000_000  # 16-digit microsecond time stamps, as MindSpore writes them
DEFAULT_HEADER = [
    "Op Type", "Op Name", "Task ID", "Stream ID", "Timestamp", "IO", "Slot", "Data Size", "Data Type",
    "Shape", "Max Value", "Min Value", "L2Norm Value",
]  # fmt: skip
FULL_HEADER = [
    *DEFAULT_HEADER[:12], "Avg Value", "Count", "Negative Zero Count", "Positive Zero Count", "NaN Count",
    "Negative Inf Count", "Positive Inf Count", "Zero Count", "L2Norm Value",
]  # fmt: skip


@dataclass
class Kernel:
    """One kernel launch: its name parts and its input/output tensors (None: not dumped on that side)."""

    op_type: str
    scope: str
    task_id: int
    inputs: list[np.ndarray | None] = field(default_factory=list)
    outputs: list[np.ndarray | None] = field(default_factory=list)
    stream_id: int = 0
    fmt: str = "DefaultFormat"
    dtype_suffix: bool = False  # MindSpore >= 2.3 appends the dtype to the file name

    @property
    def op_name(self) -> str:
        return f"Default--{self.scope}--{self.op_type}-op{self.task_id}"


def npy_name(k: Kernel, timestamp: int, io: str, slot: int, array: np.ndarray) -> str:
    name = f"{k.op_type}.{k.op_name}.{k.task_id}.{k.stream_id}.{timestamp}.{io}.{slot}.{k.fmt}"
    return f"{name}.{array.dtype.name}.npy" if k.dtype_suffix else f"{name}.npy"


def _tensors(kernel: Kernel) -> Iterable[tuple[str, int, np.ndarray]]:
    for io, arrays in (("input", kernel.inputs), ("output", kernel.outputs)):
        for slot, array in enumerate(arrays):
            if array is not None:
                yield io, slot, array


def write_npy_leaf(folder: Path, kernels: Iterable[Kernel], t0: int = T0) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i, kernel in enumerate(kernels):
        for io, slot, array in _tensors(kernel):
            np.save(folder / npy_name(kernel, t0 + 7 * i, io, slot, array), array)


def statistic_row(
    kernel: Kernel, timestamp: int, io: str, slot: int, array: np.ndarray, header: list[str]
) -> list[str]:
    """One statistic.csv line, with the statistics MindSpore computes for the tensor."""
    flat = array.reshape(-1).astype(np.int8) if array.dtype == bool else array.reshape(-1)
    finite = flat[np.isfinite(flat)] if flat.dtype.kind == "f" else flat
    values = {
        "Op Type": kernel.op_type,
        "Op Name": kernel.op_name,
        "Task ID": kernel.task_id,
        "Stream ID": kernel.stream_id,
        "Timestamp": timestamp,
        "IO": io,
        "Slot": slot,
        "Data Size": array.nbytes,
        "Data Type": array.dtype.name,
        "Shape": "(" + ",".join(str(n) for n in array.shape) + ")",
        "Max Value": flat.max(),
        "Min Value": flat.min(),
        "Avg Value": flat.astype(np.float64).mean(),
        "Count": flat.size,
        "Negative Zero Count": int(np.sum((flat == 0) & np.signbit(flat))) if flat.dtype.kind == "f" else 0,
        "Positive Zero Count": int(np.sum((flat == 0) & ~np.signbit(flat))) if flat.dtype.kind == "f" else 0,
        "NaN Count": int(np.isnan(flat).sum()) if flat.dtype.kind == "f" else 0,
        "Negative Inf Count": int(np.isneginf(flat).sum()) if flat.dtype.kind == "f" else 0,
        "Positive Inf Count": int(np.isposinf(flat).sum()) if flat.dtype.kind == "f" else 0,
        "Zero Count": int(np.sum(finite == 0)),
        "L2Norm Value": np.linalg.norm(flat.astype(np.float64)),
    }
    return [str(values[name]) for name in header]


def write_statistic_leaf(
    folder: Path, kernels: Iterable[Kernel], header: list[str] = DEFAULT_HEADER, t0: int = T0
) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "statistic.csv", "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(header)
        for i, kernel in enumerate(kernels):
            for io, slot, array in _tensors(kernel):
                writer.writerow(statistic_row(kernel, t0 + 7 * i, io, slot, array, header))


def leaf_folder(root: Path, layout: str, rank: int, step: int, graph: int = 1) -> Path:
    if layout == "rank":
        return root / f"rank_{rank}" / NET / str(graph) / str(step)
    return root / GE_TIME / str(rank) / NET / str(graph) / str(step)


def write_side_extras(root: Path, layout: str, rank: int) -> None:
    """The folders a real dump has beside the data: graphs, execution order, constants, metadata."""
    base = root / f"rank_{rank}" if layout == "rank" else root / GE_TIME / str(rank)
    for sub, name, text in (
        ("graphs", "ms_output_trace_code_graph_1.ir", "# IR of graph 1\n"),
        ("execution_order", "ms_execution_order_graph_1.csv", "op_name\n"),
        (".dump_metadata", "data_dump.json", "{}\n"),
    ):
        (base / sub).mkdir(parents=True, exist_ok=True)
        (base / sub / name).write_text(text, encoding="utf-8")
    constants = base / NET / "1" / "constants"
    constants.mkdir(parents=True, exist_ok=True)
    np.save(constants / f"Parameter.data-1.0.0.{T0}.output.0.DefaultFormat.npy", np.ones(4, np.float32))


# ---------------------------------------------------------------------------------------------------------
# A network: what each rank runs per step


def network(rng: np.random.Generator, layers: int, elems: int) -> list[Kernel]:
    """The kernels of a small transformer-like graph, forward then backward, golden values."""
    width = max(int(math.sqrt(elems)), 2)
    kernels: list[Kernel] = []
    task = 1

    def add(
        op_type: str, scope: str, inputs: list[np.ndarray], outputs: list[np.ndarray], **kw: object
    ) -> None:
        nonlocal task
        kernels.append(Kernel(op_type, scope, task, list(inputs), list(outputs), **kw))  # type: ignore[arg-type]
        task += 1

    h = rng.standard_normal((width, width)).astype(np.float32)
    for layer in range(layers):
        scope = f"network-WithLossCell--_backbone-Net--layers-{layer}-Block"
        w = (rng.standard_normal((width, width)) / width).astype(np.float32)
        y = h @ w
        add("MatMul", scope + "--dense-Dense", [h, w], [y])
        z = np.maximum(y, 0)
        add("ReLU", scope + "--act-ReLU", [y], [z])
        half = z.astype(np.float16)
        add("Cast", scope + "--cast-Cast", [z], [half])
        s = (half.astype(np.float32) + h).astype(np.float32)
        add("Add", scope + "--residual-Add", [half.astype(np.float32), h], [s])
        add("AllReduce", scope + "--allreduce-AllReduce", [s], [s], stream_id=1)
        h = s / np.float32(max(float(np.abs(s).max()), 1.0))
    loss = np.array(np.mean(h * h), np.float32)
    add("ReduceMean", "network-WithLossCell--_loss_fn-MSELoss", [h], [loss])
    for layer in reversed(range(layers)):
        scope = f"Gradients--Default--network-WithLossCell--_backbone-Net--layers-{layer}-Block"
        g = (rng.standard_normal((width, width)) * 1e-2).astype(np.float32)
        add("MatMul", scope + "--gradMatMul", [g, g], [g @ g])
    return kernels


def perturbed(kernels: list[Kernel], rng: np.random.Generator, drift_from: int | None) -> list[Kernel]:
    """The target run: golden values times (1 + 1e-4 noise); kernels from ``drift_from`` on drift by 5 %."""

    def shift(array: np.ndarray | None, scale: float) -> np.ndarray | None:
        if array is None or array.dtype.kind != "f":
            return array
        noise = rng.standard_normal(array.shape) * scale
        return (array * (1 + noise)).astype(array.dtype)

    out = []
    for i, k in enumerate(kernels):
        scale = 5e-2 if drift_from is not None and i >= drift_from else 1e-4
        inputs, outputs = [shift(a, scale) for a in k.inputs], [shift(a, scale) for a in k.outputs]
        out.append(Kernel(k.op_type, k.scope, k.task_id, inputs, outputs, k.stream_id, k.fmt, k.dtype_suffix))
    return out


def write_tree(
    out: Path, *, ranks: int, steps: int, layers: int, elems: int, mode: str, layout: str, seed: int
) -> None:
    """OUT/target and OUT/golden for a run of ``ranks`` x ``steps`` (see the module docstring)."""
    for side in ("target", "golden"):
        shutil.rmtree(out / side, ignore_errors=True)
    for rank in range(ranks):
        for step in range(steps):
            golden = network(np.random.default_rng([seed, rank, step]), layers, elems)
            drift = len(golden) // 2 if rank == ranks // 2 else None
            target = perturbed(golden, np.random.default_rng([seed, rank, step, 1]), drift)
            for side, kernels, t0 in (("golden", golden, T0), ("target", target, T0 + 10**9)):
                folder = leaf_folder(out / side, layout, rank, step)
                if mode == "npy":
                    write_npy_leaf(folder, kernels, t0)
                else:
                    write_statistic_leaf(folder, kernels, FULL_HEADER, t0)
        for side in ("target", "golden"):
            write_side_extras(out / side, layout, rank)


# ---------------------------------------------------------------------------------------------------------
# Reference-test fixtures

Pair = tuple[list[Kernel], list[Kernel]]


def _k(op_type: str, task: int, npu: list, bench: list, io: str = "output", **kw: object) -> Pair:
    """One kernel on each side: the target's and golden's tensors of one slot list (None: not dumped)."""
    scope = f"network-Net--edge-{op_type}"
    target = Kernel(op_type, scope, task, **kw)  # type: ignore[arg-type]
    golden = Kernel(op_type, scope, task, **kw)  # type: ignore[arg-type]
    setattr(target, io + "s", list(npu))
    setattr(golden, io + "s", list(bench))
    return [target], [golden]


def npy_edge_cases(rng: np.random.Generator) -> list[Pair]:
    f32 = np.float32
    x = rng.standard_normal((4, 5)).astype(f32)
    nan_inf = x.copy()
    nan_inf[0, 0], nan_inf[1, 1], nan_inf[2, 2] = np.nan, np.inf, -np.inf
    other_nan = x.copy()
    other_nan[3, 3] = np.nan
    inf_for_nan = nan_inf.copy()
    inf_for_nan[0, 0] = np.inf
    with_zero = x.copy()
    with_zero[1, 2] = 0
    cases = [
        _k("MatMul", 11, [x, x * f32(1.0001)], [x, x], io="input"),
        _k("MatMul", 11, [x @ x.T], [(x @ x.T) * f32(1.0001)]),
        _k("Softmax", 12, [x], [x * f32(1.01)]),
        _k("Gelu", 13, [x], [x + f32(0.02)]),  # cos ~0.99, MaxAbsErr 0.02
        _k("Tanh", 14, [x], [-x]),
        _k("Cast", 15, [x.astype(np.float16)], [(x * 1.001).astype(np.float16)]),
        _k("CastMix", 16, [x.astype(np.float16)], [x]),  # dtype mismatch
        _k("Reshape", 17, [x], [x.reshape(5, 4)]),  # shape mismatch
        _k("ExpandDims", 18, [x.reshape(4, 5, 1)], [x]),  # equal after squeeze, still a mismatch
        _k("Both", 19, [x.astype(np.float16)], [x.reshape(5, 4)]),  # shape and dtype
        _k("ReduceSum", 20, [np.array(3.0, f32)], [np.array(3.5, f32)]),  # 0-d
        _k("ReduceMax", 21, [np.array([2.0], f32)], [np.array([2.5], f32)]),  # one element
        _k("ReduceMin", 22, [np.array([[2.0]], f32)], [np.array([[2.0]], f32)]),
        _k("Squeeze", 23, [np.array([2.0], f32)], [np.array(2.5, f32)]),
        _k("Unsqueeze", 24, [np.array(2.0, f32)], [np.array([2.5], f32)]),
        _k("ScalarCast", 25, [np.array(1.0, f32)], [np.array(1.0, np.float16)]),
        _k("Mul", 26, [nan_inf], [nan_inf * f32(1.001)]),  # NaN/Inf at the same places
        _k("Div", 27, [nan_inf], [other_nan]),  # at different places
        _k("RealDiv", 28, [nan_inf], [inf_for_nan]),  # NaN where the golden has Inf
        _k("Log", 29, [np.full((3, 2), np.nan, f32)], [np.full((3, 2), np.nan, f32)]),
        _k("Sqrt", 30, [np.array([np.nan], f32)], [np.array([1.0], f32)]),
        _k("ZerosLike", 31, [np.zeros((2, 3), f32)], [x[:2, :3]]),
        _k("OnesLike", 32, [x[:2, :3]], [np.zeros((2, 3), f32)]),
        _k("Fill", 33, [np.zeros(6, f32)], [np.zeros(6, f32)]),
        _k("Sub", 34, [np.zeros((2, 3), f32)], [x[:2, :3] * f32(1e-3)]),
        _k("Neg", 35, [x], [with_zero]),
        _k("ArgMax", 36, [np.array([1, 2, 3], np.int32)], [np.array([1, 2, 4], np.int32)]),
        _k("ArgMin", 37, [np.array([1, 2, 250], np.uint8)], [np.array([1, 3, 0], np.uint8)]),
        _k("Range", 38, [np.arange(6, dtype=np.int64)], [np.arange(6, dtype=np.int64)]),
        _k("Sign", 39, [np.array([-1, 2, 3], np.int8)], [np.array([1, 2, 3], np.int8)]),
        _k("Equal", 40, [np.array([True, False])], [np.array([True, True])]),
        _k("Less", 41, [np.array([True])], [np.array([False])]),
        _k("Exp", 42, [x.astype(np.float64)], [(x * 1.0001).astype(np.float64)]),
        _k("Dropout", 43, [x, None], [x, x > 0], io="output"),  # second output only in the golden
        _k("Transpose", 44, [x.T.copy()], [x.T.copy()], fmt="NCHW", dtype_suffix=True),
        _k("Abs", 45, [x[0]], [x[0] * f32(1.2)], stream_id=2),
    ]
    cases.append(([Kernel("OnlyTarget", "network-Net--edge-OnlyTarget", 46, [], [x])], []))
    cases.append(([], [Kernel("OnlyGolden", "network-Net--edge-OnlyGolden", 47, [], [x])]))
    # one kernel launched 12 times in the target and 11 times in the golden (occurrences 0..11)
    loop_t = [Kernel("Assign", "network-Net--loop-Assign", 48, [], [x + i]) for i in range(12)]
    loop_g = [Kernel("Assign", "network-Net--loop-Assign", 48, [], [x + i * 1.01]) for i in range(11)]
    cases.append((loop_t, loop_g))
    # twelve input slots: slot 10 sorts before slot 2
    many = [x[:1] * i for i in range(12)]
    cases.append(_k("Concat", 49, many, [m * f32(1.001) for m in many], io="input"))
    return cases


def stat_edge_cases(rng: np.random.Generator) -> list[Pair]:
    f32 = np.float32
    x = rng.standard_normal((4, 5)).astype(f32)
    big = (x * f32(123.456789)).astype(f32)
    with_inf = x.copy()
    with_inf[0, 0] = np.inf
    with_ninf = x.copy()
    with_ninf[0, 1] = -np.inf
    with_nan = x.copy()
    with_nan[1, 1] = np.nan
    cases = [
        _k("MatMul", 11, [x, x], [x, x * f32(1.05)], io="input"),
        _k("MatMul", 11, [big], [big * f32(1.000001)]),
        _k("BiasAdd", 12, [x], [x * f32(3.0)]),  # golden much bigger: negative max diff
        _k("Relu", 13, [np.abs(x)], [np.zeros((4, 5), f32)]),  # golden 0: N/A
        _k("Softmax", 14, [with_inf], [x]),
        _k("LogSoftmax", 15, [x], [with_inf]),
        _k("Neg", 16, [with_ninf], [with_ninf]),
        _k("Sqrt", 17, [with_nan], [x]),
        _k("Rsqrt", 18, [x], [with_nan]),
        _k("Cast", 19, [x.astype(np.float16)], [x]),  # dtype mismatch
        _k("Reshape", 20, [x], [x.reshape(5, 4)]),  # shape mismatch
        _k("ReduceSum", 21, [np.array(3.0, f32)], [np.array(3.5, f32)]),
        _k("ArgMax", 22, [np.array([1, 2, 3], np.int32)], [np.array([1, 2, 4], np.int32)]),
        _k("Equal", 23, [np.array([True, False])], [np.array([True, True])]),
        _k("Dropout", 24, [x, None], [x, x * f32(2)], io="output"),
    ]
    cases.append(([Kernel("OnlyTarget", "network-Net--edge-OnlyTarget", 25, [], [x])], []))
    cases.append(([], [Kernel("OnlyGolden", "network-Net--edge-OnlyGolden", 26, [], [x])]))
    loop_t = [Kernel("Assign", "network-Net--loop-Assign", 27, [], [x + i]) for i in range(12)]
    loop_g = [Kernel("Assign", "network-Net--loop-Assign", 27, [], [x + i * 1.01]) for i in range(11)]
    cases.append((loop_t, loop_g))
    return cases


def _flatten(cases: list[Pair]) -> tuple[list[Kernel], list[Kernel]]:
    return [k for t, _ in cases for k in t], [k for _, g in cases for k in g]


def _matched(kernels: list[Kernel], change: Callable[[np.ndarray], np.ndarray]) -> Pair:
    golden = [
        Kernel(k.op_type, k.scope, k.task_id, list(k.inputs), list(k.outputs), k.stream_id) for k in kernels
    ]
    target = [
        Kernel(k.op_type, k.scope, k.task_id, [change(a) for a in k.inputs], [change(a) for a in k.outputs],
               k.stream_id)
        for k in kernels
    ]  # fmt: skip
    return target, golden


def write_fixtures(out: Path) -> None:
    """tests/data/kernel_npy and tests/data/kernel_stat inputs (target/ and golden/ of each)."""
    rng = np.random.default_rng(20240601)
    small = network(np.random.default_rng(7), layers=2, elems=16)

    def noisy(a: np.ndarray) -> np.ndarray:
        return (a * np.float32(1.0005)).astype(a.dtype) if a.dtype.kind == "f" else a

    npy, stat = out / "kernel_npy", out / "kernel_stat"
    for case in (npy, stat):
        for side in ("target", "golden"):
            shutil.rmtree(case / side, ignore_errors=True)
    # kernel_npy: rank_{R}/Net/{graph}/{step}
    edges_t, edges_g = _flatten(npy_edge_cases(rng))
    plain_t, plain_g = _matched(small, noisy)
    # rank 0 step 0: every edge case (object columns), plus a second graph of the same step
    write_npy_leaf(leaf_folder(npy / "target", "rank", 0, 0), edges_t, T0 + 10**9)
    write_npy_leaf(leaf_folder(npy / "golden", "rank", 0, 0), edges_g, T0)
    write_npy_leaf(leaf_folder(npy / "target", "rank", 0, 0, graph=2), plain_t[:3], T0 + 2 * 10**9)
    write_npy_leaf(leaf_folder(npy / "golden", "rank", 0, 0, graph=2), plain_g[:3], T0 + 10**8)
    # rank 0 step 1: float32 only, all matched (float32 columns)
    f32_t, f32_g = _matched([k for k in small if k.op_type != "Cast"], noisy)
    write_npy_leaf(leaf_folder(npy / "target", "rank", 0, 1), f32_t, T0 + 10**9)
    write_npy_leaf(leaf_folder(npy / "golden", "rank", 0, 1), f32_g, T0)
    # rank 1 step 0: float16 and int32 only (pandas makes those columns float32)
    ints = Kernel("ArgMax", "network-Net--head-ArgMax", 90, [], [np.array([[3, 1], [0, 2]], np.int32)])
    halves = [k for k in small if k.op_type == "Cast"] + [ints]
    write_npy_leaf(leaf_folder(npy / "target", "rank", 1, 0), _matched(halves, noisy)[0], T0 + 10**9)
    write_npy_leaf(leaf_folder(npy / "golden", "rank", 1, 0), halves, T0)
    # rank 1 step 1: float32 with one infinite value and one unmatched kernel
    inf_t, inf_g = _matched(f32_g, noisy)
    inf_t[0].outputs[0] = inf_t[0].outputs[0].copy()
    inf_t[0].outputs[0][0, 0] = np.inf
    inf_g[0].outputs[0] = inf_g[0].outputs[0].copy()
    inf_g[0].outputs[0][0, 0] = np.inf
    write_npy_leaf(leaf_folder(npy / "target", "rank", 1, 1), inf_t, T0 + 10**9)
    write_npy_leaf(leaf_folder(npy / "golden", "rank", 1, 1), inf_g[:-1], T0)
    # rank 2 only in the target, step 2 only in the golden: never compared
    write_npy_leaf(leaf_folder(npy / "target", "rank", 2, 0), plain_t[:2], T0)
    write_npy_leaf(leaf_folder(npy / "golden", "rank", 0, 2), plain_g[:2], T0)
    for side in ("target", "golden"):
        for rank in (0, 1):
            write_side_extras(npy / side, "rank", rank)
        (leaf_folder(npy / side, "rank", 0, 0) / "random.npy").write_bytes(b"not a kernel tensor")
    # kernel_stat: {time}/{device}/Net/1/{iteration}
    edges_t, edges_g = _flatten(stat_edge_cases(rng))
    write_statistic_leaf(leaf_folder(stat / "target", "ge", 0, 0), edges_t, FULL_HEADER, T0 + 10**9)
    write_statistic_leaf(leaf_folder(stat / "golden", "ge", 0, 0), edges_g, DEFAULT_HEADER, T0)
    write_statistic_leaf(leaf_folder(stat / "target", "ge", 0, 1), plain_t, DEFAULT_HEADER, T0 + 10**9)
    write_statistic_leaf(leaf_folder(stat / "golden", "ge", 0, 1), plain_g, DEFAULT_HEADER, T0)
    write_statistic_leaf(leaf_folder(stat / "target", "ge", 1, 0), plain_t, FULL_HEADER, T0 + 10**9)
    write_statistic_leaf(leaf_folder(stat / "golden", "ge", 1, 0), plain_g[1:], FULL_HEADER, T0)


REFERENCE_RUNS = {
    "kernel_npy": [
        ("compare_csv", ["--rank", "0,1", "--step", "0,1"]),
        ("compare_rank1_csv", ["--rank", "1"]),
        ("compare_step1_csv", ["--rank", "0,1,2", "--step", "1"]),
        ("compare_xlsx", ["--rank", "0,1", "--xlsx"]),
        ("compare_no_common", ["--rank", "2"]),
    ],
    "kernel_stat": [
        ("compare_csv", ["--rank", "0,1"]),
        ("compare_xlsx", ["--rank", "0,1", "--xlsx"]),
        ("compare_mode_mismatch", ["--rank", "0", "--step", "0"]),
    ],
}
SHIM = Path("kernel_npy/ref/shim")  # below the fixtures folder: lets the reference import without MindSpore


def run_reference(data: Path, msprobe: str) -> None:
    """Run the reference on the fixtures (cwd = ``data``, relative paths) into each case's ref/ folder.

    Each run gets ref/<run>/ (its outputs), ref/logs/<run>.log and an entry in ref/commands.txt.
    """
    import os
    import subprocess

    env = {**os.environ, "PYTHONPATH": str((data / SHIM).resolve())}
    for case, runs in REFERENCE_RUNS.items():
        ref = data / case / "ref"
        (ref / "logs").mkdir(parents=True, exist_ok=True)
        lines = [
            "# Reference: mindstudio-probe 26.2.0, run with cwd = tests/data and PYTHONPATH=" + str(SHIM),
            "# (an import shim: no MindSpore here). Absolute paths in the outputs start with "
            f"{data.resolve()}/",
            "",
        ]
        for name, extra in runs:
            golden = "kernel_stat/golden" if name == "compare_mode_mismatch" else f"{case}/golden"
            target = "kernel_npy/target" if name == "compare_mode_mismatch" else f"{case}/target"
            shutil.rmtree(ref / name, ignore_errors=True)
            argv = [msprobe, "compare", "-tp", target, "-gp", golden, "-o", f"{case}/ref/{name}", *extra]
            done = subprocess.run(argv, cwd=data, env=env, capture_output=True, text=True, check=False)
            (ref / "logs" / f"{name}.log").write_text(done.stdout + done.stderr, encoding="utf-8")
            outputs = sorted(p.name for p in (ref / name).glob("*")) if (ref / name).is_dir() else []
            shown = " ".join(["msprobe", *argv[1:]])
            lines += [f"[{name}]", shown, f"  rc={done.returncode}", f"  outputs: {', '.join(outputs)}", ""]
        (ref / "commands.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--tree", action="store_true", help="a target/golden run of ranks x steps")
    what.add_argument("--fixtures", action="store_true", help="tests/data/kernel_npy and kernel_stat inputs")
    parser.add_argument("--ranks", type=int, default=16)
    parser.add_argument("--steps", type=int, default=1)
    parser.add_argument("--layers", type=int, default=50)
    parser.add_argument("--elems", type=int, default=4096, help="elements per activation tensor")
    parser.add_argument("--mode", choices=("npy", "statistic"), default="npy")
    parser.add_argument("--layout", choices=("rank", "ge"), default="rank")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--reference", metavar="MSPROBE", help="with --fixtures: also run the reference on them"
    )
    args = parser.parse_args()
    if args.fixtures:
        write_fixtures(args.out)
        if args.reference:
            run_reference(args.out, args.reference)
    else:
        write_tree(
            args.out, ranks=args.ranks, steps=args.steps, layers=args.layers, elems=args.elems,
            mode=args.mode, layout=args.layout, seed=args.seed,
        )  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
