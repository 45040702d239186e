"""Composing verified fragments: the least-cost cover of the program, chained in one ModelNew."""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass

from drtriton.judge import Verdict
from drtriton.program import parse_python
from drtriton.search.fragments import Fragment, Traced, least_cost_cover


@dataclass(frozen=True)
class Choice:
    """A verified candidate for one fragment."""

    fragment: Fragment
    candidate: str
    verdict: Verdict

    @property
    def cost(self) -> float:
        return verdict_cost(self.verdict)


def verdict_cost(verdict: Verdict) -> float:
    """Milliseconds where timed; with no timing (CPU) every piece costs 1, so fewer, larger
    fragments win and a whole-program candidate ties with any single fragment."""
    return verdict.runtime_ms if verdict.runtime_ms is not None else 1.0


def _rename_apart(candidate: str, prefix: str) -> tuple[list[str], str]:
    """Prefix every top-level name a candidate defines; return (its imports, the rest)."""
    tree = parse_python(candidate)
    imports = [ast.unparse(s) for s in tree.body if isinstance(s, ast.Import | ast.ImportFrom)]
    body = [s for s in tree.body if not isinstance(s, ast.Import | ast.ImportFrom)]
    defined: set[str] = set()
    for stmt in body:
        if isinstance(stmt, ast.FunctionDef | ast.ClassDef):
            defined.add(stmt.name)
        elif isinstance(stmt, ast.Assign | ast.AnnAssign):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            defined.update(t.id for t in targets if isinstance(t, ast.Name))

    class Renamer(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.Name:
            if node.id in defined:
                node.id = prefix + node.id
            return node

        def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.FunctionDef:
            self.generic_visit(node)
            if node.name in defined:
                node.name = prefix + node.name
            return node

        def visit_ClassDef(self, node: ast.ClassDef) -> ast.ClassDef:
            self.generic_visit(node)
            if node.name in defined:
                node.name = prefix + node.name
            return node

    module = Renamer().visit(ast.Module(body=body, type_ignores=[]))
    return imports, ast.unparse(module)


def compose(traced: Traced, choices: Sequence[Choice]) -> str:
    """One candidate program chaining the chosen fragment candidates in order."""
    imports: list[str] = ["import torch", "import torch.nn as nn"]
    parts: list[str] = []
    lines = []
    for k, choice in enumerate(choices):
        frag_imports, body = _rename_apart(choice.candidate, f"_f{k}_")
        imports += [i for i in frag_imports if i not in imports]
        nodes = f"{choice.fragment.start}..{choice.fragment.stop - 1}"
        parts.append(f"# ---- fragment {k}: nodes {nodes}\n{body}")
        outs = ", ".join(choice.fragment.outputs)  # a tuple-returning fragment unpacks
        lines.append(f"        {outs} = self.f{k}({', '.join(choice.fragment.inputs)})")
    result = [n for n in traced.graph.nodes if n.op == "output"][0].args[0]
    ret = ", ".join(n.name for n in result) if isinstance(result, tuple | list) else result.name
    init = _constructor_lines(traced, len(choices))
    if traced.constructor is not None:
        parts.insert(0, _SHARE_PARAMETERS)
    params = ", ".join(p.name for p in traced.placeholders)
    model = (
        "class ModelNew(nn.Module):\n"
        '    """Composition of verified fragment candidates (drtriton fragment search)."""\n\n'
        "    def __init__(self, *init_inputs):\n"
        f"        super().__init__()\n{init}\n\n"
        f"    def forward(self, {params}):\n" + "\n".join(lines) + f"\n        return {ret}\n"
    )
    return "\n".join(imports) + "\n\n\n" + "\n\n\n".join(parts) + "\n\n\n" + model


def _constructor_lines(traced: Traced, count: int) -> str:
    """``ModelNew.__init__``'s body. Fragments of a program with parameters are built by the
    program's constructor, each from the same random state, so each holds the program's seeded
    values (as the whole program's candidate would); then they share the first one's tensors."""
    if traced.constructor is None:
        return "\n".join(f"        self.f{k} = _f{k}_ModelNew()" for k in range(count))
    lines = ["        rng = torch.get_rng_state()"]
    for k in range(count):
        lines += [
            "        torch.set_rng_state(rng)",
            f"        self.f{k} = _f{k}_ModelNew(*init_inputs)",
        ]
        if k:
            lines.append(f"        _share_parameters(self.f0, self.f{k})")
    return "\n".join(lines)


# Emitted into a composition with parameters: one copy of each tensor (a level-5 program held a
# 900 MB convolution weight), where two fragments name it alike.
_SHARE_PARAMETERS = '''def _share_parameters(first, other):
    """Point other's parameters and buffers at first's where names and shapes agree."""
    mine = {**dict(first.named_parameters()), **dict(first.named_buffers())}
    for name, tensor in [*other.named_parameters(), *other.named_buffers()]:
        source = mine.get(name)
        if source is None:
            continue
        same_kind = isinstance(source, nn.Parameter) == isinstance(tensor, nn.Parameter)
        if same_kind and source.shape == tensor.shape and source.dtype == tensor.dtype:
            owner, _, leaf = name.rpartition(".")
            setattr(other.get_submodule(owner), leaf, source)'''


def best_cover(n: int, choices: dict[tuple[int, int], Choice]) -> list[Choice] | None:
    """Least-cost cover of nodes [0, n) by verified fragments (ties: fewer fragments)."""
    cover = least_cost_cover(n, {key: choice.cost for key, choice in choices.items()})
    return [choices[key] for key in cover] if cover is not None else None
