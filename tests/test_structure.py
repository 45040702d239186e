"""The package's layers point one way: no import cycle between the top-level packages and modules
of ``src/drtriton``. Every ``import`` counts, function-local ones included: a cycle closed only by
an import inside a function is still a cycle between layers."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "drtriton"
ROOT = "drtriton"

# (importing unit, imported unit) -> where: "path:line" of the first such import
Graph = dict[tuple[str, str], str]

# The layers, top to bottom, as the package docstring lists them: a unit imports units of its own
# layer or of layers below it, never above; within a layer, the acyclic graph orders the units.
LAYERS = (
    ("cli", "commands"),  # the commands
    ("search", "bench", "train"),  # what the commands run
    ("policy", "prompts"),  # program in, candidate sources out; the one prompt format
    ("judge", "compiler", "synth"),  # verification, translation, synthesis
    # shared helpers
    ("ops", "program", "devices", "gpu_gate", "stats", "scratch", "provenance", ROOT),
)


def module_name(path: Path) -> str:
    """The dotted name of a source file under ``PACKAGE`` (a package's ``__init__`` is the
    package itself)."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def unit(module: str) -> str | None:
    """The top-level subpackage or module of ``drtriton`` that a dotted name belongs to (the
    root package itself for ``drtriton``); None outside the package."""
    parts = module.split(".")
    if parts[0] != ROOT:
        return None
    return parts[1] if len(parts) > 1 else ROOT


def _is_submodule(dotted: str) -> bool:
    relative = Path(*dotted.split(".")[1:])
    return (PACKAGE / relative).is_dir() or (PACKAGE / relative).with_suffix(".py").is_file()


def imported_modules(path: Path) -> Iterator[tuple[str, int]]:
    """Every module ``path`` imports anywhere in its body, relative imports resolved, with the
    line; ``from P import name`` names the submodule ``P.name`` where there is one."""
    module = module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                full = f"{base}.{alias.name}"
                yield (full if unit(full) and _is_submodule(full) else base), node.lineno


def units() -> set[str]:
    """Every top-level subpackage and module of ``drtriton``, and the root package itself."""
    return {unit(module_name(path)) for path in PACKAGE.rglob("*.py")}


def import_graph() -> Graph:
    """Edges between units of ``drtriton``, each with the first import that makes it."""
    edges: Graph = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        source = unit(module_name(path))
        for target_module, line in imported_modules(path):
            target = unit(target_module)
            if target is not None and target != source:
                where = f"{path.relative_to(PACKAGE.parents[1])}:{line}"
                edges.setdefault((source, target), where)
    return edges


def elementary_cycles(edges: Graph) -> list[list[str]]:
    """Every cycle of the graph once, from its alphabetically first unit back to it (the graph
    has a dozen units: a plain depth-first walk is enough)."""
    successors: dict[str, list[str]] = {}
    for a, b in sorted(edges):
        successors.setdefault(a, []).append(b)
    found: list[list[str]] = []

    def extend(path: list[str]) -> None:
        for w in successors.get(path[-1], []):
            if w == path[0]:
                found.append([*path, w])
            elif w > path[0] and w not in path:
                extend([*path, w])

    for start in sorted(successors):
        extend([start])
    return found


def describe(edges: Graph, cycle: list[str]) -> str:
    """A cycle, with the import that makes each hop."""
    hops = [f"  {a} -> {b} ({edges[(a, b)]})" for a, b in zip(cycle, cycle[1:], strict=False)]
    return " -> ".join(cycle) + "\n" + "\n".join(hops)


def test_the_graph_sees_function_local_and_relative_imports():
    edges = import_graph()
    assert ("policy", "compiler") in edges  # policy.py imports the compiler only inside functions
    assert ("bench", "judge") in edges


def test_cycles_are_found_once_each():
    edges = {("a", "b"): "", ("b", "a"): "", ("b", "c"): "", ("c", "a"): "", ("c", "d"): ""}
    assert elementary_cycles(edges) == [["a", "b", "a"], ["a", "b", "c", "a"]]


def test_no_import_cycle_between_top_level_units():
    edges = import_graph()
    cycles = elementary_cycles(edges)
    assert not cycles, "import cycles between units of drtriton:\n" + "\n".join(
        describe(edges, cycle) for cycle in cycles
    )


def test_every_import_points_down_the_layers():
    depth = {name: level for level, names in enumerate(LAYERS) for name in names}
    unplaced = sorted(units() - set(depth))
    assert not unplaced, f"units in no layer (place them in LAYERS and the docstring): {unplaced}"
    edges = import_graph()
    upward = [f"  {a} -> {b} ({where})" for (a, b), where in sorted(edges.items())
              if depth[a] > depth[b]]
    assert not upward, "imports of a higher layer:\n" + "\n".join(upward)


def test_the_search_engine_imports_neither_policy_nor_compiler():
    """Search takes its candidate generators as arguments: the caller chooses the policies."""
    edges = import_graph()
    assert ("search", "policy") not in edges and ("search", "prompts") not in edges
    engine = PACKAGE / "search" / "engine.py"
    imported = {name for name, _ in imported_modules(engine)}
    assert not [name for name in imported if name.startswith("drtriton.compiler")]


def test_the_package_docstring_names_every_unit_with_its_layer():
    doc = ast.get_docstring(ast.parse((PACKAGE / "__init__.py").read_text())) or ""
    missing = sorted(u for u in units() - {ROOT} if f"``{u}``" not in doc)
    assert not missing, f"the package docstring does not list {missing}"
