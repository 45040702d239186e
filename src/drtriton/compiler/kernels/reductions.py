"""Row-wise reductions, normalisations and scans over the kept dimensions of their input."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from drtriton.compiler import ir
from drtriton.compiler.kernels.writer import (
    TL_DTYPES,
    Epilogue,
    Kernel,
    Writer,
    finish_1d,
    next_pow2,
)

COLUMN_BR = 64  # reduced elements per loop step of a column reduction (GPU)

FDT = "tl.float32"  # rows are reduced and normalised in fp32 (float64 rows in float64)


def accumulator(dtype: torch.dtype) -> str:
    """The Triton type rows and scans of ``dtype`` accumulate in: int64 for integers and bools
    (exact), float64 for float64, float32 for the other floats."""
    if not ir.is_float(dtype):
        return "tl.int64"
    return TL_DTYPES[torch.float64] if dtype == torch.float64 else FDT


def innermost_dim(shape: ir.Shape) -> int:
    """The innermost dim longer than 1 (the last dim if none is): neighbours in memory along it."""
    return max((d for d, n in enumerate(shape) if n > 1), default=len(shape) - 1)


@dataclass
class _Rows:
    """One row-wise kernel being written: each program reduces BM of the M kept rows, reading a
    row's R reduced elements in chunks of BR (one chunk when ``single``, loaded once). Making one
    writes the kernel's row indexing."""

    w: Writer
    x: ir.Expr
    dims: tuple[int, ...]
    correction: int
    eps: float
    kept: list[int] = field(init=False)
    kidx: list[str] = field(init=False)
    M: int = field(init=False)
    R: int = field(init=False)
    BR: int = field(init=False)
    single: bool = field(init=False)
    column: bool = field(init=False)
    cache: list = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        shape, w = self.x.shape, self.w
        self.kept = [d for d in range(len(shape)) if d not in self.dims]
        self.M, self.R = ir.numel(self.kshape), ir.numel(self.rshape)
        b = w.blocks
        # On a GPU, a reduction that keeps the innermost dim (a column sum of a row-major matrix)
        # reads memory along the kept rows: many rows per program, a short loop over the reduced
        # dims, so each [BM, BR] tile is coalesced along BM (a [1, R] tile would stride by a
        # row). Size-1 dims do not count (``innermost_dim``): they change no stride.
        self.column = b.tune and innermost_dim(shape) not in self.dims and self.R > 1
        self.single = self.R <= b.row_single and not self.column
        longest = COLUMN_BR if self.column else 1024
        self.BR = next_pow2(self.R) if self.single else min(next_pow2(self.R), longest)
        w.constexprs = ["BM"]
        w.line("rows = tl.program_id(0) * BM + tl.arange(0, BM)")
        w.line("rm = rows[:, None]")
        w.tile_axes.update(rm=0, rr=1)
        w.line(f"mmask = rm < {self.M}")
        self.kidx = w.delinearize("rm", self.kshape)
        if self.single:
            w.line("r0 = 0")

    @property
    def kshape(self) -> ir.Shape:
        return tuple(self.x.shape[d] for d in self.kept)

    @property
    def rshape(self) -> ir.Shape:
        return tuple(self.x.shape[d] for d in self.dims)

    @property
    def loop(self) -> str | None:
        """The header of the loop over a row's chunks; None (no loop) for a single chunk."""
        return None if self.single else f"for r0 in range(0, {self.R}, {self.BR}):"

    def chunk(self) -> tuple[str, list]:
        """Load the current chunk: its [BM, BR] tile's name and the index of each dim of x."""
        # a row that fits one block is loaded once and reused by every pass
        if self.single and self.cache:
            return self.cache[0]
        loaded = self._load()
        if self.single:
            self.cache.append(loaded)
        return loaded

    def _load(self) -> tuple[str, list]:
        w, x = self.w, self.x
        w.line(f"rr = r0 + tl.arange(0, {self.BR})[None, :]")
        w.line(f"mask = mmask & (rr < {self.R})")
        ridx = w.delinearize("rr", self.rshape)
        idx = [None] * len(x.shape)
        for d, i in zip(self.kept, self.kidx, strict=True):
            idx[d] = i
        for d, i in zip(self.dims, ridx, strict=True):
            idx[d] = i
        v = w.ev(x, idx, "mask")
        if ir.is_float(x.dtype) and x.dtype not in (torch.float32, torch.float64):
            v = w.tmp(f"{v}.to({FDT})", "v")
        # broadcast to the full tile: a value constant along the row still counts R times
        tile = accumulator(x.dtype)
        return w.tmp(f"{v} + tl.zeros([BM, {self.BR}], {tile})", "x"), idx

    @property
    def fdt(self) -> str:
        """The float type rows are reduced in: float64 for float64 rows, else float32."""
        return FDT if self.integer else accumulator(self.x.dtype)

    @property
    def integer(self) -> bool:
        """Integer rows are loaded as int64 tiles and reduced exactly in int64."""
        return not ir.is_float(self.x.dtype)

    def sum_of(self, term: Callable[[str], str]) -> str:
        """One pass summing ``term(chunk)`` over each row; returns the [BM] sum's name."""
        if self.integer:
            acc = self.w.tmp("tl.zeros([BM], tl.int64)", "acc")
            zero = "0"
        else:
            acc = self.w.tmp(f"tl.zeros([BM], {self.fdt}) + 0.0", "acc")
            zero = "0.0"
        with self.w.block(self.loop):
            v, _ = self.chunk()
            self.w.line(f"{acc} += tl.sum(tl.where(mask, {term(v)}, {zero}), 1)")
        return acc


