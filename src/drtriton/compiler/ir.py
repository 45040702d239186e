"""Lazy pointwise expressions: the compiler's intermediate representation.

Every tensor value in a captured program is an ``Expr``: a DAG of pointwise operations whose
leaves are strided loads from materialised buffers (inputs, parameters, kernel outputs). Views
(permute, transpose, expand, slicing, unsqueeze, reshape) never copy: they either fold into a
leaf's strides or stay as an index remapping node. A kernel that consumes an ``Expr`` evaluates it
at a tuple of index expressions (see ``kernels.Writer.ev``), so elementwise chains, broadcasting
and views fuse into whichever kernel reads them (pointwise, reduction, matmul, convolution).

Nothing here runs PyTorch compute; shapes are static (taken from shape propagation).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch

Shape = tuple[int, ...]

FLOATS = (torch.float32, torch.float16, torch.float64, torch.bfloat16)


def numel(shape: Shape) -> int:
    return math.prod(shape)


def contiguous_strides(shape: Shape) -> tuple[int, ...]:
    strides, acc = [], 1
    for size in reversed(shape):
        strides.append(acc)
        acc *= size
    return tuple(reversed(strides))


@dataclass(frozen=True, eq=False)
class Expr:
    shape: Shape
    dtype: torch.dtype


@dataclass(frozen=True, eq=False)
class Load(Expr):
    """Element ``offset + sum(idx[k] * strides[k])`` of buffer variable ``buf``."""

    buf: str = ""
    strides: tuple[int, ...] = ()
    offset: int = 0


@dataclass(frozen=True, eq=False)
class Const(Expr):
    value: float | int | bool = 0


@dataclass(frozen=True, eq=False)
class Op(Expr):
    """Pointwise op; every non-Const arg has exactly ``shape`` (broadcasts are explicit views)."""

    name: str = ""
    args: tuple[Expr, ...] = ()
    params: tuple = ()


@dataclass(frozen=True, eq=False)
class View(Expr):
    """Affine index map: child dim k reads ``start + step * idx[out_dim]`` (or ``start`` if -1)."""

    child: Expr | None = None
    maps: tuple[tuple[int, int, int], ...] = ()


@dataclass(frozen=True, eq=False)
class Reshape(Expr):
    """Reshape that cannot fold into strides: index goes through the linear (row-major) order."""

    child: Expr | None = None


@dataclass(frozen=True, eq=False)
class Cat(Expr):
    parts: tuple[Expr, ...] = ()
    dim: int = 0
    offsets: tuple[int, ...] = field(default=())


@dataclass(frozen=True, eq=False)
class Take(Expr):
    """``x`` read at positions taken from ``index`` along ``dim``: element i is ``x[i with
    index[i] at dim]``, 0 where the index is out of range (PyTorch raises). ``index`` has this
    node's shape; on every other dim ``x`` is at least as long. A gather (embedding rows, a
    class picked by a target) so fuses into the kernel that reads it."""

    x: Expr | None = None
    dim: int = 0
    index: Expr | None = None


def children(e: Expr) -> tuple[Expr, ...]:
    """The expressions ``e`` reads directly."""
    if isinstance(e, Op):
        return e.args
    if isinstance(e, View | Reshape):
        return (e.child,)
    if isinstance(e, Cat):
        return e.parts
    if isinstance(e, Take):
        return (e.x, e.index)
    return ()


# Ops whose value depends on the index itself: views cannot be pushed through them.
INDEX_OPS = {"triu", "tril", "arange"}


def is_float(dtype: torch.dtype) -> bool:
    return dtype in FLOATS


def const(value: float | int | bool) -> Const:
    if isinstance(value, bool):
        return Const((), torch.bool, value)
    if isinstance(value, int):
        return Const((), torch.int64, value)
    return Const((), torch.float32, float(value))


def promote(*dtypes: torch.dtype) -> torch.dtype:
    if any(is_float(d) for d in dtypes):
        floats = [d for d in dtypes if is_float(d)]
        return torch.float32 if torch.float32 in floats or len(set(floats)) > 1 else floats[0]
    if any(d == torch.int64 for d in dtypes):
        return torch.int64
    if any(d == torch.int32 for d in dtypes):
        return torch.int32
    return dtypes[0] if dtypes else torch.float32


def broadcast_shapes(*shapes: Shape) -> Shape:
    return tuple(torch.broadcast_shapes(*shapes))


# ---------------------------------------------------------------- views


def view(child: Expr, shape: Shape, maps: tuple[tuple[int, int, int], ...]) -> Expr:
    """Apply an affine index map, folding it into loads and through pointwise ops."""
    return _view(child, tuple(shape), tuple(maps), {})


def _view(child: Expr, shape: Shape, maps, memo: dict) -> Expr:
    key = (id(child), shape, maps)
    if key in memo:
        return memo[key]
    out: Expr
    if isinstance(child, Const):
        out = _const_as(child, shape)
    elif isinstance(child, Load):
        strides = [0] * len(shape)
        offset = child.offset
        for (od, start, step), cstride in zip(maps, child.strides, strict=True):
            offset += start * cstride
            if od >= 0:
                strides[od] += step * cstride
        out = Load(shape, child.dtype, child.buf, tuple(strides), offset)
    elif isinstance(child, Op) and child.name not in INDEX_OPS:
        args = tuple(a if isinstance(a, Const) else _view(a, shape, maps, memo) for a in child.args)
        out = Op(shape, child.dtype, child.name, args, child.params)
    elif isinstance(child, View):
        # compose: grandchild dim k reads start_k + step_k * (start_j + step_j * idx[od_j])
        composed = []
        for od, start, step in child.maps:
            if od < 0:
                composed.append((-1, start, 0))
            else:
                od2, start2, step2 = maps[od]
                composed.append((od2, start + step * start2, step * step2) if od2 >= 0
                                else (-1, start + step * start2, 0))
        out = _view(child.child, shape, tuple(composed), memo)
    else:
        out = View(shape, child.dtype, child, maps)
    memo[key] = out
    return out


def identity_maps(rank: int) -> tuple[tuple[int, int, int], ...]:
    return tuple((d, 0, 1) for d in range(rank))


def _const_as(c: Const, shape: Shape) -> Const:
    """A constant under a view: a scalar stays a scalar (it broadcasts in ops); a shaped one
    (``torch.full_like``) takes the view's shape."""
    return c if not c.shape or c.shape == tuple(shape) else Const(tuple(shape), c.dtype, c.value)


