"""Layer mapping ``-lm`` (compare.md §3.6): layer names from the model code, mapped through construct.json.

Every entry gets a place in its side's layer tree:

- a Cell/Module entry sits at its own path (``Cell.layers.0.dense1.Dense.forward.0`` -> ``layers/0/dense1``);
- an API entry sits under the path of its parent module in construct.json (its forward twin's parent for
  a backward entry), named by its function (``MintFunctional.linear.0.forward`` -> ``linear``).

The target's paths are rewritten child by child with the yaml ``{LayerClass: {target child: golden child}}``
(the class of each parent comes from the construct.json chain; ``Cell`` means the top level), then the
n-th target item of a (place, direction) pairs with the n-th golden item there. Rows pair by their
suffix inside paired entries; every other target row maps to ``N/A``. The result is a data mapping
(``-dm``), also written as ``data_mapping_{timestamp}.yaml``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from msprobe_dask.errors import ConfigError
from msprobe_dask.match.mapfile import load_yaml, warn, warn_unused

NA = "N/A"
TOP = "TopLayer"
_MODULE_PREFIXES = ("Cell", "Module")
_DIRECTIONS = ("forward", "backward")

LayerTable = Mapping[str, Mapping[str, str]]


def load_layer_yaml(path: str | Path | None) -> dict[str, dict[str, str]]:
    """``{LayerClass: {target child: golden child}}``; ``Cell`` as a class means the top level."""
    if path is None:
        return {}
    doc = load_yaml(path)
    if doc is None:
        warn(f"{path}: empty layer mapping file; only layers of the same name are paired")
        return {}
    if not isinstance(doc, dict):
        raise ConfigError(
            path, f"a layer mapping file must be a yaml mapping of layer classes, found {doc!r}"
        )
    table: dict[str, dict[str, str]] = {}
    for cls, children in doc.items():
        if not isinstance(children, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in children.items()
        ):
            raise ConfigError(path, f"layer class {cls!r} must map child names to child names")
        table[TOP if cls == "Cell" else str(cls)] = dict(children)
    return table


def _module_parts(entry: str) -> tuple[tuple[str, ...], str] | None:
    """(path, class) of a Cell/Module entry, None for anything else."""
    parts = entry.split(".")
    if parts[0] in _MODULE_PREFIXES and len(parts) >= 4 and parts[-2] in _DIRECTIONS:
        return tuple(parts[1:-3]), parts[-3]
    if parts[0] in _MODULE_PREFIXES and "parameters_grad" in parts[-2:]:
        cut = parts.index("parameters_grad")
        return tuple(parts[1 : cut - 1]), parts[cut - 1]
    return None


def _direction(entry: str) -> str:
    parts = entry.split(".")
    for part in reversed(parts[-2:]):
        if part in _DIRECTIONS or part == "parameters_grad":
            return part
    return ""


class _Places:
    """Where each entry of one side sits in the layer tree, with the target's names rewritten."""

    def __init__(self, parents: Mapping[str, str | None], table: LayerTable) -> None:
        self.parents = parents
        self.table = table
        self.paths: dict[str, tuple[str, ...]] = {}
        self.used: set[tuple[str, str]] = set()

    def module_path(self, entry: str) -> tuple[str, ...]:
        """The (rewritten) path of a module entry, resolved from the top of its construct chain down."""
        chain: list[str] = []
        node: str | None = entry
        while node is not None and node not in self.paths and node not in chain and _module_parts(node):
            chain.append(node)
            node = self.parents.get(node)
        for name in reversed(chain):
            parent = self.parents.get(name)
            parent_parts = _module_parts(parent) if parent else None
            own_path, _ = _module_parts(name)  # type: ignore[misc]
            if parent is not None and parent in self.paths and parent_parts is not None:
                raw_parent, cls = parent_parts
                rel = own_path[len(raw_parent) :] if own_path[: len(raw_parent)] == raw_parent else own_path
                self.paths[name] = self.paths[parent] + self._rename(cls, rel)
            else:
                self.paths[name] = self._rename(TOP, own_path)
        parts = _module_parts(entry)
        return self.paths.get(entry, parts[0] if parts is not None else ())

    def _rename(self, cls: str, rel: tuple[str, ...]) -> tuple[str, ...]:
        children = self.table.get(cls)
        if not children or not rel:
            return rel
        whole = ".".join(rel)
        if whole in children:
            self.used.add((cls, whole))
            return tuple(children[whole].split("."))
        if rel[0] in children:
            self.used.add((cls, rel[0]))
            return tuple(children[rel[0]].split(".")) + rel[1:]
        return rel

    def place(self, entry: str) -> tuple[Any, ...] | None:
        if _module_parts(entry) is not None:
            return ("module", self.module_path(entry))
        parts = entry.split(".")
        if len(parts) < 3:
            return None
        twin = entry[: -len("backward")] + "forward" if parts[-1] == "backward" else entry
        parent = self.parents.get(twin) or self.parents.get(entry)
        scope = self.module_path(parent) if parent and _module_parts(parent) else (TOP,)
        return ("api", scope, parts[-3])


