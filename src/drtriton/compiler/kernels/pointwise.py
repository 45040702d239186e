"""Elementwise kernels: one fused expression over a flat range of output elements."""

from __future__ import annotations

from drtriton.compiler import ir
from drtriton.compiler.kernels.writer import Kernel, Writer, finish_1d, next_pow2

POINTWISE_CONFIGS = [(256, 2), (1024, 4), (4096, 8)]


def pointwise(w: Writer, expr: ir.Expr, out: str) -> Kernel:
    n = ir.numel(expr.shape)
    w.constexprs = ["BLOCK"]
    w.line("offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)")
    w.line("mask = offs < N")
    idx = w.delinearize("offs", expr.shape)
    v = w.ev(expr, idx, "mask")
    w.store(out, "offs", v, "mask", expr.shape)
    return finish_1d(w, n, "BLOCK", POINTWISE_CONFIGS, n, min(w.blocks.pointwise, next_pow2(n)))
