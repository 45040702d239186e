"""Lowerings of views and shape ops: index arithmetic, no copies where possible."""

from __future__ import annotations

import math
import operator

import torch
import torch.nn.functional as F

from drtriton.compiler import ir
from drtriton.compiler.lower import Unsupported
from drtriton.compiler.lowerings.registry import fn, method

# ------------------------------------------------------------------ views and shapes


@method("size")
def _size(L, x, dim=None):
    return tuple(x.shape) if dim is None else x.shape[dim]


@method("dim", "ndimension")
def _dim(L, x):
    return len(x.shape)


@method("numel")
@fn(torch.numel)
def _numel(L, x):
    return ir.numel(x.shape)


DEVICE = "the device of the program's tensors"  # the value of a tensor's ``.device``


@fn(getattr)
def _getattr(L, x, name):
    if isinstance(x, ir.Expr):
        if name == "shape":
            return tuple(x.shape)
        if name == "data":  # the same values, detached: forward sees no difference
            return x
        if name == "T":
            return ir.permute(x, tuple(reversed(range(len(x.shape)))))
        if name == "mT":
            return ir.transpose(x, -2, -1)
        if name == "dtype":
            return x.dtype
        if name == "ndim":  # static, as the shape is
            return len(x.shape)
        if name == "device":  # the candidate runs where its inputs are: constructors ignore it
            return DEVICE
        raise Unsupported(f"attribute .{name}")
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return getattr(x, name)
    if isinstance(x, dict):
        return x[name]
    return getattr(x, name)


def _shape_args(args) -> tuple:
    if len(args) == 1 and isinstance(args[0], tuple | list | torch.Size):
        return tuple(args[0])
    return tuple(args)


@method("view", "reshape")
def _view(L, x, *shape):
    if len(shape) == 1 and isinstance(shape[0], torch.dtype):
        raise Unsupported("view(dtype)")
    x = L.t(x)
    return ir.reshape(x, ir.resolve_shape(_shape_args(shape), ir.numel(x.shape)))


@fn(torch.reshape)
def _reshape(L, x, shape):
    x = L.t(x)
    return ir.reshape(x, ir.resolve_shape(tuple(shape), ir.numel(x.shape)))


@method("view_as", "reshape_as")
def _view_as(L, x, other):
    return ir.reshape(L.t(x), other.shape)


@fn(torch.flatten)
@method("flatten")
def _flatten(L, x, start_dim=0, end_dim=-1):
    x = L.t(x)
    r = len(x.shape)
    if r == 0:
        return ir.reshape(x, (1,))
    s, e = start_dim % r, end_dim % r
    shape = x.shape[:s] + (ir.numel(x.shape[s:e + 1]),) + x.shape[e + 1:]
    return ir.reshape(x, shape)


@fn(torch.unflatten)
@method("unflatten")
def _unflatten(L, x, dim, sizes):
    x = L.t(x)
    d = dim % len(x.shape)
    inner = ir.resolve_shape(tuple(sizes), x.shape[d])
    return ir.reshape(x, x.shape[:d] + inner + x.shape[d + 1:])


@fn(torch.squeeze)
@method("squeeze")
def _squeeze(L, x, dim=None):
    x = L.t(x)
    r = len(x.shape)
    if dim is None:
        dims = {d for d in range(r) if x.shape[d] == 1}
    else:
        dims = {
            d % r for d in (dim if isinstance(dim, tuple | list) else (dim,)) if x.shape[d % r] == 1
        }
    return ir.reshape(x, tuple(s for d, s in enumerate(x.shape) if d not in dims))


@fn(torch.unsqueeze)
@method("unsqueeze")
def _unsqueeze(L, x, dim):
    x = L.t(x)
    d = dim % (len(x.shape) + 1)
    return ir.reshape(x, x.shape[:d] + (1,) + x.shape[d:])


@fn(torch.permute)
@method("permute")
def _permute(L, x, *dims):
    return ir.permute(L.t(x), _shape_args(dims))


@fn(torch.transpose, torch.swapaxes, torch.swapdims)
@method("transpose", "swapaxes", "swapdims")
def _transpose(L, x, d0, d1):
    return ir.transpose(L.t(x), d0, d1)


@fn(torch.t)
@method("t")
def _t(L, x):
    x = L.t(x)
    return x if len(x.shape) < 2 else ir.transpose(x, 0, 1)


@method("expand")
def _expand(L, x, *sizes):
    x = L.t(x)
    sizes = _shape_args(sizes)
    lead = len(sizes) - len(x.shape)
    shape = tuple(x.shape[i - lead] if s == -1 else s for i, s in enumerate(sizes))
    return ir.broadcast_to(x, shape)


@method("expand_as")
def _expand_as(L, x, other):
    return ir.broadcast_to(L.t(x), other.shape)


