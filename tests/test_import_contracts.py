"""Import contracts of the package (run by `make lint` and by the test suite).

Every ``import`` of the package is read with ``ast``, those inside function bodies included, and three
rules are checked:

1. No cycle between modules.
2. Imports point down the layers (``LAYERS``): foundation -> dump -> match -> metrics -> judge ->
   table (the compare table model) -> graph / analysis (consumers of the rows) -> writers -> the
   commands (CLI, pipeline, and the drivers of graph and analysis) on top.
   Within one layer, a package imports none of its siblings.
3. No private name (``_x``) is imported from another module, nor read from one it imports
   (``module._x``).

Today's violations are listed in ``ALLOWED``, each with why it is there and what removes it; any other
violation fails. An entry that no longer matches a violation fails too, so the list only shrinks.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "msprobe_dask"

# (module prefix, layer); the longest matching prefix places a module. Lower layers import nothing above.
LAYERS: list[tuple[str, int]] = [
    # what every layer may use: errors, column names, the C-extension switch, atomic output files,
    # the run's child processes
    ("msprobe_dask.errors", 0),
    ("msprobe_dask.columns", 0),
    ("msprobe_dask.native", 0),
    ("msprobe_dask.cli_args", 0),  # the arguments every command shares (argparse only)
    ("msprobe_dask.writers.atomic", 0),
    # the rows' wire format between graph_visualize's chunk tasks and the vis.db writer (with the SQLite
    # binding that inserts it): graph/ packs, writers/visdb.py inserts; it imports only native
    ("msprobe_dask.writers.packed_rows", 0),
    ("msprobe_dask.processes", 0),  # the child processes a run started, stopped when it is
    ("msprobe_dask.msprobe_log", 0),  # lines in msprobe's log format (-progress_log, -tensor_log)
    ("msprobe_dask.dump", 1),
    ("msprobe_dask.match", 2),
    ("msprobe_dask.metrics", 3),
    ("msprobe_dask.judge", 4),
    ("msprobe_dask.table", 5),  # the compare table model: matched row pairs -> judged rows (CompareTable)
    # the end-of-run summary's records and rules: graph_visualize's chunk tasks summarise their rows
    ("msprobe_dask.summary", 5),
    # the first-divergence rules over compare rows: compare's summary and graph_visualize's chunk tasks
    ("msprobe_dask.analysis", 5),
    ("msprobe_dask.analysis.records", 6),  # -da's first-diff records (of the compare table)
    ("msprobe_dask.graph", 6),
    ("msprobe_dask.writers", 7),
    ("msprobe_dask.summary.divergence", 7),  # the first divergence of a compare, by analysis/
    ("msprobe_dask.summary.first_divergence", 7),  # the summary of analysis/'s answer
    # the commands and their drivers
    ("msprobe_dask.pipeline", 8),
    ("msprobe_dask.graph.api", 8),
    # graph.api's rank plan, vis.db write chain and run setup (they use the writers and the scheduler)
    ("msprobe_dask.graph.rank_plan", 8),
    ("msprobe_dask.graph.merge.plan", 8),  # a merge's plan, its vis.db written by its write chain
    ("msprobe_dask.graph.write_chain", 8),
    ("msprobe_dask.graph.run_setup", 8),
    ("msprobe_dask.graph.cli", 8),
    ("msprobe_dask.analysis.cli", 8),
    ("msprobe_dask.cli", 8),
    ("msprobe_dask.view_cli", 8),
    ("msprobe_dask", 8),  # the package's __init__: msprobe_dask.compare / .graph, the API on first use
    ("msprobe_dask.api", 8),
    ("msprobe_dask.report", 8),  # the HTML report of a run
    ("msprobe_dask.results", 8),  # the Python API's typed results: summaries, csv/xlsx of a finished run
    ("msprobe_dask.__main__", 8),
]

# (importer, imported) -> why it is allowed today. Rule 3's entries name the private name too.
ALLOWED: dict[tuple[str, str], str] = {}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    found = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
    return {name: path for name, path in found.items() if name != "msprobe_dask"}  # the package itself


def imports(name: str, path: Path, known: set[str]) -> Iterator[tuple[str, str | None]]:
    """(imported module, imported name or None) for every import of the package in the file, and
    (module, name) for every private name read from a module it imports as a name (``mod._name``)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    bound: dict[str, str] = {}  # a name the file binds to a module of the package -> that module
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "msprobe_dask":
                    if alias.asname:
                        bound[alias.asname] = alias.name
                    yield alias.name, None
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            if base.split(".")[0] != "msprobe_dask":
                continue
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                if submodule in known:
                    bound[alias.asname or alias.name] = submodule
                yield (submodule, None) if submodule in known else (base, alias.name)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound:
            if node.attr.startswith("_") and not node.attr.startswith("__"):
                yield bound[node.value.id], node.attr


