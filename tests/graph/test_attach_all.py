"""The C loop of a build (csrc/tree.c: attach_all, with _repair_parent and _Builder.new in C) makes
the tree the Python loop makes: the same nodes in the same order, with the same parents, children,
types, stacks (the very same list objects) and micro steps, or the same error.

On every dump of tests/data, and on generated construct.json / stack.json pairs that mix forward and
backward modules and APIs, parents that the repair rules move, twins without stacks, names that are
not ASCII or hold a newline, parents that are not names, and Megatron micro steps.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from msprobe_dask.graph import build, speedups
from msprobe_dask.graph.model import Graph

NATIVE = speedups.native
pytestmark = pytest.mark.skipif(NATIVE is None, reason="the C extension is not built")
DATA = Path(__file__).resolve().parents[1] / "data"


def _tree(g: Graph) -> list[Any]:
    """Each node's fields; its stack as the node that first holds the same list object, and the
    shared constants by name (which objects are shared matters: stack ids are numbered by object)."""
    first: dict[int, str] = {id(build.NO_STACK): "NO_STACK", id(build.NO_FORWARD_STACK): "NO_FORWARD_STACK"}
    return [
        (
            n.id,
            n.type,
            n.parent.id if n.parent is not None else None,
            [c.id for c in n.children],
            n.stack,
            first.setdefault(id(n.stack), n.id),
            n.micro,
        )
        for n in g.nodes.values()
    ]


def _built(folder: Path, native: bool, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(speedups, "native", NATIVE if native else None)
    try:
        g = build.build_graph(build.GraphSource(str(folder)), items=False)
    except Exception as exc:  # the same error either way
        return ("error", type(exc).__name__, str(exc))
    finally:
        monkeypatch.setattr(speedups, "native", NATIVE)
    return _tree(g)


FOLDERS = sorted({p.parent for p in DATA.rglob("construct.json")})


@pytest.mark.parametrize("folder", FOLDERS, ids=[str(f.relative_to(DATA)) for f in FOLDERS])
def test_the_test_dumps(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _built(folder, True, monkeypatch) == _built(folder, False, monkeypatch)


_MODULES = [
    "Module.a",
    "Module.a.b",
    "Module.layers.0.Block",
    "Module.x.y.z",
    "Cell.c",
    "Module.é",
    "Module.n\nl",
]
_APIS = ["Functional.linear", "Tensor.add", "Torch.matmul", "Distributed.all_reduce", "Weird.op"]


def _name(rng: random.Random) -> str:
    """A module's or an API's name; now and then with a final newline (which build.py's regular
    expressions read as the end of the name)."""
    if rng.random() < 0.55:
        kind = rng.choice(["Linear", "Block"])
        name = f"{rng.choice(_MODULES)}.{kind}.{rng.choice(['forward', 'backward'])}.{rng.randrange(3)}"
    else:
        kind = rng.choice(["forward", "backward"])
        name = f"{rng.choice(_APIS)}.{rng.randrange(3)}.{kind}"
        name = name if rng.random() < 0.9 else name.replace(f".{kind}", f".{kind}.x")
    return name + "\n" if rng.random() < 0.05 else name


def _dump(folder: Path, seed: int) -> None:
    rng = random.Random(seed)
    names = list(dict.fromkeys(_name(rng) for _ in range(rng.randrange(5, 60))))
    construct: dict[str, Any] = {}
    for i, name in enumerate(names):
        r = rng.random()
        if r < 0.3 or i == 0:
            construct[name] = None
        elif r < 0.93:
            construct[name] = rng.choice(names[:i] + names[i:])  # (a later node, or itself, now and then)
        elif r < 0.97:
            construct[name] = rng.choice(["", 3, ["x"]])
        else:
            construct[name] = _name(rng)  # a parent that is no entry
    if seed % 4 == 0:
        construct = {k: [v, rng.randrange(3)] for k, v in construct.items()}
        construct["megatron_micro_step_number"] = 2  # type: ignore[assignment]
    _write(folder, construct, [n for n in names if rng.random() < 0.4], names)


def _write(folder: Path, construct: dict[str, Any], with_stack: list[str], entries: list[str]) -> None:
    """A dump folder: construct.json, a stack.json giving ``with_stack`` a line each, and a dump.json
    with an empty entry for each of ``entries``."""
    folder.mkdir()
    (folder / "construct.json").write_text(json.dumps(construct))
    stacks = {str(i): [[n], [f"File m.py, line {i}, in f"]] for i, n in enumerate(with_stack)}
    (folder / "stack.json").write_text(json.dumps(stacks))
    data = {n: {"input_args": [], "output": []} for n in entries}
    (folder / "dump.json").write_text(
        json.dumps({"task": "statistics", "level": "mix", "data": data}, indent=1)
    )


def _model_dump(folder: Path, seed: int) -> None:
    """A model's forward and backward nodes (modules nested two deep, APIs in them), whose backward
    nodes have the right parent, none, the forward twin's, another module's, or one of another
    prefix: the cases of _repair_parent's rules."""
    rng = random.Random(seed)
    top = [f"Module.l{i}.Block" for i in range(rng.randrange(1, 4))]
    inner = [f"{t}.m{j}.Linear" for t in top for j in range(rng.randrange(0, 3))]
    construct: dict[str, Any] = {}
    for direction in ("forward", "backward"):
        for call in range(rng.randrange(1, 3)):
            for m in top + inner:
                name = f"{m}.{direction}.{call}"
                outer = m.rsplit(".", 2)[0]
                right = f"{outer}.{direction}.{call}" if outer in top else None
                if direction == "backward":
                    # (the last: a parent whose name starts as the node's does, less its last four parts)
                    same_start = ".".join([*name.split(".")[:-4], "p", "q", "r"])
                    right = rng.choice(
                        [
                            right,
                            None,
                            f"{outer}.forward.{call}",
                            f"{rng.choice(top)}.backward.{call}",
                            "Other.x.y.z.w",
                            same_start,
                        ]
                    )
                construct[name] = right
                for a in range(rng.randrange(0, 2)):
                    api = f"Functional.f{a}.{call}.{direction}"
                    construct[api] = name if rng.random() < 0.8 else None
    _write(folder, construct, [n for n in construct if "forward" in n], list(construct))


@pytest.mark.parametrize("seed", range(150))
@pytest.mark.parametrize("make", [_dump, _model_dump], ids=["names", "models"])
def test_generated_dumps(make: Any, seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make(tmp_path / "d", seed)
    assert _built(tmp_path / "d", True, monkeypatch) == _built(tmp_path / "d", False, monkeypatch)