# A reducer writes the passes over each row and returns the name of its [BM] result.
Reducer = Callable[[_Rows], str]
# A normaliser writes the passes that gather each row's statistics and returns the element of
# the output at a loaded chunk (the chunk's name to an expression), stored by a last pass.
Normaliser = Callable[[_Rows], Callable[[str], str]]

_EXTREMES = {"max": ('-float("inf")', ">"), "min": ('float("inf")', "<")}  # fill, improves
_INT_EXTREMES = {"max": str(torch.iinfo(torch.int64).min), "min": str(torch.iinfo(torch.int64).max)}


def _sum(r: _Rows) -> str:
    return r.w.tmp(r.sum_of(lambda v: v), "r")


def _mean(r: _Rows) -> str:
    return r.w.tmp(f"{r.sum_of(lambda v: v)} / {r.R}", "r")


def _norm2(r: _Rows) -> str:
    acc = r.sum_of(lambda v: f"{v} * {v}")
    return r.w.tmp(f"tl.sqrt({acc})", "r")


def _squared_deviations(r: _Rows) -> tuple[str, str]:
    """Two passes: each row's mean, then its sum of squared deviations from it."""
    mean = r.w.tmp(f"{r.sum_of(lambda v: v)} / {r.R}", "mean")
    acc2 = r.sum_of(lambda v: f"({v} - {mean}[:, None]) * ({v} - {mean}[:, None])")
    return mean, acc2


def _moments(r: _Rows) -> tuple[str, str]:
    """Each row's mean and sum of squared deviations from it. A row of one chunk: two passes
    over the registers (``_squared_deviations``). Of several: one pass over memory, each
    chunk's own mean and squared deviations (two passes over its registers) merged into the
    running pair by Chan et al.'s update, as PyTorch's Welford kernels merge theirs, where two
    passes would read the row from memory twice."""
    if r.single:
        return _squared_deviations(r)
    w = r.w
    n, mean, m2 = (w.tmp(f"tl.zeros([BM], {r.fdt})", name) for name in ("n", "mean", "m2"))
    with w.block(r.loop):
        v, _ = r.chunk()
        count = w.tmp(f"tl.sum(mask.to({r.fdt}), 1)", "cn")
        cmean = w.tmp(f"tl.sum(tl.where(mask, {v}, 0.0), 1) / tl.maximum({count}, 1.0)", "cm")
        dev = w.tmp(f"tl.where(mask, {v} - {cmean}[:, None], 0.0)", "cd")
        total = w.tmp(f"{n} + {count}", "nt")
        share = w.tmp(f"{count} / tl.maximum({total}, 1.0)", "sh")
        delta = w.tmp(f"{cmean} - {mean}", "dl")
        w.line(f"{m2} = {m2} + tl.sum({dev} * {dev}, 1) + {delta} * {delta} * {n} * {share}")
        w.line(f"{mean} = {mean} + {delta} * {share}")
        w.line(f"{n} = {total}")
    return mean, m2


def _var(r: _Rows) -> str:
    _, acc2 = _moments(r)
    n = r.R - r.correction
    return r.w.tmp(f"{acc2} / {n}" if n > 0 else f'{acc2} * float("nan")', "r")