def broadcast_to(x: Expr, shape: Shape) -> Expr:
    shape = tuple(shape)
    if isinstance(x, Const):
        return _const_as(x, shape)
    if x.shape == shape:
        return x
    lead = len(shape) - len(x.shape)
    if lead < 0:
        raise ValueError(f"cannot broadcast {x.shape} to {shape}")
    maps = []
    for k, size in enumerate(x.shape):
        od = k + lead
        if size == 1 and shape[od] != 1:
            maps.append((-1, 0, 0))
        elif size == shape[od]:
            maps.append((od, 0, 1))
        else:
            raise ValueError(f"cannot broadcast {x.shape} to {shape}")
    return view(x, shape, tuple(maps))


def permute(x: Expr, perm: tuple[int, ...]) -> Expr:
    perm = tuple(p % len(x.shape) for p in perm)
    if perm == tuple(range(len(x.shape))):
        return x
    shape = tuple(x.shape[p] for p in perm)
    maps = [None] * len(perm)
    for i, p in enumerate(perm):
        maps[p] = (i, 0, 1)
    return view(x, shape, tuple(maps))


def transpose(x: Expr, d0: int, d1: int) -> Expr:
    rank = len(x.shape)
    perm = list(range(rank))
    d0, d1 = d0 % rank, d1 % rank
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return permute(x, tuple(perm))


def _view_strides(oldshape: Shape, oldstride: tuple[int, ...], newshape: Shape):
    """PyTorch's view stride rule; None when the reshape needs a copy."""
    if len(oldshape) == 0:
        return [1] * len(newshape)
    newstride = [0] * len(newshape)
    view_d = len(newshape) - 1
    chunk_base_stride = oldstride[-1]
    tensor_numel = 1
    view_numel = 1
    for tensor_d in range(len(oldshape) - 1, -1, -1):
        tensor_numel *= oldshape[tensor_d]
        if tensor_d == 0 or (
            oldshape[tensor_d - 1] != 1
            and oldstride[tensor_d - 1] != tensor_numel * chunk_base_stride
        ):
            while view_d >= 0 and (view_numel < tensor_numel or newshape[view_d] == 1):
                newstride[view_d] = view_numel * chunk_base_stride
                view_numel *= newshape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if tensor_d > 0:
                chunk_base_stride = oldstride[tensor_d - 1]
                tensor_numel = 1
                view_numel = 1
    if view_d != -1:
        return None
    return newstride


def reshape(x: Expr, shape: Shape) -> Expr:
    shape = tuple(shape)
    if isinstance(x, Const):
        return _const_as(x, shape)
    if x.shape == shape:
        return x
    if numel(shape) != numel(x.shape):
        raise ValueError(f"cannot reshape {x.shape} to {shape}")
    return _reshape(x, shape, {})


