"""Lowerings of tensors a forward makes from sizes and indices, and of Python ``math`` on sizes.

``torch.eye``, ``F.one_hot`` and ``torch.meshgrid`` are comparisons or broadcasts of ``arange``
values: lazy expressions of their own index, no buffer. ``x.new_zeros`` and its kin are shaped
constants with ``x``'s dtype. fx wraps every ``math`` function, so ``math.sqrt(k.size(-1))`` is a
graph node; the sizes are static (the trace is specialised to the inputs' shapes), so it folds
to a Python number.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from drtriton.compiler import ir
from drtriton.compiler.lower import Lowering, Unsupported
from drtriton.compiler.lowerings.registry import fn, method
from drtriton.compiler.lowerings.views import _filled, _shape_args, _tensor

# ------------------------------------------------------------------ index-made tensors


def _along(n: int, d: int, shape: ir.Shape) -> ir.Expr:
    """``arange(n)`` laid along dim ``d`` of ``shape`` (size n there), broadcast to the rest."""
    line = ir.arange(n, 0, 1, torch.int64)
    lone = tuple(n if k == d else 1 for k in range(len(shape)))
    return ir.broadcast_to(ir.reshape(line, lone), shape)


def eye(n: int, m: int | None = None, dtype: torch.dtype | None = None) -> ir.Expr:
    """``torch.eye``: 1 where the row index equals the column index."""
    m = n if m is None else m
    if not (isinstance(n, int) and isinstance(m, int)) or n <= 0 or m <= 0:
        raise Unsupported(f"eye of sizes {n}, {m} (positive ints are lowered)")
    shape = (n, m)
    diag = ir.op("eq", _along(n, 0, shape), _along(m, 1, shape))
    return ir.cast(diag, dtype or torch.get_default_dtype())


@fn(torch.eye)
def _eye(L, n, m=None, *, out=None, dtype=None, layout=None, device=None, pin_memory=False,
         requires_grad=False):
    if out is not None:
        raise Unsupported("out= argument")
    return eye(n, m, dtype)


@fn(F.one_hot)
def one_hot(L: Lowering, labels, num_classes: int = -1) -> ir.Expr:
    """int64 ``(*labels.shape, C)``: 1 where the class index equals the label. A label outside
    ``[0, C)`` (PyTorch raises) gives a row of zeros."""
    labels = L.t(labels)
    if num_classes is None or num_classes < 0:
        raise Unsupported("one_hot without num_classes (the largest label sizes the output)")
    if labels.dtype != torch.int64:
        raise Unsupported(f"one_hot of {labels.dtype} labels (PyTorch requires int64)")
    shape = (*labels.shape, int(num_classes))
    lab = ir.broadcast_to(ir.reshape(labels, (*labels.shape, 1)), shape)
    return ir.cast(ir.op("eq", lab, _along(int(num_classes), len(labels.shape), shape)),
                   torch.int64)


# ``torch.meshgrid([a, b])`` (a list) reaches the trace as the builtin it calls, not as itself
@fn(torch.meshgrid, torch._C._VariableFunctions.meshgrid)
def meshgrid(L: Lowering, *tensors, indexing: str | None = None) -> tuple[ir.Expr, ...]:
    """Each 0-D or 1-D input broadcast along its own dim of the grid; ``indexing="xy"`` swaps
    the first two dims of the grid (None is PyTorch's default, "ij")."""
    if len(tensors) == 1 and isinstance(tensors[0], list | tuple):
        tensors = tuple(tensors[0])
    if indexing not in (None, "ij", "xy"):
        raise Unsupported(f"meshgrid indexing={indexing!r}")
    ts = [ir.reshape(t, (1,)) if not t.shape else t for t in map(L.t, tensors)]
    if any(len(t.shape) != 1 for t in ts):
        raise Unsupported("meshgrid of tensors of more than one dim")
    dims = list(range(len(ts)))
    if indexing == "xy" and len(ts) > 1:
        dims[0], dims[1] = 1, 0
    shape = [0] * len(ts)
    for t, d in zip(ts, dims, strict=True):
        shape[d] = t.shape[0]
    return tuple(ir.broadcast_to(ir.reshape(t, tuple(t.shape[0] if k == d else 1
                                                     for k in range(len(ts)))), tuple(shape))
                 for t, d in zip(ts, dims, strict=True))


# ------------------------------------------------------------------ x.new_* and fills


def _new(value):
    """``x.new_zeros(*size)``-like: a shaped constant of ``x``'s dtype (or ``dtype=``).
    ``new_empty`` is one too: any contents are a correct value of an uninitialised tensor."""
    def h(L, x, *size, dtype=None, device=None, layout=None, requires_grad=False,
          pin_memory=False, **kw):
        size = size or (kw.pop("size", ()),)  # new_zeros(size=(b, h)) names it
        if kw:
            raise Unsupported(f"arguments {sorted(kw)}")
        return _filled(_shape_args(size), value, dtype or L.t(x).dtype)

    return h


method("new_zeros", "new_empty")(_new(0))
method("new_ones")(_new(1))


@method("new_full")
def _new_full(L, x, size, fill_value, *, dtype=None, device=None, layout=None,
              requires_grad=False, pin_memory=False):
    if isinstance(fill_value, ir.Expr):
        raise Unsupported("new_full with a tensor fill value")
    return _filled(_shape_args((size,)), fill_value, dtype or L.t(x).dtype)


@method("new_tensor")
def _new_tensor(L, x, data, *, dtype=None, device=None, requires_grad=False, pin_memory=False):
    """A constant of Python numbers with ``x``'s dtype (``torch.tensor``'s lowering)."""
    return _tensor(L, data, dtype or L.t(x).dtype)


@method("fill")
def _fill(L, x, value):
    """``x.fill_(value)`` (``check_inplace`` rebinds ``x`` to the result): ``x``'s shape and
    dtype, every element ``value`` (a number or a one-element tensor)."""
    x = L.t(x)
    if isinstance(value, ir.Expr):
        if ir.numel(value.shape) != 1:
            raise Unsupported("fill_ with a tensor of more than one element")
        return ir.broadcast_to(ir.reshape(ir.cast(value, x.dtype), ()), x.shape)
    return _filled(x.shape, value, x.dtype)


@method("zero")
def _zero(L, x):
    x = L.t(x)
    return _filled(x.shape, 0, x.dtype)


# ------------------------------------------------------------------ math on static sizes


def _math(f):
    def h(L, *args, **kwargs):
        if any(isinstance(v, ir.Expr) for v in _leaves((args, kwargs))):
            raise Unsupported(f"math.{f.__name__} of a tensor value (data-dependent)")
        return f(*args, **kwargs)

    return h


def _leaves(v) -> list:
    if isinstance(v, list | tuple):
        return [x for a in v for x in _leaves(a)]
    if isinstance(v, dict):
        return _leaves(list(v.values()))
    return [v]


# the functions fx's tracer wraps into graph nodes: every public callable of ``math``
for _name, _f in vars(math).items():
    if not _name.startswith("_") and callable(_f):
        fn(_f)(_math(_f))
