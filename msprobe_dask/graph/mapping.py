"""``-lm``: layer mapping between two graphs (graph_visualize.md §3.2, "Layer mapping").

Not implemented yet: the reference's scope-trie mapping (class chains, stack-derived API scopes,
yaml renames) is only summarised in the spec. Until it is, ``-lm`` matches nodes whose ids are equal,
without the ancestor check (what the reference itself does when it cannot build the mapping), and
says so on stderr. A yaml file is still read and validated.
"""

from __future__ import annotations

import sys
from pathlib import Path

from msprobe_dask.errors import ConfigError
from msprobe_dask.graph.model import Graph


def layer_mapping(npu: Graph, bench: Graph, spec: str | bool) -> dict[str, str]:
    if isinstance(spec, str):
        path = Path(spec)
        if not path.is_file():
            raise ConfigError(path, "layer mapping file does not exist")
        import yaml

        try:
            doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            raise ConfigError(path, f"is not valid yaml: {exc}") from None
        if doc is not None and not isinstance(doc, dict):
            raise ConfigError(path, "must map class names to {npu_layer: bench_layer}")
    print(
        "msprobe-dask: warning: -lm scope mapping is not implemented yet; matching equal node names only",
        file=sys.stderr,
    )
    return {}
