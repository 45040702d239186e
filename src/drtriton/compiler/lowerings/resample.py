"""Lowerings of resampling and rearranging ops (interpolate, pixel shuffle, roll).

``pixel_shuffle``/``pixel_unshuffle`` are a reshape, a permute and a reshape; ``roll`` is two
slices concatenated along each rolled dim: both stay lazy index arithmetic.

``interpolate`` (``nn.Upsample``) computes, for every spatial dim on its own, the source index of
each output index (and for the linear modes a second neighbour and its weight) with PyTorch's
float32 formulas, emulated here in numpy at compile time. A dim whose source indices are a
multiple of the output index (copy, broadcast, integer down-sampling) or the output index
divided by an integer (integer nearest up-sampling) is a lazy view; when every dim is, the whole
op is a view that fuses into its consumer. Otherwise one gather kernel evaluates the input
(with any fused elementwise prologue) at the computed source indices, with the same float32
formulas written into the kernel, and blends the linear modes' neighbours.

PyTorch's kernels short-cut some sizes (an unchanged size copies, a doubled one shifts) on some
backends and ranks and not on others; where the short-cut and the formula give different
indices (a scale factor that leaves the size unchanged or doubles it but is not 1 or 2), the
backends disagree with each other and the lowering refuses.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from drtriton.compiler import ir
from drtriton.compiler.kernels.resample import Axis, Indices, Weights, resample_kernel
from drtriton.compiler.lower import Lowering, Unsupported
from drtriton.compiler.lowerings.layers import adaptive_avg, reread_input
from drtriton.compiler.lowerings.registry import _f, fn, method, module
from drtriton.compiler.lowerings.views import _cat, _index, take

# ------------------------------------------------------------------ pixel shuffle


def pixel_shuffle(L: Lowering, x: ir.Expr, r: int) -> ir.Expr:
    """(*, C*r*r, H, W) -> (*, C, H*r, W*r): out[c, h*r+i, w*r+j] = x[c*r*r + i*r + j, h, w]."""
    x, r = L.t(x), int(r)
    *batch, c, h, w = x.shape
    if c % (r * r):
        raise Unsupported(f"pixel_shuffle of {c} channels by {r}")
    b = len(batch)
    y = ir.reshape(x, (*batch, c // (r * r), r, r, h, w))
    y = ir.permute(y, (*range(b), b, b + 3, b + 1, b + 4, b + 2))
    return ir.reshape(y, (*batch, c // (r * r), h * r, w * r))


def pixel_unshuffle(L: Lowering, x: ir.Expr, r: int) -> ir.Expr:
    """(*, C, H*r, W*r) -> (*, C*r*r, H, W), the inverse of :func:`pixel_shuffle`."""
    x, r = L.t(x), int(r)
    *batch, c, h, w = x.shape
    if h % r or w % r:
        raise Unsupported(f"pixel_unshuffle of {h}x{w} by {r}")
    b = len(batch)
    y = ir.reshape(x, (*batch, c, h // r, r, w // r, r))
    y = ir.permute(y, (*range(b), b, b + 2, b + 4, b + 1, b + 3))
    return ir.reshape(y, (*batch, c * r * r, h // r, w // r))


@fn(torch.pixel_shuffle, F.pixel_shuffle)
def _pixel_shuffle(L, x, upscale_factor):
    return pixel_shuffle(L, x, upscale_factor)


@fn(torch.pixel_unshuffle, F.pixel_unshuffle)
def _pixel_unshuffle(L, x, downscale_factor):
    return pixel_unshuffle(L, x, downscale_factor)


@module(nn.PixelShuffle)
def _m_pixel_shuffle(L, m, p, x):
    return pixel_shuffle(L, x, m.upscale_factor)


@module(nn.PixelUnshuffle)
def _m_pixel_unshuffle(L, m, p, x):
    return pixel_unshuffle(L, x, m.downscale_factor)


# ------------------------------------------------------------------ roll


def _ints(v) -> tuple[int, ...]:
    return tuple(int(s) for s in v) if isinstance(v, list | tuple) else (int(v),)


def roll(L: Lowering, x: ir.Expr, shifts: int | tuple[int, ...],
         dims: int | tuple[int, ...] | None = None) -> ir.Expr:
    """``torch.roll``: out[i] = x[(i - shift) mod n] along each dim, as the last ``shift``
    elements followed by the others (a ``cat`` of two slices); ``dims=None`` rolls the
    flattened tensor."""
    x = L.t(x)
    shifts = _ints(shifts)
    if dims is None:
        if len(shifts) != 1:
            raise Unsupported("roll with several shifts and no dims")
        flat = ir.reshape(x, (ir.numel(x.shape),))
        return ir.reshape(_roll_dim(L, flat, shifts[0], 0), x.shape)
    dims = _ints(dims)
    if len(dims) != len(shifts):
        raise Unsupported("roll with unequal numbers of shifts and dims")
    for s, d in zip(shifts, dims, strict=True):
        x = _roll_dim(L, x, s, d % len(x.shape))
    return x


def _roll_dim(L: Lowering, x: ir.Expr, shift: int, d: int) -> ir.Expr:
    n = x.shape[d]
    s = shift % n if n else 0
    if s == 0:
        return x
    head = [slice(None)] * d
    return _cat(L, [_index(x, (*head, slice(n - s, n))), _index(x, (*head, slice(0, n - s)))], d)


@fn(torch.roll)
@method("roll")
def _roll(L, x, shifts, dims=None):
    return roll(L, x, shifts, dims)


# ------------------------------------------------------------------ interpolate: index plans

NEAREST = ("nearest", "nearest-exact")
LINEAR = {"linear": 1, "bilinear": 2, "trilinear": 3}
DISAGREE = "PyTorch short-cuts that size in some of its kernels, not in others"

_f32 = np.float32
def _emulate(rule: str, scale: float, n_in: int, n_out: int) -> tuple[Indices, Indices, Weights]:
    """(src, src1, lam) of every output index, as PyTorch computes them in float32."""
    d = np.arange(n_out, dtype=_f32)
    s = _f32(scale)
    if rule == "nearest":
        r = np.floor(d * s)
    elif rule == "nearest-exact":
        r = np.floor((d + _f32(0.5)) * s)
    elif rule == "linear_ac":
        r = s * d
    else:
        r = np.maximum(s * (d + _f32(0.5)) - _f32(0.5), _f32(0))
    i0 = np.minimum(np.floor(r).astype(np.int64), n_in - 1)
    if rule in NEAREST:
        return tuple(int(i) for i in i0), tuple(int(i) for i in i0), (0.0,) * n_out
    lam = np.minimum(np.maximum(r - i0.astype(_f32), _f32(0)), _f32(1))
    i1 = np.minimum(i0 + 1, n_in - 1)
    return tuple(int(i) for i in i0), tuple(int(i) for i in i1), tuple(float(v) for v in lam)


def _scale(align: bool, n_in: int, n_out: int, scale: float | None) -> np.float32:
    """PyTorch's float32 ``area_pixel_compute_scale`` / ``compute_scales_value``."""
    if align:
        return _f32(n_in - 1) / _f32(n_out - 1) if n_out > 1 else _f32(0)
    if scale is not None and scale > 0:
        return _f32(1.0 / scale)
    return _f32(n_in) / _f32(n_out)


