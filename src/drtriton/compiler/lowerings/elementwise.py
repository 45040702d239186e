"""Lowerings of elementwise arithmetic, unary ops and activations, dtype and identity methods."""

from __future__ import annotations

import math
import operator

import torch
import torch.nn.functional as F

from drtriton.compiler import ir
from drtriton.compiler.lower import Lowering, Unsupported
from drtriton.compiler.lowerings.registry import _f, fn, method

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
            if mode == "floor":
                return floor_divide(a, b)
            r = ir.op("div", _f(a), _f(b))
            if mode == "trunc":
                r = ir.op(
                    "where", ir.op("lt", r, ir.const(0.0)), ir.op("ceil", r), ir.op("floor", r)
                )
            return r
        return ir.op(name, a, b)

    return h


for _name, _targets in {
    "add": (torch.add, operator.add, operator.iadd, torch.Tensor.add),
    "sub": (torch.sub, torch.subtract, operator.sub, operator.isub),
    "mul": (torch.mul, torch.multiply, operator.mul, operator.imul),
    "div": (torch.div, torch.divide, torch.true_divide, operator.truediv, operator.itruediv),
    "maximum": (
        torch.maximum,
        torch.max_elementwise if hasattr(torch, "max_elementwise") else torch.maximum,
    ),
    "minimum": (torch.minimum,),
    "lt": (torch.lt, operator.lt),
    "le": (torch.le, operator.le),
    "gt": (torch.gt, operator.gt),
    "ge": (torch.ge, operator.ge),
    "eq": (torch.eq, operator.eq),
    "ne": (torch.ne, operator.ne),
}.items():
    fn(*_targets)(_binary(_name))
    method(_name)(_binary(_name))
method("sub", "subtract")(_binary("sub"))
method("mul", "multiply")(_binary("mul"))
method("div", "divide", "true_divide")(_binary("div"))


def _bitwise(name: str):
    """``&``, ``|``, ``^``, ``<<``, ``>>`` of bools or integers (bitwise, as PyTorch; floats
    are an error)."""
    def h(L: Lowering, a, b):
        a, b = L.t(a), L.t(b)
        if any(ir.is_float(e.dtype) for e in (a, b) if not isinstance(e, ir.Const)):
            raise Unsupported(f"bitwise {name} of floating point values (PyTorch refuses it)")
        return ir.op(name, a, b)
    return h


for _name, _ops, _methods in (
    ("lshift", (operator.lshift, operator.ilshift, torch.bitwise_left_shift),
     ("__lshift__", "bitwise_left_shift")),
    ("rshift", (operator.rshift, operator.irshift, torch.bitwise_right_shift),
     ("__rshift__", "bitwise_right_shift")),
):
    fn(*_ops)(_bitwise(_name))
    method(*_methods)(_bitwise(_name))


def _logical(name: str):
    """``logical_and``/``or``/``xor``: the truth of each operand (nonzero), combined."""
    def h(L: Lowering, a, b, *, out=None):
        if out is not None:
            raise Unsupported("out= argument")
        truth = [e if e.dtype == torch.bool else ir.op("ne", e, ir.const(0), dtype=torch.bool)
                 for e in (L.t(a), L.t(b))]
        return ir.op(name, *truth, dtype=torch.bool)
    return h


for _name, _op, _iop in (("and", operator.and_, operator.iand), ("or", operator.or_, operator.ior),
                         ("xor", operator.xor, operator.ixor)):
    fn(_op, _iop, getattr(torch, f"bitwise_{_name}"))(_bitwise(_name))
    method(f"bitwise_{_name}", f"__{_name}__")(_bitwise(_name))
    fn(getattr(torch, f"logical_{_name}"))(_logical(_name))
    method(f"logical_{_name}")(_logical(_name))


@fn(torch.rsub)
@method("rsub")
def _rsub(L, a, b, alpha=1):
    return _binary("sub")(L, b, a, alpha=alpha)


