"""Write a deep transformer-like dump pair by tiling tests/data/transformer_big (24 blocks) N times.

    python workflows/gen_transformer.py OUT [--copies 4]

OUT/target and OUT/golden each get dump.json and stack.json (and construct.json) as msProbe writes them:
copy c renames block ``h.{i}`` to ``h.{i + 24 c}``, adds c times the op's call count to every API's
call number (``Functional.linear.37.forward``) and counts calls of the modules outside the blocks
(``Module.wte.Embedding.forward.{c}``). 4 copies: 96 blocks, 7,728 entries per side.
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

SOURCE = Path(__file__).resolve().parent.parent / "tests" / "data" / "transformer_big"
BLOCKS = 24
_BLOCK = re.compile(r"\.h\.(\d+)\.")
_API = re.compile(r"^(.*)\.(\d+)\.(forward|backward)$")
_MODULE = re.compile(r"^(.*)\.(forward|backward)\.(\d+)$")


def _renamer(names: list[str], copy: int) -> dict[str, str]:
    """Each entry name of the source dump as copy ``copy`` names it."""
    counts = Counter(m.group(1) for m in map(_API.match, names) if m)
    renamed = {}
    for name in names:
        new = _BLOCK.sub(lambda m: f".h.{int(m.group(1)) + BLOCKS * copy}.", name)
        api, module = _API.match(new), _MODULE.match(new)
        if api:
            new = f"{api.group(1)}.{int(api.group(2)) + copy * counts[api.group(1)]}.{api.group(3)}"
        elif module and new == name:  # a module outside the blocks: called once more per copy
            new = f"{module.group(1)}.{module.group(2)}.{int(module.group(3)) + copy}"
        renamed[name] = new
    return renamed


def tile(side: Path, out: Path, copies: int) -> int:
    dump = json.loads((side / "dump.json").read_text())
    stack = json.loads((side / "stack.json").read_text())
    construct = json.loads((side / "construct.json").read_text())
    names = list(dump["data"])
    data: dict[str, Any] = {}
    stacks: dict[str, list[Any]] = {}
    parents: dict[str, Any] = {}
    for copy in range(copies):
        rename = _renamer(names, copy)
        for name in names:
            data[rename[name]] = dump["data"][name]
        for key, (entries, lines) in stack.items():
            stacks[f"{copy}.{key}"] = [[rename.get(e, e) for e in entries], lines]
        for child, parent in construct.items():
            parents[rename.get(child, child)] = rename.get(parent, parent) if parent else parent
    out.mkdir(parents=True, exist_ok=True)
    doc = {**{k: v for k, v in dump.items() if k != "data"}, "data": data}
    (out / "dump.json").write_text(json.dumps(doc, indent=1))
    numbered = {str(i): group for i, group in enumerate(stacks.values())}
    (out / "stack.json").write_text(json.dumps(numbered, indent=1))
    (out / "construct.json").write_text(json.dumps(parents, indent=1))
    return len(data)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--copies", type=int, default=4, help="copies of the 24 blocks (4: 96 blocks)")
    args = parser.parse_args()
    for side in ("target", "golden"):
        count = tile(SOURCE / side, args.out / side, args.copies)
        print(f"{args.out / side / 'dump.json'}: {count} entries")


if __name__ == "__main__":
    main()
