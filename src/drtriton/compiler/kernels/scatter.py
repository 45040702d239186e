"""Scatter kernels: a tensor with elements of another written or added at indexed positions
(``index_add``, ``scatter_add``, ``scatter``, ``index_copy``, ``x[:, idx] = v``)."""

from __future__ import annotations

from drtriton.compiler import ir
from drtriton.compiler.kernels.pointwise import pointwise
from drtriton.compiler.kernels.writer import TL_DTYPES, Kernel, Writer, next_pow2


def scatter(w: Writer, base: ir.Expr, src: ir.Expr, index: ir.Expr, dim: int, per_element: bool,
            accumulate: bool, out: str) -> Kernel:
    """``out`` = ``base``; then, for each position ``p`` of the iteration space, ``src[p]`` is
    added (``accumulate``) or written at ``p`` with dim ``dim`` replaced by the index there.

    ``per_element``: ``index`` has its own shape, which is the iteration space, and is read at
    ``p`` (``scatter``, ``scatter_add``); else it is 1-D, read at ``p[dim]``, and the space is
    ``base``'s shape with dim ``dim`` as long as ``index`` (``index_add``, ``index_copy``); a
    scalar ``src`` is written everywhere. Negative indices count from the end; indices out of
    range write nothing. A fill kernel launched first writes ``base``. The scatter is a fixed
    launch: autotuning runs a kernel several times, and its adds would pile up.
    """
    fill = pointwise(Writer(w.name + "_fill", "Copy (the tensor scattered into).", w.blocks),
                     base, out)
    rows = ir.numel(index.shape)
    space = index.shape if per_element else base.shape[:dim] + (rows,) + base.shape[dim + 1:]
    n = ir.numel(space)
    block = min(w.blocks.pointwise, next_pow2(n))
    w.constexprs = ["BLOCK"]
    w.line("offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)")
    w.line("mask = offs < N")
    pos = w.delinearize("offs", space)
    value = w.ev(ir.cast(src, base.dtype), pos, "mask")
    # a block of the output's dtype even where ``src`` is one literal (atomic_add takes blocks)
    value = w.tmp(f"tl.zeros([BLOCK], {TL_DTYPES[base.dtype]}) + {value}", "v")
    read = pos if per_element else [pos[dim]]
    at = w.ev(index, read, "mask")
    size = base.shape[dim]
    at = w.tmp(f"tl.where({at} < 0, {at} + {size}, {at})", "i")
    inside = w.tmp(f"mask & ({at} >= 0) & ({at} < {size})", "m")
    strides = ir.contiguous_strides(base.shape)
    target = [at if d == dim else p for d, p in enumerate(pos)]
    terms = [t if s == 1 else f"{t} * {s}" for t, s, m in zip(target, strides, base.shape,
                                                              strict=True) if m != 1 and t != "0"]
    where = f"{w.ptr(out, out=True)} + {' + '.join(terms) or '0'}"
    if accumulate:
        w.line(f"tl.atomic_add({where}, {value}, mask={inside}, sem='relaxed')")
    else:
        w.line(f"tl.store({where}, {value}, mask={inside})")
    kernel = w.finish(f"({-(-n // block)},)", {"BLOCK": block}, n, None)
    kernel.fill = fill
    return kernel