def _prod(r: _Rows) -> str:
    """Each row's product: chunk products (a tree, as PyTorch's kernels multiply) times the
    running one; integers exactly in int64 (wrapping as PyTorch's do)."""
    one, dtype = ("1", "tl.int64") if r.integer else ("1.0", r.fdt)
    r.w.helpers.add("_mul_combine")
    acc = r.w.tmp(f"tl.full([BM], {one}, {dtype})", "acc")
    with r.w.block(r.loop):
        v, _ = r.chunk()
        r.w.line(f"{acc} = {acc} * tl.reduce(tl.where(mask, {v}, {one}), 1, _mul_combine)")
    return acc


def _extreme(fn: str) -> Reducer:
    """amax (``fn`` "max") or amin: one pass keeping each row's running extreme."""
    fill = _EXTREMES[fn][0]

    def emit(r: _Rows) -> str:
        tile_fill, dtype = (_INT_EXTREMES[fn], "tl.int64") if r.integer else (fill, r.fdt)
        acc = r.w.tmp(f"tl.full([BM], {tile_fill}, {dtype})", "acc")
        with r.w.block(r.loop):
            v, _ = r.chunk()
            r.w.line(f"{acc} = tl.{fn}imum({acc}, tl.{fn}(tl.where(mask, {v}, {tile_fill}), 1))")
        return acc

    return emit


def _arg_extreme(fn: str) -> Reducer:
    """argmax (``fn`` "max") or argmin: each row's running extreme and the first index of it."""
    fill, improves = _EXTREMES[fn]

    def emit(r: _Rows) -> str:
        w = r.w
        best = w.tmp(f"tl.full([BM], {fill}, {r.fdt})", "best")
        bidx = w.tmp("tl.zeros([BM], tl.int64)", "bidx")
        with w.block(r.loop):
            v, _ = r.chunk()
            vm = w.tmp(f"tl.where(mask, {v}, {fill})", "x")
            cb = w.tmp(f"tl.{fn}({vm}, 1)", "cb")
            # first index attaining the chunk's extreme (PyTorch returns the first occurrence)
            first = f"tl.where(({vm} == {cb}[:, None]) & mask, rr, {r.R})"
            ci = w.tmp(f"tl.min({first}, 1).to(tl.int64)", "ci")
            up = w.tmp(f"{cb} {improves} {best}", "up")
            w.line(f"{best} = tl.where({up}, {cb}, {best})")
            w.line(f"{bidx} = tl.where({up}, {ci}, {bidx})")
        return bidx

    return emit


def _softmax_stats(r: _Rows) -> tuple[str, str]:
    """One online pass: each row's maximum and its sum of exponentials relative to it."""
    w, ninf = r.w, '-float("inf")'
    mx = w.tmp(f"tl.full([BM], {ninf}, {r.fdt})", "mx")
    den = w.tmp(f"tl.zeros([BM], {r.fdt})", "den")
    with w.block(r.loop):
        v, _ = r.chunk()
        vm = w.tmp(f"tl.where(mask, {v}, {ninf})", "x")
        nm = w.tmp(f"tl.maximum({mx}, tl.max({vm}, 1))", "nm")
        # rows past M are all -inf: keep their exponent finite to avoid NaN noise
        safe = w.tmp(f"tl.where({nm} == {ninf}, 0.0, {nm})", "sm")
        rescaled = f"{den} * tl.exp({mx} - {safe})"
        w.line(f"{den} = {rescaled} + tl.sum(tl.exp({vm} - {safe}[:, None]), 1)")
        w.line(f"{mx} = {nm}")
    return mx, den


def _softmax(r: _Rows) -> Callable[[str], str]:
    mx, den = _softmax_stats(r)
    return lambda v: f"tl.exp({v} - {mx}[:, None]) / {den}[:, None]"


def _log_softmax(r: _Rows) -> Callable[[str], str]:
    mx, den = _softmax_stats(r)
    return lambda v: f"{v} - {mx}[:, None] - tl.log({den}[:, None])"


def _logsumexp(r: _Rows) -> str:
    """One online pass (running maximum, rescaled sum), where amax then a sum of exponentials
    reads each row twice."""
    mx, den = _softmax_stats(r)
    return r.w.tmp(f"{mx} + tl.log({den})", "r")


