"""Per-operator lowerings: PyTorch functions, tensor methods and ``nn`` modules to IR and kernels.

Each handler gets the ``Lowering`` and the node's arguments (tensors as ``ir.Expr``) and returns
the node's value. Pointwise ops and views only build expressions; the rest register kernels.
Importing this module fills the dispatch tables in ``lower``.
"""

from __future__ import annotations

import math
import operator

import torch
import torch.nn as nn
import torch.nn.functional as F

from drtriton.compiler import ir, kernels
from drtriton.compiler.lower import FUNCTIONS, METHODS, MODULES, Lowering, Missing, Unsupported
from drtriton.compiler.lower import _tuple as ntuple


def fn(*targets):
    def deco(h):
        for t in targets:
            FUNCTIONS[t] = h
        return h

    return deco


def method(*names):
    def deco(h):
        for n in names:
            METHODS[n] = h
        return h

    return deco


def module(*types):
    def deco(h):
        for t in types:
            MODULES[t] = h
        return h

    return deco


def _f(x: ir.Expr) -> ir.Expr:
    """Compute in float32 (ints and bools are promoted, as PyTorch does for these ops)."""
    return x if ir.is_float(x.dtype) else ir.cast(x, torch.float32)


# ------------------------------------------------------------------ elementwise arithmetic


def _binary(name):
    def h(L: Lowering, a, b, *rest, alpha=1, out=None, **kw):
        if out is not None:
            raise Unsupported("out= argument")
        a, b = L.t(a), L.t(b)
        if rest:
            alpha = rest[0]
        if alpha != 1:
            b = ir.op("mul", b, ir.const(alpha))
        if name == "div":
            mode = kw.get("rounding_mode")
            r = ir.op("div", _f(a), _f(b))
            if mode == "floor":
                r = ir.op("floor", r)
            elif mode == "trunc":
                r = ir.op("where", ir.op("lt", r, ir.const(0.0)), ir.op("ceil", r), ir.op("floor", r))
            return r
        return ir.op(name, a, b)

    return h


for _name, _targets in {
    "add": (torch.add, operator.add, operator.iadd, torch.Tensor.add),
    "sub": (torch.sub, torch.subtract, operator.sub, operator.isub),
    "mul": (torch.mul, torch.multiply, operator.mul, operator.imul),
    "div": (torch.div, torch.divide, torch.true_divide, operator.truediv, operator.itruediv),
    "maximum": (torch.maximum, torch.max_elementwise if hasattr(torch, "max_elementwise") else torch.maximum),
    "minimum": (torch.minimum,),
    "lt": (torch.lt, operator.lt), "le": (torch.le, operator.le), "gt": (torch.gt, operator.gt),
    "ge": (torch.ge, operator.ge), "eq": (torch.eq, operator.eq), "ne": (torch.ne, operator.ne),
    "and": (torch.logical_and, operator.and_), "or": (torch.logical_or, operator.or_),
}.items():
    fn(*_targets)(_binary(_name))
    method(_name if _name not in ("and", "or") else f"logical_{_name}")(_binary(_name))
method("sub", "subtract")(_binary("sub"))
method("mul", "multiply")(_binary("mul"))
method("div", "divide", "true_divide")(_binary("div"))


@fn(torch.rsub)
@method("rsub")
def _rsub(L, a, b, alpha=1):
    return _binary("sub")(L, b, a, alpha=alpha)


@fn(operator.floordiv, torch.floor_divide)
@method("floor_divide")
def _floordiv(L, a, b):
    return ir.op("floor", ir.op("div", _f(L.t(a)), _f(L.t(b))))


@fn(torch.pow, operator.pow)
@method("pow")
def _pow(L, a, b):
    a, b = L.t(a), L.t(b)
    if isinstance(a, ir.Const) and a.value > 0:  # scalar ** tensor
        return ir.op("exp2", ir.op("mul", _f(b), ir.const(math.log2(a.value))))
    if isinstance(b, ir.Const):
        e = b.value
        if e == 0.5:
            return ir.op("sqrt", _f(a))
        if float(e).is_integer() and abs(e) <= 8:  # exact for negative bases too
            n = int(abs(e))
            if n == 0:
                return ir.op("add", ir.op("mul", _f(a), ir.const(0.0)), ir.const(1.0))
            r = a
            for _ in range(n - 1):
                r = ir.op("mul", r, a)
            return ir.op("div", ir.const(1.0), _f(r)) if e < 0 else r
    return _pow_general(a, b)


def _pow_general(a, b):
    return ir.op("pow", _f(a), _f(b))


@fn(torch.neg, torch.negative, operator.neg)
@method("neg", "negative", "__neg__")
def _neg(L, x):
    return ir.op("neg", L.t(x))


@fn(torch.where)
@method("where")
def _where(L, c, a=None, b=None):
    if a is None:
        raise Unsupported("torch.where(cond) (data-dependent shape)")
    c, a, b = L.t(c), L.t(a), L.t(b)
    if c.dtype != torch.bool:
        c = ir.op("ne", c, ir.const(0))
    return ir.op("where", c, a, b, dtype=ir.promote(a.dtype, b.dtype))


