"""Static checks on candidate source: early, clear reasons. The run-time checks still decide.

Flags (``strict`` mode): ``torch.compile``; try/except whose handler falls back to PyTorch or to
another forward; a class deriving from the reference ``Model``; imports of the reference module.
A syntax error is a ``compile_error``. Returns ``None`` when nothing is found.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from drtriton.program import parse_python

_TORCH_ROOTS = {"torch", "F", "nn", "np", "numpy"}


@dataclass(frozen=True)
class StaticFinding:
    status: str  # compile_error | rejected
    reason: str


def check_source(source: str, mode: str = "strict") -> StaticFinding | None:
    try:
        tree = parse_python(source)
    except SyntaxError as exc:
        return StaticFinding("compile_error", f"syntax error: {exc.msg} (line {exc.lineno})")
    for node in ast.walk(tree):
        finding = _check_node(node, mode)
        if finding:
            return StaticFinding("rejected", f"static check: {finding}")
    return None


def _check_node(node: ast.AST, mode: str) -> str | None:
    if isinstance(node, ast.ClassDef):
        for base in node.bases:
            if _name(base) in ("Model", "reference.Model"):
                return f"class {node.name} subclasses the reference Model"
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        modules = (
            [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
        )
        if any("reference" in m.split(".")[-1] for m in modules):
            return "imports the reference program"
    if mode != "strict":
        return None
    if isinstance(node, ast.Attribute) and _name(node) in (
        "torch.compile",
        "torch._dynamo.optimize",
    ):
        return f"uses {_name(node)}"
    if isinstance(node, ast.Try):
        for handler in node.handlers:
            fallback = _pytorch_call(handler)
            if fallback:
                return f"try/except falls back to {fallback} (line {handler.lineno})"
    return None


def _pytorch_call(handler: ast.ExceptHandler) -> str | None:
    for sub in ast.walk(handler):
        if isinstance(sub, ast.Call):
            name = _name(sub.func)
            if name.split(".")[0] in _TORCH_ROOTS or name.endswith(".forward"):
                return name
    return None


def _name(node: ast.AST) -> str:
    """Dotted name of an expression like ``torch.nn.functional.relu``; '' otherwise."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _name(node.value)
        return f"{inner}.{node.attr}" if inner else node.attr
    if isinstance(node, ast.Call):
        return _name(node.func) + "()"
    return ""