@method("repeat")
def repeat(L, x, *sizes) -> ir.Expr:
    """``x.repeat(*sizes)``: ``x`` (with leading dims of 1 up to ``len(sizes)``) tiled ``sizes[k]``
    times along dim k: each dim ``s`` becomes a broadcast ``(r, s)`` pair, merged (no copy)."""
    x, reps = L.t(x), _shape_args(sizes)
    lead = len(reps) - len(x.shape)
    if lead < 0 or min(reps, default=1) < 1:
        raise Unsupported(f"repeat by {reps} of a rank-{len(x.shape)} tensor (fewer sizes than "
                          "dims, or an empty result)")
    shape = (1,) * lead + x.shape
    pairs = tuple(v for s in shape for v in (1, s))
    wide = tuple(v for r, s in zip(reps, shape, strict=True) for v in (r, s))
    y = ir.broadcast_to(ir.reshape(x, pairs), wide)
    return ir.reshape(y, tuple(r * s for r, s in zip(reps, shape, strict=True)))


@fn(torch.repeat_interleave)
@method("repeat_interleave")
def _repeat_interleave(L, x, repeats, dim=None, *, output_size=None):
    """``x.repeat_interleave(r, dim)``: each element of dim ``dim`` ``r`` times in a row, a
    broadcast ``(s, r)`` pair merged (no copy); no ``dim``: of the flattened tensor."""
    x = L.t(x)
    if isinstance(repeats, ir.Expr) or not isinstance(repeats, int) or repeats < 1:
        raise Unsupported("repeat_interleave by a tensor of counts (an int count is lowered)")
    if dim is None:
        x, dim = ir.reshape(x, (ir.numel(x.shape),)), 0
    return repeat_each(x, repeats, dim)


def repeat_each(x: ir.Expr, repeats: int, dim: int) -> ir.Expr:
    """Each element of dim ``dim`` of ``x`` ``repeats`` times in a row, a lazy view."""
    d = dim % len(x.shape)
    pair = x.shape[:d + 1] + (1,) + x.shape[d + 1:]
    wide = x.shape[:d + 1] + (repeats,) + x.shape[d + 1:]
    y = ir.broadcast_to(ir.reshape(x, pair), wide)
    return ir.reshape(y, x.shape[:d] + (x.shape[d] * repeats,) + x.shape[d + 1:])


@method("unfold")
def _tensor_unfold(L, x, dimension, size, step):
    """``x.unfold(dim, size, step)``: windows of ``size`` along ``dim`` every ``step``, as a
    strided view (a window's elements are a new last dim), of ``x``'s buffer."""
    x = L.t(x)
    d = dimension % len(x.shape)
    windows = (x.shape[d] - size) // step + 1
    if size < 1 or step < 1 or windows < 1:
        raise Unsupported(f"unfold of size {size}, step {step} over a dim of {x.shape[d]}")
    if not isinstance(x, ir.Load):
        x = L.materialize(x)
    shape = x.shape[:d] + (windows,) + x.shape[d + 1:] + (size,)
    strides = x.strides[:d] + (x.strides[d] * step,) + x.strides[d + 1:] + (x.strides[d],)
    return ir.Load(shape, x.dtype, x.buf, strides, x.offset)


@fn(torch.diagonal)
@method("diagonal")
def _diagonal(L, x, offset=0, dim1=0, dim2=1):
    """``x.diagonal(offset, dim1, dim2)``: a strided view of ``x``'s buffer whose last dim
    steps along both ``dim1`` and ``dim2`` at once."""
    x = L.t(x)
    rank = len(x.shape)
    d1, d2 = dim1 % rank, dim2 % rank
    if d1 == d2:
        raise Unsupported("diagonal of one dim with itself")
    if not isinstance(x, ir.Load):
        x = L.materialize(x)
    start = (0, offset) if offset >= 0 else (-offset, 0)
    n = max(0, min(x.shape[d1] - start[0], x.shape[d2] - start[1]))
    if n == 0:
        raise Unsupported(f"empty diagonal (offset {offset})")
    keep = [d for d in range(rank) if d not in (d1, d2)]
    shape = tuple(x.shape[d] for d in keep) + (n,)
    strides = tuple(x.strides[d] for d in keep) + (x.strides[d1] + x.strides[d2],)
    offset0 = x.offset + start[0] * x.strides[d1] + start[1] * x.strides[d2]
    return ir.Load(shape, x.dtype, x.buf, strides, offset0)


@fn(torch.trace)
@method("trace")
def _trace(L, x):
    return L.reduce("sum", _diagonal(L, x), None, False)