@fn(operator.floordiv, torch.floor_divide)
@method("floor_divide")
def _floordiv(L, a, b):
    return floor_divide(L.t(a), L.t(b))


def floor_divide(a: ir.Expr, b: ir.Expr) -> ir.Expr:
    """``a // b`` as PyTorch (and Python) computes it for floats: from ``fmod``, so ``7.7 //
    0.7`` is 10, not ``floor(7.7 / 0.7)`` = 11; integers as the floor of their quotient."""
    if not any(ir.is_float(e.dtype) for e in (a, b)):
        return ir.op("floor", ir.op("div", _f(a), _f(b)))
    a, b = _f(a), _f(b)
    zero, quotient = ir.const(0.0), ir.op("div", a, b)
    mod = ir.op("fmod", a, b)
    div = ir.op("div", ir.op("sub", a, mod), b)
    div = ir.op("where", _signs_differ(mod, b), ir.op("sub", div, ir.const(1.0)), div)
    low = ir.op("floor", div)
    up = ir.op("where", ir.op("gt", ir.op("sub", div, low), ir.const(0.5)),
               ir.op("add", low, ir.const(1.0)), low)
    signed_zero = ir.op("mul", quotient, zero)
    whole = ir.op("where", ir.op("ne", div, zero), up, signed_zero)
    return ir.op("where", ir.op("eq", b, zero), quotient, whole)


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
    ("sign", (torch.sign,), ("sign",)),
]:
    fn(*_targets)(_unary(_name))
    method(*_meths)(_unary(_name))


@fn(torch.round)
@method("round")
def _round(L, x, *, decimals=0):
    """Half to even, at ``decimals`` places as PyTorch: ``x * 10**d`` rounded, divided back."""
    x = _f(L.t(x))
    if not decimals:
        return ir.op("round", x)
    scale = ir.const(10.0 ** abs(int(decimals)))
    if decimals > 0:
        return ir.op("div", ir.op("round", ir.op("mul", x, scale)), scale)
    return ir.op("mul", ir.op("round", ir.op("div", x, scale)), scale)


@fn(torch.trunc, torch.fix)
@method("trunc", "fix")
def _trunc(L, x):
    """Rounding toward zero; integers are whole already."""
    x = L.t(x)
    if not ir.is_float(x.dtype):
        return x
    return ir.op("where", ir.op("lt", x, ir.const(0.0)), ir.op("ceil", x), ir.op("floor", x))


def _same_dtype(L, a, b) -> tuple[ir.Expr, ir.Expr]:
    a, b = L.t(a), L.t(b)
    dtype = ir.promote(a.dtype, b.dtype)
    return ir.cast(a, dtype), ir.cast(b, dtype)


@fn(torch.fmod)
@method("fmod")
def _fmod(L, a, b):
    """C's remainder: the sign of ``a``."""
    return ir.op("fmod", *_same_dtype(L, a, b))


@fn(torch.remainder, operator.mod)
@method("remainder", "__mod__")
def _remainder(L, a, b):
    """Python's remainder, the sign of ``b``: fmod moved by ``b`` where the signs differ, as
    PyTorch computes it."""
    a, b = _same_dtype(L, a, b)
    r = ir.op("fmod", a, b)
    return ir.op("where", _signs_differ(r, b), ir.op("add", r, b), r)


def _signs_differ(mod: ir.Expr, b: ir.Expr) -> ir.Expr:
    """Where ``fmod(a, b)`` is nonzero with the sign opposite ``b``'s: there Python's floor
    division is one less and its remainder ``b`` more than C's."""
    zero = ir.const(0)
    return ir.op("and", ir.op("ne", mod, zero),
                 ir.op("ne", ir.op("lt", mod, zero), ir.op("lt", b, zero)))


