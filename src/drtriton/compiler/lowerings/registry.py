"""Dispatch-table decorators shared by the lowering modules."""

from __future__ import annotations

import torch

from drtriton.compiler import ir
from drtriton.compiler.lower import FUNCTIONS, METHODS, MODULES


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
