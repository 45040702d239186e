"""Sorting: ``sort``, ``argsort``, ``msort``, ``median`` and ``kthvalue`` along one dim. One
kernel finds each row's order (``kernels/sort.py``); the values are a gather of the input at
those positions, lazy, so they fuse into their reader."""

from __future__ import annotations

import torch

from drtriton.compiler import ir
from drtriton.compiler.kernels.sort import MAX_SORTED, argsort, argsort_by_rank
from drtriton.compiler.lower import Lowering, Unsupported
from drtriton.compiler.lowerings.registry import fn, method
from drtriton.compiler.lowerings.views import _index, take


def order(L: Lowering, x, dim: int, descending: bool) -> tuple[ir.Expr, ir.Expr]:
    """(values, indices) of ``x`` sorted along ``dim``, stably."""
    x = L.t(x)
    exact = x.dtype in (torch.float32, torch.float16, torch.bfloat16)
    if not exact and (x.dtype.is_floating_point or x.dtype.is_complex):
        raise Unsupported(f"sorting {x.dtype} (float32, float16, bfloat16 and integers are sorted)")
    if not x.shape:
        x = ir.reshape(x, (1,))
    d = dim % len(x.shape)
    n = x.shape[d]
    if n > MAX_SORTED:
        raise Unsupported(f"sorting rows of {n} elements (at most {MAX_SORTED})")
    last = ir.transpose(x, d, len(x.shape) - 1) if d != len(x.shape) - 1 else x
    rows = ir.cast(last, torch.float32) if exact else last
    L.flush_expr(rows)
    rank = argsort if exact else argsort_by_rank  # integers: exact, by counting
    found = L.kernel(lambda w, o: rank(w, rows, descending, o), last.shape, torch.int64)
    L.flush(found.buf)
    indices = ir.transpose(found, d, len(x.shape) - 1) if d != len(x.shape) - 1 else found
    return take(L, x, d, indices), indices


@fn(torch.sort)
@method("sort")
def _sort(L, input, dim=-1, descending=False, stable=False, *, out=None):
    if isinstance(dim, bool):  # sort(x, stable=..., dim=...) spelt positionally differently
        raise Unsupported("sort arguments")
    return torch.return_types.sort(order(L, input, dim, descending))


@fn(torch.argsort)
@method("argsort")
def _argsort(L, input, dim=-1, descending=False, stable=False):
    return order(L, input, dim, descending)[1]


@fn(torch.msort)
@method("msort")
def _msort(L, input):
    return order(L, input, 0, False)[0]


def _pick(L, x, k: int, dim, keepdim: bool, kind):
    """The ``k``-th smallest (0-based) along ``dim`` and its index."""
    x = L.t(x)
    if dim is None:
        x, dim = ir.reshape(x, (ir.numel(x.shape),)), 0
    values, indices = order(L, x, dim, False)
    d = dim % len(x.shape)
    at = tuple(slice(None) if j != d else (slice(k, k + 1) if keepdim else k)
               for j in range(len(x.shape)))
    return kind((_index(values, at), _index(indices, at)))


@fn(torch.median)
@method("median")
def _median(L, input, dim=None, keepdim=False):
    """The lower median (the ``(n - 1) // 2``-th smallest), as PyTorch's."""
    x = L.t(input)
    n = ir.numel(x.shape) if dim is None else x.shape[dim % len(x.shape)]
    result = _pick(L, x, (n - 1) // 2, dim, keepdim, torch.return_types.median)
    return result.values if dim is None else result


@fn(torch.kthvalue)
@method("kthvalue")
def _kthvalue(L, input, k, dim=-1, keepdim=False):
    return _pick(L, input, k - 1, dim, keepdim, torch.return_types.kthvalue)
