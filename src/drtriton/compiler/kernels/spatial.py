"""Convolutions (implicit GEMM; strided transposed ones by output phase) and pooling."""

from __future__ import annotations

from dataclasses import dataclass

from drtriton.compiler import ir
from drtriton.compiler.kernels import writer
from drtriton.compiler.kernels.matmul import (
    accumulate_dot,
    finish_narrow,
    finish_tiles,
    narrow_width,
)
from drtriton.compiler.kernels.writer import Kernel, Writer, finish_1d, next_pow2


def _conv_input_tile(w: Writer, x: ir.Expr, batch: str, pos: list[str], valid: list[str]) -> str:
    """The [rows x input channels] tile of ``x`` at spatial positions ``pos`` under ``amask``."""
    w.line(f"amask = {' & '.join(valid)}")
    n0 = f"{batch}[:, None]" if batch != "0" else "0"
    return w.ev(x, [n0, "ci[None, :]", *pos], "amask")


@dataclass(frozen=True)
class ConvSpec:
    transposed: bool
    stride: tuple[int, ...]
    padding: tuple[int, ...]
    dilation: tuple[int, ...]
    groups: int
    out_shape: tuple[int, ...]  # full output shape (N, OC, *O)


def conv(w: Writer, x: ir.Expr, wt: ir.Expr, spec: ConvSpec, out: str) -> Kernel:
    """Direct convolution (or transposed convolution) as an implicit GEMM per group.

    Rows are output positions (n, o...), columns output channels of the group, the reduction runs
    over (input channel, kernel offset). Transposed convolution gathers: output o receives input
    i = (o + p - k*d) / s where that division is exact and in range; with a stride above 1 it
    goes to :func:`conv_transpose_phased`, which does not multiply the masked-out taps.
    """
    groups_by_phases = spec.groups * ir.numel(spec.stride)
    if spec.transposed and max(spec.stride) > 1 and groups_by_phases <= writer.MAX_GRID_Z:
        return conv_transpose_phased(w, x, wt, spec, out)
    nb, cin, *ins = x.shape
    _, oc, *outs = spec.out_shape
    G = spec.groups
    ksz = tuple(wt.shape[2:])
    cg = cin // G
    ocg = oc // G
    M = nb * ir.numel(tuple(outs))
    K = cg * ir.numel(ksz)
    P = ir.numel(tuple(outs))
    w.constexprs = ["BM", "BN", "BK"]
    w.line("rm = tl.program_id(0) * BM + tl.arange(0, BM)")
    w.line("rn = tl.program_id(1) * BN + tl.arange(0, BN)")
    w.line("g = tl.program_id(2)")
    midx = w.delinearize("rm", (nb, *outs))
    w.line(f"oc = g * {ocg} + rn")
    w.line("acc = tl.zeros([BM, BN], dtype=tl.float32)")
    with w.block(f"for k0 in range(0, {K}, BK):"):
        w.line("rk = k0 + tl.arange(0, BK)")
        kidx = w.delinearize("rk", (cg, *ksz))
        w.line(f"ci = g * {cg} + {kidx[0]}")
        valid = [f"(rm[:, None] < {M})", f"(rk[None, :] < {K})"]
        pos = []
        for j, size in enumerate(ins):
            o = f"{midx[1 + j]}[:, None]" if midx[1 + j] != "0" else "0"
            k = f"{kidx[1 + j]}[None, :]" if kidx[1 + j] != "0" else "0"
            s, p, d = spec.stride[j], spec.padding[j], spec.dilation[j]
            if not spec.transposed:
                q = w.tmp(f"{o} * {s} - {p} + {k} * {d}", "q")
            else:
                t = w.tmp(f"{o} + {p} - {k} * {d}", "q")
                valid.append(f"({t} >= 0) & ({t} % {s} == 0)" if s != 1 else f"({t} >= 0)")
                q = w.tmp(f"tl.where({t} >= 0, {t}, 0) // {s}", "q") if s != 1 else t
            valid.append(f"({q} >= 0) & ({q} < {size})")
            pos.append(q)
        av = _conv_input_tile(w, x, midx[0], pos, valid)
        w.line(f"bmask = (rk[:, None] < {K}) & (rn[None, :] < {ocg})")
        kk = [f"{i}[:, None]" if i != "0" else "0" for i in kidx[1:]]
        if spec.transposed:  # weight (C_in, OC/G, *k)
            bv = w.ev(wt, ["ci[:, None]", "rn[None, :]", *kk], "bmask")
        else:  # weight (OC, C_in/G, *k)
            bv = w.ev(wt, ["oc[None, :]", f"{kidx[0]}[:, None]" if kidx[0] != "0" else "0", *kk],
                      "bmask")
        accumulate_dot(w, av, bv, narrow=narrow_width(ocg) is not None)
    w.line(f"cmask = (rm[:, None] < {M}) & (rn[None, :] < {ocg})")
    n_ = f"({midx[0]})" if midx[0] != "0" else "0"
    lin = w.tmp(f"{n_}[:, None] * {oc * P} + oc[None, :] * {P} + (rm % {P})[:, None]"
                if midx[0] != "0" else f"oc[None, :] * {P} + (rm % {P})[:, None]", "o")
    w.store(out, lin, "acc", "cmask", spec.out_shape)
    if narrow_width(ocg):
        return finish_narrow(w, M, ocg, K, G, loop_k=K)
    return finish_tiles(w, M, ocg, K, G)