@fn(torch.diag)
@method("diag")
def _diag(L, x, diagonal=0):
    """A 2-D input's diagonal, or the square matrix with a 1-D input on its ``diagonal``-th
    diagonal and zeros elsewhere."""
    x = L.t(x)
    if len(x.shape) == 2:
        return _diagonal(L, x, diagonal)
    if len(x.shape) != 1:
        raise Unsupported(f"torch.diag of a {len(x.shape)}-D tensor")
    k, n = int(diagonal), x.shape[0]
    size = n + abs(k)
    row = ir.view(ir.arange(size, 0, 1, torch.int64), (size, size), ((0, 0, 1),))
    col = ir.view(ir.arange(size, 0, 1, torch.int64), (size, size), ((1, 0, 1),))
    on = ir.op("eq", ir.op("sub", col, row), ir.const(k))
    at = ir.op("minimum", ir.op("maximum", row if k >= 0 else col, ir.const(0)),
               ir.const(n - 1))  # the vector's element on row i (k >= 0) or column j
    values = take(L, ir.broadcast_to(ir.reshape(x, (1, n)), (size, n)), 1, at)
    return ir.op("where", on, values, ir.Const((), x.dtype, 0))


@fn(torch.tile)
@method("tile")
def _tile(L, x, *dims):
    """``torch.tile``: ``repeat`` with fewer sizes than dims padded by leading 1s."""
    x, dims = L.t(x), _shape_args(dims)
    return repeat(L, x, *((1,) * (len(x.shape) - len(dims)) + tuple(dims)))


@fn(torch.broadcast_to)
def _broadcast_to(L, x, shape):
    return _expand(L, x, *shape)


def _index(x: ir.Expr, key, L=None) -> ir.Expr:
    if isinstance(key, ir.Expr) and L is not None and key.dtype == torch.int64 and x.shape:
        return _advanced(L, x, (key,))  # x[index]: rows of x, negative indices from the end
    if not isinstance(key, tuple):
        key = (key,)
    if any(isinstance(k, ir.Expr) for k in key):
        if L is None:
            raise Unsupported("tensor indexing")
        return _advanced(L, x, key)
    if any(isinstance(k, list) for k in key):
        return _list_index(x, key)
    key = _whole_for_ellipsis(key, len(x.shape))
    key = key + (slice(None),) * (len(x.shape) - sum(1 for k in key if k is not None))
    shape, maps, d = [], [], 0
    for k in key:
        if k is None:
            shape.append(1)
            continue
        size = x.shape[d]
        if isinstance(k, int):
            if not -size <= k < size:
                raise Unsupported("index out of range")
            maps.append((-1, k % size, 0))
        elif isinstance(k, slice):
            start, stop, step = k.indices(size)
            length = len(range(start, stop, step))
            maps.append((len(shape), start, step))
            shape.append(length)
        else:
            raise Unsupported(f"index {k!r}")
        d += 1
    return ir.view(x, tuple(shape), tuple(maps))


MAX_LIST_INDEX = 64  # entries of a literal list index, each a one-wide slice concatenated


def _whole_for_ellipsis(key: tuple, rank: int) -> tuple:
    """``key`` with its ``...`` replaced by a whole slice for each dim it stands for (the
    dims no other key indexes; ``None`` inserts a dim and indexes none)."""
    if Ellipsis not in key:
        return key
    i = key.index(Ellipsis)
    indexed = sum(1 for k in key if k is not None and k is not Ellipsis)
    return key[:i] + (slice(None),) * (rank - indexed) + key[i + 1:]


def _list_index(x: ir.Expr, key: tuple) -> ir.Expr:
    """``x[:, [0, 2]]``: one literal list of ints, the other keys slices (``:``, ``...``): a
    strided slice where the entries step evenly, else their one-wide slices concatenated."""
    key = _whole_for_ellipsis(key, len(x.shape))
    lists = [j for j, k in enumerate(key) if isinstance(k, list)]
    d = lists[0] if len(lists) == 1 else -1
    entries = key[d] if d >= 0 else None
    if d < 0 or not all(isinstance(k, slice) for j, k in enumerate(key) if j != d) or not (
            entries and all(isinstance(e, int) and not isinstance(e, bool) for e in entries)):
        raise Unsupported(f"index {key!r} (one list of ints, with slices elsewhere, is lowered)")
    size = x.shape[d]
    if not all(-size <= e < size for e in entries):
        raise Unsupported("index out of range")
    at = [e % size for e in entries]
    step = at[1] - at[0] if len(at) > 1 else 1
    if step > 0 and at == list(range(at[0], at[-1] + 1, step)):
        return _index(x, key[:d] + (slice(at[0], at[-1] + 1, step),) + key[d + 1:])
    if len(at) > MAX_LIST_INDEX:
        raise Unsupported(f"a list index of {len(at)} entries (at most {MAX_LIST_INDEX})")
    parts = [_index(x, key[:d] + (slice(e, e + 1),) + key[d + 1:]) for e in at]
    offsets = [sum(p.shape[d] for p in parts[:i]) for i in range(len(parts))]
    shape = parts[0].shape[:d] + (len(parts),) + parts[0].shape[d + 1:]
    return ir.Cat(shape, x.dtype, tuple(parts), d, tuple(offsets))


