"""``einops.rearrange`` and its layer ``Rearrange`` (when einops is installed): a reshape to the
pattern's elementary axes, a permutation to their order on the right, and a reshape to its
groups; views only. The capture keeps the call whole (fx cannot trace into einops, which
refuses proxies)."""

from __future__ import annotations

import math
import re

from drtriton.compiler import ir
from drtriton.compiler.lower import Unsupported
from drtriton.compiler.lowerings.registry import fn, module

try:
    import einops
except ImportError:  # the lowering exists only where references can import einops
    einops = None

_TOKEN = re.compile(r"\(|\)|[A-Za-z_][A-Za-z0-9_]*|1|\S")


def parse_side(side: str) -> list[list[str]]:
    """``"b (h w) c"`` -> ``[["b"], ["h", "w"], ["c"]]``; ``1`` is an empty group (a unit
    dim). Ellipses and other numbers are refused."""
    groups: list[list[str]] = []
    inner: list[str] | None = None
    for token in _TOKEN.findall(side):
        if token == "(":
            if inner is not None:
                raise Unsupported(f"einops pattern {side!r} (nested parentheses)")
            inner = []
        elif token == ")":
            if inner is None:
                raise Unsupported(f"einops pattern {side!r} (unbalanced parentheses)")
            groups.append(inner)
            inner = None
        elif token == "1":  # a unit dim; inside a group it multiplies by one
            if inner is None:
                groups.append([])
        elif token[0].isalpha() or token[0] == "_":
            if inner is None:
                groups.append([token])
            else:
                inner.append(token)
        else:
            raise Unsupported(f"einops pattern {side!r} (only names, parentheses and 1)")
    if inner is not None:
        raise Unsupported(f"einops pattern {side!r} (unbalanced parentheses)")
    return groups


def _sizes(groups: list[list[str]], shape: ir.Shape, known: dict[str, int]) -> dict[str, int]:
    if len(groups) != len(shape):
        raise Unsupported(f"einops: {len(groups)} axes in the pattern, input has {len(shape)}")
    sizes = dict(known)
    for group, size in zip(groups, shape, strict=True):
        unknown = [a for a in group if a not in sizes]
        if len(unknown) > 1:
            raise Unsupported(f"einops: sizes of {unknown} cannot be inferred")
        rest = math.prod(sizes[a] for a in group if a in sizes)
        if unknown:
            if rest == 0 or size % rest:
                raise Unsupported(f"einops: {size} does not split by {rest}")
            sizes[unknown[0]] = size // rest
        elif rest != size:
            raise Unsupported(f"einops: group {group} is {rest}, the input's dim is {size}")
    return sizes


def rearrange(x: ir.Expr, pattern: str, axes_lengths: dict[str, int]) -> ir.Expr:
    if "->" not in pattern or "." in pattern:
        raise Unsupported(f"einops pattern {pattern!r} (left -> right, no ellipsis)")
    left, right = (parse_side(s) for s in pattern.split("->"))
    names_left = [a for g in left for a in g]
    names_right = [a for g in right for a in g]
    if sorted(names_left) != sorted(names_right) or len(set(names_left)) != len(names_left):
        raise Unsupported(f"einops rearrange {pattern!r} (the same axes on both sides, once)")
    sizes = _sizes(left, x.shape, axes_lengths)
    flat = ir.reshape(x, tuple(sizes[a] for a in names_left))
    moved = ir.permute(flat, tuple(names_left.index(a) for a in names_right))
    return ir.reshape(moved, tuple(math.prod(sizes[a] for a in g) for g in right))


if einops is not None:
    from einops.layers.torch import Rearrange

    @fn(einops.rearrange)
    def _rearrange(L, tensor, pattern: str, **axes_lengths):
        return rearrange(L.t(tensor), pattern, axes_lengths)

    @module(Rearrange)
    def _rearrange_layer(L, m, p, x):
        """The layer (``nn.Sequential(Rearrange("b c (h p) (w q) -> b (h w) (p q c)", p=16,
        q=16), ...)``, a ViT's patch embedding) as the function."""
        return rearrange(L.t(x), m.pattern, dict(m.axes_lengths))