def _normalize(r: _Rows) -> Callable[[str], str]:
    mean, acc2 = _moments(r)
    rstd = r.w.tmp(f"1.0 / tl.sqrt({acc2} / {r.R} + {r.eps})", "rstd")
    return lambda v: f"({v} - {mean}[:, None]) * {rstd}[:, None]"


REDUCERS: dict[str, Reducer] = {
    "sum": _sum, "mean": _mean, "norm2": _norm2, "var": _var, "prod": _prod,
    "amax": _extreme("max"), "amin": _extreme("min"),
    "argmax": _arg_extreme("max"), "argmin": _arg_extreme("min"), "logsumexp": _logsumexp,
}
NORMALISERS: dict[str, Normaliser] = {
    "softmax": _softmax, "log_softmax": _log_softmax, "normalize": _normalize,
}
# Pairs of row statistics stored together: (maximum, sum of exponentials relative to it), and
# (mean, sum of squared deviations from it).
PAIRS: dict[str, Callable[[_Rows], tuple[str, str]]] = {
    "softmax_stats": _softmax_stats, "moments": _moments,
}
ROW_KINDS = set(REDUCERS) | set(NORMALISERS) | set(PAIRS)


def rowwise(w: Writer, kind: str, x: ir.Expr, dims: tuple[int, ...], out: str,
            correction: int = 1, eps: float = 1e-5, spread: Epilogue | None = None) -> Kernel:
    """Reduce ``x`` over ``dims`` (any set), or normalise over them (softmax, norms).

    ``spread``: an elementwise consumer of x's shape that reads the reduction's result
    (``spread.hole``) only broadcast along ``dims``, stored instead of the result by a last
    pass over each row (a hand-written RMSNorm's ``x * rsqrt(mean(x * x) + eps)``): the row
    is read once more from the kernel's own tile, or from cache, not by a kernel of its own."""
    if kind not in ROW_KINDS:
        raise KeyError(kind)
    r = _Rows(w, x, dims, correction, eps)
    if kind in NORMALISERS:
        _store_normalised(r, out, NORMALISERS[kind](r))
    elif kind in PAIRS:  # two statistics of each row, interleaved: out has shape kept + (2,)
        w.line(f"rmask = rows < {r.M}")
        for k, stat in enumerate(PAIRS[kind](r)):
            w.store(out, f"rows * 2 + {k}", stat, "rmask", r.kshape + (2,))
    elif spread is not None:
        res = REDUCERS[kind](r)
        _store_rows(r, out, spread.expr.shape, lambda v, idx: w.ev(
            spread.expr, idx, "mask", {spread.hole: f"{res}[:, None]"}))
    else:
        res = REDUCERS[kind](r)
        w.line(f"rmask = rows < {r.M}")
        w.store(out, "rows", res, "rmask", r.kshape)
    cpu_bm = max(1, min(next_pow2(r.M), w.blocks.row_elems // r.BR))
    return finish_1d(w, r.M, "BM", _row_configs(r), r.M * r.R, cpu_bm)


def _store_normalised(r: _Rows, out: str, element: Callable[[str], str]) -> None:
    """A last pass over each row storing ``element`` of each chunk, in the input's shape."""
    _store_rows(r, out, r.x.shape, lambda v, _: element(v))


def _store_rows(r: _Rows, out: str, shape: ir.Shape,
                element: Callable[[str, list], str]) -> None:
    """A last pass over each row storing ``element(chunk, index)`` over x's index, as a
    contiguous tensor of ``shape`` (x's extents)."""
    w = r.w
    strides = ir.contiguous_strides(shape)
    with w.block(r.loop):
        v, idx = r.chunk()
        y = w.tmp(element(v, idx), "y")
        terms = [f"{i} * {s}" for i, s, n in zip(idx, strides, shape, strict=True)
                 if n != 1 and i != "0"]
        lin = w.tmp(" + ".join(terms) if terms else "rm * 0 + rr * 0", "o")
        w.store(out, lin, y, "mask", shape)


def _row_configs(r: _Rows) -> list[tuple[int, int]]:
    """The autotune space (BM, warps): many rows for a column reduction, else about 1k to 16k
    elements per tile."""
    M, BR = r.M, r.BR
    if r.column:  # only ever set on a GPU
        bms = sorted({max(1, min(next_pow2(M), bm)) for bm in (16, 32, 64, 128)})
        return [(bm, 4) for bm in bms]
    bms = sorted({max(1, min(next_pow2(M), max(1, n // BR))) for n in (1024, 4096, 16384)})
    return [(bm, 4 if bm * BR <= 4096 else 8) for bm in bms]


def scan(w: Writer, kind: str, x: ir.Expr, dim: int, out: str) -> Kernel:
    """Cumulative sum/product/max/min/logsumexp along ``dim``: chunked associative scan with a
    running carry."""
    shape = x.shape
    kept = [d for d in range(len(shape)) if d != dim]
    kshape = tuple(shape[d] for d in kept)
    M, R = ir.numel(kshape), shape[dim]
    # as in rowwise: scanning a dim other than the innermost, tiles are many rows by a short
    # stretch of the scan, coalesced along the rows (a cumsum over dim 0 of (1593, 6694, 1, 1, 2)
    # read [4, 1024] tiles at a stride of 13,388 floats: 4.9 ms on an H200)
    column = w.blocks.tune and innermost_dim(shape) != dim and R > 1
    BR = min(next_pow2(R), COLUMN_BR if column else 1024)
    w.constexprs = ["BM"]
    w.line("rm = (tl.program_id(0) * BM + tl.arange(0, BM))[:, None]")
    w.tile_axes.update(rm=0, rr=1)
    w.line(f"mmask = rm < {M}")
    kidx = w.delinearize("rm", kshape)
    fill = {"cumsum": "0.0", "cumprod": "1.0", "cummax": '-float("inf")',
            "cummin": 'float("inf")', "logcumsumexp": '-float("inf")'}[kind]
    acc_dt = accumulator(x.dtype)
    if acc_dt == "tl.int64":
        fill = {"cumsum": "0", "cumprod": "1"}[kind]
    carry = w.tmp(f"tl.full([BM], {fill}, {acc_dt})", "carry")
    strides = ir.contiguous_strides(shape)
    with w.block(f"for r0 in range(0, {R}, {BR}):"):
        w.line(f"rr = r0 + tl.arange(0, {BR})[None, :]")
        w.line(f"mask = mmask & (rr < {R})")
        idx = [None] * len(shape)
        for d, i in zip(kept, kidx, strict=True):
            idx[d] = i
        idx[dim] = "rr"
        v = w.ev(x, idx, "mask")
        v = w.tmp(f"tl.where(mask, {v} + tl.zeros([BM, {BR}], {acc_dt}), {fill})", "x")
        if kind == "cumsum":
            c = w.tmp(f"tl.cumsum({v}, 1) + {carry}[:, None]", "c")
            w.line(f"{carry} = {carry} + tl.sum({v}, 1)")
        elif kind == "logcumsumexp":
            w.helpers.add("_logaddexp_combine")
            scanned = w.tmp(f"tl.associative_scan({v}, 1, _logaddexp_combine)", "s")
            c = w.tmp(f"_logaddexp_combine({scanned}, {carry}[:, None])", "c")
            w.line(f"{carry} = _logaddexp_combine({carry}, tl.reduce({v}, 1, "
                   "_logaddexp_combine))")
        elif kind == "cumprod":
            w.helpers.add("_mul_combine")
            c = w.tmp(f"tl.associative_scan({v}, 1, _mul_combine) * {carry}[:, None]", "c")
            w.line(f"{carry} = {carry} * tl.reduce({v}, 1, _mul_combine)")
        else:
            comb = "_max_combine" if kind == "cummax" else "_min_combine"
            fn = "maximum" if kind == "cummax" else "minimum"
            red = "max" if kind == "cummax" else "min"
            w.helpers.add(comb)
            c = w.tmp(f"tl.{fn}(tl.associative_scan({v}, 1, {comb}), {carry}[:, None])", "c")
            w.line(f"{carry} = tl.{fn}({carry}, tl.{red}({v}, 1))")
        terms = [f"{i} * {s}" for i, s, n in zip(idx, strides, shape, strict=True)
                 if n != 1 and i != "0"]
        lin = w.tmp(" + ".join(terms), "o")
        w.store(out, lin, c, "mask", shape)
    bm = max(1, min(next_pow2(M), 4096 // BR))
    if column:
        bms = sorted({max(1, min(next_pow2(M), m)) for m in (16, 32, 64, 128)})
        configs = [(m, 4) for m in bms]
    else:
        configs = [(m, 4) for m in sorted({1, min(bm, 4), bm})]
    return finish_1d(w, M, "BM", configs, M * R, bm)
