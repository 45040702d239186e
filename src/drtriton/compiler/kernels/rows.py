"""Row-wise reductions, normalisations and scans over the kept dimensions of their input."""

from __future__ import annotations

import torch

from drtriton.compiler import ir
from drtriton.compiler.kernels.writer import TL_DTYPES, Kernel, Writer, finish_1d, next_pow2

COLUMN_BR = 64  # reduced elements per loop step of a column reduction (GPU)


ROW_KINDS = {"sum", "mean", "amax", "amin", "argmax", "argmin", "var", "norm2",
             "softmax", "log_softmax", "normalize"}


def innermost_dim(shape: ir.Shape) -> int:
    """The innermost dim longer than 1 (the last dim if none is): neighbours in memory along it."""
    return max((d for d, n in enumerate(shape) if n > 1), default=len(shape) - 1)


def rowwise(w: Writer, kind: str, x: ir.Expr, dims: tuple[int, ...], out: str,
            correction: int = 1, eps: float = 1e-5) -> Kernel:
    """Reduce ``x`` over ``dims`` (any set), or normalise over them (softmax, norms)."""
    shape = x.shape
    kept = [d for d in range(len(shape)) if d not in dims]
    kshape = tuple(shape[d] for d in kept)
    rshape = tuple(shape[d] for d in dims)
    M, R = ir.numel(kshape), ir.numel(rshape)
    b = w.blocks
    # On a GPU, a reduction that keeps the innermost dim (a column sum of a row-major matrix)
    # reads memory along the kept rows: many rows per program, a short loop over the reduced
    # dims, so each [BM, BR] tile is coalesced along BM (a [1, R] tile would stride by a row).
    # Size-1 dims do not count: a norm over dim 1 of (1161, 5797, 149, 1) read [1, 8192] tiles at
    # a stride of 149 floats (3.9 ms on an H200, about 4x its memory time).
    column = b.tune and innermost_dim(shape) not in dims and R > 1
    single = R <= b.row_single and not column
    BR = next_pow2(R) if single else min(next_pow2(R), COLUMN_BR if column else 1024)
    w.constexprs = ["BM"]
    w.line("rows = tl.program_id(0) * BM + tl.arange(0, BM)")
    w.line("rm = rows[:, None]")
    w.line(f"mmask = rm < {M}")
    kidx = w.delinearize("rm", kshape)
    fdt = "tl.float32"

    cache: list = []

    def load_chunk():
        # a row that fits one block is loaded once and reused by every pass
        if single and cache:
            return cache[0]
        out = _load_chunk()
        if single:
            cache.append(out)
        return out

    def _load_chunk():
        w.line(f"rr = r0 + tl.arange(0, {BR})[None, :]")
        w.line(f"mask = mmask & (rr < {R})")
        ridx = w.delinearize("rr", rshape)
        idx = [None] * len(shape)
        for d, i in zip(kept, kidx, strict=True):
            idx[d] = i
        for d, i in zip(dims, ridx, strict=True):
            idx[d] = i
        v = w.ev(x, idx, "mask")
        if ir.is_float(x.dtype) and x.dtype != torch.float32:
            v = w.tmp(f"{v}.to({fdt})", "v")
        # broadcast to the full tile: a value constant along the row still counts R times
        v = w.tmp(f"{v} + tl.zeros([BM, {BR}], {TL_DTYPES[torch.float32] if ir.is_float(x.dtype) else 'tl.int64'})", "x")
        return v, idx

    loop = None if single else f"for r0 in range(0, {R}, {BR}):"
    if single:
        w.line("r0 = 0")

    def sum_of(expr_fn, init="0.0"):
        acc = w.tmp(f"tl.zeros([BM], {fdt}) + {init}", "acc")
        with w.block(loop):
            v, idx = load_chunk()
            w.line(f"{acc} += tl.sum(tl.where(mask, {expr_fn(v)}, 0.0), 1)")
        return acc, idx

    out_dtype_full = kind in ("softmax", "log_softmax", "normalize")
    if kind in ("sum", "mean"):
        acc, _ = sum_of(lambda v: v)
        res = w.tmp(f"{acc} / {R}" if kind == "mean" else acc, "r")
    elif kind == "norm2":
        acc, _ = sum_of(lambda v: f"{v} * {v}")
        res = w.tmp(f"tl.sqrt({acc})", "r")
    elif kind in ("amax", "amin"):
        fn, fill = ("max", '-float("inf")') if kind == "amax" else ("min", 'float("inf")')
        acc = w.tmp(f"tl.full([BM], {fill}, {fdt})", "acc")
        with w.block(loop):
            v, _ = load_chunk()
            w.line(f"{acc} = tl.{fn}imum({acc}, tl.{fn}(tl.where(mask, {v}, {fill}), 1))")
        res = acc
    elif kind in ("argmax", "argmin"):
        fn, fill, cmp = (("max", '-float("inf")', ">") if kind == "argmax"
                         else ("min", 'float("inf")', "<"))
        best = w.tmp(f"tl.full([BM], {fill}, {fdt})", "best")
        bidx = w.tmp("tl.zeros([BM], tl.int64)", "bidx")
        with w.block(loop):
            v, _ = load_chunk()
            vm = w.tmp(f"tl.where(mask, {v}, {fill})", "x")
            cb = w.tmp(f"tl.{fn}({vm}, 1)", "cb")
            # first index attaining the chunk's extreme (PyTorch returns the first occurrence)
            ci = w.tmp(f"tl.min(tl.where(({vm} == {cb}[:, None]) & mask, rr, {R}), 1).to(tl.int64)", "ci")
            up = w.tmp(f"{cb} {cmp} {best}", "up")
            w.line(f"{best} = tl.where({up}, {cb}, {best})")
            w.line(f"{bidx} = tl.where({up}, {ci}, {bidx})")
        res = bidx
    elif kind in ("var", "normalize"):
        acc, _ = sum_of(lambda v: v)
        mean = w.tmp(f"{acc} / {R}", "mean")
        acc2, _ = sum_of(lambda v: f"({v} - {mean}[:, None]) * ({v} - {mean}[:, None])")
        if kind == "var":
            res = w.tmp(f"{acc2} / {max(R - correction, 0)}" if R - correction > 0
                        else f"{acc2} * float(\"nan\")", "r")
        else:
            rstd = w.tmp(f"1.0 / tl.sqrt({acc2} / {R} + {eps})", "rstd")
    elif kind in ("softmax", "log_softmax"):
        mx = w.tmp(f"tl.full([BM], -float(\"inf\"), {fdt})", "mx")
        den = w.tmp(f"tl.zeros([BM], {fdt})", "den")
        with w.block(loop):
            v, _ = load_chunk()
            vm = w.tmp(f"tl.where(mask, {v}, -float(\"inf\"))", "x")
            nm = w.tmp(f"tl.maximum({mx}, tl.max({vm}, 1))", "nm")
            # rows past M are all -inf: keep their exponent finite to avoid NaN noise
            safe = w.tmp(f"tl.where({nm} == -float(\"inf\"), 0.0, {nm})", "sm")
            w.line(f"{den} = {den} * tl.exp({mx} - {safe}) + tl.sum(tl.exp({vm} - {safe}[:, None]), 1)")
            w.line(f"{mx} = {nm}")
    else:
        raise KeyError(kind)

    if out_dtype_full:
        full_strides = ir.contiguous_strides(shape)
        with w.block(loop):
            v, idx = load_chunk()
            if kind == "softmax":
                y = w.tmp(f"tl.exp({v} - {mx}[:, None]) / {den}[:, None]", "y")
            elif kind == "log_softmax":
                y = w.tmp(f"{v} - {mx}[:, None] - tl.log({den}[:, None])", "y")
            else:
                y = w.tmp(f"({v} - {mean}[:, None]) * {rstd}[:, None]", "y")
            terms = [f"{i} * {s}" for i, s, n in zip(idx, full_strides, shape, strict=True) if n != 1 and i != "0"]
            lin = w.tmp(" + ".join(terms) if terms else "rm * 0 + rr * 0", "o")
            w.store(out, lin, y, "mask", shape)
    else:
        w.line(f"rmask = rows < {M}")
        w.store(out, "rows", res, "rmask", kshape)

    if b.tune and column:
        bms = sorted({max(1, min(next_pow2(M), bm)) for bm in (16, 32, 64, 128)})
        configs = [(bm, 4) for bm in bms]
    else:
        bms = sorted({max(1, min(next_pow2(M), max(1, n // BR))) for n in (1024, 4096, 16384)})
        configs = [(bm, 4 if bm * BR <= 4096 else 8) for bm in bms]
    cpu_bm = max(1, min(next_pow2(M), b.row_elems // BR))
    return finish_1d(w, M, "BM", configs, M * R, cpu_bm)


def scan(w: Writer, kind: str, x: ir.Expr, dim: int, out: str) -> Kernel:
    """Cumulative sum/max/min along ``dim``: chunked associative scan with a running carry."""
    shape = x.shape
    kept = [d for d in range(len(shape)) if d != dim]
    kshape = tuple(shape[d] for d in kept)
    M, R = ir.numel(kshape), shape[dim]
    # as in rowwise: scanning a dim other than the innermost, tiles are many rows by a short
    # stretch of the scan, coalesced along the rows (a cumsum over dim 0 of (1593, 6694, 1, 1, 2)
    # read [4, 1024] tiles at a stride of 13,388 floats: 4.9 ms on an H200)
    column = w.blocks.tune and innermost_dim(shape) != dim and R > 1
    BR = min(next_pow2(R), COLUMN_BR if column else 1024)
    w.constexprs = ["BM"]
    w.line("rm = (tl.program_id(0) * BM + tl.arange(0, BM))[:, None]")
    w.line(f"mmask = rm < {M}")
    kidx = w.delinearize("rm", kshape)
    fill = {"cumsum": "0.0", "cumprod": "1.0", "cummax": '-float("inf")',
            "cummin": 'float("inf")'}[kind]
    carry = w.tmp(f"tl.full([BM], {fill}, tl.float32)", "carry")
    strides = ir.contiguous_strides(shape)
    with w.block(f"for r0 in range(0, {R}, {BR}):"):
        w.line(f"rr = r0 + tl.arange(0, {BR})[None, :]")
        w.line(f"mask = mmask & (rr < {R})")
        idx = [None] * len(shape)
        for d, i in zip(kept, kidx, strict=True):
            idx[d] = i
        idx[dim] = "rr"
        v = w.ev(x, idx, "mask")
        v = w.tmp(f"tl.where(mask, {v} + tl.zeros([BM, {BR}], tl.float32), {fill})", "x")
        if kind == "cumsum":
            c = w.tmp(f"tl.cumsum({v}, 1) + {carry}[:, None]", "c")
            w.line(f"{carry} = {carry} + tl.sum({v}, 1)")
        elif kind == "cumprod":
            w.helpers.add("_mul_combine")
            c = w.tmp(f"tl.associative_scan({v}, 1, _mul_combine) * {carry}[:, None]", "c")
            w.line(f"{carry} = {carry} * tl.reduce({v}, 1, _mul_combine)")
        else:
            comb = "_max_combine" if kind == "cummax" else "_min_combine"
            fn = "maximum" if kind == "cummax" else "minimum"
            red = "max" if kind == "cummax" else "min"
            w.helpers.add(comb)
            c = w.tmp(f"tl.{fn}(tl.associative_scan({v}, 1, {comb}), {carry}[:, None])", "c")
            w.line(f"{carry} = tl.{fn}({carry}, tl.{red}({v}, 1))")
        terms = [f"{i} * {s}" for i, s, n in zip(idx, strides, shape, strict=True) if n != 1 and i != "0"]
        lin = w.tmp(" + ".join(terms), "o")
        w.store(out, lin, c, "mask", shape)
    bm = max(1, min(next_pow2(M), 4096 // BR))
    if column:
        configs = [(m, 4) for m in sorted({max(1, min(next_pow2(M), m)) for m in (16, 32, 64, 128)})]
    else:
        configs = [(m, 4) for m in sorted({1, min(bm, 4), bm})]
    return finish_1d(w, M, "BM", configs, M * R, bm)