def conv_transpose_phased(w: Writer, x: ir.Expr, wt: ir.Expr, spec: ConvSpec, out: str) -> Kernel:
    """Strided transposed convolution, one output phase per program.

    Output o (per spatial dim) receives input i = (o + p - k*d) / s only for the taps k where that
    division is exact, which depends on o only through its phase r = o mod s. A program takes the
    rows of one phase (o = r + s*t) and one group, so every tap is valid or invalid for the whole
    tile: invalid taps are skipped, valid ones read i = t + (r + p - k*d) / s. The gathering form
    multiplied every tap and masked all but 1/s^d of them (a stride-14 ConvTranspose2d at GPU
    scale timed out on an H200).
    """
    nb, cin, *ins = x.shape
    _, oc, *outs = spec.out_shape
    G, ksz, strides = spec.groups, tuple(wt.shape[2:]), tuple(spec.stride)
    cg, ocg = cin // G, oc // G
    steps = tuple(-(-o // s) for o, s in zip(outs, strides, strict=True))  # t per phase (max)
    rows = nb * ir.numel(steps)
    phases = ir.numel(strides)
    taps = ir.numel(ksz)
    P = ir.numel(tuple(outs))
    w.constexprs = ["BM", "BN", "BK"]
    w.line("rm = tl.program_id(0) * BM + tl.arange(0, BM)")
    w.line("rn = tl.program_id(1) * BN + tl.arange(0, BN)")
    w.line(f"g = tl.program_id(2) // {phases}")
    w.line(f"phase = tl.program_id(2) % {phases}")
    ridx = w.delinearize("phase", strides)  # r per spatial dim (scalars)
    tidx = w.delinearize("rm", (nb, *steps))  # (n, t...) per row
    opos = []
    rmask = [f"(rm < {rows})"]
    for j, (r, t) in enumerate(zip(ridx, tidx[1:], strict=True)):
        o = w.tmp(f"{r} + {strides[j]} * {t}", "op")
        opos.append(o)
        rmask.append(f"({o} < {outs[j]})")
    w.line(f"rowmask = {' & '.join(rmask)}")
    w.line(f"oc = g * {ocg} + rn")
    w.line("acc = tl.zeros([BM, BN], dtype=tl.float32)")
    with w.block(f"for tap in range(0, {taps}):"):
        kidx = w.delinearize("tap", ksz)
        shifts, ok = [], []
        for j, (r, k) in enumerate(zip(ridx, kidx, strict=True)):
            c = w.tmp(f"{r} + {spec.padding[j]} - {k} * {spec.dilation[j]}", "c")
            ok.append(f"({c} % {strides[j]} == 0)")
            shifts.append(c)
        with w.block(f"if {' & '.join(ok)}:"):
            with w.block(f"for c0 in range(0, {cg}, BK):"):
                w.line("rk = c0 + tl.arange(0, BK)")
                w.line(f"ci = g * {cg} + rk")
                valid = ["rowmask[:, None]", f"(rk[None, :] < {cg})"]
                pos = []
                for j, size in enumerate(ins):
                    t = f"{tidx[1 + j]}[:, None]" if tidx[1 + j] != "0" else "0"
                    q = w.tmp(f"{t} + {shifts[j]} // {strides[j]}", "q")
                    valid.append(f"({q} >= 0) & ({q} < {size})")
                    pos.append(q)
                av = _conv_input_tile(w, x, tidx[0], pos, valid)
                w.line(f"bmask = (rk[:, None] < {cg}) & (rn[None, :] < {ocg})")
                bv = w.ev(wt, ["ci[:, None]", "rn[None, :]", *kidx], "bmask")  # (C_in, OC/G, *k)
                accumulate_dot(w, av, bv, narrow=narrow_width(ocg) is not None)
    w.line(f"cmask = rowmask[:, None] & (rn[None, :] < {ocg})")
    ostr = ir.contiguous_strides(tuple(outs))
    spatial = " + ".join(f"{o} * {st}" for o, st in zip(opos, ostr, strict=True))
    n_ = f"{tidx[0]}[:, None] * {oc * P} + " if tidx[0] != "0" else ""
    lin = w.tmp(f"{n_}oc[None, :] * {P} + ({spatial})[:, None]", "o")
    w.store(out, lin, "acc", "cmask", spec.out_shape)
    if narrow_width(ocg):
        return finish_narrow(w, rows, ocg, cg * taps, G * phases, loop_k=cg)
    return finish_tiles(w, rows, ocg, cg * taps, G * phases, loop_k=cg)


def pool(w: Writer, kind: str, x: ir.Expr, ksz, stride, padding, dilation, out_shape, out) -> Kernel:
    """Max or average pooling (count_include_pad): each output element loops over its window."""
    nsp = len(ksz)
    n = ir.numel(out_shape)
    w.constexprs = ["BLOCK"]
    w.line("offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)")
    w.line("omask = offs < N")
    oidx = w.delinearize("offs", tuple(out_shape))
    lead = oidx[: len(out_shape) - nsp]
    fill = '-float("inf")' if kind == "max" else "0.0"
    w.line(f"acc = tl.full([BLOCK], {fill}, tl.float32)")
    ins = x.shape[len(x.shape) - nsp:]
    outs = tuple(out_shape)[len(out_shape) - nsp:]
    taps = [reachable_taps(*a) for a in zip(ksz, stride, padding, dilation, ins, outs, strict=True)]
    spans = tuple(hi - lo + 1 for lo, hi in taps)
    with w.block(f"for kk in range(0, {ir.numel(spans)}):"):
        kidx = w.delinearize("kk", spans)
        valid = ["omask"]
        pos = []
        for j in range(nsp):
            o = oidx[len(lead) + j]
            k = kidx[j] if taps[j][0] == 0 else f"({kidx[j]} + {taps[j][0]})"
            q = w.tmp(f"{o} * {stride[j]} - {padding[j]} + {k} * {dilation[j]}", "q")
            valid.append(f"({q} >= 0) & ({q} < {ins[j]})")
            pos.append(q)
        w.line(f"wmask = {' & '.join(valid)}")
        v = w.ev(x, [*lead, *pos], "wmask")
        if kind == "max":
            w.line(f"acc = tl.maximum(acc, tl.where(wmask, {v}, -float(\"inf\")))")
        else:
            w.line(f"acc += tl.where(wmask, {v}, 0.0)")
    res = "acc" if kind == "max" else w.tmp(f"acc / {ir.numel(tuple(ksz))}", "r")
    w.store(out, "offs", res, "omask", tuple(out_shape))
    window = ir.numel(spans)
    return finish_1d(w, n, "BLOCK", [(128, 4), (512, 4), (1024, 8)], n * window, min(1024, next_pow2(n)))


def reachable_taps(k: int, s: int, p: int, d: int, n_in: int, n_out: int) -> tuple[int, int]:
    """The window offsets (first, last) of one dim that some output's window can place inside the
    input; the others only ever read padding. A 3-D max pool with 8-wide windows over a depth of 1
    looped over 512 offsets per output, 448 of them always masked (15.8 ms on an H200)."""
    lo = max(0, -(-(p - (n_out - 1) * s) // d))  # the last output's window reaches index 0
    hi = min(k - 1, (n_in - 1 + p) // d)  # the first output's window still starts in range
    return (lo, hi) if lo <= hi else (0, k - 1)