def layer(name: str) -> tuple[str, int]:
    places = [(p, n) for p, n in LAYERS if name == p or name.startswith(p + ".")]
    assert places, f"{name} has no layer: add it to LAYERS in tests/test_import_contracts.py"
    return max(places, key=lambda item: len(item[0]))


def _top_package(name: str) -> str:
    return ".".join(name.split(".")[:2])


def violations() -> dict[tuple[str, str], str]:
    """(importer, imported[:name]) -> which rule it breaks (cycles are found on what remains)."""
    known = modules()
    found: dict[tuple[str, str], str] = {}
    edges: dict[str, set[str]] = {name: set() for name in known}
    for name, path in known.items():
        for target, imported in imports(name, path, set(known)):
            if target == name:
                continue
            edges[name].add(target)
            if imported is not None and imported.startswith("_") and not imported.startswith("__"):
                found[(name, f"{target}:{imported}")] = "imports a private name from another module"
            (_, mine), (_, theirs) = layer(name), layer(target)
            if theirs > mine:
                found[(name, target)] = f"imports upward (layer {mine} -> {theirs})"
            elif theirs == mine and mine > 0 and _top_package(name) != _top_package(target):
                if mine != layer("msprobe_dask.cli")[1]:
                    found[(name, target)] = f"imports a sibling package in layer {mine}"
    for cycle in _cycles(edges):
        for a in cycle:
            for b in sorted(edges[a] & set(cycle)):
                found.setdefault((a, b), f"is part of an import cycle among {', '.join(cycle)}")
    return found


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan): the modules of each cycle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return components


def test_imports_follow_the_contracts() -> None:
    found = violations()
    new = [f"{a} -> {b}: {why}" for (a, b), why in sorted(found.items()) if (a, b) not in ALLOWED]
    stale = [f"{a} -> {b}" for a, b in ALLOWED if (a, b) not in found]
    assert not new, "import contract broken (tests/test_import_contracts.py):\n" + "\n".join(new)
    assert not stale, "fixed, remove from ALLOWED in tests/test_import_contracts.py:\n" + "\n".join(stale)


def test_the_check_sees_a_cycle_an_upward_import_and_a_private_name() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(edges) == [["a", "b", "c"]]
    assert layer("msprobe_dask.dump.rows")[1] < layer("msprobe_dask.writers.visdb")[1]
    assert layer("msprobe_dask.writers.atomic")[1] == 0
    assert layer("msprobe_dask.graph.api")[1] > layer("msprobe_dask.graph.chunks")[1]


def test_the_check_sees_a_private_name_read_from_an_imported_module(tmp_path: Path) -> None:
    source = tmp_path / "user.py"
    source.write_text(
        "from msprobe_dask.writers import atomic\n"
        "import msprobe_dask.writers.visdb as visdb\n"
        "atomic._umask()\nvisdb.write\n",
        encoding="utf-8",
    )
    known = set(modules())
    found = list(imports("msprobe_dask.user", source, known))
    assert ("msprobe_dask.writers.atomic", "_umask") in found
    assert not [(m, n) for m, n in found if n is not None and m == "msprobe_dask.writers.visdb"]
