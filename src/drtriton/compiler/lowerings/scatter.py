"""Writes and adds at indexed positions: ``index_add``, ``index_copy``, ``index_fill``,
``scatter_add``, ``scatter``, assignments (``index_put``: ``x[mask] = v`` as a select,
``x[:, idx] = v`` and ``x[idx] += v`` as a scatter), ``max_unpool``, ``F.fold`` and
``embedding_bag``'s bags by offsets. In-place spellings (``index_add_``) reach these through the
method table's in-place rule."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from drtriton.compiler import ir
from drtriton.compiler.kernels.scatter import scatter
from drtriton.compiler.lower import Lowering, Unsupported
from drtriton.compiler.lower import _tuple as ntuple
from drtriton.compiler.lowerings.registry import fn, method


def _scattered(L: Lowering, x, dim: int, index, src, per_element: bool,
               accumulate: bool) -> ir.Load:
    """``x`` with ``src`` written (or added) along ``dim`` at ``index`` (see ``scatter``)."""
    x, index, src = L.t(x), L.t(index), L.t(src)
    if index.dtype.is_floating_point or index.dtype == torch.bool:
        raise Unsupported(f"an index of dtype {index.dtype}")
    d = dim % len(x.shape)
    if per_element:
        if len(index.shape) != len(x.shape):
            raise Unsupported("an index of another rank than the tensor")
        if any(index.shape[k] > x.shape[k] for k in range(len(x.shape)) if k != d) or (
                src.shape and any(i > n for i, n in zip(index.shape, src.shape, strict=False))):
            raise Unsupported(f"an index of shape {index.shape} for {x.shape} and {src.shape}")
        space = index.shape
    else:
        if len(index.shape) > 1:
            raise Unsupported("an index with more than one dim")
        space = x.shape[:d] + (ir.numel(index.shape),) + x.shape[d + 1:]
        index = ir.reshape(index, (space[d],)) if index.shape != (space[d],) else index
        try:
            src = ir.broadcast_to(src, space)
        except ValueError:
            raise Unsupported(f"values of shape {src.shape} for {space} positions") from None
    out = L.kernel(lambda w, o: scatter(w, x, src, index, d, per_element, accumulate, o),
                   x.shape, x.dtype)
    L.flush(out.buf)  # nothing fuses into it: its adds are not its outputs' final values
    return out


@fn(torch.index_add)
@method("index_add")
def _index_add(L, x, dim, index, source, alpha=1):
    source = L.t(source)
    if alpha != 1:
        source = ir.op("mul", source, ir.const(alpha))
    return _scattered(L, x, dim, index, source, per_element=False, accumulate=True)


@fn(torch.index_copy)
@method("index_copy")
def _index_copy(L, x, dim, index, source):
    return _scattered(L, x, dim, index, source, per_element=False, accumulate=False)


@fn(torch.index_fill)
@method("index_fill")
def _index_fill(L, x, dim, index, value):
    return _scattered(L, x, dim, index, value, per_element=False, accumulate=False)


@fn(torch.scatter_add)
@method("scatter_add")
def _scatter_add(L, x, dim, index, src):
    return _scattered(L, x, dim, index, src, per_element=True, accumulate=True)


@fn(torch.scatter)
@method("scatter")
def _scatter(L, x, dim, index, src=None, value=None, reduce=None):
    if reduce is not None:
        raise Unsupported(f"scatter with reduce={reduce!r}")
    values = src if src is not None else value
    if isinstance(values, ir.Expr) and values.shape == () or not isinstance(values, ir.Expr):
        values = ir.broadcast_to(L.t(values), L.t(index).shape)  # one value everywhere
    return _scattered(L, x, dim, index, values, per_element=True, accumulate=False)


@fn(torch.index_put)
@method("index_put")
def _index_put(L, x, indices, values, accumulate=False):
    """``x[mask] = values`` for a boolean ``mask`` over ``x``'s leading dims, as a select
    (``values`` one value, or one per selected row); ``x[:, idx] = values`` and
    ``x[idx] += values`` with one integer index tensor as a scatter."""
    x, values = L.t(x), L.t(values)
    given = [(d, L.t(i)) for d, i in enumerate(indices) if i is not None]
    if len(given) != 1:
        raise Unsupported("assignment through several index tensors at once")
    d, index = given[0]
    if index.dtype in (torch.bool, torch.uint8):
        if d != 0 or tuple(index.shape) != tuple(x.shape[:len(index.shape)]):
            raise Unsupported("assignment through a mask over other than the leading dims")
        return _masked_put(x, index, values, accumulate)
    if len(index.shape) > 1:
        raise Unsupported("assignment through integer indices with more than one dim")
    return _scattered(L, x, d, index, values, per_element=False, accumulate=accumulate)


def _masked_put(x: ir.Expr, mask: ir.Expr, values: ir.Expr, accumulate: bool) -> ir.Expr:
    if mask.dtype != torch.bool:
        mask = ir.op("ne", mask, ir.const(0))
    k = len(mask.shape)
    mask = ir.broadcast_to(ir.reshape(mask, mask.shape + (1,) * (len(x.shape) - k)), x.shape)
    try:
        new = ir.cast(ir.broadcast_to(values, x.shape), x.dtype)
    except ValueError:
        raise Unsupported("x[mask] = values with one value per selected element "
                          "(their number depends on the data)") from None
    if accumulate:
        new = ir.op("add", x, new)
    return ir.op("where", mask, new, x, dtype=x.dtype)


def _unpool(L, nsp: int, x, indices, kernel_size, stride=None, padding=0, output_size=None):
    """``max_unpool``: each value written at the position its max pooling recorded, in a zero
    plane of the output size (default ``(in - 1) * stride - 2 * padding + kernel``)."""
    x, indices = L.t(x), L.t(indices)
    ksz = ntuple(kernel_size, nsp)
    strides = ksz if stride is None else ntuple(stride, nsp)
    pads = ntuple(padding, nsp)
    lead, ins = x.shape[:-nsp], x.shape[-nsp:]
    if output_size is None:
        outs = tuple((i - 1) * s - 2 * p + k for i, s, p, k in zip(ins, strides, pads, ksz,
                                                                   strict=True))
    else:
        outs = tuple(output_size)[-nsp:]
    plane = math.prod(outs)
    flat = lead + (math.prod(ins),)
    zeros = ir.Const(lead + (plane,), x.dtype, 0.0)
    out = _scattered(L, zeros, len(lead), ir.reshape(indices, flat), ir.reshape(x, flat),
                     per_element=True, accumulate=False)
    return ir.reshape(out, lead + outs)


for _n in (1, 2, 3):
    fn(getattr(F, f"max_unpool{_n}d"))(
        lambda L, x, indices, *a, _n=_n, **k: _unpool(L, _n, x, indices, *a, **k))


@fn(F.fold)
def _fold(L, input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """``F.fold`` (col2im): every column's patch added into the (C, H, W) image. The target of
    each (channel, tap, block) is affine in aranges along its own axes, so no division is
    needed; taps that fall in the padding are aimed past the image and write nothing."""
    x = L.t(input)
    (h, w), (kh, kw), (dh, dw), (ph, pw), (sh, sw) = (
        ntuple(v, 2) for v in (output_size, kernel_size, dilation, padding, stride))
    unbatched = len(x.shape) == 2
    if unbatched:
        x = ir.reshape(x, (1,) + x.shape)
    n, rows, blocks = x.shape
    lh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    lw = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    c = rows // (kh * kw)
    if c * kh * kw != rows or lh * lw != blocks:
        raise Unsupported(f"fold of {x.shape} into {(h, w)} with a {(kh, kw)} kernel")
    axes = (c, kh, kw, lh, lw)

    def along(k: int, start: int, step: int) -> ir.Expr:
        line = ir.arange(axes[k], start, step, torch.int64)
        return ir.reshape(line, tuple(s if j == k else 1 for j, s in enumerate(axes)))

    ys = ir.op("add", along(3, -ph, sh), along(1, 0, dh))
    xs = ir.op("add", along(4, -pw, sw), along(2, 0, dw))
    inside = ir.op("and", ir.op("and", ir.op("ge", ys, ir.const(0)), ir.op("lt", ys, ir.const(h))),
                   ir.op("and", ir.op("ge", xs, ir.const(0)), ir.op("lt", xs, ir.const(w))))
    at = ir.op("add", ir.op("add", along(0, 0, h * w), ir.op("mul", ys, ir.const(w))), xs)
    at = ir.op("where", inside, at, ir.const(c * h * w), dtype=torch.int64)  # past the image
    index = ir.broadcast_to(ir.reshape(at, (1, rows * blocks)), (n, rows * blocks))
    zeros = ir.Const((n, c * h * w), x.dtype, 0.0)
    out = _scattered(L, zeros, 1, index, ir.reshape(x, (n, rows * blocks)), per_element=True,
                     accumulate=True)
    return ir.reshape(out, (c, h, w) if unbatched else (n, c, h, w))


def bags_by_offsets(L, rows: ir.Expr, offsets, mode: str, include_last_offset: bool) -> ir.Expr:
    """``embedding_bag`` with ``offsets``: row k belongs to bag ``(offsets <= k).sum() - 1``;
    the bags are sums of their rows (atomic adds), means divide by their sizes (an empty bag
    gives zeros, as PyTorch's)."""
    from drtriton.compiler.lowerings.reductions import _bucketize  # reductions imports views

    offsets = L.t(offsets)
    if len(offsets.shape) != 1 or len(rows.shape) != 2:
        raise Unsupported("embedding_bag with offsets over a 1-D input, one offset per bag")
    if mode not in ("sum", "mean"):
        raise Unsupported(f"embedding_bag mode {mode!r} with offsets")
    n, bags = rows.shape[0], offsets.shape[0] - (1 if include_last_offset else 0)
    positions = ir.arange(n, 0, 1, torch.int64)
    bag_of = ir.op("sub", _bucketize(L, positions, offsets, right=True), ir.const(1))
    zeros = ir.Const((bags, rows.shape[1]), rows.dtype, 0.0)
    sums = _scattered(L, zeros, 0, bag_of, rows, per_element=False, accumulate=True)
    if mode == "sum":
        return sums
    sizes = _scattered(L, ir.Const((bags,), rows.dtype, 0.0), 0, bag_of, ir.const(1.0),
                       per_element=False, accumulate=True)
    return ir.op("div", sums, ir.reshape(ir.op("maximum", sizes, ir.const(1.0)), (bags, 1)))
