"""Sort kernels: where each element of a row lands when the row is sorted (``argsort``); the
values follow by a gather. Keys are the float32 bits mapped to an order-preserving int32,
packed over the element's position into an int64 that ``tl.sort`` orders, so ties keep their
positions' order (a stable sort) and NaN sorts above everything, as PyTorch's."""

from __future__ import annotations

import math

from drtriton.compiler import ir
from drtriton.compiler.kernels.writer import Kernel, Writer, next_pow2

MAX_SORTED = 4096  # the longest row one program sorts in registers
ROW_ELEMS = 4096  # rows per program: at most this many elements in a tile


def argsort(w: Writer, x: ir.Expr, descending: bool, out: str) -> Kernel:
    """The int64 positions of each row of ``x`` (its last dim, float32) in sorted order."""
    *lead, n = x.shape
    rows, width = math.prod(lead), next_pow2(n)
    block = max(1, min(next_pow2(rows), ROW_ELEMS // width))
    w.constexprs = ["BM"]
    w.line("rm = (tl.program_id(0) * BM + tl.arange(0, BM))[:, None]")
    w.line(f"cols = tl.arange(0, {width})[None, :]")
    w.line(f"mask = (rm < {rows}) & (cols < {n})")
    pos = (w.delinearize("rm", tuple(lead)) if lead else []) + ["cols"]
    value = w.ev(x, pos, "mask")
    bits = w.tmp(f"({value} + tl.zeros([BM, {width}], tl.float32)).to(tl.int32, bitcast=True)",
                 "b")
    key = w.tmp(f"{bits} ^ (({bits} >> 31) & 0x7FFFFFFF)", "k")  # float order as int order
    pad = -(2**31) if descending else 2**31 - 1  # padding lanes sort after every element
    key = w.tmp(f"tl.where(mask, {key}, {pad})", "k")
    at = f"({width - 1} - cols)" if descending else "cols"  # ties keep their order either way
    packed = w.tmp(f"({key}.to(tl.int64) << 32) | {at}.to(tl.int64)", "p")
    ordered = w.tmp(f"tl.sort({packed}, 1, descending={descending})", "s")
    low = w.tmp(f"{ordered} & 0xFFFFFFFF", "i")
    if descending:
        low = w.tmp(f"{width - 1} - {low}", "i")
    w.line(f"tl.store({w.ptr(out, out=True)} + rm * {n} + cols, {low}, mask=mask)")
    return w.finish(f"({-(-rows // block)},)", {"BM": block}, rows * n, None)


RANK_TILE = 64  # elements of a row ranked, and compared against, per step: [64, 64] compares


def argsort_by_rank(w: Writer, x: ir.Expr, descending: bool, out: str) -> Kernel:
    """``argsort`` for integer rows, whose values an int32 key cannot hold (int64): each element's
    place is the count of the row's elements ordered before it (smaller, or equal and earlier:
    stable), found by comparing it with every element, then the element's position is scattered
    there. Quadratic in the row length, exact for every integer dtype."""
    *lead, n = x.shape
    rows, blocks = math.prod(lead), -(-n // RANK_TILE)
    w.constexprs = ["BI", "BJ"]
    w.line("pid = tl.program_id(0)")
    w.line(f"r = pid // {blocks}")
    w.line(f"ii = (pid % {blocks}) * BI + tl.arange(0, BI)")
    w.line(f"imask = ii < {n}")
    head = w.delinearize("r", tuple(lead)) if lead else []
    mine = w.tmp(f"({w.ev(x, [*head, 'ii'], 'imask')}).to(tl.int64)", "a")
    w.line("rank = tl.zeros([BI], tl.int64)")
    with w.block(f"for j0 in range(0, {n}, BJ):"):
        w.line("jj = j0 + tl.arange(0, BJ)")
        w.line(f"jmask = jj < {n}")
        other = w.tmp(f"({w.ev(x, [*head, 'jj'], 'jmask')}).to(tl.int64)", "b")
        ahead = ">" if descending else "<"
        before = w.tmp(f"({other}[None, :] {ahead} {mine}[:, None]) | "
                       f"(({other}[None, :] == {mine}[:, None]) & (jj[None, :] < ii[:, None]))",
                       "m")
        w.line(f"rank += tl.sum(({before} & jmask[None, :]).to(tl.int64), axis=1)")
    w.line(f"tl.store({w.ptr(out, out=True)} + r * {n} + rank, ii.to(tl.int64), mask=imask)")
    return w.finish(f"({rows * blocks},)", {"BI": RANK_TILE, "BJ": RANK_TILE}, rows * n * n,
                    None)