def _advanced(L, x: ir.Expr, key: tuple) -> ir.Expr:
    """``x[:, i, j]``: integer index tensors at adjacent dims (the others whole, ``:``), as
    PyTorch's advanced indexing: the indices broadcast together, their dims merged into one
    linear index, and the result's indexed dims replaced by the indices' shape."""
    key = _whole_for_ellipsis(key, len(x.shape))
    key = key + (slice(None),) * (len(x.shape) - len(key))
    at = [d for d, k in enumerate(key) if isinstance(k, ir.Expr)]
    if any(key[d].dtype == torch.bool for d in at):
        raise Unsupported("indexing by a boolean mask (the result's size depends on the mask's "
                          "values; torch.where(mask, a, b) or masked_fill keep the shape)")
    whole = all(k == slice(None) for d, k in enumerate(key) if d not in at)
    if len(key) != len(x.shape) or not whole or at != list(range(at[0], at[-1] + 1)) or any(
            key[d].dtype not in (torch.int64, torch.int32) for d in at):
        raise Unsupported("tensor indexing (integer index tensors at adjacent dims, the others "
                          "whole, are lowered)")
    first, sizes = at[0], [x.shape[d] for d in at]
    shape = ir.broadcast_shapes(*(key[d].shape for d in at))
    linear = None
    for d, size in zip(at, sizes, strict=True):
        idx = ir.broadcast_to(ir.cast(key[d], torch.int64), shape)
        idx = ir.op("where", ir.op("lt", idx, ir.const(0)), ir.op("add", idx, ir.const(size)),
                    idx)  # negative indices count from the end
        linear = idx if linear is None else ir.op("add", ir.op("mul", linear, ir.const(size)),
                                                  idx)
    pre, post = x.shape[:first], x.shape[at[-1] + 1:]
    merged = ir.reshape(x, (*pre, math.prod(sizes), *post))
    n = ir.numel(shape)
    flat = ir.reshape(linear, (1,) * len(pre) + (n,) + (1,) * len(post))
    out = take(L, merged, len(pre), ir.broadcast_to(flat, (*pre, n, *post)))
    return ir.reshape(out, (*pre, *shape, *post))


@fn(torch.index_select)
@method("index_select")
def _index_select(L, x, dim, index):
    x = L.t(x)
    d = dim % len(x.shape)
    return _advanced(L, x, (slice(None),) * d + (L.t(index),))


@fn(operator.getitem)
def _getitem(L, x, key):
    if isinstance(x, ir.Expr):
        return _index(x, key, L)
    return x[key]


@fn(torch.narrow)
@method("narrow")
def _narrow(L, x, dim, start, length):
    x = L.t(x)
    key = [slice(None)] * len(x.shape)
    key[dim % len(x.shape)] = slice(start, start + length)
    return _index(x, tuple(key))


@fn(torch.slice_scatter)
def _slice_scatter(L, x, src, dim=0, start=None, end=None, step=1):
    """``x`` with ``x[start:end]`` along ``dim`` replaced by ``src`` (what ``out[:, 2:5] = y``
    leaves after export): the kept runs of ``x`` and ``src`` concatenated."""
    x, src = L.t(x), L.t(src)
    d = dim % len(x.shape)
    size = x.shape[d]
    lo, hi, stride = slice(start, end, step).indices(size)
    if stride != 1:
        return _strided_scatter(L, x, src, d, lo, hi, stride)
    hi = max(hi, lo)
    middle = x.shape[:d] + (hi - lo,) + x.shape[d + 1:]
    parts = [_narrow(L, x, d, 0, lo)] if lo > 0 else []
    if hi > lo:
        parts.append(ir.cast(_shaped(ir.broadcast_to(src, middle), middle), x.dtype))
    if hi < size:
        parts.append(_narrow(L, x, d, hi, size - hi))
    return _cat(L, parts, d)


def _shaped(e: ir.Expr, shape: ir.Shape) -> ir.Expr:
    """``e`` with ``shape`` even where it is a scalar constant (which views leave scalar)."""
    return ir.Const(tuple(shape), e.dtype, e.value) if isinstance(e, ir.Const) else e