@fn(torch.lerp)
@method("lerp")
def _lerp(L, a, b, w):
    return ir.op("lerp", L.t(a), L.t(b), L.t(w))


@fn(torch.clamp, torch.clip)
@method("clamp", "clip")
def _clamp(L, x, min=None, max=None):
    x = L.t(x)
    if min is not None:
        x = ir.op("maximum", x, L.t(min))
    if max is not None:
        x = ir.op("minimum", x, L.t(max))
    return x


@fn(torch.clamp_min)
@method("clamp_min")
def _clamp_min(L, x, v):
    return ir.op("maximum", L.t(x), L.t(v))


@fn(torch.clamp_max)
@method("clamp_max")
def _clamp_max(L, x, v):
    return ir.op("minimum", L.t(x), L.t(v))


# ------------------------------------------------------------------ unary and activations


def _unary(name, floaty=True):
    def h(L, x, *a, inplace=False, **kw):
        x = L.t(x)
        return ir.op(name, _f(x) if floaty else x)

    return h


for _name, _targets, _meths in [
    ("exp", (torch.exp,), ("exp",)), ("log", (torch.log,), ("log",)),
    ("sqrt", (torch.sqrt,), ("sqrt",)), ("rsqrt", (torch.rsqrt,), ("rsqrt",)),
    ("cos", (torch.cos,), ("cos",)), ("sin", (torch.sin,), ("sin",)),
    ("exp2", (torch.exp2,), ("exp2",)), ("log2", (torch.log2,), ("log2",)),
    ("erf", (torch.erf, torch.special.erf), ("erf",)),
    ("sigmoid", (torch.sigmoid, F.sigmoid, torch.special.expit), ("sigmoid",)),
    ("tanh", (torch.tanh, F.tanh), ("tanh",)),
    ("floor", (torch.floor,), ("floor",)), ("ceil", (torch.ceil,), ("ceil",)),
    ("round", (torch.round,), ("round",)), ("sign", (torch.sign,), ("sign",)),
]:
    fn(*_targets)(_unary(_name))
    method(*_meths)(_unary(_name))


@fn(torch.abs, torch.absolute)
@method("abs", "absolute", "__abs__")
def _abs(L, x):
    return ir.op("abs", L.t(x))


@fn(torch.relu, F.relu)
@method("relu")
def _relu(L, x, inplace=False):
    return ir.op("relu", L.t(x))


@fn(F.relu6)
def _relu6(L, x, inplace=False):
    return ir.op("minimum", ir.op("relu", L.t(x)), ir.const(6.0))


@fn(torch.square)
@method("square")
def _square(L, x):
    x = L.t(x)
    return ir.op("mul", x, x)


@fn(torch.reciprocal)
@method("reciprocal")
def _reciprocal(L, x):
    return ir.op("div", ir.const(1.0), _f(L.t(x)))


@fn(torch.log1p)
@method("log1p")
def _log1p(L, x):
    return ir.op("log", ir.op("add", _f(L.t(x)), ir.const(1.0)))


@fn(torch.expm1)
@method("expm1")
def _expm1(L, x):
    return ir.op("sub", ir.op("exp", _f(L.t(x))), ir.const(1.0))


def leaky_relu(x, slope):
    return ir.op("where", ir.op("gt", x, ir.const(0.0)), x, ir.op("mul", x, ir.const(float(slope))))


@fn(F.leaky_relu)
def _leaky(L, x, negative_slope=0.01, inplace=False):
    return leaky_relu(_f(L.t(x)), negative_slope)


def silu(x):
    return ir.op("mul", x, ir.op("sigmoid", x))


def gelu(x, approximate="none"):
    if approximate == "tanh":
        inner = ir.op("mul", ir.op("add", x, ir.op("mul", ir.op("mul", ir.op("mul", x, x), x),
                                                   ir.const(0.044715))),
                      ir.const(math.sqrt(2.0 / math.pi)))
        return ir.op("mul", ir.op("mul", x, ir.const(0.5)), ir.op("add", ir.op("tanh", inner), ir.const(1.0)))
    return ir.op("mul", ir.op("mul", x, ir.const(0.5)),
                 ir.op("add", ir.op("erf", ir.op("mul", x, ir.const(1 / math.sqrt(2.0)))), ir.const(1.0)))


def elu(x, alpha=1.0, scale=1.0, input_scale=1.0):
    neg = ir.op("mul", ir.op("sub", ir.op("exp", ir.op("mul", x, ir.const(float(input_scale)))),
                             ir.const(1.0)), ir.const(float(alpha)))
    out = ir.op("where", ir.op("gt", x, ir.const(0.0)), x, neg)
    return out if scale == 1.0 else ir.op("mul", out, ir.const(float(scale)))


SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


