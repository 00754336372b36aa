"""Layer mapping ``-lm`` (compare.md §3.6): layer names from the model code, mapped through construct.json.

Every entry gets a place in its side's layer tree:

- a Cell/Module entry sits at its own path (``Cell.layers.0.dense1.Dense.forward.0`` -> ``layers/0/dense1``),
  a backward call where its forward call sits, a ``parameters_grad`` entry where its module's first forward
  call sits;
- an API entry sits under the path of its parent module in construct.json (its forward twin's parent for
  a backward entry), named by its function (``MintFunctional.linear.0.forward`` -> ``linear``);
- the ``layers.N`` of a ParallelTransformer count from the lowest N of that side (a pipeline stage's).

The target's paths are rewritten child by child with the yaml ``{LayerClass: {target child: golden child}}``
(the class of each parent comes from the construct.json chain; ``Cell`` means the top level), then the
n-th target item of a (place, direction) pairs with the n-th golden item there. The same entry pairs
serve graph_visualize ``-lm`` (``graph.mapping``) and compare ``-lm``, where rows pair by their suffix
inside paired entries, every other target row maps to ``N/A``, and the result is a data mapping (``-dm``),
also written as ``data_mapping_{timestamp}.yaml``.

Stack frames play no part. The reference also keys an API by the framework function that called it,
taken from stack.json by entry name: that finds nothing in the grouped stack.json msProbe writes now
(checked with graph_visualize), only in an old per-entry one, where its pairs can differ from ours.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from msprobe_dask.columns import NA
from msprobe_dask.dump.markers import PARAMETERS_GRAD
from msprobe_dask.errors import ConfigError
from msprobe_dask.match.mapfile import load_yaml, warn, warn_unused

TOP = "TopLayer"
PARALLEL_TRANSFORMER = "ParallelTransformer"
_MODULE_PREFIXES = ("Cell", "Module")
_DIRECTIONS = ("forward", "backward")
_GRAD_PART = "." + PARAMETERS_GRAD

LayerTable = Mapping[str, Mapping[str, str]]


def load_layer_yaml(path: str | Path | None, allow_empty: bool = True) -> dict[str, dict[str, str]]:
    """``{LayerClass: {target child: golden child}}``; ``Cell`` as a class means the top level.

    An empty file is an empty table for compare (with a warning); graph_visualize refuses it
    (``allow_empty=False``) because the reference treats it as a file that failed to parse."""
    if path is None:
        return {}
    doc = load_yaml(path)
    if doc is None:
        if not allow_empty:
            raise ConfigError(path, "the layer mapping file is empty")
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
    if parts[0] in _MODULE_PREFIXES and PARAMETERS_GRAD in parts[-2:]:
        cut = parts.index(PARAMETERS_GRAD)
        return tuple(parts[1 : cut - 1]), parts[cut - 1]
    return None


def _layer_index(rel: tuple[str, ...]) -> int | None:
    """N for a path relative to a ParallelTransformer that starts with ``layers.N``."""
    return int(rel[1]) if len(rel) > 1 and rel[0] == "layers" and rel[1].isdigit() else None


def _layer_bases(entries: Iterable[str]) -> dict[tuple[str, ...], int]:
    """Path of each ParallelTransformer among the entries -> its lowest ``layers.N`` index. A
    pipeline stage numbers its layers from where it starts (12 for stage 2 of 4, say); the layer
    tree counts them from 0 so that stages and whole models line up."""
    module_paths = [parts for parts in map(_module_parts, entries) if parts is not None]
    bases: dict[tuple[str, ...], int] = {}
    for container in {path for path, cls in module_paths if cls == PARALLEL_TRANSFORMER}:
        found = [
            _layer_index(path[len(container) :])
            for path, _ in module_paths
            if path[: len(container)] == container
        ]
        indices = [i for i in found if i is not None]
        if indices:
            bases[container] = min(indices)
    return bases


def _direction(entry: str) -> str:
    parts = entry.split(".")
    for part in reversed(parts[-2:]):
        if part in _DIRECTIONS or part == PARAMETERS_GRAD:
            return part
    return ""


class _Places:
    """Where each entry of one side sits in the layer tree, with the target's names rewritten."""

    def __init__(self, parents: Mapping[str, str | None], table: LayerTable, entries: Iterable[str]) -> None:
        self.parents = parents
        self.table = table
        self.paths: dict[str, tuple[str, ...]] = {}
        self.used: set[tuple[str, str]] = set()
        self.layer_bases = _layer_bases(entries)

    def module_path(self, entry: str) -> tuple[str, ...]:
        """The (rewritten) path of a module entry, resolved from the top of its construct chain down;
        a backward call sits where its forward call does."""
        twin = self._forward_twin(entry)
        if twin is not None and entry not in self.paths:
            self.paths[entry] = self.module_path(twin)
        chain: list[str] = []
        node: str | None = entry
        while node is not None and node not in self.paths and node not in chain and _module_parts(node):
            if self._forward_twin(node) is not None:
                self.module_path(node)
                break
            chain.append(node)
            node = self.parents.get(node)
        for name in reversed(chain):
            parent = self.parents.get(name)
            parent_parts = _module_parts(parent) if parent else None
            own_path = self._raw_path(name)
            if parent is not None and parent in self.paths and parent_parts is not None:
                raw_parent, cls = self._raw_path(parent), parent_parts[1]
                rel = own_path[len(raw_parent) :] if own_path[: len(raw_parent)] == raw_parent else own_path
                self.paths[name] = self.paths[parent] + self._rename(cls, rel)
            else:
                self.paths[name] = self._rename(TOP, own_path)
        return self.paths.get(entry) or self._raw_path(entry)

    def _raw_path(self, entry: str) -> tuple[str, ...]:
        """The module path in the entry's name, ParallelTransformer layers counted from 0."""
        parts = _module_parts(entry)
        if parts is None:
            return ()
        path = list(parts[0])
        for container, base in self.layer_bases.items():
            cut = len(container)
            index = _layer_index(parts[0][cut:]) if parts[0][:cut] == container else None
            if index is not None:
                path[cut + 1] = str(index - base)
        return tuple(path)

    def _forward_twin(self, entry: str) -> str | None:
        """``X.forward.N`` for a module entry ``X.backward.N`` when that forward call is known."""
        head, _, call = entry.rpartition(".backward.")
        if not head or not call.isdigit() or _module_parts(entry) is None:
            return None
        twin = f"{head}.forward.{call}"
        return twin if twin in self.parents else None

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

    def _grads_path(self, entry: str) -> tuple[str, ...] | None:
        """Where a ``parameters_grad`` entry sits: where its module's first forward call does, renamed
        ancestors included. None (no partner) when the yaml renames the module itself: the reference
        then pairs it with nothing, not even the renamed module's gradients."""
        twin = entry[: entry.index(_GRAD_PART)] + ".forward.0"
        if twin not in self.parents:
            return self.module_path(entry)
        path = self.module_path(twin)
        return path if path[-1:] == self._raw_path(entry)[-1:] else None

    def place(self, entry: str) -> tuple[Any, ...] | None:
        if _module_parts(entry) is not None:
            path = self._grads_path(entry) if _GRAD_PART in entry else self.module_path(entry)
            return ("module", path) if path is not None else None
        parts = entry.split(".")
        if len(parts) < 3:
            return None
        twin = entry[: -len("backward")] + "forward" if parts[-1] == "backward" else entry
        parent = self.parents.get(twin if twin in self.parents else entry)
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
    bench_places = _Places(bench_parents, {}, bench_entries)
    slots: dict[tuple[Any, ...], str] = {}
    counts: dict[tuple[Any, ...], int] = defaultdict(int)
    for entry in bench_entries:
        place = bench_places.place(entry)
        if place is None:
            continue
        key = (place, _direction(entry))
        slots[(*key, counts[key])] = entry
        counts[key] += 1
    npu_places = _Places(npu_parents, table, npu_entries)
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
    if path is not None:
        unused = [
            f"{cls}.{child}"
            for cls, children in table.items()
            for child in children
            if (cls, child) not in npu_places.used
        ]
        warn_unused(path, "layer mapping", unused, "the target's layers")
    return pairs


def construct_parents(path: Path) -> dict[str, str | None]:
    """construct.json as entry -> parent, also in the Megatron form ``{entry: [parent, micro step]}``."""
    from msprobe_dask.dump.dumpjson import load_construct

    return load_construct(path)[0]


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
    if not (npu.source.construct_json.is_file() and bench.source.construct_json.is_file()):
        warn("construct.json not found beside both dumps; -lm pairs rows by their own names")
        return {}
    pairs = entry_pairs(
        list(dict.fromkeys(r.entry for r in npu.rows)),
        construct_parents(npu.source.construct_json),
        list(dict.fromkeys(r.entry for r in bench.rows)),
        construct_parents(bench.source.construct_json),
        table,
        path,
    )
    return row_mapping(((r.name, r.entry) for r in npu.rows), ((r.name, r.entry) for r in bench.rows), pairs)
