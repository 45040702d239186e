"""Attention as one kernel: ``softmax(q @ k^T * scale + mask) @ v`` with an online softmax
(flash attention), so the [Lq x Lk] scores never reach memory. Each program holds a [BM x D]
block of queries and walks the keys in [BN] steps, keeping the running row maximum, the running
sum of exponentials and the [BM x Dv] accumulator in registers; a causal program stops at its
last query's key. Products are ``tl.dot``: fp32 operands at ``Blocks.dot_precision``, 16-bit
ones in their dtype; the softmax is fp32 throughout."""

from __future__ import annotations

import torch

from drtriton.compiler import ir
from drtriton.compiler.kernels.writer import (
    HALF,
    TL_DTYPES,
    Kernel,
    Writer,
    fp32_dot,
    next_pow2,
    tune_config,
)

MAX_HEAD_DIM = 256  # q, k and v rows held in registers per program
MAX_BATCH = 65535  # grid axis 1 (CUDA's limit)
# (BM, BN, warps, stages): the Triton fused-attention tutorial's Hopper range
ATTENTION_TILES = ((64, 32, 4, 3), (64, 64, 4, 3), (128, 32, 8, 3), (128, 64, 8, 3))
CPU_TILE = 16


def fits(q: ir.Expr, k: ir.Expr, v: ir.Expr) -> bool:
    """Whether one kernel can hold the operands' rows (head dims up to MAX_HEAD_DIM, batches
    within the grid)."""
    batch = q.shape[:-2]
    return (max(q.shape[-1], v.shape[-1]) <= MAX_HEAD_DIM and ir.numel(tuple(batch)) <= MAX_BATCH
            and len(k.shape) == len(q.shape) == len(v.shape))


def _operand(w: Writer, e: ir.Expr, idx: list[str], mask: str, dtype: torch.dtype) -> str:
    """A tile of ``e`` for ``tl.dot``: zero outside ``mask``, in a 16-bit dtype or fp32. A plain
    load of that dtype goes as loaded (``other=0`` zeroes it): Triton copies only plain loads
    into shared memory asynchronously (see ``matmul.accumulate_dot``)."""
    value = w.ev(e, idx, mask)
    if isinstance(e, ir.Load) and e.dtype == dtype:
        return value
    kind = TL_DTYPES[dtype] if dtype in HALF else "tl.float32"
    return w.tmp(f"tl.where({mask}, {value}, 0.0).to({kind})", "t")


def _dot(w: Writer, a: str, b: str, dtype: torch.dtype) -> str:
    if dtype in HALF:
        return f"tl.dot({a}, {b})"
    return fp32_dot(a, b, w.blocks.dot_precision, w.helpers)


