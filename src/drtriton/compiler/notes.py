"""Shape notes: what a translation is specialised to, written as reasoning before its code.

The compiler's kernels bake every shape into sizes, strides and grids. A policy trained on its
answers must read those shapes off the program (``get_inputs`` and each op) before it writes a
number; the notes spell them out in graph order, so each constant in the code follows a line that
states where it comes from:

    x0: float32[64, 32, 2, 1], 4096 elements
    x1: float32[32, 2, 1], 64 elements
    div = div(x0, x1): float32[64, 32, 2, 1], 4096 elements; x1 as [1, 32, 2, 1]
    sum_1 = sum(div, dim=-3, keepdim=False): float32[64, 2, 1], 128 elements
    returns sum_1

Each op's line carries its arguments (a reduction's ``dim``, a module's configuration) and, for
an op of several tensors, each lower-rank input right-aligned to the result's rank, as
broadcasting reads it: a small model copies those facts more reliably than it derives them (a
12.6M model's level-1 failures were mostly shapes and indices derived wrongly from ``dim``
arguments and broadcasts).
"""

from __future__ import annotations

import math

import torch
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
            lines.append(f"{node.name} = {_call(node, modules)}: {meta}{_aligned(node)}")
        elif node.op == "output":
            lines.append("returns " + ", ".join(a.name for a in node.all_input_nodes))
    return "\n".join(lines)


def _call(node: fx.Node, modules: dict) -> str:
    """``sum(x0, dim=-3, keepdim=False)``; a module as its one-line repr applied to its inputs,
    ``Conv2d(3, 16, kernel_size=(3, 3), stride=(1, 1))(x0)``."""
    if node.op == "call_module":
        module = modules[node.target]
        text = repr(module)
        head = text if "\n" not in text and len(text) <= _MAX_REPR else type(module).__name__
        return f"{head}({', '.join(a.name for a in node.all_input_nodes)})"
    name = f".{node.target}" if node.op == "call_method" else getattr(
        node.target, "__name__", str(node.target))
    parts = [_argument(a) for a in node.args]
    parts += [f"{key}={_argument(value)}" for key, value in node.kwargs.items()]
    return f"{name}({', '.join(parts)})"


_MAX_REPR = 120  # longer arguments (a large constant list) are elided: notes state shapes


def _argument(value) -> str:
    if isinstance(value, fx.Node):
        return value.name
    if isinstance(value, torch.device):  # the capture's device, not the candidate's
        return "device"
    if isinstance(value, list):
        text = "[" + ", ".join(_argument(v) for v in value) + "]"
    elif isinstance(value, tuple):
        text = "(" + ", ".join(_argument(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    else:
        text = repr(value).removeprefix("torch.")  # torch.float32 -> float32
    return text if len(text) <= _MAX_REPR else "..."


def _aligned(node: fx.Node) -> str:
    """``; x1 as [1, 32, 2, 1]`` for an op of several tensors: each input of lower rank than the
    result, padded with leading ones as broadcasting aligns it (when that matches the result)."""
    out = node.meta.get("tensor_meta")
    inputs = [(a.name, a.meta.get("tensor_meta")) for a in node.all_input_nodes]
    inputs = [(name, m) for name, m in inputs if isinstance(m, TensorMetadata)]
    if not isinstance(out, TensorMetadata) or len(inputs) < 2:
        return ""
    rank, notes = len(out.shape), []
    for name, meta in inputs:
        if 0 < len(meta.shape) < rank:
            padded = [1] * (rank - len(meta.shape)) + list(meta.shape)
            if all(p in (1, o) for p, o in zip(padded, out.shape, strict=True)):
                notes.append(f"{name} as {padded}")
    return "; " + ", ".join(notes) if notes else ""


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
