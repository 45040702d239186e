"""Convolutions (implicit GEMM; strided transposed ones over the input when no two taps meet,
else by output phase) and pooling."""

from __future__ import annotations

from dataclasses import astuple, dataclass

from drtriton.compiler import ir
from drtriton.compiler.kernels import writer
from drtriton.compiler.kernels.matmul import (
    accumulate_dot,
    dot_operands,
    finish_narrow,
    finish_tiles,
    flat_tile_ids,
    grouped_tile_ids,
    narrow_width,
)
from drtriton.compiler.kernels.pointwise import POINTWISE_CONFIGS
from drtriton.compiler.kernels.writer import Kernel, Writer, finish_1d, finish_blocks, next_pow2


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
    i = (o + p - k*d) / s where that division is exact and in range. With a stride above 1 it
    goes to :func:`conv_transpose_scatter` where taps never meet, else to
    :func:`conv_transpose_phased`; neither multiplies the masked-out taps.
    """
    if spec.transposed and max(spec.stride) > 1:
        if taps_never_meet(spec, x.shape[2:], wt.shape[2:]) and spec.groups <= writer.MAX_GRID_Z:
            return conv_transpose_scatter(w, x, wt, spec, out)
        if spec.groups * ir.numel(spec.stride) <= writer.MAX_GRID_Z:
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
        accumulate_dot(w, av, bv, narrow=narrow_width(ocg) is not None,
                       operands=dot_operands(x, wt))
    w.line(f"cmask = (rm[:, None] < {M}) & (rn[None, :] < {ocg})")
    n_ = f"({midx[0]})" if midx[0] != "0" else "0"
    lin = w.tmp(f"{n_}[:, None] * {oc * P} + oc[None, :] * {P} + (rm % {P})[:, None]"
                if midx[0] != "0" else f"oc[None, :] * {P} + (rm % {P})[:, None]", "o")
    w.store(out, lin, "acc", "cmask", spec.out_shape)
    if narrow_width(ocg):
        return finish_narrow(w, M, ocg, K, G, loop_k=K)
    return finish_tiles(w, M, ocg, K, G)


def conv_channels_last(w: Writer, x: ir.Expr, wt: ir.Expr, spec: ConvSpec, out: str,
                       tf32_exact: bool = False) -> Kernel:
    """Direct convolution as an implicit GEMM fed to tensor cores: ``x`` is the input read
    channels-last (N, *in, C) and ``wt`` the weight read tap-major (*k, OC, C/G), both K-major
    plain loads. One loop runs over (tap, BK channels of the group) steps, so each A tile is
    [output positions x contiguous channels] and each B tile [contiguous channels x output
    channels], and the loop is long enough to pipeline. On an H200 the channel-first form (taps
    and channels delinearized from one index, positions contiguous) ran ResNet-50's 3x3
    convolutions at 0.27-0.37x cuDNN."""
    nb, *ins, cin = x.shape
    _, oc, *outs = spec.out_shape
    G = spec.groups
    ksz = tuple(wt.shape[:-2])
    cg, ocg = cin // G, oc // G
    M = nb * ir.numel(tuple(outs))
    w.constexprs = ["BM", "BN", "BK"]
    grouped_tile_ids(w, M, ocg)
    w.line("g = tl.program_id(2)")
    midx = w.delinearize("rm", (nb, *outs))
    w.line(f"oc = g * {ocg} + rn")
    w.line("acc = tl.zeros([BM, BN], dtype=tl.float32)")
    w.line(f"bcols = rn[None, :] < {ocg}")
    w.line(f"chunks = tl.cdiv({cg}, BK)")
    with w.block(f"for t in range(0, {ir.numel(ksz)} * chunks):"):
        w.line("ck = (t % chunks) * BK + tl.arange(0, BK)")
        taps = w.delinearize("(t // chunks)", ksz)
        valid = [f"(rm[:, None] < {M})"]
        rows = [f"{i}[:, None]" if i != "0" else "0" for i in midx[1:]]
        pos = _tap_positions(w, spec, (ins, outs, ksz), rows, taps, valid)
        w.line(f"amask = {' & '.join(valid)} & (ck[None, :] < {cg})")
        w.line(f"bmask = (ck[:, None] < {cg}) & bcols")
        n0 = f"{midx[0]}[:, None]" if midx[0] != "0" else "0"
        av = w.ev(x, [n0, *pos, f"g * {cg} + ck[None, :]"], "amask")
        bv = w.ev(wt, [*taps, "oc[None, :]", "ck[:, None]"], "bmask")
        accumulate_dot(w, av, bv, loaded=(True, True), operands=dot_operands(x, wt),
                       tf32_exact=(tf32_exact, tf32_exact))
    _store_position_tiles(w, spec, midx, "oc", out)
    return finish_tiles(w, M, ocg, cg * ir.numel(ksz), G, loop_k=cg, flat=True)


def conv_merged_taps(w: Writer, x: ir.Expr, wt: ir.Expr, spec: ConvSpec, out: str,
                     cin: int, tf32_exact: bool = False) -> Kernel:
    """A convolution over few input channels (an image stem: 3 channels, 7x7 taps) as an implicit
    GEMM fed to tensor cores: ``x`` is the input channels-last with its last spatial dim and
    channels merged (N, *in[:-1], W * C), ``wt`` the weight (*k[:-1], OC, kw * C). A window row's
    kw * C inputs are one contiguous run of that merged dim (stride 1 along the row's last
    spatial dim is not needed: the run starts at ``(o * s - p) * C``), so each A tile is [output
    positions x contiguous run] and the reduction per tap is kw * C long instead of C (under 16,
    too short for a dot). ``cin``: C. Groups 1 and dilation 1 along the last spatial dim
    only."""
    nb, *lead_ins, run_in = x.shape
    _, oc, *outs = spec.out_shape
    ksz = tuple(wt.shape[:-2])  # the taps of every spatial dim but the last
    run = wt.shape[-1]  # kw * C
    M = nb * ir.numel(tuple(outs))
    s, p = spec.stride[-1], spec.padding[-1]
    w.constexprs = ["BM", "BN", "BK"]
    grouped_tile_ids(w, M, oc)
    midx = w.delinearize("rm", (nb, *outs))
    w.line("acc = tl.zeros([BM, BN], dtype=tl.float32)")
    w.line(f"bcols = rn[None, :] < {oc}")
    w.line(f"chunks = tl.cdiv({run}, BK)")
    rows = [f"{i}[:, None]" if i != "0" else "0" for i in midx[1:]]
    start = w.tmp(f"({rows[-1]} * {s} - {p}) * {cin}", "q")
    w.tile_axes[start] = 0
    with w.block(f"for t in range(0, {ir.numel(ksz)} * chunks):"):
        w.line("ck = (t % chunks) * BK + tl.arange(0, BK)")
        taps = w.delinearize("(t // chunks)", ksz)
        valid = [f"(rm[:, None] < {M})"]
        pos = _tap_positions(w, spec, (lead_ins, outs[:-1], ksz), rows[:-1], taps, valid)
        col = w.tmp(f"{start} + ck[None, :]", "q")
        w.line(f"amask = {' & '.join(valid)} & (ck[None, :] < {run}) & ({col} >= 0) & "
               f"({col} < {run_in})")
        w.line(f"bmask = (ck[:, None] < {run}) & bcols")
        n0 = f"{midx[0]}[:, None]" if midx[0] != "0" else "0"
        av = w.ev(x, [n0, *pos, f"{start} + ck[None, :]"], "amask")
        bv = w.ev(wt, [*taps, "rn[None, :]", "ck[:, None]"], "bmask")
        accumulate_dot(w, av, bv, loaded=(True, True), operands=dot_operands(x, wt),
                       tf32_exact=(tf32_exact, tf32_exact))
    _store_position_tiles(w, spec, midx, "rn", out)
    return finish_tiles(w, M, oc, run * ir.numel(ksz), 1, loop_k=run, flat=True)


def _store_position_tiles(w: Writer, spec: ConvSpec, midx: list[str], channel: str,
                          out: str) -> None:
    """Store ``acc``, a [output positions x output channels] tile (rows ``rm``, delinearized
    as ``midx``; columns ``channel``, masked by ``bcols``), into the (N, OC, *O) output."""
    nb, oc, *outs = spec.out_shape
    P = ir.numel(tuple(outs))
    w.line(f"cmask = (rm[:, None] < {nb * P}) & bcols")
    n_ = f"({midx[0]})" if midx[0] != "0" else "0"
    lin = w.tmp(f"{n_}[:, None] * {oc * P} + {channel}[None, :] * {P} + (rm % {P})[:, None]"
                if midx[0] != "0" else f"{channel}[None, :] * {P} + (rm % {P})[:, None]", "o")
    w.store(out, lin, "acc", "cmask", spec.out_shape)


def _tap_positions(w: Writer, spec: ConvSpec, sizes: tuple, out_idx: list[str],
                   taps: list[str], valid: list[str]) -> list[str]:
    """The input position ``o * s + tap * d - p`` of each spatial dim (``sizes``: the input,
    output and kernel extents), appending to ``valid`` the range check of each dim whose
    windows can leave the input."""
    pos = []
    for j, (size, n_out, k) in enumerate(zip(*sizes, strict=True)):
        s, p, d = spec.stride[j], spec.padding[j], spec.dilation[j]
        q = w.tmp(f"{out_idx[j]} * {s} + {taps[j]} * {d} - {p}", "q")
        if out_idx[j].endswith("[:, None]"):
            w.tile_axes[q] = 0  # a tile's rows (taps are scalars)
        if p > 0 or (n_out - 1) * s + (k - 1) * d - p >= size:
            valid.append(f"({q} >= 0) & ({q} < {size})")
        pos.append(q)
    return pos


DEPTHWISE_CONFIGS = [(256, 4), (512, 4), (1024, 4), (1024, 8), (2048, 8)]  # (BLOCK, warps)


def conv_depthwise(w: Writer, x: ir.Expr, wt: ir.Expr, spec: ConvSpec, out: str) -> Kernel:
    """A convolution whose every group reads one input channel (depthwise, or a one-channel
    input): there is no channel reduction to feed a dot, so each output element sums its
    window's taps times their weights, outputs flattened so that neighbours read neighbouring
    inputs (the kernel streams its input and output once, from L2 for the window's overlap).
    As an implicit GEMM, MobileNetV2's 3x3 depthwise convolution padded one-column output tiles
    and a 9-tap reduction to 16 and ran at 0.34x cuDNN fp32 on an H200."""
    _, oc, *outs = spec.out_shape
    ins = x.shape[2:]
    ocg = oc // spec.groups
    n = ir.numel(tuple(spec.out_shape))
    ksz = tuple(wt.shape[2:])
    w.constexprs = ["BLOCK"]
    w.line("offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)")
    w.line(f"omask = offs < {n}")
    oidx = w.delinearize("offs", tuple(spec.out_shape))
    channel = w.tmp(f"{oidx[1]} // {ocg}", "ci") if ocg > 1 else oidx[1]
    w.line("acc = tl.zeros([BLOCK], dtype=tl.float32)")
    with w.block(f"for kk in range(0, {ir.numel(ksz)}):"):
        kidx = w.delinearize("kk", ksz)
        valid = ["omask"]
        pos = _tap_positions(w, spec, (ins, outs, ksz), oidx[2:], kidx, valid)
        w.line(f"xmask = {' & '.join(valid)}")
        xv = w.ev(x, [oidx[0], channel, *pos], "xmask")
        wv = w.ev(wt, [oidx[1], "0", *kidx], "omask")
        w.line(f"acc += tl.where(xmask, {xv}, 0.0).to(tl.float32) * {wv}")
    w.store(out, "offs", "acc", "omask", tuple(spec.out_shape))
    return finish_1d(w, n, "BLOCK", DEPTHWISE_CONFIGS, n * ir.numel(ksz), min(1024, next_pow2(n)))


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
                accumulate_dot(w, av, bv, narrow=narrow_width(ocg) is not None,
                               operands=dot_operands(x, wt))
    w.line(f"cmask = rowmask[:, None] & (rn[None, :] < {ocg})")
    ostr = ir.contiguous_strides(tuple(outs))
    spatial = " + ".join(f"{o} * {st}" for o, st in zip(opos, ostr, strict=True))
    n_ = f"{tidx[0]}[:, None] * {oc * P} + " if tidx[0] != "0" else ""
    lin = w.tmp(f"{n_}oc[None, :] * {P} + ({spatial})[:, None]", "o")
    w.store(out, lin, "acc", "cmask", spec.out_shape)
    if narrow_width(ocg):
        return finish_narrow(w, rows, ocg, cg * taps, G * phases, loop_k=cg)
    return finish_tiles(w, rows, ocg, cg * taps, G * phases, loop_k=cg)


def taps_never_meet(spec: ConvSpec, ins: ir.Shape, ksz: ir.Shape) -> bool:
    """Whether each output of a transposed convolution receives at most one (input, tap) pair per
    dim: taps k1 != k2 meet at one output iff (k2 - k1) * d is a multiple of s smaller than the
    input's extent (i1 - i2 = (k2 - k1) * d / s)."""
    return all(dk * d % s or dk * d // s >= n
               for n, k, s, d in zip(ins, ksz, spec.stride, spec.dilation, strict=True)
               for dk in range(1, k))


def conv_transpose_scatter(w: Writer, x: ir.Expr, wt: ir.Expr, spec: ConvSpec, out: str) -> Kernel:
    """Transposed convolution whose taps never meet (:func:`taps_never_meet`), as one GEMM over the
    input per group: rows (n, i...), columns (output channel, tap...), reduction over the group's
    input channels. Element (i, k) goes to output o = i*s - p + k*d, which nothing else writes;
    a fill kernel launched first writes the outputs that no (i, k) reaches.

    Both operands are read along their contiguous dims: the weight (C_in, OC/G, *k) along
    (channel, tap), the input along i. The per-phase gather read the weight one tap at a time, at
    a stride of all taps: a ConvTranspose3d of a 1 x 1 x 1 input to 3608 channels of 616 taps
    took 26 ms on an H200 against cuDNN's 1.35 ms. A single row (one input position) is a
    matrix-vector product: :func:`_scatter_one_row`.
    """
    d = _ScatterDims.of(x, wt, spec)
    if d.M == 1 and narrow_width(d.ncols) is None:
        kernel = _scatter_one_row(w, x, wt, spec, d, out)
    elif narrow_width(d.ncols) is not None:
        kernel = _scatter_outer_products(w, x, wt, spec, d, out)
    else:
        kernel = _scatter_tiles(w, x, wt, spec, d, out)
    kernel.fill = _unreached_fill(w, spec, d.ins, d.ksz, out)
    return kernel


@dataclass(frozen=True)
class _ScatterDims:
    """The GEMM of :func:`conv_transpose_scatter`: M rows (n, i...), ncols columns (channel,
    tap...) per group, a reduction over the cg input channels of a group."""

    nb: int
    ins: tuple[int, ...]
    ksz: tuple[int, ...]
    G: int
    cg: int
    ocg: int
    M: int
    ncols: int

    @staticmethod
    def of(x: ir.Expr, wt: ir.Expr, spec: ConvSpec) -> _ScatterDims:
        nb, cin, *ins = x.shape
        ksz, G = tuple(wt.shape[2:]), spec.groups
        ocg = spec.out_shape[1] // G
        return _ScatterDims(nb, tuple(ins), ksz, G, cin // G, ocg, nb * ir.numel(tuple(ins)),
                            ocg * ir.numel(ksz))


def _scatter_tiles(
    w: Writer, x: ir.Expr, wt: ir.Expr, spec: ConvSpec, d: _ScatterDims, out: str
) -> Kernel:
    """:func:`conv_transpose_scatter` on [rows x columns] tiles (``tl.dot``)."""
    nb, ins, ksz, G, cg, ocg, M, ncols = astuple(d)
    w.constexprs = ["BM", "BN", "BK"]
    flat_tile_ids(w, M)
    w.line("g = tl.program_id(2)")
    row_idx = [_side(i, "[:, None]") for i in w.delinearize("rm", (nb, *ins))]
    col_idx = [_side(i, "[None, :]") for i in w.delinearize("rn", (ocg, *ksz))]
    w.line("acc = tl.zeros([BM, BN], dtype=tl.float32)")
    with w.block(f"for c0 in range(0, {cg}, BK):"):
        w.line("rk = c0 + tl.arange(0, BK)")
        w.line(f"ci = g * {cg} + rk")
        w.line(f"amask = (rm[:, None] < {M}) & (rk[None, :] < {cg})")
        av = w.ev(x, [row_idx[0], "ci[None, :]", *row_idx[1:]], "amask")
        w.line(f"bmask = (rk[:, None] < {cg}) & (rn[None, :] < {ncols})")
        bv = w.ev(wt, ["ci[:, None]", *col_idx], "bmask")
        accumulate_dot(w, av, bv, operands=dot_operands(x, wt))
    tile = all(i == "0" for i in row_idx) or all(k == "0" for k in col_idx)
    _store_scattered(
        w,
        spec,
        row_idx,
        col_idx,
        [f"(rm[:, None] < {M})", f"(rn[None, :] < {ncols})"],
        out,
        "(BM, BN)" if tile else None,
    )
    return finish_tiles(w, M, ncols, cg, G, flat=True)


OUTER_PRODUCT_ROWS = ((64, 4), (128, 4), (256, 8))  # BM, warps


def _scatter_outer_products(w: Writer, x: ir.Expr, wt: ir.Expr, spec: ConvSpec, d: _ScatterDims,
                            out: str) -> Kernel:
    """:func:`conv_transpose_scatter` with under 16 columns: one outer product per input channel,
    a [BM] column of the input (contiguous along i) times a [BN] row of the weight.

    The [BM x BN x BK] broadcast-and-sum of :func:`accumulate_dot` reduces across lanes at every
    step: a ConvTranspose2d of 242 channels per group into 15 (channel, tap) columns took 13.1 ms
    on an H200 for 4.2 GB of input (cuDNN: 13.8 ms for the whole program)."""
    nb, ins, ksz, G, cg, ocg, M, ncols = astuple(d)
    bn = narrow_width(ncols)
    w.constexprs = ["BM"]
    w.line("rm = tl.program_id(0) * BM + tl.arange(0, BM)")
    w.line(f"rn = tl.arange(0, {bn})")
    w.line("g = tl.program_id(2)")
    w.line(f"amask = rm < {M}")
    w.line(f"bmask = rn < {ncols}")
    rows = w.delinearize("rm", (nb, *ins))
    cols = w.delinearize("rn", (ocg, *ksz))
    w.line(f"acc = tl.zeros([BM, {bn}], dtype=tl.float32)")
    with w.block(f"for c in range({cg}):"):
        w.line(f"ci = g * {cg} + c")
        av = w.ev(x, [rows[0], "ci", *rows[1:]], "amask")
        bv = w.ev(wt, ["ci", *cols], "bmask")
        w.line(f"acc += tl.where(amask, {av}, 0.0).to(tl.float32)[:, None]"
               f" * tl.where(bmask, {bv}, 0.0).to(tl.float32)[None, :]")
    row_idx = [_side(i, "[:, None]") for i in rows]
    col_idx = [_side(i, "[None, :]") for i in cols]
    tile = all(i == "0" for i in row_idx) or all(k == "0" for k in col_idx)
    _store_scattered(w, spec, row_idx, col_idx, ["amask[:, None]", "bmask[None, :]"], out,
                     f"(BM, {bn})" if tile else None)
    configs = [({"BM": bm}, wp) for bm, wp in OUTER_PRODUCT_ROWS if bm <= max(64, next_pow2(M))]
    return finish_blocks(
        w, [[(M, "BM")], 1, G], M * ncols * cg, {"BM": min(64, next_pow2(M))}, configs
    )


# (BN, BK, warps)
ONE_ROW_TILES = ((128, 32, 4), (256, 32, 4), (512, 16, 4), (512, 32, 8), (1024, 16, 8))


def _scatter_one_row(
    w: Writer, x: ir.Expr, wt: ir.Expr, spec: ConvSpec, d: _ScatterDims, out: str
) -> Kernel:
    """:func:`conv_transpose_scatter` of a single input position: a vector times the weight.

    ``tl.dot`` pads the one row to 16 (a 101-long vector times a (101 x 2.2M) weight took 4.9 ms
    on an H200, 180 GB/s). Here each program keeps [BK x BN] products in registers over the
    reduction and sums them once at the end: the weight streams along its columns, and the sum
    is no broadcast-and-sum that Triton's combine pass rewrites into a TF32 dot."""
    _, ins, ksz, G, cg, ocg, _, ncols = astuple(d)
    zeros = ["0"] * len(ins)
    w.constexprs = ["BN", "BK"]
    w.line("rn = tl.program_id(0) * BN + tl.arange(0, BN)")
    w.line("g = tl.program_id(2)")
    cols = w.delinearize("rn", (ocg, *ksz))
    w.line("part = tl.zeros([BK, BN], dtype=tl.float32)")
    with w.block(f"for c0 in range(0, {cg}, BK):"):
        w.line("rk = c0 + tl.arange(0, BK)")
        w.line(f"ci = g * {cg} + rk")
        w.line(f"amask = rk < {cg}")
        av = w.ev(x, ["0", "ci", *zeros], "amask")
        w.line(f"bmask = (rk[:, None] < {cg}) & (rn[None, :] < {ncols})")
        bv = w.ev(wt, ["ci[:, None]", *(_side(c, "[None, :]") for c in cols)], "bmask")
        a = w.tmp(f"tl.where(amask, {av}, 0.0).to(tl.float32)", "a")
        b = w.tmp(f"tl.where(bmask, {bv}, 0.0).to(tl.float32)", "b")
        w.line(f"part += {a}[:, None] * {b}")
    w.line("acc = tl.sum(part, 0)")
    _store_scattered(w, spec, ["0", *zeros], cols, [f"(rn < {ncols})"], out, None)
    configs = [({"BN": bn, "BK": bk}, wp) for bn, bk, wp in ONE_ROW_TILES
               if bn <= max(128, next_pow2(ncols)) and bk <= max(16, next_pow2(cg))]
    cpu = {"BN": min(128, next_pow2(ncols)), "BK": min(16, next_pow2(cg))}
    return finish_blocks(w, [[(ncols, "BN")], 1, G], ncols * cg, cpu, configs)


def _store_scattered(w: Writer, spec: ConvSpec, row_idx: list[str], col_idx: list[str],
                     valid: list[str], out: str, tile: str | None) -> None:
    """Store ``acc``: element (row (n, i...), column (channel, k...)) of group ``g`` goes to output
    o = i*s - p + k*d, where that is inside the output. ``tile``: the shape to broadcast the
    index to, where one side has no index."""
    _, oc, *outs = spec.out_shape
    ocg, P = oc // spec.groups, ir.numel(tuple(outs))
    ostr = ir.contiguous_strides(tuple(outs))
    valid, spatial = list(valid), []
    for j, (i, k) in enumerate(zip(row_idx[1:], col_idx[1:], strict=True)):
        o = w.tmp(f"{i} * {spec.stride[j]} - {spec.padding[j]} + {k} * {spec.dilation[j]}", "op")
        valid.append(f"({o} >= 0) & ({o} < {outs[j]})")
        spatial.append(f"{o} * {ostr[j]}")
    w.line(f"cmask = {' & '.join(valid)}")
    lin = f"{row_idx[0]} * {oc * P} + (g * {ocg} + {col_idx[0]}) * {P} + {' + '.join(spatial)}"
    if tile:
        lin = f"tl.broadcast_to({lin}, {tile})"  # a side of one row or one column: no tile index
    w.store(out, w.tmp(lin, "o"), "acc", "cmask", spec.out_shape)


def _side(index: str, axis: str) -> str:
    """``index`` broadcast along one side of a 2-D tile (a size-1 dim's "0" stays a scalar)."""
    return index + axis if index != "0" else "0"


FILL_TILES = ((4, 512, 4), (8, 256, 4), (16, 256, 8), (8, 1024, 8))  # (BR, BC, warps)


def _unreached_fill(tiles: Writer, spec: ConvSpec, ins, ksz, out: str) -> Kernel | None:
    """The outputs of :func:`conv_transpose_scatter` (written by ``tiles``) that no (input, tap)
    pair reaches, written as zero through the fused epilogue (which may map 0 to anything); None
    when every output is reached.

    Where at most half the outputs are reached, the fill writes all of them (the GEMM overwrites
    its own): a mask that changes from one element to the next keeps stores scalar, and a
    ConvTranspose2d's masked fill wrote its 3.5 GB at 1.1 TB/s on an H200. Else tiles are
    [rows (n, channel) x columns (spatial position)]: whether a position is reached does not
    depend on its row, so the per-tap test runs once per column of a tile, not once per element
    (per element, a fill tested 29 taps for each of 214M outputs: 1.5 ms).
    """
    nb, oc, *outs = spec.out_shape
    counts = [reached_count(spec, j, ins[j], ksz[j]) for j in range(len(outs))]
    tests = [j for j, c in enumerate(counts) if c != outs[j]]
    if not tests:
        return None
    if None not in counts and ir.numel(tuple(counts)) * 2 <= ir.numel(tuple(outs)):
        return _fill_all(tiles, spec, out)
    w = _fill_writer(tiles, "Outputs no input reaches.")
    rows, P = nb * oc, ir.numel(tuple(outs))
    w.constexprs = ["BR", "BC"]
    w.line(f"tiles_c = tl.cdiv({P}, BC)")
    w.line("rc = (tl.program_id(0) % tiles_c) * BC + tl.arange(0, BC)")
    w.line("rr = (tl.program_id(0) // tiles_c) * BR + tl.arange(0, BR)")
    oidx = w.delinearize("rc", tuple(outs))
    hits = []
    for j in tests:
        s, p, d = spec.stride[j], spec.padding[j], spec.dilation[j]
        hit = w.tmp("tl.zeros([BC], dtype=tl.int1)", "hit")
        with w.block(f"for k in tl.static_range({ksz[j]}):"):
            w.line(f"t = {oidx[j]} + {p} - k * {d}")
            w.line(f"{hit} = {hit} | ((t >= 0) & (t % {s} == 0) & (t < {s * ins[j]}))")
        hits.append(hit)
    w.line(f"free = (rc < {P}) & (({' & '.join(hits)}) == 0)")
    w.line(f"fmask = (rr[:, None] < {rows}) & free[None, :]")
    lin = w.tmp(f"rr[:, None] * {P} + rc[None, :]", "o")
    w.store(out, lin, "tl.zeros([BR, BC], dtype=tl.float32)", "fmask", spec.out_shape)
    configs = [({"BR": br, "BC": bc}, wp) for br, bc, wp in FILL_TILES
               if br <= max(4, next_pow2(rows)) and bc <= max(256, next_pow2(P))]
    cpu = {"BR": min(4, next_pow2(rows)), "BC": min(256, next_pow2(P))}
    # column tiles fastest, all on grid axis 0
    return finish_blocks(w, [[(P, "BC"), (rows, "BR")]], rows * P, cpu, configs, tune_small=False)


def _fill_writer(tiles: Writer, doc: str) -> Writer:
    """A writer for the fill kernel of ``tiles``: launched before it, through its epilogue."""
    w = Writer(tiles.name + "_fill", doc, tiles.blocks)
    w.epilogue = tiles.epilogue
    return w


def reached_count(spec: ConvSpec, dim: int, n_in: int, k: int) -> int | None:
    """How many output positions along spatial ``dim`` some (input, tap) pair reaches (None,
    not counted, past 2**20 pairs)."""
    if n_in * k > 1 << 20:
        return None
    s, p, d, size = spec.stride[dim], spec.padding[dim], spec.dilation[dim], spec.out_shape[2 + dim]
    return len({o for i in range(n_in) for kk in range(k) if 0 <= (o := i * s - p + kk * d) < size})


def _fill_all(tiles: Writer, spec: ConvSpec, out: str) -> Kernel:
    """Every output of a transposed convolution written as zero through the fused epilogue."""
    w = _fill_writer(tiles, "Every output (the GEMM then writes the reached ones).")
    n = ir.numel(spec.out_shape)
    w.constexprs = ["BLOCK"]
    w.line("offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)")
    w.store(out, "offs", "tl.zeros([BLOCK], dtype=tl.float32)", "offs < N", spec.out_shape)
    return finish_1d(w, n, "BLOCK", POINTWISE_CONFIGS, n, min(w.blocks.pointwise, next_pow2(n)))


def pool(
    w: Writer, kind: str, x: ir.Expr, ksz, stride, padding, dilation, out_shape, out,
    divide: int | str | None = None,
) -> Kernel:
    """Max or average pooling, or the position of each window's maximum in its input plane
    (``argmax``, PyTorch's ``return_indices``: the first valid tap, then any larger value or
    NaN): each output element loops over its window. An average divides by ``divide``: a
    number (None: the window's size), ``"padded"`` (the window clipped to the padded input,
    where a ``ceil_mode`` window hangs over it) or ``"valid"`` (clipped to the input: no
    ``count_include_pad``), as PyTorch's ``avg_pool`` does."""
    nsp = len(ksz)
    n = ir.numel(out_shape)
    w.constexprs = ["BLOCK"]
    w.line("offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)")
    w.line("omask = offs < N")
    oidx = w.delinearize("offs", tuple(out_shape))
    lead = oidx[: len(out_shape) - nsp]
    fill = "0.0" if kind == "avg" else '-float("inf")'
    w.line(f"acc = tl.full([BLOCK], {fill}, tl.float32)")
    if kind == "argmax":
        w.line("arg = tl.full([BLOCK], -1, tl.int64)")
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
        elif kind == "argmax":
            strides = ir.contiguous_strides(tuple(ins))
            at = " + ".join(f"(tl.zeros([BLOCK], tl.int64) + {q}) * {st}"  # q may be a number
                            for q, st in zip(pos, strides, strict=True))
            vm = w.tmp(f"tl.where(wmask, {v}, -float(\"inf\"))", "x")
            # PyTorch's rule: the first valid tap, then any larger value or any NaN
            better = w.tmp(f"wmask & (({vm} > acc) | ({vm} != {vm}) | (arg < 0))", "m")
            w.line(f"acc = tl.where({better}, {vm}, acc)")
            w.line(f"arg = tl.where({better}, {at}, arg)")
        else:
            w.line(f"acc += tl.where(wmask, {v}, 0.0)")
    res = {"max": "acc", "argmax": "arg"}.get(kind) or w.tmp(
        f"acc / {_pool_divisor(w, divide, oidx[len(lead):], ksz, stride, padding, ins)}", "r")
    w.store(out, "offs", res, "omask", tuple(out_shape))
    window = ir.numel(spans)
    return finish_1d(
        w, n, "BLOCK", [(128, 4), (512, 4), (1024, 8)], n * window, min(1024, next_pow2(n))
    )


def _pool_divisor(w: Writer, divide: int | str | None, oidx, ksz, stride, padding, ins) -> str:
    """What an average window's sum is divided by (see ``pool``)."""
    if divide is None or isinstance(divide, int):
        return str(ir.numel(tuple(ksz)) if divide is None else divide)
    sizes = []
    for o, k, s, p, n in zip(oidx, ksz, stride, padding, ins, strict=True):
        start = w.tmp(f"{o} * {s} - {p}", "q")
        end = w.tmp(f"tl.minimum({start} + {k}, {n + p})", "q")
        if divide == "valid":
            start = w.tmp(f"tl.maximum({start}, 0)", "q")
            end = w.tmp(f"tl.minimum({end}, {n})", "q")
        sizes.append(f"({end} - {start})")
    return w.tmp(f"({' * '.join(sizes)}).to(tl.float32)", "d")


def reachable_taps(k: int, s: int, p: int, d: int, n_in: int, n_out: int) -> tuple[int, int]:
    """The window offsets (first, last) of one dim that some output's window can place inside the
    input; the others only ever read padding. A 3-D max pool with 8-wide windows over a depth of 1
    looped over 512 offsets per output, 448 of them always masked (15.8 ms on an H200)."""
    lo = max(0, -(-(p - (n_out - 1) * s) // d))  # the last output's window reaches index 0
    hi = min(k - 1, (n_in - 1 + p) // d)  # the first output's window still starts in range
    return (lo, hi) if lo <= hi else (0, k - 1)