def softplus(x, beta=1.0, threshold=20.0):
    bx = ir.op("mul", x, ir.const(float(beta))) if beta != 1 else x
    # max(bx, 0) + log(1 + exp(-|bx|)): stable for both signs
    sp = ir.op("add", ir.op("relu", bx),
               ir.op("log", ir.op("add", ir.op("exp", ir.op("neg", ir.op("abs", bx))), ir.const(1.0))))
    if beta != 1:
        sp = ir.op("div", sp, ir.const(float(beta)))
    return ir.op("where", ir.op("gt", bx, ir.const(float(threshold))), x, sp)


def hardsigmoid(x):
    return ir.op("minimum", ir.op("maximum", ir.op("add", ir.op("div", x, ir.const(6.0)), ir.const(0.5)),
                                  ir.const(0.0)), ir.const(1.0))


def hardtanh(x, lo=-1.0, hi=1.0):
    return ir.op("minimum", ir.op("maximum", x, ir.const(float(lo))), ir.const(float(hi)))


@fn(F.silu)
def _silu(L, x, inplace=False):
    return silu(_f(L.t(x)))


@fn(F.gelu)
def _gelu(L, x, approximate="none"):
    return gelu(_f(L.t(x)), approximate)


@fn(F.selu, torch.selu)
def _selu(L, x, inplace=False):
    return elu(_f(L.t(x)), SELU_ALPHA, SELU_SCALE)


@fn(F.elu)
def _elu(L, x, alpha=1.0, inplace=False):
    return elu(_f(L.t(x)), alpha)


@fn(F.celu)
def _celu(L, x, alpha=1.0, inplace=False):
    return elu(_f(L.t(x)), alpha, 1.0, 1.0 / alpha)


@fn(F.hardsigmoid)
def _hardsigmoid(L, x, inplace=False):
    return hardsigmoid(_f(L.t(x)))


@fn(F.hardswish)
def _hardswish(L, x, inplace=False):
    x = _f(L.t(x))
    return ir.op("mul", x, hardsigmoid(x))


@fn(F.softplus)
def _softplus(L, x, beta=1.0, threshold=20.0):
    return softplus(_f(L.t(x)), beta, threshold)


@fn(F.softsign)
def _softsign(L, x):
    x = _f(L.t(x))
    return ir.op("div", x, ir.op("add", ir.op("abs", x), ir.const(1.0)))


@fn(F.mish)
def _mish(L, x, inplace=False):
    x = _f(L.t(x))
    return ir.op("mul", x, ir.op("tanh", softplus(x)))


@fn(F.logsigmoid)
def _logsigmoid(L, x):
    x = _f(L.t(x))
    # min(x, 0) - log(1 + exp(-|x|))
    return ir.op("sub", ir.op("minimum", x, ir.const(0.0)),
                 ir.op("log", ir.op("add", ir.op("exp", ir.op("neg", ir.op("abs", x))), ir.const(1.0))))


@fn(F.hardtanh)
def _hardtanh(L, x, min_val=-1.0, max_val=1.0, inplace=False):
    return hardtanh(_f(L.t(x)), min_val, max_val)


@fn(F.tanhshrink)
def _tanhshrink(L, x):
    x = _f(L.t(x))
    return ir.op("sub", x, ir.op("tanh", x))


@fn(torch.triu)
@method("triu")
def _triu(L, x, diagonal=0):
    x = L.t(x)
    return ir.Op(x.shape, x.dtype, "triu", (x,), (int(diagonal),))


@fn(torch.tril)
@method("tril")
def _tril(L, x, diagonal=0):
    x = L.t(x)
    return ir.Op(x.shape, x.dtype, "tril", (x,), (int(diagonal),))


@fn(F.dropout, F.dropout1d, F.dropout2d, F.dropout3d, F.alpha_dropout)
def _dropout(L, x, p=0.5, training=True, inplace=False):
    if training and p > 0:
        raise Unsupported("dropout in training mode is random")
    return L.t(x)


# ------------------------------------------------------------------ dtype and identity methods


@method("float")
def _float(L, x, *a):
    return ir.cast(L.t(x), torch.float32)


@method("half")
def _half(L, x, *a):
    return ir.cast(L.t(x), torch.float16)


@method("to", "type")
def _to(L, x, *args, **kw):
    dtype = kw.get("dtype")
    for a in args:
        if isinstance(a, torch.dtype):
            dtype = a
    return ir.cast(L.t(x), dtype) if dtype is not None else L.t(x)


@method("contiguous", "clone", "detach", "cpu", "cuda", "requires_grad_")
@fn(torch.clone)
def _identity(L, x, *a, **kw):
    return L.t(x)


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


@fn(getattr)
def _getattr(L, x, name):
    if isinstance(x, ir.Expr):
        if name == "shape":
            return tuple(x.shape)
        if name == "T":
            return ir.permute(x, tuple(reversed(range(len(x.shape)))))
        if name == "mT":
            return ir.transpose(x, -2, -1)
        if name == "dtype":
            return x.dtype
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
        dims = {d % r for d in (dim if isinstance(dim, tuple | list) else (dim,)) if x.shape[d % r] == 1}
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


@fn(torch.broadcast_to)
def _broadcast_to(L, x, shape):
    return _expand(L, x, *shape)


