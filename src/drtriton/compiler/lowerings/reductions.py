"""Lowerings of reductions, scans and normalisations."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from drtriton.compiler import ir
from drtriton.compiler.lower import FUNCTIONS, Deferred, Unsupported
from drtriton.compiler.lowerings.registry import _f, fn, method
from drtriton.compiler.lowerings.sort import order
from drtriton.compiler.lowerings.views import _index

# ------------------------------------------------------------------ reductions


def _as_dtype(L, x, dtype: torch.dtype | None) -> ir.Expr:
    """The input of an op with a ``dtype=`` argument: PyTorch casts it before the op."""
    x = L.t(x)
    return x if dtype is None or dtype == x.dtype else ir.cast(x, dtype)


def _reduction(kind):
    def h(L, x, dim=None, keepdim=False, *, dtype=None, out=None):
        if isinstance(dim, bool):  # positional keepdim without dim never happens; guard anyway
            raise Unsupported("bad arguments")
        if isinstance(dim, list):
            dim = tuple(dim)
        return L.reduce(kind, _as_dtype(L, x, dtype), dim, keepdim)

    return h


fn(torch.sum)(_reduction("sum"))
method("sum")(_reduction("sum"))
fn(torch.mean)(_reduction("mean"))
method("mean")(_reduction("mean"))


@fn(torch.prod)
@method("prod")
def _prod(L, x, dim=None, keepdim=False, *, dtype=None):
    """The product over one dim, or over all (``keepdim`` only with a dim, as PyTorch)."""
    if isinstance(dim, torch.dtype):  # torch.prod(x, torch.float64)
        dim, dtype = None, dim
    return L.reduce("prod", _as_dtype(L, x, dtype), dim, keepdim and dim is not None)


fn(torch.amax)(_reduction("amax"))
method("amax")(_reduction("amax"))
fn(torch.amin)(_reduction("amin"))
method("amin")(_reduction("amin"))


def _logical(kind):
    """``any`` (``all``): the largest (smallest) truth value, 1.0 or 0.0, above zero."""
    def h(L, x, dim=None, keepdim=False):
        truth = ir.cast(ir.op("ne", L.t(x), ir.const(0)), torch.float32)
        if isinstance(dim, list):
            dim = tuple(dim)
        return ir.op("gt", L.reduce(kind, truth, dim, keepdim), ir.const(0.0), dtype=torch.bool)

    return h


fn(torch.any)(_logical("amax"))
method("any")(_logical("amax"))
fn(torch.all)(_logical("amin"))
method("all")(_logical("amin"))


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
    ext, argk, elem = (
        ("amax", "argmax", "maximum") if kind == "max" else ("amin", "argmin", "minimum")
    )

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


TOPK_MAX = 8  # k up to this takes k masked arg-reductions; more, a sort


@fn(torch.topk)
@method("topk")
def _topk(L, x, k, dim=-1, largest=True, sorted=True, *, out=None):
    """The k largest (smallest) along ``dim``, largest first: by k passes of an arg-reduction
    over the elements not yet chosen (ties go to the lowest index, as each pass's argmax); for
    k above ``TOPK_MAX``, as the first k of a stable sort (the same ties)."""
    x = L.t(x)
    if out is not None or not isinstance(k, int) or k < 1:
        raise Unsupported(f"topk with k={k}")
    if not x.dtype.is_floating_point:  # ties are common, and PyTorch's order of them its own
        raise Unsupported(f"topk of {x.dtype} (the order of equal values is PyTorch's kernel's; "
                          "sort integers instead)")
    dim = dim % len(x.shape)
    n = x.shape[dim]
    if k > n:
        raise Unsupported(f"topk k={k} over a dim of {n}")
    if k > TOPK_MAX:
        values, indices = order(L, x, dim, largest)
        first = tuple(slice(None) if d != dim else slice(0, k) for d in range(len(x.shape)))
        return torch.return_types.topk((_index(values, first), _index(indices, first)))
    along = ir.view(ir.arange(n, 0, 1, torch.int64), x.shape, ((dim, 0, 1),))  # index on dim
    fill = ir.const(float("-inf") if largest else float("inf"))
    taken = None
    values, indices = [], []
    for _ in range(k):
        xm = x if taken is None else ir.op("where", taken, fill, x)
        idx = L.reduce("argmax" if largest else "argmin", xm, dim, True)
        values.append(L.reduce("amax" if largest else "amin", xm, dim, True))
        indices.append(idx)
        hit = ir.op("eq", along, ir.broadcast_to(idx, x.shape))
        taken = hit if taken is None else ir.op("or", taken, hit)
    cat = FUNCTIONS[torch.cat]
    return torch.return_types.topk((cat(L, values, dim), cat(L, indices, dim)))


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


@fn(torch.var_mean)
def _var_mean(L, x, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """``(var, mean)``: two reductions over the same rows (they fuse where the rows fit one
    kernel, as ``x.var(); x.mean()`` do)."""
    if isinstance(dim, bool):
        unbiased, dim = dim, None
    mean = L.reduce("mean", x, dim, keepdim)
    return _var(L, x, dim, unbiased, keepdim, correction=correction), mean


@fn(torch.std_mean)
def _std_mean(L, x, dim=None, unbiased=None, keepdim=False, *, correction=None):
    var, mean = _var_mean(L, x, dim, unbiased, keepdim, correction=correction)
    return ir.op("sqrt", var), mean


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
    if p in (float("-inf"),):
        return L.reduce("amin", ir.op("abs", x), dim, keepdim)
    if p in (0, 0.0):  # the count of non-zero elements
        return L.reduce("sum", ir.cast(ir.op("ne", x, ir.const(0.0)), torch.float32), dim,
                        keepdim)
    if isinstance(p, int | float) and p > 0:  # (sum |x|^p)^(1/p)
        powered = ir.op("pow", ir.op("abs", x), ir.const(float(p)))
        return ir.op("pow", L.reduce("sum", powered, dim, keepdim), ir.const(1.0 / p))
    raise Unsupported(f"norm with p={p}")


@fn(F.normalize)
def _normalize(L, x, p=2.0, dim=1, eps=1e-12, out=None):
    x = _f(L.t(x))
    n = _norm(L, x, p, dim, True)
    return ir.op("div", x, ir.op("maximum", n, ir.const(float(eps))))


@fn(F.cosine_similarity, torch.cosine_similarity)
def _cosine_similarity(L, x1, x2, dim=1, eps=1e-8):
    """ATen's: the inputs broadcast, each divided by its own L2 norm along ``dim`` clamped to
    at least ``eps``, the products summed (not ``x1 . x2 / max(|x1| |x2|, eps)``)."""
    a, b = _f(L.t(x1)), _f(L.t(x2))
    shape = ir.broadcast_shapes(a.shape, b.shape)
    a, b = ir.broadcast_to(a, shape), ir.broadcast_to(b, shape)

    def unit(x: ir.Expr) -> ir.Expr:
        return ir.op("div", x, ir.op("maximum", _norm(L, x, 2, dim, True), ir.const(float(eps))))

    return L.reduce("sum", ir.op("mul", unit(a), unit(b)), dim, False)


@fn(torch.logsumexp)
@method("logsumexp")
def _logsumexp(L, x, dim, keepdim=False):
    return L.logsumexp(_f(L.t(x)), dim, keepdim)


@fn(torch.softmax, F.softmax, torch.special.softmax)
@method("softmax")
def _softmax(L, x, dim=None, _stacklevel=3, dtype=None):
    return L.rowfull("softmax", _as_dtype(L, x, dtype), -1 if dim is None else dim)


@fn(torch.log_softmax, F.log_softmax, torch.special.log_softmax)
@method("log_softmax")
def _log_softmax(L, x, dim=None, _stacklevel=3, dtype=None):
    return L.rowfull("log_softmax", _as_dtype(L, x, dtype), -1 if dim is None else dim)


@fn(torch.cumsum)
@method("cumsum")
def _cumsum(L, x, dim, dtype=None):
    return L.scan("cumsum", _as_dtype(L, x, dtype), dim)


@fn(torch.cumprod)
@method("cumprod")
def _cumprod(L, x, dim, dtype=None):
    """Products in blocks (an associative scan) times the running product of earlier blocks:
    the order of the multiplications differs from PyTorch's sequential one, as cumsum's does."""
    return L.scan("cumprod", _as_dtype(L, x, dtype), dim)


@fn(torch.logcumsumexp)
@method("logcumsumexp")
def _logcumsumexp(L, x, dim):
    """``log(cumsum(exp(x)))`` as a scan whose combine is ``logaddexp`` (stable where the
    values span a wide range, unlike one shift by the row's maximum)."""
    return L.scan("logcumsumexp", _f(L.t(x)), dim)


def _cum_ext(kind):
    """``cummax``/``cummin``: the values, and the indices lowered only if used (``Deferred``):
    the last position at or before each where ``x`` equals the running value, as PyTorch picks
    among ties. It is a running max of the positions where ``x`` equals its running value: after
    such a position the running value stays until the next one."""
    def h(L, x, dim):
        x = _f(L.t(x))
        values = L.scan(kind, x, dim)
        d = dim % len(x.shape)

        def indices():
            along = [1] * len(x.shape)
            along[d] = x.shape[d]
            pos = ir.broadcast_to(ir.reshape(ir.arange(x.shape[d], 0.0, 1.0, torch.float32),
                                             tuple(along)), x.shape)
            hits = ir.op("where", ir.op("eq", x, values), pos, ir.const(-1.0))
            return ir.cast(L.scan("cummax", hits, d), torch.int64)

        return torch.return_types.cummax((values, Deferred(indices, (x, values))))

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


# ------------------------------------------------------------------ bucketize, searchsorted


def _count_below(L, boundaries: ir.Expr, values: ir.Expr, right: bool, out_int32: bool):
    """For each value, how many boundaries lie below it (``<``; ``<=`` when ``right``): its
    bucket, a count of true comparisons over the boundaries' last dim."""
    below = ir.op("le" if right else "lt", boundaries, values, dtype=torch.bool)
    counts = L.reduce("sum", below, len(below.shape) - 1)
    return ir.cast(counts, torch.int32 if out_int32 else torch.int64)


@fn(torch.bucketize)
def _bucketize(L, input, boundaries, *, out_int32=False, right=False, out=None):
    x, edges = L.t(input), L.t(boundaries)
    if len(edges.shape) != 1:
        raise Unsupported("bucketize with boundaries of more than one dim")
    values = ir.reshape(x, x.shape + (1,))
    return _count_below(L, ir.reshape(edges, (1,) * len(x.shape) + edges.shape), values,
                        right, out_int32)


@fn(torch.searchsorted)
def _searchsorted(L, sorted_sequence, input, *, out_int32=False, right=False, side=None,
                  sorter=None, out=None):
    if sorter is not None:
        raise Unsupported("searchsorted with a sorter")
    seq, x = L.t(sorted_sequence), L.t(input)
    right = right or side == "right"
    if len(seq.shape) == 1:
        return _bucketize(L, x, seq, out_int32=out_int32, right=right)
    if seq.shape[:-1] != x.shape[:-1]:
        raise Unsupported("searchsorted whose sequences and values differ in leading dims")
    lead = seq.shape[:-1]
    boundaries = ir.reshape(seq, lead + (1, seq.shape[-1]))
    return _count_below(L, boundaries, ir.reshape(x, x.shape + (1,)), right, out_int32)


@fn(F.softmin)
def _softmin(L, x, dim=None, _stacklevel=3, dtype=None):
    return _softmax(L, ir.op("neg", _f(L.t(x))), dim)