def attention(w: Writer, q: ir.Expr, k: ir.Expr, v: ir.Expr, mask: ir.Expr | None,
              causal: bool, scale: float, out: str) -> Kernel:
    """``out`` (*batch, Lq, Dv) = attention of q (*batch, Lq, D), k (.., Lk, D), v (.., Lk, Dv);
    ``mask`` (broadcast to (*batch, Lq, Lk)): bool keeps where True, float is added;
    ``causal`` keeps key j <= query i (the top-left triangle, as PyTorch does)."""
    *batch, Lq, D = q.shape
    Lk, Dv = k.shape[-2], v.shape[-1]
    batch = tuple(batch)
    k, v = ir.broadcast_to(k, (*batch, Lk, D)), ir.broadcast_to(v, (*batch, Lk, Dv))
    if mask is not None:
        mask = ir.broadcast_to(mask, (*batch, Lq, Lk))
    qk_dtype = q.dtype if q.dtype == k.dtype else torch.float32
    bd, bdv = max(16, next_pow2(D)), max(16, next_pow2(Dv))
    w.constexprs = ["BM", "BN"]
    w.line("rm = tl.program_id(0) * BM + tl.arange(0, BM)")
    bidx = w.delinearize("tl.program_id(1)", batch) if batch else []
    w.line(f"rd = tl.arange(0, {bd})")
    w.line(f"re = tl.arange(0, {bdv})")
    w.line(f"qmask = (rm[:, None] < {Lq}) & (rd[None, :] < {D})")
    qt = _operand(w, q, [*bidx, "rm[:, None]", "rd[None, :]"], "qmask", qk_dtype)
    w.line('m_i = tl.full([BM], -float("inf"), tl.float32)')
    w.line("l_i = tl.zeros([BM], tl.float32)")
    w.line(f"acc = tl.zeros([BM, {bdv}], dtype=tl.float32)")
    end = f"tl.minimum({Lk}, (tl.program_id(0) + 1) * BM)" if causal else str(Lk)
    with w.block(f"for n0 in range(0, {end}, BN):"):
        _key_block(w, k, v, mask, causal, scale, bidx, qt, qk_dtype, (Lq, Lk, D, Dv))
    w.line(f"omask = (rm[:, None] < {Lq}) & (re[None, :] < {Dv})")
    nb = ir.numel(batch)
    base = f"tl.program_id(1) * {Lq * Dv} + " if nb > 1 else ""
    lin = w.tmp(f"{base}rm[:, None] * {Dv} + re[None, :]", "o")
    # a query whose keys are all masked gets zeros, as torch's attention gives (not NaN)
    w.store(out, lin, "tl.where(l_i[:, None] > 0, acc / l_i[:, None], 0.0)", "omask",
            (*batch, Lq, Dv))
    work = nb * Lq * Lk * (D + Dv)
    if not w.blocks.tune:
        consts = {"BM": CPU_TILE, "BN": CPU_TILE}
        return w.finish(f"({-(-Lq // CPU_TILE)}, {max(1, nb)})", consts, work, None)
    configs = [tune_config({"BM": bm, "BN": bn}, wp, st) for bm, bn, wp, st in ATTENTION_TILES
               if bm <= max(64, next_pow2(Lq))]
    return w.finish(f'lambda META: (triton.cdiv({Lq}, META["BM"]), {max(1, nb)})', {}, work,
                    configs)


def _key_block(w: Writer, k: ir.Expr, v: ir.Expr, mask: ir.Expr | None, causal: bool,
               scale: float, bidx: list[str], qt: str, qk_dtype: torch.dtype,
               sizes: tuple[int, int, int, int]) -> None:
    """One [BN] step over the keys: scores, the online softmax's rescaling, ``acc += p @ v``."""
    Lq, Lk, D, Dv = sizes
    w.line("rn = n0 + tl.arange(0, BN)")
    w.line(f"kmask = (rn[:, None] < {Lk}) & (rd[None, :] < {D})")
    kt = _operand(w, k, [*bidx, "rn[:, None]", "rd[None, :]"], "kmask", qk_dtype)
    s = w.tmp(f"{_dot(w, qt, f'tl.trans({kt})', qk_dtype)} * {scale!r}", "s")
    w.line(f"valid = (rm[:, None] < {Lq}) & (rn[None, :] < {Lk})")
    if causal:
        w.line("valid = valid & (rn[None, :] <= rm[:, None])")
    if mask is not None:
        mv = w.ev(mask, [*bidx, "rm[:, None]", "rn[None, :]"], "valid")
        if mask.dtype == torch.bool:
            w.line(f"valid = valid & ({mv} != 0)")
        else:
            s = w.tmp(f"{s} + {mv}", "s")  # fp32 (``_f``)
    s = w.tmp(f'tl.where(valid, {s}, -float("inf"))', "s")
    w.line(f"m_new = tl.maximum(m_i, tl.max({s}, 1))")
    # a row whose keys are all masked so far keeps m = -inf: shift by 0 there, not by -inf
    w.line('m_use = tl.where(m_new == -float("inf"), 0.0, m_new)')
    p = w.tmp(f"tl.exp({s} - m_use[:, None])", "p")
    w.line("alpha = tl.exp(m_i - m_use)")
    w.line(f"l_i = l_i * alpha + tl.sum({p}, 1)")
    w.line(f"vmask = (rn[:, None] < {Lk}) & (re[None, :] < {Dv})")
    vt = _operand(w, v, [*bidx, "rn[:, None]", "re[None, :]"], "vmask", v.dtype)
    pv = f"{p}.to({TL_DTYPES[v.dtype]})" if v.dtype in HALF else p
    w.line(f"acc = acc * alpha[:, None] + {_dot(w, pv, vt, v.dtype)}")
    w.line("m_i = m_new")
