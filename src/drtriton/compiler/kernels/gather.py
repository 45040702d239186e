"""Gathers: each output element reads ``x`` at a position taken from an index tensor."""

from __future__ import annotations

from drtriton.compiler import ir
from drtriton.compiler.kernels.pointwise import POINTWISE_CONFIGS
from drtriton.compiler.kernels.writer import Kernel, Writer, finish_1d, next_pow2


def take_kernel(w: Writer, x: ir.Expr, dim: int, index: ir.Expr, out: str) -> Kernel:
    """One lane per output element: read its index, then ``x`` there (0 out of range, where
    PyTorch raises; nothing outside ``x`` is read)."""
    shape = index.shape
    n = ir.numel(shape)
    w.constexprs = ["BLOCK"]
    w.line("offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)")
    w.line("mask = offs < N")
    idx = w.delinearize("offs", shape)
    pos = w.ev(index, idx, "mask")
    inside = w.tmp(f"mask & ({pos} >= 0) & ({pos} < {x.shape[dim]})", "m")
    src = list(idx)
    src[dim] = pos
    picked = w.ev(x, src, inside)
    value = w.tmp(f"tl.where({inside}, {picked}, 0)", "v")  # masked lanes read 0 anyway
    w.store(out, "offs", value, "mask", shape)
    return finish_1d(w, n, "BLOCK", POINTWISE_CONFIGS, 2 * n, min(w.blocks.pointwise, next_pow2(n)))