@fn(torch.hypot)
@method("hypot")
def _hypot(L, a, b):
    """``sqrt(a**2 + b**2)`` scaled by the larger magnitude, so squares of values past 1e19 do
    not overflow fp32 where the result does not."""
    a, b = ir.op("abs", _f(L.t(a))), ir.op("abs", _f(L.t(b)))
    big, small = ir.op("maximum", a, b), ir.op("minimum", a, b)
    ratio = ir.op("div", small, ir.op("where", ir.op("eq", big, ir.const(0.0)), ir.const(1.0),
                                      big))
    return ir.op("mul", big, ir.op("sqrt", ir.op("add", ir.const(1.0), ir.op("mul", ratio,
                                                                            ratio))))


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


def log1p(z: ir.Expr) -> ir.Expr:
    """``log(1 + z)`` accurate for small ``z`` (where ``1 + z`` rounds): ``log(u) * z / (u - 1)``
    with ``u = 1 + z`` corrects the rounding of ``u``; ``z`` itself where ``u`` is exactly 1."""
    u = ir.op("add", z, ir.const(1.0))
    r = ir.op("mul", ir.op("log", u), ir.op("div", z, ir.op("sub", u, ir.const(1.0))))
    r = ir.op("where", ir.op("eq", u, ir.const(float("inf"))), u, r)  # log1p(inf) = inf
    return ir.op("where", ir.op("eq", u, ir.const(1.0)), z, r)


@fn(torch.log1p)
@method("log1p")
def _log1p(L, x):
    return log1p(_f(L.t(x)))


@fn(torch.expm1)
@method("expm1")
def _expm1(L, x):
    return ir.op("sub", ir.op("exp", _f(L.t(x))), ir.const(1.0))


def leaky_relu(x, slope):
    return ir.op("where", ir.op("gt", x, ir.const(0.0)), x, ir.op("mul", x, ir.const(float(slope))))


