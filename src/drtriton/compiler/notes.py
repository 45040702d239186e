"""Shape notes: what a translation is specialised to, written as reasoning before its code.

The compiler's kernels bake every shape into sizes, strides and grids. A policy trained on its
answers must read those shapes off the program (``get_inputs`` and each op) before it writes a
number; the notes spell them out in graph order, so each constant in the code follows a line that
states where it comes from:

    x0: float32[64, 32, 2, 1]
    x1: float32[32, 2, 1]
    t0 = div(x0, x1): float32[64, 32, 2, 1], 4096 elements
    returns t0
"""

from __future__ import annotations

import math

from torch import fx
from torch.fx.passes.shape_prop import TensorMetadata

from drtriton.compiler.capture import Captured


def shape_notes(captured: Captured) -> str:
    """One line per input, per op (its result's dtype, shape and size) and for the outputs."""
    lines = []
    modules = dict(captured.gm.named_modules())
    for node in captured.gm.graph.nodes:
        meta = _described(node.meta.get("tensor_meta"))
        if node.op == "placeholder":
            lines.append(f"{node.name}: {meta}")
        elif node.op in ("call_function", "call_method", "call_module"):
            arguments = ", ".join(a.name for a in node.all_input_nodes)
            lines.append(f"{node.name} = {_op_name(node, modules)}({arguments}): {meta}")
        elif node.op == "output":
            lines.append("returns " + ", ".join(a.name for a in node.all_input_nodes))
    return "\n".join(lines)


def _op_name(node: fx.Node, modules: dict) -> str:
    if node.op == "call_module":
        return type(modules[node.target]).__name__
    if node.op == "call_method":
        return f".{node.target}"
    return getattr(node.target, "__name__", str(node.target))


def _described(meta) -> str:
    """``float32[64, 32], 2048 elements`` (size only past one element); tuples element-wise."""
    if isinstance(meta, TensorMetadata):
        shape = list(meta.shape)
        dtype = str(meta.dtype).removeprefix("torch.")
        size = math.prod(shape)
        return f"{dtype}{shape}" + (f", {size} elements" if size > 1 else "")
    if isinstance(meta, (tuple, list)):
        return "(" + "; ".join(_described(m) for m in meta) + ")"
    return "not a tensor"
