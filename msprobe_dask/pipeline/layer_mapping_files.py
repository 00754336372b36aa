"""``-lm``'s ``data_mapping_{stamp}.yaml`` files: the row mapping of each (target, golden) dump pair,
recomputed from both parsed sides and written beside the compare results."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from msprobe_dask.dump.layouts import open_dump
from msprobe_dask.match.layer_mapping import layer_row_mapping, load_layer_yaml
from msprobe_dask.pipeline.sides import parse_side
from msprobe_dask.writers.atomic import atomic_path


def write_data_mapping(mapping: Mapping[str, str], out: Path, stamp: str) -> Path:
    """``data_mapping_{stamp}.yaml`` in the output folder, as the reference writes it for ``-lm``."""
    import yaml

    final = out / f"data_mapping_{stamp}.yaml"
    with atomic_path(final) as tmp, open(tmp, "w", encoding="utf-8") as f:
        yaml.safe_dump(dict(mapping), f, sort_keys=False, allow_unicode=True, width=1 << 20)
    return final


def write_layer_mapping_files(
    target: str | Path, golden: str | Path, layer_mapping: bool | str | Path | None, out: Path, stamp: str
) -> list[Path]:
    """For ``-lm``: recompute the row mapping of each (target, golden) dump pair and write it beside the
    compare results (``data_mapping_{stamp}.yaml``; one per rank folder, named after it, for folders)."""
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