@fn(F.rrelu, torch.rrelu)
def _rrelu(L, x, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """Randomised leaky ReLU: in eval mode the slope is the mean of its range; in training it
    draws a slope per element, which a candidate cannot repeat."""
    if training:
        raise Unsupported("rrelu in training mode (random slopes)")
    return _leaky(L, x, (lower + upper) / 2)


@fn(F.leaky_relu)
def _leaky(L, x, negative_slope=0.01, inplace=False):
    return leaky_relu(_f(L.t(x)), negative_slope)


def prelu(L, x: ir.Expr, weight: ir.Expr) -> ir.Expr:
    """``F.prelu``: ``x`` where positive, else ``weight * x``; a weight of C values scales the
    channels (dim 1), one value every element."""
    if ir.numel(weight.shape) > 1:
        if len(x.shape) < 2 or x.shape[1] != ir.numel(weight.shape):
            raise Unsupported(f"prelu with {ir.numel(weight.shape)} weights for {x.shape}")
        shape = [1] * len(x.shape)
        shape[1] = x.shape[1]
        weight = ir.reshape(weight, tuple(shape))
    else:
        weight = ir.reshape(weight, (1,) * len(x.shape))
    return ir.op("where", ir.op("gt", x, ir.const(0.0)), x, ir.op("mul", weight, x))


@fn(F.prelu, torch.prelu)
def _prelu(L, x, weight):
    return prelu(L, _f(L.t(x)), _f(L.t(weight)))


def silu(x):
    return ir.op("mul", x, ir.op("sigmoid", x))


def gelu(x, approximate="none"):
    if approximate == "tanh":
        inner = ir.op("mul", ir.op("add", x, ir.op("mul", ir.op("mul", ir.op("mul", x, x), x),
                                                   ir.const(0.044715))),
                      ir.const(math.sqrt(2.0 / math.pi)))
        return ir.op(
            "mul", ir.op("mul", x, ir.const(0.5)), ir.op("add", ir.op("tanh", inner), ir.const(1.0))
        )
    return ir.op(
        "mul",
        ir.op("mul", x, ir.const(0.5)),
        ir.op("add", ir.op("erf", ir.op("mul", x, ir.const(1 / math.sqrt(2.0)))), ir.const(1.0)),
    )


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
    sp = ir.op(
        "add",
        ir.op("relu", bx),
        ir.op("log", ir.op("add", ir.op("exp", ir.op("neg", ir.op("abs", bx))), ir.const(1.0))),
    )
    if beta != 1:
        sp = ir.op("div", sp, ir.const(float(beta)))
    return ir.op("where", ir.op("gt", bx, ir.const(float(threshold))), x, sp)


def hardsigmoid(x):
    return ir.op(
        "minimum",
        ir.op(
            "maximum", ir.op("add", ir.op("div", x, ir.const(6.0)), ir.const(0.5)), ir.const(0.0)
        ),
        ir.const(1.0),
    )


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
    return ir.op(
        "sub",
        ir.op("minimum", x, ir.const(0.0)),
        ir.op("log", ir.op("add", ir.op("exp", ir.op("neg", ir.op("abs", x))), ir.const(1.0))),
    )


@fn(F.hardtanh)
def _hardtanh(L, x, min_val=-1.0, max_val=1.0, inplace=False):
    return hardtanh(_f(L.t(x)), min_val, max_val)


@fn(F.tanhshrink)
def _tanhshrink(L, x):
    x = _f(L.t(x))
    return ir.op("sub", x, ir.op("tanh", x))


@fn(F.glu)
def glu(L, x, dim: int = -1) -> ir.Expr:
    """``a * sigmoid(b)`` of the two halves of ``x`` along ``dim`` (views, no copy)."""
    x = _f(L.t(x))
    d = dim % len(x.shape)
    n = x.shape[d]
    if n % 2:
        raise Unsupported(f"glu of an odd size {n} along dim {dim}")
    half = x.shape[:d] + (n // 2,) + x.shape[d + 1:]

    def part(start: int) -> ir.Expr:
        return ir.view(x, half, tuple((k, start if k == d else 0, 1) for k in range(len(half))))

    return ir.op("mul", part(0), ir.op("sigmoid", part(n // 2)))


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


_CAST_METHODS = {"long": torch.int64, "int": torch.int32, "bool": torch.bool,
                 "double": torch.float64, "bfloat16": torch.bfloat16}


def _cast_method(dtype: torch.dtype):
    return lambda L, x, *a, **kw: ir.cast(L.t(x), dtype)


for _name, _dtype in _CAST_METHODS.items():
    method(_name)(_cast_method(_dtype))


@method("to", "type")
def _to(L, x, *args, **kw):
    dtype = kw.get("dtype")
    for a in args:
        if isinstance(a, torch.dtype):
            dtype = a
    return ir.cast(L.t(x), dtype) if dtype is not None else L.t(x)


@method("type_as")
def _type_as(L, x, other):
    """``x`` cast to ``other``'s dtype (Llama's RMSNorm: ``(...).type_as(x)``); same: itself."""
    return ir.cast(L.t(x), L.t(other).dtype)


@method("contiguous", "clone", "detach", "cpu", "cuda", "requires_grad_")
@fn(torch.clone)
def _identity(L, x, *a, **kw):
    return L.t(x)


# ------------------------------------------------------------------ float classification

_INF = float("inf")


def _classify(test, other):
    """``torch.isinf`` and friends: ``test`` of a float tensor (comparisons with infinity, NaN is
    the value unequal to itself); ``other`` of an integer or bool one, which holds no infinity or
    NaN (``x != x``: all False, ``x == x``: all True)."""
    def h(L, x):
        x = L.t(x)
        return ir.cast(test(x) if ir.is_float(x.dtype) else ir.op(other, x, x), torch.bool)

    return h


for _target, _test, _other in [
    (torch.isinf, lambda x: ir.op("eq", ir.op("abs", x), ir.const(_INF)), "ne"),
    (torch.isposinf, lambda x: ir.op("eq", x, ir.const(_INF)), "ne"),
    (torch.isneginf, lambda x: ir.op("eq", x, ir.const(-_INF)), "ne"),
    (torch.isnan, lambda x: ir.op("ne", x, x), "ne"),
    (torch.isfinite, lambda x: ir.op("lt", ir.op("abs", x), ir.const(_INF)), "eq"),
]:
    fn(_target)(_classify(_test, _other))
    method(_target.__name__)(_classify(_test, _other))


@fn(torch.nan_to_num)
@method("nan_to_num")
def _nan_to_num(L, x, nan=0.0, posinf=None, neginf=None, *, out=None):
    """NaN to ``nan``, +-inf to ``posinf`` / ``neginf`` (default: the dtype's largest and
    smallest finite values); integer tensors are returned as they are."""
    x = L.t(x)
    if out is not None:
        raise Unsupported("out= argument")
    if not ir.is_float(x.dtype):
        return x
    info = torch.finfo(x.dtype)
    hi = info.max if posinf is None else float(posinf)
    lo = info.min if neginf is None else float(neginf)
    y = ir.op("where", ir.op("ne", x, x), ir.const(float(nan)), x, dtype=x.dtype)
    y = ir.op("where", ir.op("eq", x, ir.const(_INF)), ir.const(hi), y, dtype=x.dtype)
    return ir.op("where", ir.op("eq", x, ir.const(-_INF)), ir.const(lo), y, dtype=x.dtype)


# ------------------------------------------------------------------ outer product


@fn(torch.outer, torch.ger)
@method("outer", "ger")
def _outer(L, a, b, *, out=None):
    """``a[:, None] * b[None, :]`` of two vectors (broadcast views, no kernel of its own)."""
    if out is not None:
        raise Unsupported("out= argument")
    a, b = L.t(a), L.t(b)
    if len(a.shape) != 1 or len(b.shape) != 1:
        raise Unsupported(f"outer product of shapes {a.shape} and {b.shape} (vectors only)")
    return ir.op("mul", ir.reshape(a, (a.shape[0], 1)), ir.reshape(b, (1, b.shape[0])))


@fn(torch.logical_not)
@method("logical_not")
def _logical_not(L, x):
    return ir.Op(L.t(x).shape, torch.bool, "not", (L.t(x),), ())


@fn(operator.invert, torch.bitwise_not)
@method("bitwise_not", "__invert__")
def _invert(L, x):
    """``~mask`` of a bool tensor is its logical not; of an integer one ``-x - 1``."""
    x = L.t(x)
    if x.dtype == torch.bool:
        return _logical_not(L, x)
    if ir.is_float(x.dtype):
        raise Unsupported(f"bitwise not of {x.dtype}")
    return ir.op("sub", ir.op("neg", x), ir.const(1))


# in-place functional spellings (``F.relu_(x)``): the same values; ``check_inplace`` rebinds x
for _name, _handler in (("relu_", _relu), ("elu_", _elu), ("celu_", _celu), ("selu_", _selu),
                        ("leaky_relu_", _leaky), ("hardtanh_", _hardtanh),
                        ("rrelu_", _rrelu)):
    fn(getattr(F, _name))(_handler)


@fn(F.threshold, F.threshold_, torch.threshold)
def _threshold(L, x, threshold, value, inplace=False):
    """``x`` where above ``threshold``, else ``value``."""
    x = L.t(x)
    return ir.op("where", ir.op("gt", x, ir.const(float(threshold))), x,
                 ir.const(float(value)), dtype=x.dtype)


@fn(F.hardshrink, torch.hardshrink)
@method("hardshrink")
def _hardshrink(L, x, lambd=0.5):
    x = _f(L.t(x))
    return ir.op("where", ir.op("gt", ir.op("abs", x), ir.const(float(lambd))), x,
                 ir.const(0.0), dtype=x.dtype)


@fn(F.softshrink)
def _softshrink(L, x, lambd=0.5):
    x, lam = _f(L.t(x)), ir.const(float(lambd))
    shrunk = ir.op("where", ir.op("gt", x, lam), ir.op("sub", x, lam), ir.op(
        "where", ir.op("lt", x, ir.op("neg", lam)), ir.op("add", x, lam), ir.const(0.0),
        dtype=x.dtype), dtype=x.dtype)
    return shrunk