def _index(x: ir.Expr, key) -> ir.Expr:
    if not isinstance(key, tuple):
        key = (key,)
    if any(isinstance(k, ir.Expr) for k in key):
        raise Unsupported("tensor indexing")
    n_real = sum(1 for k in key if k is not None and k is not Ellipsis)
    if Ellipsis in key:
        i = key.index(Ellipsis)
        key = key[:i] + (slice(None),) * (len(x.shape) - n_real) + key[i + 1:]
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


@fn(operator.getitem)
def _getitem(L, x, key):
    if isinstance(x, ir.Expr):
        return _index(x, key)
    return x[key]


@fn(torch.narrow)
@method("narrow")
def _narrow(L, x, dim, start, length):
    x = L.t(x)
    key = [slice(None)] * len(x.shape)
    key[dim % len(x.shape)] = slice(start, start + length)
    return _index(x, tuple(key))


@fn(torch.chunk)
@method("chunk")
def _chunk(L, x, chunks, dim=0):
    x = L.t(x)
    d = dim % len(x.shape)
    size = -(-x.shape[d] // chunks)
    return _split(L, x, size, d)


@fn(torch.split)
@method("split")
def _split(L, x, split_size_or_sections, dim=0):
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


# ------------------------------------------------------------------ reductions


def _reduction(kind):
    def h(L, x, dim=None, keepdim=False, *, dtype=None, out=None):
        if isinstance(dim, bool):  # positional keepdim without dim never happens; guard anyway
            raise Unsupported("bad arguments")
        if isinstance(dim, list):
            dim = tuple(dim)
        return L.reduce(kind, x, dim, keepdim)

    return h


fn(torch.sum)(_reduction("sum"))
method("sum")(_reduction("sum"))
fn(torch.mean)(_reduction("mean"))
method("mean")(_reduction("mean"))
fn(torch.amax)(_reduction("amax"))
method("amax")(_reduction("amax"))
fn(torch.amin)(_reduction("amin"))
method("amin")(_reduction("amin"))


def _arg_reduction(kind):
    def h(L, x, dim=None, keepdim=False):
        x = L.t(x)
        if dim is None:
            return L.reduce(kind, ir.reshape(x, (ir.numel(x.shape),)), 0, False)
        return L.reduce(kind, x, dim, keepdim)

    return h


fn(torch.argmax)(_arg_reduction("argmax"))
method("argmax")(_arg_reduction("argmax"))
fn(torch.argmin)(_arg_reduction("argmin"))
method("argmin")(_arg_reduction("argmin"))


def _minmax(kind):
    ext, argk, elem = (("amax", "argmax", "maximum") if kind == "max" else ("amin", "argmin", "minimum"))

    def h(L, x, dim=None, keepdim=False):
        if isinstance(dim, ir.Expr):
            return ir.op(elem, L.t(x), dim)
        if dim is None:
            return L.reduce(ext, x, None, False)
        values = L.reduce(ext, x, dim, keepdim)
        indices = _arg_reduction(argk)(L, x, dim, keepdim)
        return torch.return_types.max((values, indices)) if kind == "max" else \
            torch.return_types.min((values, indices))

    return h


fn(torch.max)(_minmax("max"))
method("max")(_minmax("max"))
fn(torch.min)(_minmax("min"))
method("min")(_minmax("min"))


def _correction(unbiased, correction):
    if correction is not None:
        return int(correction)
    return 1 if unbiased in (None, True) else 0


@fn(torch.var)
@method("var")
def _var(L, x, dim=None, unbiased=None, keepdim=False, *, correction=None):
    if isinstance(dim, bool):
        unbiased, dim = dim, None
    return L.reduce("var", x, dim, keepdim, correction=_correction(unbiased, correction))


@fn(torch.std)
@method("std")
def _std(L, x, dim=None, unbiased=None, keepdim=False, *, correction=None):
    return ir.op("sqrt", _var(L, x, dim, unbiased, keepdim, correction=correction))


@fn(torch.norm, torch.linalg.norm, torch.linalg.vector_norm)
@method("norm")
def _norm(L, x, p="fro", dim=None, keepdim=False, out=None, dtype=None, ord=None):
    if ord is not None:
        p = ord
    x = _f(L.t(x))
    if p in ("fro", 2, 2.0, None):
        return L.reduce("norm2", x, dim, keepdim)
    if p in (1, 1.0):
        return L.reduce("sum", ir.op("abs", x), dim, keepdim)
    if p in (float("inf"),):
        return L.reduce("amax", ir.op("abs", x), dim, keepdim)
    raise Unsupported(f"norm with p={p}")


@fn(F.normalize)
def _normalize(L, x, p=2.0, dim=1, eps=1e-12, out=None):
    x = _f(L.t(x))
    n = _norm(L, x, p, dim, True)
    return ir.op("div", x, ir.op("maximum", n, ir.const(float(eps))))


@fn(torch.logsumexp)
@method("logsumexp")
def _logsumexp(L, x, dim, keepdim=False):
    x = _f(L.t(x))
    m = L.reduce("amax", x, dim, True)
    s = L.reduce("sum", ir.op("exp", ir.op("sub", x, m)), dim, True)
    out = ir.op("add", ir.op("log", s), m)
    if not keepdim:
        dims = {d % len(x.shape) for d in ((dim,) if isinstance(dim, int) else dim)}
        out = ir.reshape(out, tuple(s for d, s in enumerate(x.shape) if d not in dims))
    return out


@fn(torch.softmax, F.softmax, torch.special.softmax)
@method("softmax")
def _softmax(L, x, dim=None, _stacklevel=3, dtype=None):
    return L.rowfull("softmax", x, -1 if dim is None else dim)


@fn(torch.log_softmax, F.log_softmax, torch.special.log_softmax)
@method("log_softmax")
def _log_softmax(L, x, dim=None, _stacklevel=3, dtype=None):
    return L.rowfull("log_softmax", x, -1 if dim is None else dim)


@fn(torch.cumsum)
@method("cumsum")
def _cumsum(L, x, dim, dtype=None):
    return L.scan("cumsum", _f(L.t(x)), dim)


def _cum_ext(kind):
    def h(L, x, dim):
        values = L.scan(kind, _f(L.t(x)), dim)
        return torch.return_types.cummax((values, Missing(f"{kind} indices")))

    return h


fn(torch.cummax)(_cum_ext("cummax"))
method("cummax")(_cum_ext("cummax"))
fn(torch.cummin)(_cum_ext("cummin"))
method("cummin")(_cum_ext("cummin"))


# ------------------------------------------------------------------ normalisation


def _channel(v: ir.Expr, rank: int, axis: int = 1) -> ir.Expr:
    """A per-channel vector shaped to broadcast against a rank-``rank`` tensor at ``axis``."""
    shape = [1] * rank
    shape[axis] = v.shape[0]
    return ir.reshape(v, tuple(shape))


def _affine(y, weight, bias, rank, axis=1):
    if weight is not None:
        y = ir.op("mul", y, _channel(weight, rank, axis) if axis is not None else weight)
    if bias is not None:
        y = ir.op("add", y, _channel(bias, rank, axis) if axis is not None else bias)
    return y


def batch_norm(L, x, running_mean, running_var, weight, bias, training, eps):
    x = _f(L.t(x))
    r = len(x.shape)
    if training or running_mean is None:
        y = L.rowfull("normalize", x, (0, *range(2, r)), eps=float(eps))
    else:
        inv = ir.op("rsqrt", ir.op("add", _channel(running_var, r), ir.const(float(eps))))
        y = ir.op("mul", ir.op("sub", x, _channel(running_mean, r)), inv)
    return _affine(y, weight, bias, r)


@fn(F.batch_norm)
def _batch_norm(L, x, running_mean, running_var, weight=None, bias=None, training=False,
                momentum=0.1, eps=1e-5):
    return batch_norm(L, x, running_mean, running_var, weight, bias, training, eps)


def layer_norm(L, x, normalized_shape, weight, bias, eps):
    x = _f(L.t(x))
    k = len(tuple(normalized_shape)) if isinstance(normalized_shape, tuple | list) else 1
    r = len(x.shape)
    y = L.rowfull("normalize", x, tuple(range(r - k, r)), eps=float(eps))
    if weight is not None:
        y = ir.op("mul", y, weight)
    if bias is not None:
        y = ir.op("add", y, bias)
    return y


@fn(F.layer_norm)
def _layer_norm(L, x, normalized_shape, weight=None, bias=None, eps=1e-5):
    return layer_norm(L, x, normalized_shape, weight, bias, eps)


def rms_norm(L, x, normalized_shape, weight, eps):
    x = _f(L.t(x))
    k = len(tuple(normalized_shape)) if isinstance(normalized_shape, tuple | list) else 1
    r = len(x.shape)
    if eps is None:
        eps = torch.finfo(torch.float32).eps
    ms = L.reduce("mean", ir.op("mul", x, x), tuple(range(r - k, r)), True)
    y = ir.op("mul", x, ir.op("rsqrt", ir.op("add", ms, ir.const(float(eps)))))
    return ir.op("mul", y, weight) if weight is not None else y


if hasattr(F, "rms_norm"):
    @fn(F.rms_norm)
    def _rms_norm(L, x, normalized_shape, weight=None, eps=None):
        return rms_norm(L, x, normalized_shape, weight, eps)


def group_norm(L, x, groups, weight, bias, eps):
    x = _f(L.t(x))
    n, c = x.shape[0], x.shape[1]
    rest = ir.numel(x.shape[2:])
    xg = ir.reshape(x, (n, groups, (c // groups) * rest))
    y = ir.reshape(L.rowfull("normalize", xg, (2,), eps=float(eps)), x.shape)
    return _affine(y, weight, bias, len(x.shape))


@fn(F.group_norm)
def _group_norm(L, x, num_groups, weight=None, bias=None, eps=1e-5):
    return group_norm(L, x, num_groups, weight, bias, eps)


def instance_norm(L, x, weight, bias, eps):
    x = _f(L.t(x))
    r = len(x.shape)
    y = L.rowfull("normalize", x, tuple(range(2, r)), eps=float(eps))
    return _affine(y, weight, bias, r)


@fn(F.instance_norm)
def _instance_norm(L, x, running_mean=None, running_var=None, weight=None, bias=None,
                   use_input_stats=True, momentum=0.1, eps=1e-5):
    if not use_input_stats:
        return batch_norm(L, x, running_mean, running_var, weight, bias, False, eps)
    return instance_norm(L, x, weight, bias, eps)


# ------------------------------------------------------------------ matmul and linear


def matmul(L: Lowering, a, b) -> ir.Expr:
    a, b = _f(L.t(a)), _f(L.t(b))
    squeeze_a = len(a.shape) == 1
    squeeze_b = len(b.shape) == 1
    if squeeze_a:
        a = ir.reshape(a, (1, a.shape[0]))
    if squeeze_b:
        b = ir.reshape(b, (b.shape[0], 1))
    batch = ir.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = ir.broadcast_to(a, batch + a.shape[-2:])
    b = ir.broadcast_to(b, batch + b.shape[-2:])
    M, K, N = a.shape[-2], a.shape[-1], b.shape[-1]
    if b.shape[-2] != K:
        raise Unsupported(f"matmul shapes {a.shape} @ {b.shape}")
    shape = batch + (M, N)
    if L.config.mode == "hybrid":
        out = L.torch_call(f"torch.matmul({L.as_torch(a)}, {L.as_torch(b)})", shape, torch.float32)
    else:
        L.flush_expr(a, b)
        out = L.kernel(lambda w, o, a=a, b=b: kernels.matmul(w, a, b, o), shape, torch.float32)
    final = shape
    if squeeze_a:
        final = final[:-2] + final[-1:]
    if squeeze_b:
        final = final[:-1]
    return ir.reshape(out, final)


@fn(torch.matmul, operator.matmul, torch.mm, torch.bmm)
@method("matmul", "mm", "bmm", "__matmul__")
def _matmul(L, a, b):
    return matmul(L, a, b)


def linear(L, x, weight, bias):
    y = matmul(L, x, ir.transpose(weight, 0, 1) if len(weight.shape) == 2 else weight)
    return ir.op("add", y, bias) if bias is not None else y


@fn(F.linear)
def _linear(L, x, weight, bias=None):
    return linear(L, x, weight, bias)


@fn(torch.addmm)
def _addmm(L, bias, a, b, *, beta=1, alpha=1):
    y = matmul(L, a, b)
    if alpha != 1:
        y = ir.op("mul", y, ir.const(float(alpha)))
    bias = L.t(bias)
    if beta != 1:
        bias = ir.op("mul", bias, ir.const(float(beta)))
    return ir.op("add", y, bias)


fn(torch.baddbmm)(_addmm)


# ------------------------------------------------------------------ convolution and pooling


def _conv_padding(padding, nsp, ksz, dilation):
    if padding == "valid":
        return (0,) * nsp
    if padding == "same":
        out = []
        for k, d in zip(ksz, dilation, strict=True):
            total = d * (k - 1)
            if total % 2:
                raise Unsupported("asymmetric 'same' padding")
            out.append(total // 2)
        return tuple(out)
    return ntuple(padding, nsp)


def conv(L: Lowering, nsp: int, x, weight, bias, stride, padding, dilation, groups,
         transposed=False, output_padding=0) -> ir.Expr:
    x, weight = _f(L.t(x)), _f(L.t(weight))
    unbatched = len(x.shape) == nsp + 1
    if unbatched:
        x = ir.reshape(x, (1, *x.shape))
    ksz = weight.shape[2:]
    stride, dilation = ntuple(stride, nsp), ntuple(dilation, nsp)
    padding = _conv_padding(padding, nsp, ksz, dilation)
    ins = x.shape[2:]
    if transposed:
        opad = ntuple(output_padding, nsp)
        oc = weight.shape[1] * groups
        outs = tuple((i - 1) * s - 2 * p + d * (k - 1) + op + 1 for i, s, p, d, k, op in
                     zip(ins, stride, padding, dilation, ksz, opad, strict=True))
    else:
        oc = weight.shape[0]
        outs = tuple((i + 2 * p - d * (k - 1) - 1) // s + 1 for i, s, p, d, k in
                     zip(ins, stride, padding, dilation, ksz, strict=True))
    shape = (x.shape[0], oc, *outs)
    if L.config.mode == "hybrid":
        name = f"conv_transpose{nsp}d" if transposed else f"conv{nsp}d"
        extra = f", output_padding={ntuple(output_padding, nsp)}" if transposed else ""
        code = (f"torch.nn.functional.{name}({L.as_torch(x)}, {L.as_torch(weight)}, None, "
                f"stride={stride}, padding={padding}{extra}, groups={groups}, dilation={dilation})")
        out = L.torch_call(code, shape, torch.float32)
    else:
        spec = kernels.ConvSpec(transposed, stride, padding, dilation, int(groups), shape)
        L.flush_expr(x, weight)
        out = L.kernel(lambda w, o, x=x, wt=weight: kernels.conv(w, x, wt, spec, o), shape, torch.float32)
    if bias is not None:
        out = ir.op("add", out, _channel(L.t(bias), len(shape)))
    if unbatched:
        out = ir.reshape(out, shape[1:])
    return out


def _conv_fn(nsp, transposed):
    if transposed:
        def h(L, x, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
            return conv(L, nsp, x, weight, bias, stride, padding, dilation, groups, True, output_padding)
    else:
        def h(L, x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
            return conv(L, nsp, x, weight, bias, stride, padding, dilation, groups)
    return h


for _n, (_c, _ct) in enumerate([(F.conv1d, F.conv_transpose1d), (F.conv2d, F.conv_transpose2d),
                                 (F.conv3d, F.conv_transpose3d)], start=1):
    fn(_c)(_conv_fn(_n, False))
    fn(_ct)(_conv_fn(_n, True))


def pool(L: Lowering, kind: str, nsp: int, x, kernel_size, stride=None, padding=0, dilation=1,
         ceil_mode=False, count_include_pad=True, divisor_override=None, return_indices=False):
    x = _f(L.t(x))
    if ceil_mode:
        raise Unsupported("ceil_mode=True")
    if return_indices:
        raise Unsupported("return_indices=True")
    if divisor_override is not None:
        raise Unsupported("divisor_override")
    ksz = ntuple(kernel_size, nsp)
    stride = ksz if stride is None or stride == [] else ntuple(stride, nsp)
    padding, dilation = ntuple(padding, nsp), ntuple(dilation, nsp)
    if kind == "avg" and not count_include_pad and any(padding):
        raise Unsupported("count_include_pad=False with padding")
    ins = x.shape[-nsp:]
    outs = tuple((i + 2 * p - d * (k - 1) - 1) // s + 1 for i, p, d, k, s in
                 zip(ins, padding, dilation, ksz, stride, strict=True))
    shape = x.shape[:-nsp] + outs
    L.flush_expr(x)
    return L.kernel(lambda w, o, x=x: kernels.pool(w, kind, x, ksz, stride, padding, dilation, shape, o),
                    shape, torch.float32)


for _n, (_a, _m) in enumerate([(F.avg_pool1d, F.max_pool1d), (F.avg_pool2d, F.max_pool2d),
                                (F.avg_pool3d, F.max_pool3d)], start=1):
    fn(_a)(lambda L, x, *a, _n=_n, **k: pool(L, "avg", _n, x, *a, **k))

    def _mp(L, x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
            return_indices=False, _n=_n):
        return pool(L, "max", _n, x, kernel_size, stride, padding, dilation, ceil_mode,
                    return_indices=return_indices)

    fn(_m)(_mp)
    if hasattr(F, f"max_pool{_n}d_with_indices"):
        fn(getattr(F, f"max_pool{_n}d_with_indices"))(_mp)


def adaptive_avg(L, nsp, x, output_size):
    x = L.t(x)
    outs = ntuple(output_size, nsp) if output_size is not None else x.shape[-nsp:]
    ins = x.shape[-nsp:]
    outs = tuple(i if o is None else o for i, o in zip(ins, outs, strict=True))
    if all(o == 1 for o in outs):
        return L.reduce("mean", x, tuple(range(len(x.shape) - nsp, len(x.shape))), True)
    if any(i % o for i, o in zip(ins, outs, strict=True)):
        raise Unsupported("adaptive pooling with non-divisible sizes")
    k = tuple(i // o for i, o in zip(ins, outs, strict=True))
    return pool(L, "avg", nsp, x, k, k)


for _n, _f_ in enumerate([F.adaptive_avg_pool1d, F.adaptive_avg_pool2d, F.adaptive_avg_pool3d], 1):
    fn(_f_)(lambda L, x, output_size, _n=_n: adaptive_avg(L, _n, x, output_size))


# ------------------------------------------------------------------ nn modules


@module(nn.Linear)
def _m_linear(L, m, p, x):
    return linear(L, x, p("weight"), p("bias"))


@module(nn.Conv1d, nn.Conv2d, nn.Conv3d)
def _m_conv(L, m, p, x):
    if m.padding_mode != "zeros":
        raise Unsupported(f"padding_mode={m.padding_mode}")
    nsp = len(m.kernel_size)
    return conv(L, nsp, x, p("weight"), p("bias"), m.stride, m.padding, m.dilation, m.groups)


@module(nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)
def _m_convt(L, m, p, x, output_size=None):
    if output_size is not None:
        raise Unsupported("output_size argument")
    nsp = len(m.kernel_size)
    return conv(L, nsp, x, p("weight"), p("bias"), m.stride, m.padding, m.dilation, m.groups,
                True, m.output_padding)


@module(nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)
def _m_bn(L, m, p, x):
    batch_stats = m.training or not m.track_running_stats
    rm = None if batch_stats else p("running_mean")
    rv = None if batch_stats else p("running_var")
    return batch_norm(L, x, rm, rv, p("weight"), p("bias"), batch_stats, m.eps)


@module(nn.LayerNorm)
def _m_ln(L, m, p, x):
    return layer_norm(L, x, m.normalized_shape, p("weight"), p("bias"), m.eps)


if hasattr(nn, "RMSNorm"):
    @module(nn.RMSNorm)
    def _m_rms(L, m, p, x):
        return rms_norm(L, x, m.normalized_shape, p("weight"), m.eps)


@module(nn.GroupNorm)
def _m_gn(L, m, p, x):
    return group_norm(L, x, m.num_groups, p("weight"), p("bias"), m.eps)


@module(nn.InstanceNorm1d, nn.InstanceNorm2d, nn.InstanceNorm3d)
def _m_in(L, m, p, x):
    if m.track_running_stats and not m.training:
        return batch_norm(L, x, p("running_mean"), p("running_var"), p("weight"), p("bias"),
                          False, m.eps)
    return instance_norm(L, x, p("weight"), p("bias"), m.eps)


@module(nn.MaxPool1d, nn.MaxPool2d, nn.MaxPool3d)
def _m_maxpool(L, m, p, x):
    nsp = {nn.MaxPool1d: 1, nn.MaxPool2d: 2, nn.MaxPool3d: 3}[type(m)]
    return pool(L, "max", nsp, x, m.kernel_size, m.stride, m.padding, m.dilation, m.ceil_mode,
                return_indices=m.return_indices)


@module(nn.AvgPool1d, nn.AvgPool2d, nn.AvgPool3d)
def _m_avgpool(L, m, p, x):
    nsp = {nn.AvgPool1d: 1, nn.AvgPool2d: 2, nn.AvgPool3d: 3}[type(m)]
    return pool(L, "avg", nsp, x, m.kernel_size, m.stride, m.padding, 1, m.ceil_mode,
                m.count_include_pad, getattr(m, "divisor_override", None))


@module(nn.AdaptiveAvgPool1d, nn.AdaptiveAvgPool2d, nn.AdaptiveAvgPool3d)
def _m_adaptive(L, m, p, x):
    nsp = {nn.AdaptiveAvgPool1d: 1, nn.AdaptiveAvgPool2d: 2, nn.AdaptiveAvgPool3d: 3}[type(m)]
    return adaptive_avg(L, nsp, x, m.output_size)


def _act(f):
    return lambda L, m, p, x: f(_f(L.t(x)), m)


MODULES.update({
    nn.ReLU: _act(lambda x, m: ir.op("relu", x)),
    nn.ReLU6: _act(lambda x, m: hardtanh(x, 0.0, 6.0)),
    nn.Sigmoid: _act(lambda x, m: ir.op("sigmoid", x)),
    nn.Tanh: _act(lambda x, m: ir.op("tanh", x)),
    nn.SiLU: _act(lambda x, m: silu(x)),
    nn.GELU: _act(lambda x, m: gelu(x, m.approximate)),
    nn.Mish: _act(lambda x, m: ir.op("mul", x, ir.op("tanh", softplus(x)))),
    nn.Hardswish: _act(lambda x, m: ir.op("mul", x, hardsigmoid(x))),
    nn.Hardsigmoid: _act(lambda x, m: hardsigmoid(x)),
    nn.LeakyReLU: _act(lambda x, m: leaky_relu(x, m.negative_slope)),
    nn.ELU: _act(lambda x, m: elu(x, m.alpha)),
    nn.CELU: _act(lambda x, m: elu(x, m.alpha, 1.0, 1.0 / m.alpha)),
    nn.SELU: _act(lambda x, m: elu(x, SELU_ALPHA, SELU_SCALE)),
    nn.Softplus: _act(lambda x, m: softplus(x, m.beta, m.threshold)),
    nn.Softsign: _act(lambda x, m: ir.op("div", x, ir.op("add", ir.op("abs", x), ir.const(1.0)))),
    nn.Hardtanh: _act(lambda x, m: hardtanh(x, m.min_val, m.max_val)),
    nn.Tanhshrink: _act(lambda x, m: ir.op("sub", x, ir.op("tanh", x))),
    nn.Identity: lambda L, m, p, x, *a, **k: L.t(x),
})
MODULES[nn.LogSigmoid] = lambda L, m, p, x: _logsigmoid(L, x)
MODULES[nn.Softmax] = lambda L, m, p, x: L.rowfull("softmax", x, -1 if m.dim is None else m.dim)
MODULES[nn.LogSoftmax] = lambda L, m, p, x: L.rowfull("log_softmax", x, -1 if m.dim is None else m.dim)
MODULES[nn.Flatten] = lambda L, m, p, x: _flatten(L, x, m.start_dim, m.end_dim)
MODULES[nn.Unflatten] = lambda L, m, p, x: _unflatten(L, x, m.dim, m.unflattened_size)


def _m_dropout(L, m, p, x):
    if m.training and m.p > 0:
        raise Unsupported("dropout in training mode is random")
    return L.t(x)


for _t in (nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d, nn.AlphaDropout):
    MODULES[_t] = _m_dropout