def _reshape(x: Expr, shape: Shape, memo: dict) -> Expr:
    if isinstance(x, Const):
        return _const_as(x, shape)
    if x.shape == shape:
        return x
    key = (id(x), shape)
    if key in memo:
        return memo[key]
    out: Expr | None = None
    if isinstance(x, Load):
        strides = _view_strides(x.shape, x.strides, shape)
        if strides is not None:
            out = Load(shape, x.dtype, x.buf, tuple(strides), x.offset)
    elif isinstance(x, Op) and x.name not in INDEX_OPS:
        args = tuple(a if isinstance(a, Const) else _reshape(a, shape, memo) for a in x.args)
        out = Op(shape, x.dtype, x.name, args, x.params)
    elif isinstance(x, Reshape):
        out = _reshape(x.child, shape, memo)
    if out is None:
        out = Reshape(shape, x.dtype, x)
    memo[key] = out
    return out


def resolve_shape(shape: tuple[int, ...], total: int) -> Shape:
    """Fill a single -1 in a reshape target."""
    shape = tuple(int(s) for s in shape)
    if -1 in shape:
        known = math.prod(s for s in shape if s != -1)
        shape = tuple(total // known if s == -1 else s for s in shape)
    return shape


# ---------------------------------------------------------------- pointwise constructors


def op(name: str, *args: Expr, dtype: torch.dtype | None = None, params: tuple = ()) -> Expr:
    """Build a pointwise op, broadcasting tensor args to a common shape."""
    tensors = [a for a in args if not isinstance(a, Const)]
    # a shaped constant (torch.ones(3, 4)) is a scalar in kernels but keeps its shape here
    shaped = [a.shape for a in args if isinstance(a, Const) and a.shape]
    shape = broadcast_shapes(*(a.shape for a in tensors), *shaped) if tensors or shaped else ()
    args = tuple(broadcast_to(a, shape) for a in args)
    if dtype is None:
        dtype = promote(*(a.dtype for a in args))
    return Op(shape, dtype, name, args, params)  # all constants: a scalar expression in kernels


def arange(n: int, start: float | int, step: float | int, dtype: torch.dtype) -> Expr:
    """``start + i * step`` for i in [0, n): a value computed from its own index (no buffer)."""
    return Op((n,), dtype, "arange", (), (start, step))


def cast(x: Expr, dtype: torch.dtype) -> Expr:
    if x.dtype == dtype:
        return x
    if isinstance(x, Const):
        value = (
            bool(x.value) if dtype == torch.bool else (float if is_float(dtype) else int)(x.value)
        )
        return Const(x.shape, dtype, value)
    return Op(x.shape, dtype, "cast", (x,), ())


def count_nodes(x: Expr, seen: set | None = None) -> int:
    seen = set() if seen is None else seen
    if id(x) in seen:
        return 0
    seen.add(id(x))
    return 1 + sum(count_nodes(k, seen) for k in children(x))


# operators that cost a special-function evaluation (or a division) rather than one instruction
_COSTLY_OPS = frozenset({"exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "tanh",
                         "erf", "sigmoid", "pow", "div"})
COSTLY_OP_WEIGHT = 4


def op_cost(x: Expr, seen: set | None = None) -> int:
    """The work of one evaluation of ``x`` beyond its loads: each ``Op`` counts 1, a special
    function ``COSTLY_OP_WEIGHT``; a shared subexpression counts once."""
    seen = set() if seen is None else seen
    if id(x) in seen:
        return 0
    seen.add(id(x))
    own = (COSTLY_OP_WEIGHT if x.name in _COSTLY_OPS else 1) if isinstance(x, Op) else 0
    return own + sum(op_cost(k, seen) for k in children(x))


def nodes(x: Expr) -> Iterator[Expr]:
    """Every node of an expression, each shared subexpression once."""
    stack, seen = [x], set()
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        stack.extend(children(e))


def buffers_of(x: Expr, acc: dict | None = None) -> dict[str, list[Load]]:
    """Buffers read by an expression, with every load of each."""
    acc = {} if acc is None else acc
    for e in nodes(x):
        if isinstance(e, Load):
            acc.setdefault(e.buf, []).append(e)
    return acc


def substitute(e: Expr, buf: str, inner: Expr) -> Expr:
    """Replace direct identity loads of ``buf`` in ``e`` by ``inner`` (same linear order)."""
    memo: dict[int, Expr] = {}

    def rec(x: Expr) -> Expr:
        if id(x) in memo:
            return memo[id(x)]
        if isinstance(x, Load) and x.buf == buf:
            out = reshape(inner, x.shape)
        elif isinstance(x, Op):
            out = Op(x.shape, x.dtype, x.name, tuple(rec(a) for a in x.args), x.params)
        else:
            out = x
        memo[id(x)] = out
        return out

    return rec(e)


def is_cheap(x: Expr) -> bool:
    """A load (through views) or a constant: re-reading it costs no compute."""
    return isinstance(x, Load | Const)