def _strided_scatter(L, x: ir.Expr, src: ir.Expr, d: int, lo: int, hi: int, step: int):
    """``x`` with every ``step``-th element of ``[lo, hi)`` along ``d`` replaced by ``src``
    (``pe[:, 0::2] = torch.sin(...)``): a select between ``x`` and a gather of ``src``."""
    count = len(range(lo, hi, step))
    if not count:
        return x
    along = ir.view(ir.arange(x.shape[d], 0, 1, torch.int64), x.shape, ((d, 0, 1),))
    offset = ir.op("sub", along, ir.const(lo))
    hit = ir.op("and", ir.op("and", ir.op("ge", along, ir.const(lo)),
                             ir.op("lt", along, ir.const(hi))),
                ir.op("eq", ir.op("fmod", offset, ir.const(step)), ir.const(0)))
    if isinstance(src, ir.Const):  # one value: a scalar, whatever shape it was given
        src = ir.Const((), x.dtype, src.value)
    else:
        src = ir.cast(ir.broadcast_to(src, x.shape[:d] + (count,) + x.shape[d + 1:]), x.dtype)
        row = ir.cast(ir.op("floor", ir.op("div", ir.cast(offset, torch.float32),
                                           ir.const(float(step)))), torch.int64)
        row = ir.op("minimum", ir.op("maximum", row, ir.const(0)), ir.const(count - 1))
        src = take(L, src, d, row)
    return ir.op("where", hit, src, x)


@fn(torch.select_scatter)
def _select_scatter(L, x, src, dim, index):
    """``x`` with ``x.select(dim, index)`` replaced by ``src`` (``out[:, 0] = v``)."""
    x, src = L.t(x), L.t(src)
    d = dim % len(x.shape)
    at = index % x.shape[d]
    row = ir.reshape(ir.broadcast_to(src, x.shape[:d] + x.shape[d + 1:]),
                     x.shape[:d] + (1,) + x.shape[d + 1:])
    return _slice_scatter(L, x, row, d, at, at + 1)


