"""The gather kernel of ``interpolate`` (see ``lowerings/resample.py``): per spatial dim, the
source indices of each output index (and the linear modes' second neighbour and weight) from
PyTorch's float32 formulas, the input read at each combination of taps and blended."""

from __future__ import annotations

import math
from dataclasses import dataclass

from drtriton.compiler import ir
from drtriton.compiler.kernels.pointwise import POINTWISE_CONFIGS
from drtriton.compiler.kernels.writer import Kernel, Writer, finish_1d, next_pow2

Indices = tuple[int, ...]
Weights = tuple[float, ...]


@dataclass(frozen=True)
class Axis:
    """How one spatial dim reads its input. ``src``/``src1``/``lam`` are the source indices,
    second neighbours and their weights for every output index (numpy emulation of the float32
    formula ``rule`` with ``scale``); ``form`` is how the kernel computes them:

    * ``affine``: ``src = k * o`` (k = 0 broadcasts, 1 copies, more down-samples);
    * ``repeat``: ``src = o // k`` (integer nearest up-sampling);
    * ``formula``: the float32 ``rule`` itself (``nearest``, ``nearest-exact``, ``linear``,
      ``linear_ac`` for align_corners).

    ``two``: two taps blended by ``lam`` (a linear rule whose neighbours differ somewhere with a
    non-zero weight); ``cubic``: the four taps around the source coordinate (rule ``cubic`` or
    ``cubic_ac``, always computed in the kernel); otherwise the one tap ``src``."""

    n_in: int
    n_out: int
    rule: str
    scale: float  # float32 value
    src: Indices
    src1: Indices
    lam: Weights
    form: str
    two: bool
    k: int = 0
    cubic: bool = False  # four taps with cubic-convolution weights (``bicubic``)


def resample_kernel(w: Writer, x: ir.Expr, axes: tuple[Axis, ...], shape: ir.Shape, out: str,
                    itype: str) -> Kernel:
    """One output element per lane: source indices per spatial dim, ``x`` read at each
    combination of taps, the linear modes' neighbours blended inner dim first."""
    n = ir.numel(shape)
    w.constexprs = ["BLOCK"]
    w.line("offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)")
    w.line("mask = offs < N")
    idx = w.delinearize("offs", shape)
    lead = idx[: len(shape) - len(axes)]
    taps = [_taps(w, a, o, itype) for a, o in zip(axes, idx[len(lead):], strict=True)]

    def blend(j: int, pos: list[str]) -> str:
        if j == len(taps):
            return w.ev(x, [*lead, *pos], "mask")
        vals = [(blend(j + 1, [*pos, i]), wt) for i, wt in taps[j]]
        if len(vals) == 1:
            return vals[0][0]
        return w.tmp(" + ".join(f"{wt} * {v}" for v, wt in vals), "v")

    w.store(out, "offs", blend(0, []), "mask", shape)
    reads = n * math.prod(len(t) for t in taps)
    return finish_1d(w, n, "BLOCK", POINTWISE_CONFIGS, reads, min(w.blocks.pointwise, next_pow2(n)))


def _taps(w: Writer, a: Axis, o: str, itype: str) -> list[tuple[str, str | None]]:
    """(index, weight) of each tap of output index ``o`` along axis ``a`` (weight None: one tap).
    The float32 formulas are those ``lowerings.resample._emulate`` mirrors, operation for
    operation."""
    if a.cubic:
        return _cubic_taps(w, a, o, itype)
    if o == "0":  # a single output index: the emulated values themselves
        if a.two and a.src1[0] != a.src[0] and a.lam[0]:
            return [(str(a.src[0]), repr(1.0 - a.lam[0])), (str(a.src1[0]), repr(a.lam[0]))]
        return [(str(a.src[0]), None)]
    if a.form == "affine":
        return [("0" if a.k == 0 else o if a.k == 1 else w.tmp(f"{o} * {a.k}", "s"), None)]
    if a.form == "repeat":
        return [(w.tmp(f"{o} // {a.k}", "s"), None)]
    of, s, top = f"{o}.to(tl.float32)", repr(a.scale), a.n_in - 1
    if a.rule == "nearest":
        return [(w.tmp(f"tl.minimum(tl.floor({of} * {s}).to({itype}), {top})", "s"), None)]
    if a.rule == "nearest-exact":
        return [(w.tmp(f"tl.minimum(tl.floor(({of} + 0.5) * {s}).to({itype}), {top})", "s"), None)]
    if a.rule == "linear_ac":
        r = w.tmp(f"{s} * {of}", "r")
    else:
        r = w.tmp(f"tl.maximum({s} * ({of} + 0.5) - 0.5, 0.0)", "r")
    i0 = w.tmp(f"tl.minimum(tl.floor({r}).to({itype}), {top})", "s")
    if not a.two:
        return [(i0, None)]
    i1 = w.tmp(f"tl.minimum({i0} + 1, {top})", "s")
    l1 = w.tmp(f"tl.minimum(tl.maximum({r} - {i0}.to(tl.float32), 0.0), 1.0)", "l")
    l0 = w.tmp(f"1.0 - {l1}", "l")
    return [(i0, l0), (i1, l1)]


CUBIC_A = -0.75  # PyTorch's (and OpenCV's) cubic convolution coefficient


def _cubic_taps(w: Writer, a: Axis, o: str, itype: str) -> list[tuple[str, str]]:
    """PyTorch's bicubic: source coordinate ``scale * o`` (align_corners) or
    ``scale * (o + 0.5) - 0.5``, not clamped; taps ``floor - 1 .. floor + 2`` clamped to the
    input; weights of Keys' cubic convolution at the distances ``t + 1, t, 1 - t, 2 - t``."""
    of, s, top, c = ("0.0" if o == "0" else f"{o}.to(tl.float32)"), repr(a.scale), a.n_in - 1, \
        CUBIC_A
    r = w.tmp(f"{s} * {of}" if a.rule == "cubic_ac" else f"{s} * ({of} + 0.5) - 0.5", "r")
    floor = w.tmp(f"tl.floor({r})", "r")
    i0 = w.tmp(f"{floor}.to({itype})", "s")
    t = w.tmp(f"{r} - {floor}", "l")
    far = f"(({c} * {{x}} - {5 * c}) * {{x}} + {8 * c}) * {{x}} - {4 * c}"  # 1 < |x| < 2
    near = f"(({c + 2} * {{x}} - {c + 3}) * {{x}}) * {{x}} + 1.0"  # |x| <= 1
    weights = [w.tmp(far.format(x=f"({t} + 1.0)"), "l"), w.tmp(near.format(x=t), "l"),
               w.tmp(near.format(x=f"(1.0 - {t})"), "l"),
               w.tmp(far.format(x=f"(2.0 - {t})"), "l")]
    taps = [w.tmp(f"tl.minimum(tl.maximum({i0} + {k - 1}, 0), {top})", "s") for k in range(4)]
    return list(zip(taps, weights, strict=True))