def plan_axis(mode: str, align: bool, n_in: int, n_out: int, scale: float | None) -> Axis:
    """The source indices of one spatial dim (``scale``: the scale factor PyTorch's kernel gets,
    None when it derives it from the sizes) and the cheapest exact way to compute them."""
    s = _scale(align, n_in, n_out, scale)
    if mode == "bicubic":
        return Axis(n_in, n_out, "cubic_ac" if align else "cubic", float(s), (), (), (),
                    "formula", False, cubic=True)
    rule = mode if mode in NEAREST else ("linear_ac" if align else "linear")
    src, src1, lam = _emulate(rule, s, n_in, n_out)
    _check_shortcuts(mode, n_in, n_out, src, lam)
    single = all(a == b or w == 0 for a, b, w in zip(src, src1, lam, strict=True))
    form, k = "formula", 0
    if single:
        step = src[1] if n_out > 1 else 0
        if all(i == o * step for o, i in enumerate(src)):
            form, k = "affine", step
        elif n_out % n_in == 0 and all(i == o // (n_out // n_in) for o, i in enumerate(src)):
            form, k = "repeat", n_out // n_in
    return Axis(n_in, n_out, rule, float(s), src, src1, lam, form, not single, k)


def _check_shortcuts(mode: str, n_in: int, n_out: int, src, lam) -> None:
    """Refuse where PyTorch's size short-cuts (copy an unchanged size; shift a doubled one for
    nearest) would give other indices than its formula: its backends disagree there."""
    ident = all(i == o for o, i in enumerate(src)) and not any(lam)
    if n_out == n_in and n_in > 1 and not ident:
        raise Unsupported(f"{mode} with a scale factor that keeps size {n_in} but is not 1 "
                          f"({DISAGREE})")
    if mode in NEAREST and n_out == 2 * n_in and any(i != o >> 1 for o, i in enumerate(src)):
        raise Unsupported(f"{mode} with a scale factor that doubles size {n_in} but is not 2 "
                          f"({DISAGREE})")


# ------------------------------------------------------------------ interpolate: lowering


def _per_dim(v, nsp: int, what: str) -> tuple:
    if isinstance(v, list | tuple | torch.Size):
        if len(v) != nsp:
            raise Unsupported(f"{what} of {len(v)} values for {nsp} spatial dims")
        return tuple(v)
    return (v,) * nsp


def _sizes(ins, size, scale_factor, recompute) -> tuple[tuple[int, ...], tuple]:
    """Output sizes and the scale factors PyTorch's kernel receives (None: from the sizes)."""
    nsp = len(ins)
    if size is not None:
        if scale_factor is not None:
            raise Unsupported("both size and scale_factor")
        outs = _per_dim(size, nsp, "size")
        if not all(isinstance(o, int) for o in outs):
            raise Unsupported("size that is not a tuple of ints")
        return tuple(outs), (None,) * nsp
    if scale_factor is None:
        raise Unsupported("neither size nor scale_factor")
    scales = tuple(float(s) for s in _per_dim(scale_factor, nsp, "scale_factor"))
    outs = tuple(int(math.floor(i * s)) for i, s in zip(ins, scales, strict=True))
    return outs, ((None,) * nsp if recompute else scales)


def interpolate(L: Lowering, x: ir.Expr, size: int | tuple[int, ...] | None = None,
                scale_factor: float | tuple[float, ...] | None = None, mode: str = "nearest",
                align_corners: bool | None = None, recompute_scale_factor: bool | None = None,
                antialias: bool = False) -> ir.Expr:
    """``F.interpolate`` as PyTorch computes it: output sizes from ``size`` or
    ``floor(in * scale_factor)``, source indices per spatial dim (:func:`plan_axis`), then a lazy
    view where every dim allows one, else :func:`resample_kernel`."""
    x = L.t(x)
    nsp = len(x.shape) - 2
    if not 1 <= nsp <= 3:
        raise Unsupported(f"interpolate of a {len(x.shape)}-D input")
    if antialias:
        raise Unsupported("interpolate with antialias=True")
    if mode in LINEAR and LINEAR[mode] != nsp:
        raise Unsupported(f"mode={mode!r} on a {len(x.shape)}-D input")
    if mode == "bicubic" and nsp != 2:
        raise Unsupported(f"mode='bicubic' on a {len(x.shape)}-D input")
    if mode not in NEAREST and mode not in LINEAR and mode not in ("area", "bicubic"):
        raise Unsupported(f"interpolate mode={mode!r}")
    if mode in NEAREST and align_corners:
        raise Unsupported("align_corners with a nearest mode")
    ins = x.shape[2:]
    outs, scales = _sizes(ins, size, scale_factor, recompute_scale_factor or mode == "area")
    if mode == "area":  # PyTorch's own definition: adaptive average pooling to the sizes
        return adaptive_avg(L, nsp, x, outs)
    if mode in LINEAR or mode == "bicubic":
        x = _f(x)
    axes = tuple(plan_axis(mode, bool(align_corners), i, o, s)
                 for i, o, s in zip(ins, outs, scales, strict=True))
    if all(a.form != "formula" for a in axes):
        return _as_view(x, axes)
    return _gather(L, x, axes)


def _as_view(x: ir.Expr, axes: tuple[Axis, ...]) -> ir.Expr:
    """Affine dims as one strided view, then repeated dims as broadcast-and-merge reshapes."""
    lead = len(x.shape) - len(axes)
    shape = list(x.shape[:lead]) + [a.n_out if a.form == "affine" else a.n_in for a in axes]
    maps = [(d, 0, 1) for d in range(lead)]
    maps += [(lead + j, 0, a.k if a.form == "affine" else 1) for j, a in enumerate(axes)]
    same = tuple(shape) == x.shape and tuple(maps) == ir.identity_maps(len(shape))
    y = x if same else ir.view(x, tuple(shape), tuple(maps))
    split = list(x.shape[:lead])
    for a in axes:
        split += [a.n_in, 1] if a.form == "repeat" else [a.n_out]
    wide = list(x.shape[:lead])
    for a in axes:
        wide += [a.n_in, a.k] if a.form == "repeat" else [a.n_out]
    y = ir.broadcast_to(ir.reshape(y, tuple(split)), tuple(wide))
    return ir.reshape(y, x.shape[:lead] + tuple(a.n_out for a in axes))


def _gather(L: Lowering, x: ir.Expr, axes: tuple[Axis, ...]) -> ir.Load:
    lead = x.shape[: len(x.shape) - len(axes)]
    shape = lead + tuple(a.n_out for a in axes)
    taps = math.prod(4 if a.cubic else 2 if a.two else 1 for a in axes)
    x = reread_input(L, x, ir.numel(shape) * taps / max(1, ir.numel(x.shape)))
    L.flush_expr(x)
    big = max([ir.numel(shape)] + [ir.numel(L.shapes[b][0]) for b in ir.buffers_of(x)])
    itype = "tl.int64" if big >= 2**31 else "tl.int32"
    return L.kernel(lambda w, o, x=x: resample_kernel(w, x, axes, shape, o, itype),
                    shape, x.dtype)


@fn(F.interpolate, F.upsample)
def _interpolate(L, input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                 recompute_scale_factor=None, antialias=False):
    return interpolate(L, input, size, scale_factor, mode, align_corners, recompute_scale_factor,
                       antialias)


@fn(F.upsample_nearest)
def _upsample_nearest(L, input, size=None, scale_factor=None):
    return interpolate(L, input, size, scale_factor, "nearest")


@fn(F.upsample_bilinear)
def _upsample_bilinear(L, input, size=None, scale_factor=None):
    return interpolate(L, input, size, scale_factor, "bilinear", True)


@module(nn.Upsample, nn.UpsamplingNearest2d, nn.UpsamplingBilinear2d)
def _m_upsample(L, m, p, x):
    return interpolate(L, x, m.size, m.scale_factor, m.mode, m.align_corners,
                       m.recompute_scale_factor)


# ------------------------------------------------------------------ affine_grid, grid_sample


def _normalised_line(n: int, align: bool) -> ir.Expr:
    """PyTorch's ``linspace_from_neg_one``: n points across [-1, 1] (pixel centres without
    ``align_corners``)."""
    if n <= 1:
        return ir.arange(1, 0.0, 0.0, torch.float32)
    if align:
        return ir.arange(n, -1.0, 2.0 / (n - 1), torch.float32)
    return ir.arange(n, -(n - 1) / n, 2.0 / n, torch.float32)


@fn(F.affine_grid)
def _affine_grid(L, theta, size, align_corners=None):
    """The sampling grid of a batch of 2-D affine maps: ``theta[n] @ (x, y, 1)`` at every
    output pixel's normalised coordinates, (N, H, W, 2)."""
    theta = L.t(theta)
    if len(size) != 4 or tuple(theta.shape) != (size[0], 2, 3):
        raise Unsupported("affine_grid of a volume (a 5-D size)")
    n, _, h, w = size
    xs = ir.reshape(_normalised_line(w, bool(align_corners)), (1, 1, w))
    ys = ir.reshape(_normalised_line(h, bool(align_corners)), (1, h, 1))

    def row(r: int) -> ir.Expr:
        t = [ir.reshape(_index(theta, (slice(None), r, c)), (n, 1, 1)) for c in range(3)]
        return ir.op("add", ir.op("add", ir.op("mul", xs, t[0]), ir.op("mul", ys, t[1])), t[2])

    parts = tuple(ir.reshape(row(r), (n, h, w, 1)) for r in range(2))
    return ir.Cat((n, h, w, 2), torch.float32, parts, 3, (0, 1))


@fn(F.grid_sample)
def _grid_sample(L, input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """``input`` (N, C, H, W) read at ``grid``'s normalised (x, y) points, bilinear: four
    gathers of the flattened input, weighted; taps outside the input read 0 (``zeros``), or the
    coordinates are clamped to it first (``border``)."""
    x, grid = _f(L.t(input)), L.t(grid)
    if len(x.shape) != 4:
        raise Unsupported("grid_sample of a volume (5-D input)")
    if mode != "bilinear" or padding_mode not in ("zeros", "border"):
        raise Unsupported(f"grid_sample with mode={mode!r}, padding_mode={padding_mode!r} "
                          "(bilinear with zeros or border is lowered)")
    n, c, h_in, w_in = x.shape
    _, h, w, _ = grid.shape
    coords = []
    for k, size in ((0, w_in), (1, h_in)):
        g = _index(grid, (slice(None), slice(None), slice(None), k))
        if align_corners:
            u = ir.op("mul", ir.op("div", ir.op("add", g, ir.const(1.0)), ir.const(2.0)),
                      ir.const(float(size - 1)))
        else:
            u = ir.op("div", ir.op("sub", ir.op("mul", ir.op("add", g, ir.const(1.0)),
                                                ir.const(float(size))), ir.const(1.0)),
                      ir.const(2.0))
        if padding_mode == "border":
            u = ir.op("minimum", ir.op("maximum", u, ir.const(0.0)), ir.const(float(size - 1)))
        coords.append(u)
    (ix, iy) = coords
    x0, y0 = ir.op("floor", ix), ir.op("floor", iy)
    fx, fy = ir.op("sub", ix, x0), ir.op("sub", iy, y0)
    flat = ir.reshape(x, (n, c, h_in * w_in))
    out = None
    for dy in (0, 1):
        for dx in (0, 1):
            xi = ir.cast(ir.op("add", x0, ir.const(float(dx))), torch.int64)
            yi = ir.cast(ir.op("add", y0, ir.const(float(dy))), torch.int64)
            inside = ir.op("and", ir.op("and", ir.op("ge", xi, ir.const(0)),
                                        ir.op("lt", xi, ir.const(w_in))),
                           ir.op("and", ir.op("ge", yi, ir.const(0)),
                                 ir.op("lt", yi, ir.const(h_in))))
            lin = ir.op("where", inside, ir.op("add", ir.op("mul", yi, ir.const(w_in)), xi),
                        ir.const(-1), dtype=torch.int64)  # -1: the gather reads nothing
            wx = fx if dx else ir.op("sub", ir.const(1.0), fx)
            wy = fy if dy else ir.op("sub", ir.const(1.0), fy)
            index = ir.broadcast_to(ir.reshape(lin, (n, 1, h * w)), (n, c, h * w))
            tap = ir.op("mul", ir.reshape(ir.op("mul", wx, wy), (n, 1, h * w)),
                        take(L, flat, 2, index))
            out = tap if out is None else ir.op("add", out, tap)
    return ir.reshape(out, (n, c, h, w))


@fn(F.channel_shuffle, torch.channel_shuffle, F.native_channel_shuffle)
def _channel_shuffle(L, input, groups):
    """ShuffleNet's shuffle: channels (g, C/g) read as (C/g, g), a lazy view."""
    x = L.t(input)
    n, c, rest = x.shape[0], x.shape[1], x.shape[2:]
    if c % groups:
        raise Unsupported(f"channel_shuffle of {c} channels into {groups} groups")
    y = ir.reshape(x, (n, groups, c // groups, *rest))
    return ir.reshape(ir.transpose(y, 1, 2), x.shape)