@fn(torch.chunk)
@method("chunk")
def _chunk(L, x, chunks, dim=0):
    x = L.t(x)
    d = dim % len(x.shape)
    size = -(-x.shape[d] // chunks)
    return _split(L, x, size, d)


@fn(torch.split)
@method("split")
def _split(L, x, split_size_or_sections=None, dim=0, *, split_size=None):
    """``torch.split(x, split_size_or_sections)``; the method names it ``split_size``."""
    if split_size_or_sections is None:
        split_size_or_sections = split_size
    if split_size_or_sections is None:
        raise Unsupported("split without a size")
    x = L.t(x)
    d = dim % len(x.shape)
    n = x.shape[d]
    sizes = (list(split_size_or_sections) if isinstance(split_size_or_sections, list | tuple)
             else [min(split_size_or_sections, n - s) for s in range(0, n, split_size_or_sections)])
    out, start = [], 0
    for s in sizes:
        key = [slice(None)] * len(x.shape)
        key[d] = slice(start, start + s)
        out.append(_index(x, tuple(key)))
        start += s
    return tuple(out)


@fn(torch.unbind)
@method("unbind")
def _unbind(L, x, dim=0):
    x = L.t(x)
    d = dim % len(x.shape)
    return tuple(_index(x, tuple([slice(None)] * d + [i])) for i in range(x.shape[d]))


@fn(torch.cat, torch.concat, torch.concatenate)
def _cat(L, tensors, dim=0):
    parts = [L.t(t) for t in tensors if not (isinstance(t, ir.Expr) and t.shape == (0,))]
    rank = len(parts[0].shape)
    d = dim % rank
    dtype = ir.promote(*(p.dtype for p in parts))
    parts = [ir.cast(p, dtype) for p in parts]
    offsets, acc = [], 0
    for p in parts:
        offsets.append(acc)
        acc += p.shape[d]
    shape = parts[0].shape[:d] + (acc,) + parts[0].shape[d + 1:]
    if len(parts) == 1:
        return parts[0]
    return ir.Cat(shape, dtype, tuple(parts), d, tuple(offsets))


@fn(torch.stack)
def _stack(L, tensors, dim=0):
    parts = [L.t(t) for t in tensors]
    d = dim % (len(parts[0].shape) + 1)
    parts = [ir.reshape(p, p.shape[:d] + (1,) + p.shape[d:]) for p in parts]
    return _cat(L, parts, d)


# ------------------------------------------------------------------ tensors made in forward


def _made_dtype(dtype, *values) -> torch.dtype:
    if dtype is not None:
        return dtype
    if values and all(isinstance(v, bool) for v in values):
        return torch.bool
    if all(isinstance(v, int | bool) for v in values):
        return torch.int64
    return torch.get_default_dtype()


@fn(torch.arange)
def _arange(L, *args, dtype=None, device=None, layout=None, requires_grad=False,
            pin_memory=False, out=None):
    if out is not None or any(isinstance(a, ir.Expr) for a in args):
        raise Unsupported("arange of tensor bounds or with out=")
    start, end, step = (0, args[0], 1) if len(args) == 1 else (*args, 1)[:3]
    n = max(0, -(-(end - start) // step)) if all(isinstance(v, int) for v in (start, end, step)) \
        else max(0, math.ceil((end - start) / step))
    return ir.arange(int(n), start, step, _made_dtype(dtype, start, end, step))


def _filled(shape, value, dtype) -> ir.Expr:
    dtype = _made_dtype(dtype, value)
    value = bool(value) if dtype == torch.bool else value if ir.is_float(dtype) else int(value)
    return ir.Const(tuple(_shape_args(shape)), dtype, value)  # a shaped constant


def _constant_fill(value):
    def h(L, *shape, dtype=None, device=None, layout=None, requires_grad=False,
          pin_memory=False, out=None):
        if out is not None:
            raise Unsupported("out= argument")
        return _filled(shape, value, dtype or torch.get_default_dtype())

    return h


fn(torch.zeros)(_constant_fill(0.0))
fn(torch.ones)(_constant_fill(1.0))


@fn(torch.full)
def _full(L, size, fill_value, *, dtype=None, device=None, layout=None, requires_grad=False,
          pin_memory=False, out=None):
    if out is not None or isinstance(fill_value, ir.Expr):
        raise Unsupported("full with a tensor fill value or out=")
    return _filled(size, fill_value, dtype)


def _like(value):
    def h(L, x, *a, dtype=None, device=None, layout=None, requires_grad=False,
          memory_format=None, pin_memory=False):
        x = L.t(x)
        return _filled(x.shape, value, dtype or x.dtype)

    return h


fn(torch.zeros_like)(_like(0))
fn(torch.ones_like)(_like(1))


@fn(torch.full_like)
def _full_like(L, x, fill_value, *, dtype=None, device=None, layout=None, requires_grad=False,
               memory_format=None, pin_memory=False):
    x = L.t(x)
    return _filled(x.shape, fill_value, dtype or x.dtype)


# ------------------------------------------------------------------ gather


def dense(L, v) -> ir.Expr:
    """``v`` as an Expr that kernels evaluate as a tensor: a shaped constant (``torch.full_like``)
    is a Python literal in kernel code, so ops on constants alone would yield Python scalars
    (no ``.to()``, no block shape); it becomes a step-0 ``arange`` along its innermost dim,
    broadcast to its shape."""
    v = L.t(v)
    if not isinstance(v, ir.Const) or not v.shape:
        return v
    axis = max(range(len(v.shape)), key=lambda k: (v.shape[k] > 1, k))
    line = ir.arange(v.shape[axis], v.value, 0, v.dtype)
    lone = tuple(n if k == axis else 1 for k, n in enumerate(v.shape))
    return ir.broadcast_to(ir.reshape(line, lone), v.shape)


def take(L, x: ir.Expr, dim: int, index: ir.Expr) -> ir.Expr:
    """``out[i] = x[i with index[i] at dim]`` over index's shape (rank of x, and on every other
    dim at most x's extent): an expression, so the gather fuses into whatever reads it."""
    x, index = dense(L, x), dense(L, index)
    rank = len(x.shape)
    if rank == 0 or len(index.shape) != rank:
        raise Unsupported(f"gather of {x.shape} by an index of shape {index.shape}")
    if index.dtype != torch.int64:
        raise Unsupported(f"gather index of {index.dtype} (PyTorch requires int64)")
    d = dim % rank
    if any(index.shape[k] > x.shape[k] for k in range(rank) if k != d):
        raise Unsupported(f"index shape {index.shape} exceeds input {x.shape}")
    return ir.Take(index.shape, x.dtype, x, d, index)


@fn(torch.gather)
@method("gather")
def gather(L, x, dim: int, index, *, sparse_grad: bool = False, out=None) -> ir.Expr:
    """``torch.gather`` / ``Tensor.gather`` (``sparse_grad`` only changes the backward)."""
    if out is not None:
        raise Unsupported("out= argument")
    return take(L, x, dim, index)


@fn(F.embedding_bag)
def _embedding_bag(L, input, weight, offsets=None, max_norm=None, norm_type=2,
                   scale_grad_by_freq=False, mode="mean", sparse=False, per_sample_weights=None,
                   include_last_offset=False, padding_idx=None) -> ir.Expr:
    """``F.embedding_bag`` of a 2-D input (one bag per row; summed, averaged or maxed), or of a
    1-D input cut into bags by ``offsets`` (summed or averaged); ``per_sample_weights`` scale
    the rows (``sum``); entries equal to ``padding_idx`` (2-D input) are left out of their
    bag."""
    index = L.t(input)
    if (offsets is None) != (len(index.shape) == 2):
        raise Unsupported("embedding_bag of a 1-D input without offsets, or a 2-D one with them")
    if max_norm is not None:
        raise Unsupported("embedding_bag with max_norm (it renormalises the weight in place)")
    if padding_idx is not None and offsets is not None:
        raise Unsupported("embedding_bag with padding_idx and offsets")
    rows = embedding(L, index, weight)
    if per_sample_weights is not None:
        if mode != "sum":
            raise Unsupported("per_sample_weights with a mode other than sum (PyTorch too)")
        rows = ir.op("mul", rows, ir.reshape(L.t(per_sample_weights), (*index.shape, 1)))
    if padding_idx is not None:
        return _bags_without(L, rows, index, int(padding_idx) % L.t(weight).shape[0], mode)
    if offsets is not None:  # bags of data-dependent sizes
        from drtriton.compiler.lowerings.scatter import bags_by_offsets  # scatter imports views
        return bags_by_offsets(L, rows, offsets, mode, include_last_offset)
    kinds = {"sum": "sum", "mean": "mean", "max": "amax"}
    if mode not in kinds:
        raise Unsupported(f"embedding_bag mode {mode!r}")
    return L.reduce(kinds[mode], rows, (1,))


def _bags_without(L, rows: ir.Expr, index: ir.Expr, padding_idx: int, mode: str) -> ir.Expr:
    """Each row's bag of ``rows`` (batch, bag, dim) reduced over the entries whose index is not
    ``padding_idx``: a bag of padding only gives zeros, as PyTorch's."""
    keep = ir.reshape(ir.op("ne", index, ir.const(padding_idx)), (*index.shape, 1))
    count = L.reduce("sum", ir.cast(keep, rows.dtype), (1,))
    if mode == "max":
        top = L.reduce("amax", ir.op("where", keep, rows, ir.const(float("-inf"))), (1,))
        return ir.op("where", ir.op("gt", count, ir.const(0.0)), top, ir.const(0.0))
    if mode not in ("sum", "mean"):
        raise Unsupported(f"embedding_bag mode {mode!r}")
    total = L.reduce("sum", ir.op("where", keep, rows, ir.const(0.0)), (1,))
    if mode == "sum":
        return total
    return ir.op("div", total, ir.op("maximum", count, ir.const(1.0)))


@fn(F.embedding)
def embedding(L, index, weight, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False) -> ir.Expr:
    """Rows of ``weight`` at ``index`` (``padding_idx`` only changes the backward)."""
    if max_norm is not None:
        raise Unsupported("embedding with max_norm (it renormalises the weight in place)")
    return _rows(L, L.t(weight), L.t(index))


def _rows(L, table: ir.Expr, index: ir.Expr) -> ir.Expr:
    """``table[index]``: one row (the trailing dims) per index element."""
    flat = ir.reshape(index, (ir.numel(index.shape), *([1] * (len(table.shape) - 1))))
    wide = ir.broadcast_to(flat, (flat.shape[0], *table.shape[1:]))
    return ir.reshape(take(L, table, 0, wide), (*index.shape, *table.shape[1:]))


@fn(torch.tensor, torch.as_tensor)
def _tensor(L, data, dtype=None, device=None, requires_grad=False, pin_memory=False):
    """A tensor of Python numbers made in ``forward``: a constant (see ``_traced_constant``)."""
    if any(isinstance(v, ir.Expr) for v in _numbers(data)):
        raise Unsupported("torch.tensor of traced values")
    return L._traced_constant(L.new_buf("made"), torch.tensor(data, dtype=dtype))


def _numbers(data) -> list:
    return [v for d in data for v in _numbers(d)] if isinstance(data, list | tuple) else [data]


@fn(torch.flip)
@method("flip")
def _flip(L, x, *dims_args, dims=None):
    x = L.t(x)
    dims = {d % len(x.shape) for d in _shape_args(dims_args if dims is None else (dims,))}
    maps = tuple((d, n - 1, -1) if d in dims else (d, 0, 1) for d, n in enumerate(x.shape))
    return ir.view(x, x.shape, maps)


@fn(torch.select)
@method("select")
def _select(L, x, dim, index):
    x = L.t(x)
    d = dim % len(x.shape)
    return _index(x, (slice(None),) * d + (index,))


@fn(torch.masked_fill)
@method("masked_fill")
def _masked_fill(L, x, mask, value):
    x, mask = L.t(x), L.t(mask)
    value = L.t(value)
    if value.shape:
        raise Unsupported("masked_fill with a non-scalar value")
    return ir.op("where", ir.cast(mask, torch.bool), ir.cast(value, x.dtype), x, dtype=x.dtype)


# ------------------------------------------------------------------ padding
PAD_MODES = ("constant", "reflect", "replicate", "circular")


def _edge(x: ir.Expr, d: int, width: int, start: int, step: int) -> ir.Expr:
    """``width`` elements along dim ``d`` of ``x`` read at ``start + step * i`` (the pad's
    source: the edge repeated, mirrored or wrapped around)."""
    shape = x.shape[:d] + (width,) + x.shape[d + 1:]
    maps = tuple((k, start, step) if k == d else (k, 0, 1) for k in range(len(x.shape)))
    return ir.view(x, shape, maps)


def _pad_dim(x: ir.Expr, d: int, before: int, after: int, mode: str, value) -> ir.Expr:
    n = x.shape[d]
    if before < 0 or after < 0:  # negative padding crops
        x = _edge(x, d, n + min(before, 0) + min(after, 0), -min(before, 0), 1)
        before, after, n = max(before, 0), max(after, 0), x.shape[d]
    if mode == "reflect" and max(before, after) >= n:
        raise Unsupported(f"reflect padding {before, after} not below the size {n}")
    if mode == "circular" and max(before, after) > n:
        raise Unsupported(f"circular padding {before, after} above the size {n}")
    sources = {("replicate", 0): (0, 0), ("replicate", 1): (n - 1, 0),
               ("reflect", 0): (before, -1), ("reflect", 1): (n - 2, -1),
               ("circular", 0): (n - before, 1), ("circular", 1): (0, 1)}

    def block(width: int, side: int) -> ir.Expr:
        if mode == "constant":
            fill = 0 if value is None else value
            shape = x.shape[:d] + (width,) + x.shape[d + 1:]
            return ir.Const(shape, x.dtype, fill if ir.is_float(x.dtype) else int(fill))
        return _edge(x, d, width, *sources[(mode, side)])

    parts = [block(before, 0)] * bool(before) + [x] + [block(after, 1)] * bool(after)
    if len(parts) == 1:
        return x
    offsets = [sum(p.shape[d] for p in parts[:k]) for k in range(len(parts))]
    shape = x.shape[:d] + (sum(p.shape[d] for p in parts),) + x.shape[d + 1:]
    return ir.Cat(shape, x.dtype, tuple(parts), d, tuple(offsets))


def pad(L, x, widths, mode: str = "constant", value=None) -> ir.Expr:
    """``F.pad``: ``widths`` pairs (before, after) from the last dim backwards, as PyTorch."""
    x = L.t(x)
    widths = [int(w) for w in _shape_args(tuple(widths))]
    if mode not in PAD_MODES:
        raise Unsupported(f"pad mode {mode!r}")
    if len(widths) % 2 or len(widths) // 2 > len(x.shape):
        raise Unsupported(f"pad widths {widths} for a rank-{len(x.shape)} tensor")
    for k in range(len(widths) // 2):
        x = _pad_dim(x, len(x.shape) - 1 - k, widths[2 * k], widths[2 * k + 1], mode, value)
    return x


@fn(F.pad)
def _pad(L, input, pad_widths, mode="constant", value=None):
    return pad(L, input, pad_widths, mode, value)


# ------------------------------------------------------------------ unfold (im2col)
def _two(v) -> tuple[int, int]:
    return (int(v), int(v)) if isinstance(v, int) else (int(v[0]), int(v[1]))


@fn(F.unfold)
def _unfold(L, input, kernel_size, dilation=1, padding=0, stride=1):
    """``F.unfold``: each of the kernel's ``kh * kw`` taps is a strided view of the (padded)
    input, and the taps are concatenated and flattened as PyTorch orders them
    (channel-major, then tap, then output position)."""
    x = L.t(input)
    if len(x.shape) not in (3, 4):
        raise Unsupported(f"unfold of a rank-{len(x.shape)} input (3 or 4 dims are lowered)")
    batched = len(x.shape) == 4
    x = x if batched else ir.reshape(x, (1, *x.shape))
    (kh, kw), (dh, dw), (ph, pw), (sh, sw) = map(_two, (kernel_size, dilation, padding, stride))
    if ph or pw:
        x = pad(L, x, (pw, pw, ph, ph))
    n, c, h, w = x.shape
    oh, ow = (h - dh * (kh - 1) - 1) // sh + 1, (w - dw * (kw - 1) - 1) // sw + 1
    if oh < 1 or ow < 1:
        raise Unsupported("unfold with a kernel larger than the padded input")
    taps = [ir.view(x, (n, c, 1, oh, ow), ((0, 0, 1), (1, 0, 1), (3, i * dh, sh), (4, j * dw, sw)))
            for i in range(kh) for j in range(kw)]
    out = ir.reshape(_cat(L, taps, 2), (n, c * kh * kw, oh * ow))
    return out if batched else ir.reshape(out, out.shape[1:])
