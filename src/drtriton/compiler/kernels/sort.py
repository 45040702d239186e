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
