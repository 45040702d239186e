"""The 61 operators: each one's PyTorch call, accepted ranks, shape rule (CP-SAT constraints built
with ``ShapeBuilder``) and FLOP model, then the catalogue itself (``OPS``, ``get_op``)."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from drtriton.ops.shapes import ALL_RANKS, Applied, Dim, OpSpec, ShapeBuilder, TensorVar, Value


# ----------------------------------------------------------------------------- elementwise
def _broadcast_dims(sb: ShapeBuilder, args: Sequence[TensorVar]) -> list[Dim]:
    """Right-aligned broadcasting: per slot, each input either equals the output or is 1."""
    rank = max(t.rank for t in args)
    out: list[Dim] = []
    for j in range(1, rank + 1):
        members = [t.dims[-j] for t in args if t.rank >= j]
        equal = [d for d in members if sb.rng.random() >= 0.15]
        for d in members:
            if not any(d is e for e in equal):
                sb.model.add(d == 1)
        for d in equal[1:]:
            sb.model.add(d == equal[0])
        out.append(equal[0] if equal else 1)
    return out[::-1]


def _nary(fn: str, weight: int) -> Callable[[ShapeBuilder, list[TensorVar]], Applied]:
    def build(sb: ShapeBuilder, args: list[TensorVar]) -> Applied:
        out = sb.tensor(_broadcast_dims(sb, args))
        return Applied(out, lambda v, a: f"{fn}({', '.join(a)})", weight * out.numel)

    return build


UNARY_WEIGHTS = {
    "ReLU": 1, "LeakyReLU": 2, "Sigmoid": 4, "Tanh": 3, "SiLU": 5, "GELU": 8, "SELU": 4,
    "Hardsigmoid": 3, "Softplus": 3, "Softsign": 3, "ELU": 4, "Hardtanh": 2, "Clamp": 2,
    "Cos": 1, "Sin": 1, "Exp2": 1, "LogSigmoid": 4, "Abs": 1, "Triu": 1, "Tril": 1,
}  # fmt: skip


def _unary_call(name: str, fn: str, rng: random.Random) -> Callable[[str], str]:
    """The call text of a unary op, with its constants drawn once per placement."""
    if name == "LeakyReLU":
        slope = rng.choice((0.01, 0.1, 0.2))
        return lambda x: f"{fn}({x}, negative_slope={slope})"
    if name == "ELU":
        alpha = rng.choice((1.0, 0.5))
        return lambda x: f"{fn}({x}, alpha={alpha})"
    if name in ("Hardtanh", "Clamp"):
        lo, hi = rng.choice(((-1.0, 1.0), (-0.5, 0.5), (-2.0, 2.0), (0.0, 1.0)))
        keys = ("min_val", "max_val") if name == "Hardtanh" else ("min", "max")
        return lambda x: f"{fn}({x}, {keys[0]}={lo}, {keys[1]}={hi})"
    if name in ("Triu", "Tril"):
        diagonal = rng.choice((-1, 0, 1))
        return lambda x: f"{fn}({x}, diagonal={diagonal})"
    return lambda x: f"{fn}({x})"


def _unary(name: str, fn: str) -> Callable[[ShapeBuilder, list[TensorVar]], Applied]:
    def build(sb: ShapeBuilder, args: list[TensorVar]) -> Applied:
        (x,) = args
        call = _unary_call(name, fn, sb.rng)
        out = sb.tensor(x.dims)
        return Applied(out, lambda v, a: call(a[0]), UNARY_WEIGHTS[name] * out.numel)

    return build


# ----------------------------------------------------------------------------- along a dim
def _pick_dim(sb: ShapeBuilder, x: TensorVar) -> int:
    """A dim to reduce or scan along, avoiding dims fixed to 1 (e.g. kept by an earlier
    reduction)."""
    free = [i for i, d in enumerate(x.dims) if not isinstance(d, int) or d > 1]
    return sb.rng.choice(free or list(range(x.rank)))


def _reduction(fn: str, weight: int, *, min_size: int = 1, dtype: str = "float32", extra: str = ""):
    def build(sb: ShapeBuilder, args: list[TensorVar]) -> Applied:
        (x,) = args
        dim = _pick_dim(sb, x)
        keepdim = sb.rng.random() < 0.5
        sb.model.add(x.dims[dim] >= max(min_size, 2))  # reducing a size-1 dim is a no-op
        dims = list(x.dims)
        if keepdim:
            dims[dim] = 1
        else:
            del dims[dim]
        out = sb.tensor(dims, dtype)
        text = lambda v, a: f"{fn}({a[0]}, {extra}dim={dim - x.rank}, keepdim={keepdim})"  # noqa: E731
        return Applied(out, text, weight * x.numel)

    return build


def _along_dim(fn: str, weight: int, suffix: str = "", min_size: int = 1):
    def build(sb: ShapeBuilder, args: list[TensorVar]) -> Applied:
        (x,) = args
        dim = _pick_dim(sb, x)
        sb.model.add(x.dims[dim] >= min_size)
        out = sb.tensor(x.dims)
        text = lambda v, a: f"{fn}({a[0]}, dim={dim - x.rank}){suffix}"  # noqa: E731
        return Applied(out, text, weight * out.numel)

    return build


# ----------------------------------------------------------------------------- linear algebra
def _matmul(sb: ShapeBuilder, args: list[TensorVar]) -> Applied:
    a, b = args
    sb.model.add(a.dims[-1] == b.dims[-2])
    batch = (
        _broadcast_dims(sb, [_view(a.dims[:-2]), _view(b.dims[:-2])])
        if max(a.rank, b.rank) > 2
        else []
    )
    out = sb.tensor([*batch, a.dims[-2], b.dims[-1]])
    flops = sb.product([out.numel, a.dims[-1]], sb.limits.flops_hi)
    return Applied(out, lambda v, x: f"torch.matmul({x[0]}, {x[1]})", 2 * flops)


def _view(dims: Sequence[Dim]) -> TensorVar:
    """A dims-only stand-in for broadcasting part of a shape (never registered as a tensor)."""
    return TensorVar(list(dims), numel=None)  # type: ignore[arg-type]


def _bmm(sb: ShapeBuilder, args: list[TensorVar]) -> Applied:
    a, b = args
    sb.model.add(a.dims[0] == b.dims[0])
    sb.model.add(a.dims[2] == b.dims[1])
    out = sb.tensor([a.dims[0], a.dims[1], b.dims[2]])
    flops = sb.product([out.numel, a.dims[2]], sb.limits.flops_hi)
    return Applied(out, lambda v, x: f"torch.bmm({x[0]}, {x[1]})", 2 * flops)


def _transpose(sb: ShapeBuilder, args: list[TensorVar]) -> Applied:
    (x,) = args
    out = sb.tensor([*x.dims[:-2], x.dims[-1], x.dims[-2]])
    return Applied(out, lambda v, a: f"torch.transpose({a[0]}, -2, -1)", out.numel)


# ----------------------------------------------------------------------------- normalisation
def _batch_norm(sb: ShapeBuilder, args: list[TensorVar]) -> Applied:
    (x,) = args
    sb.model.add(x.numel >= 2 * x.dims[1])  # batch statistics need >1 value per channel
    out = sb.tensor(x.dims)
    return Applied(
        out, lambda v, a: f"F.batch_norm({a[0]}, None, None, training=True)", 7 * out.numel
    )


def _layer_norm(sb: ShapeBuilder, args: list[TensorVar]) -> Applied:
    (x,) = args
    k = sb.rng.randint(min(2, x.rank), min(4, x.rank))
    normalized = x.dims[-k:]
    size = sb.product(normalized, sb.limits.max_numel)
    sb.model.add(size >= 2)
    out = sb.tensor(x.dims)

    def text(v: Value, a: Sequence[str]) -> str:
        shape = ", ".join(str(v(d)) for d in normalized)
        return f"F.layer_norm({a[0]}, ({shape},))"

    return Applied(out, text, 7 * out.numel)


def _group_norm(sb: ShapeBuilder, args: list[TensorVar]) -> Applied:
    (x,) = args
    groups = sb.attr(1, sb.limits.groups_max)
    per_group = sb.dim(lo=2)
    sb.model.add_multiplication_equality(x.dims[1], [groups, per_group])
    out = sb.tensor(x.dims)
    return Applied(out, lambda v, a: f"F.group_norm({a[0]}, {v(groups)})", 7 * out.numel)


def _instance_norm(sb: ShapeBuilder, args: list[TensorVar]) -> Applied:
    (x,) = args
    batch_channels = sb.product(x.dims[:2], sb.limits.max_numel)
    sb.model.add(x.numel >= 2 * batch_channels)  # >1 spatial value per instance
    out = sb.tensor(x.dims)
    return Applied(out, lambda v, a: f"F.instance_norm({a[0]})", 7 * out.numel)


# ----------------------------------------------------------------------------- windows
def _window_out(sb: ShapeBuilder, size: Dim, kernel: Dim, stride: Dim, pad: Dim, dil: Dim) -> Dim:
    """floor((size + 2*pad - dil*(kernel-1) - 1) / stride) + 1, with a non-negative numerator."""
    lim = sb.limits
    kernel_m1 = sb.var(0, lim.kernel_max, decide=False)
    sb.model.add(kernel_m1 == kernel - 1)
    span = (
        sb.product([dil, kernel_m1], lim.dilation_max * lim.kernel_max)
        if not isinstance(dil, int) or dil != 1
        else kernel_m1
    )
    numerator = sb.var(0, lim.max_dim + 2 * lim.pad_sum_max, decide=False)
    sb.model.add(numerator == size + 2 * pad - span - 1)
    quotient = sb.var(0, lim.max_dim, decide=False)
    sb.model.add_division_equality(quotient, numerator, stride)
    out = sb.var(1, lim.max_dim, decide=False)
    sb.model.add(out == quotient + 1)
    return out


def _pool(nd: int, kind: str):
    fn = f"F.{kind}_pool{nd}d"

    def build(sb: ShapeBuilder, args: list[TensorVar]) -> Applied:
        (x,) = args
        lim = sb.limits
        kernel = sb.attr(lim.kernel_min, lim.kernel_max)
        stride = sb.attr(1, lim.stride_max)
        sb.model.add(stride <= kernel)
        pad = sb.attr(0, lim.kernel_max // 2)
        sb.model.add(2 * pad <= kernel)
        dil = sb.attr(1, lim.dilation_max) if kind == "max" else 1
        if kind == "avg":  # PyTorch's avg_pool3d rejects inputs smaller than the kernel
            for d in x.dims[2:]:
                sb.model.add(d >= kernel)
        spatial = [_window_out(sb, d, kernel, stride, pad, dil) for d in x.dims[2:]]
        out = sb.tensor([*x.dims[:2], *spatial])
        window = sb.product([kernel] * nd, lim.kernel_max**nd)
        flops = sb.product([out.numel, window], lim.flops_hi)

        def text(v: Value, a: Sequence[str]) -> str:
            extra = f", dilation={v(dil)}" if kind == "max" else ""
            return (f"{fn}({a[0]}, kernel_size={v(kernel)}, stride={v(stride)}, "
                    f"padding={v(pad)}{extra})")

        return Applied(out, text, flops)

    return build


def _conv(nd: int, transposed: bool):
    fn = f"F.conv_transpose{nd}d" if transposed else f"F.conv{nd}d"

    def build(sb: ShapeBuilder, args: list[TensorVar]) -> Applied:
        (x,) = args
        lim = sb.limits
        groups = sb.attr(1, lim.groups_max)
        in_per_group, out_per_group = sb.dim(), sb.dim()
        sb.model.add_multiplication_equality(x.dims[1], [groups, in_per_group])
        out_channels = sb.product([groups, out_per_group], lim.max_dim)
        kernels = [sb.attr(lim.kernel_min, lim.kernel_max) for _ in range(nd)]
        stride = sb.attr(1, lim.stride_max)
        pad = sb.attr(0, lim.pad_sum_max // 2)
        dil = sb.attr(1, lim.dilation_max)
        if transposed:
            out_pad = sb.attr(0, lim.stride_max - 1)
            sb.model.add(out_pad < stride)
            weight = sb.tensor([x.dims[1], out_per_group, *kernels])
            spatial = [
                _transposed_out(sb, d, k, stride, pad, dil, out_pad)
                for d, k in zip(x.dims[2:], kernels, strict=True)
            ]
            work = [x.numel, out_per_group, *kernels]
        else:
            weight = sb.tensor([out_channels, in_per_group, *kernels])
            spatial = [
                _window_out(sb, d, k, stride, pad, dil)
                for d, k in zip(x.dims[2:], kernels, strict=True)
            ]
        out = sb.tensor([x.dims[0], out_channels, *spatial])
        if not transposed:
            work = [out.numel, in_per_group, *kernels]
        flops = sb.product(work, lim.flops_hi)

        def text(v: Value, a: Sequence[str]) -> str:
            opts = f"stride={v(stride)}, padding={v(pad)}"
            if transposed:
                opts += f", output_padding={v(out_pad)}"
            return f"{fn}({a[0]}, {a[1]}, {opts}, dilation={v(dil)}, groups={v(groups)})"

        return Applied(out, text, 2 * flops, weights=[weight])

    return build


def _transposed_out(
    sb: ShapeBuilder, size: Dim, kernel: Dim, stride: Dim, pad: Dim, dil: Dim, out_pad: Dim
) -> Dim:
    """(size - 1)*stride - 2*pad + dil*(kernel - 1) + out_pad + 1."""
    lim = sb.limits
    size_m1 = sb.var(0, lim.max_dim, decide=False)
    sb.model.add(size_m1 == size - 1)
    kernel_m1 = sb.var(0, lim.kernel_max, decide=False)
    sb.model.add(kernel_m1 == kernel - 1)
    grown = sb.var(0, lim.max_dim * lim.stride_max, decide=False)
    sb.model.add_multiplication_equality(grown, [size_m1, stride])
    span = sb.var(0, lim.dilation_max * lim.kernel_max, decide=False)
    sb.model.add_multiplication_equality(span, [dil, kernel_m1])
    out = sb.var(1, lim.max_dim, decide=False)
    sb.model.add(out == grown - 2 * pad + span + out_pad + 1)
    return out


# ----------------------------------------------------------------------------- joining
def _cat(sb: ShapeBuilder, args: list[TensorVar]) -> Applied:
    a, b = args
    dim = sb.rng.randrange(a.rank)
    for i, (da, db) in enumerate(zip(a.dims, b.dims, strict=True)):
        if i != dim:
            sb.model.add(da == db)
    joined = sb.dim()
    sb.model.add(joined == a.dims[dim] + b.dims[dim])
    dims = list(a.dims)
    dims[dim] = joined
    out = sb.tensor(dims)
    return Applied(out, lambda v, x: f"torch.cat([{x[0]}, {x[1]}], dim={dim - a.rank})", out.numel)


def _stack(sb: ShapeBuilder, args: list[TensorVar]) -> Applied:
    a, b = args
    for da, db in zip(a.dims, b.dims, strict=True):
        sb.model.add(da == db)
    dim = sb.rng.randrange(a.rank + 1)
    out = sb.tensor([*a.dims[:dim], 2, *a.dims[dim:]])
    return Applied(out, lambda v, x: f"torch.stack([{x[0]}, {x[1]}], dim={dim})", out.numel)


# ----------------------------------------------------------------------------- the catalogue
def _catalogue() -> tuple[OpSpec, ...]:
    ops: list[OpSpec] = []

    def add(name, category, arity, ranks, fn, build, weight=0, same_rank=False):
        ops.append(OpSpec(name, category, arity, tuple(ranks), same_rank, fn, weight, build))

    for name, fn in [("Add", "torch.add"), ("Sub", "torch.sub"), ("Mul", "torch.mul"),
                     ("Div", "torch.div"), ("Maximum", "torch.maximum"),
                     ("Minimum", "torch.minimum")]:  # fmt: skip
        add(name, "elementwise", 2, ALL_RANKS, fn, _nary(fn, 1), 1)
    add("Lerp", "elementwise", 3, ALL_RANKS, "torch.lerp", _nary("torch.lerp", 3), 3)

    reductions = [
        ("Sum", "torch.sum", 1, {}), ("Mean", "torch.mean", 1, {}), ("Max", "torch.amax", 1, {}),
        ("Min", "torch.amin", 1, {}), ("ArgMax", "torch.argmax", 1, {"dtype": "int64"}),
        ("ArgMin", "torch.argmin", 1, {"dtype": "int64"}), ("Var", "torch.var", 3, {}),
        ("Norm", "torch.norm", 3, {"extra": "p=2, "}),
    ]  # fmt: skip
    for name, fn, weight, kw in reductions:
        add(name, "reduction", 1, (2, 3, 4, 5), fn, _reduction(fn, weight, **kw), weight)

    add("Matmul", "matmul", 2, (2, 3, 4, 5), "torch.matmul", _matmul)
    add("Bmm", "matmul", 2, (3,), "torch.bmm", _bmm, same_rank=True)
    add("Transpose", "layout", 1, (2, 3, 4, 5), "torch.transpose", _transpose, 1)

    unary_fns = {
        "ReLU": "torch.relu", "LeakyReLU": "F.leaky_relu", "Sigmoid": "torch.sigmoid",
        "Tanh": "torch.tanh", "SiLU": "F.silu", "GELU": "F.gelu", "SELU": "F.selu",
        "Hardsigmoid": "F.hardsigmoid", "Softplus": "F.softplus", "Softsign": "F.softsign",
        "ELU": "F.elu", "Hardtanh": "F.hardtanh", "Clamp": "torch.clamp", "Cos": "torch.cos",
        "Sin": "torch.sin", "Exp2": "torch.exp2", "LogSigmoid": "F.logsigmoid", "Abs": "torch.abs",
        "Triu": "torch.triu", "Tril": "torch.tril",
    }  # fmt: skip
    for name, fn in unary_fns.items():
        ranks = (2, 3, 4, 5) if name in ("Triu", "Tril") else ALL_RANKS
        add(name, "unary", 1, ranks, fn, _unary(name, fn), UNARY_WEIGHTS[name])

    add(
        "Softmax",
        "along_dim",
        1,
        ALL_RANKS,
        "torch.softmax",
        _along_dim("torch.softmax", 3, min_size=2),
        3,
    )
    add(
        "LogSoftmax",
        "along_dim",
        1,
        ALL_RANKS,
        "torch.log_softmax",
        _along_dim("torch.log_softmax", 3, min_size=2),
        3,
    )
    add("CumSum", "along_dim", 1, ALL_RANKS, "torch.cumsum", _along_dim("torch.cumsum", 1), 1)
    add(
        "CumMax",
        "along_dim",
        1,
        ALL_RANKS,
        "torch.cummax",
        _along_dim("torch.cummax", 1, ".values"),
        1,
    )
    add(
        "CumMin",
        "along_dim",
        1,
        ALL_RANKS,
        "torch.cummin",
        _along_dim("torch.cummin", 1, ".values"),
        1,
    )

    add("BatchNorm", "norm", 1, (2, 3, 4, 5), "F.batch_norm", _batch_norm, 7)
    add("LayerNorm", "norm", 1, ALL_RANKS, "F.layer_norm", _layer_norm, 7)
    add("GroupNorm", "norm", 1, (2, 3, 4, 5), "F.group_norm", _group_norm, 7)
    add("InstanceNorm", "norm", 1, (3, 4, 5), "F.instance_norm", _instance_norm, 7)

    for kind, title in (("avg", "AvgPool"), ("max", "MaxPool")):
        for nd in (1, 2, 3):
            add(f"{title}{nd}d", "pool", 1, (nd + 2,), f"F.{kind}_pool{nd}d", _pool(nd, kind))
    for transposed, title in ((False, "Conv"), (True, "ConvTranspose")):
        for nd in (1, 2, 3):
            fn = f"F.conv_transpose{nd}d" if transposed else f"F.conv{nd}d"
            add(f"{title}{nd}d", "conv", 1, (nd + 2,), fn, _conv(nd, transposed))

    add("Cat", "join", 2, ALL_RANKS, "torch.cat", _cat, 1, same_rank=True)
    add("Stack", "join", 2, (1, 2, 3, 4), "torch.stack", _stack, 1, same_rank=True)
    return tuple(ops)


OPS: tuple[OpSpec, ...] = _catalogue()
OP_NAMES: tuple[str, ...] = tuple(op.name for op in OPS)
_BY_NAME = {op.name: op for op in OPS}


def get_op(name: str) -> OpSpec:
    """Look an operator up by its catalogue name, with a clear error for unknown names."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(
            f"unknown operator {name!r}; the catalogue has: {', '.join(OP_NAMES)}"
        ) from None