def entry_pairs(
    npu_entries: Sequence[str],
    npu_parents: Mapping[str, str | None],
    bench_entries: Sequence[str],
    bench_parents: Mapping[str, str | None],
    table: LayerTable,
    path: str | Path | None = None,
) -> dict[str, str]:
    """Target entry -> golden entry, for every target entry that has a partner."""
    bench_places = _Places(bench_parents, {})
    slots: dict[tuple[Any, ...], str] = {}
    counts: dict[tuple[Any, ...], int] = defaultdict(int)
    for entry in bench_entries:
        place = bench_places.place(entry)
        if place is None:
            continue
        key = (place, _direction(entry))
        slots[(*key, counts[key])] = entry
        counts[key] += 1
    npu_places = _Places(npu_parents, table)
    counts.clear()
    pairs: dict[str, str] = {}
    for entry in npu_entries:
        place = npu_places.place(entry)
        if place is None:
            continue
        key = (place, _direction(entry))
        partner = slots.get((*key, counts[key]))
        counts[key] += 1
        if partner is not None:
            pairs[entry] = partner
    unused = [
        f"{cls}.{child}"
        for cls, children in table.items()
        for child in children
        if (cls, child) not in npu_places.used
    ]
    warn_unused(path, "layer mapping", unused, "the target's layers")
    return pairs


def row_mapping(
    npu_rows: Iterable[tuple[str, str]], bench_rows: Iterable[tuple[str, str]], pairs: Mapping[str, str]
) -> dict[str, str]:
    """Target row name -> golden row name (``N/A`` when unpaired), in target row order."""
    by_entry: dict[str, dict[str, str]] = defaultdict(dict)
    for name, entry in bench_rows:
        by_entry[entry].setdefault(name[len(entry) :] if name.startswith(entry) else name, name)
    mapping: dict[str, str] = {}
    for name, entry in npu_rows:
        partner = pairs.get(entry)
        suffix = name[len(entry) :] if name.startswith(entry) else None
        found = by_entry[partner].get(suffix) if partner is not None and suffix is not None else None
        mapping[name] = found if found is not None else NA
    return mapping


def layer_row_mapping(
    npu: Any, bench: Any, table: LayerTable, path: str | Path | None = None
) -> dict[str, str]:
    """The data mapping ``-lm`` produces for two parsed sides (``pipeline.sides.Side``)."""
    from msprobe_dask.dump.dumpjson import load_construct

    if not (npu.source.construct_json.is_file() and bench.source.construct_json.is_file()):
        warn("construct.json not found beside both dumps; -lm pairs rows by their own names")
        return {}
    pairs = entry_pairs(
        list(dict.fromkeys(r.entry for r in npu.rows)),
        load_construct(npu.source.construct_json),
        list(dict.fromkeys(r.entry for r in bench.rows)),
        load_construct(bench.source.construct_json),
        table,
        path,
    )
    return row_mapping(((r.name, r.entry) for r in npu.rows), ((r.name, r.entry) for r in bench.rows), pairs)


def write_data_mapping(mapping: Mapping[str, str], out: Path, stamp: str) -> Path:
    """``data_mapping_{stamp}.yaml`` in the output folder, as the reference writes it for ``-lm``."""
    import yaml

    from msprobe_dask.writers.atomic import atomic_path

    final = out / f"data_mapping_{stamp}.yaml"
    with atomic_path(final) as tmp, open(tmp, "w", encoding="utf-8") as f:
        yaml.safe_dump(dict(mapping), f, sort_keys=False, allow_unicode=True, width=1 << 20)
    return final


def write_layer_mapping_files(
    target: str | Path, golden: str | Path, layer_mapping: bool | str | Path | None, out: Path, stamp: str
) -> list[Path]:
    """For ``-lm``: recompute the row mapping of each (target, golden) dump pair and write it beside the
    compare results (``data_mapping_{stamp}.yaml``; one per rank folder, named after it, for folders)."""
    from msprobe_dask.dump.layouts import open_dump
    from msprobe_dask.pipeline.sides import parse_side

    if not layer_mapping:
        return []
    path = layer_mapping if isinstance(layer_mapping, (str, Path)) else None
    table = load_layer_yaml(path)
    npu_tree, bench_tree = open_dump(target), open_dump(golden)
    bench_by_key = {s.key: s for s in bench_tree.sources}
    written = []
    for npu_src in npu_tree.sources:
        bench_src = bench_by_key.get(npu_src.key)
        if bench_src is None:
            continue
        npu, bench = parse_side(npu_src, False), parse_side(bench_src, False)
        if npu.framework == "pytorch":
            continue
        mapping = layer_row_mapping(npu, bench, table)
        label = npu_src.output_label.replace("/", "_")
        written.append(write_data_mapping(mapping, out, f"{label}_{stamp}" if label else stamp))
    return written
