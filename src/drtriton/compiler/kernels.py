"""Triton kernel templates: each writes the source of one ``@triton.jit`` kernel.

A ``Writer`` holds one kernel under construction. Templates (``pointwise``, ``rowwise``, ``scan``,
``matmul``, ``conv``, ``pool``) lay out the iteration space and call ``Writer.ev`` to evaluate the
lazy input expressions (``ir.Expr``) at index expressions, which is how elementwise prologues,
broadcasting and views fuse into the kernel. ``Writer.store`` writes the result, optionally through
a fused elementwise epilogue. Shapes and strides are baked into the kernel as literals (the
candidate is specialised to the reference's input shapes, as KernelBench evaluates it).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import torch

from drtriton.compiler import ir

TL_DTYPES = {
    torch.float32: "tl.float32",
    torch.float16: "tl.float16",
    torch.float64: "tl.float64",
    torch.bfloat16: "tl.bfloat16",
    torch.int64: "tl.int64",
    torch.int32: "tl.int32",
    torch.bool: "tl.int1",
}

HELPERS = {
    "_tanh": '''@triton.jit
def _tanh(x):
    # tanh via exp: saturates correctly to +-1 (no libdevice in the interpreter)
    return 1.0 - 2.0 / (tl.exp(2.0 * x) + 1.0)
''',
    "_max_combine": '''@triton.jit
def _max_combine(a, b):
    return tl.maximum(a, b)
''',
    "_min_combine": '''@triton.jit
def _min_combine(a, b):
    return tl.minimum(a, b)
''',
}


def next_pow2(n: int) -> int:
    p = 1
    while p < n:
        p *= 2
    return p


@dataclass(frozen=True)
class Blocks:
    """Block sizes for one device. ``tune`` adds a small ``triton.autotune`` space (GPU only)."""

    pointwise: int = 1024
    row_elems: int = 4096  # BM * BR of a row kernel
    row_single: int = 4096  # rows up to this length stay in registers (one pass over memory)
    mm: tuple[int, int, int] = (32, 32, 32)
    tune: bool = False


CPU_BLOCKS = Blocks()
CUDA_BLOCKS = Blocks(pointwise=1024, row_elems=4096, row_single=8192, mm=(64, 64, 32), tune=True)


@dataclass
class Epilogue:
    """Elementwise tail fused into a producer: ``expr`` reads the producer's output ``hole``."""

    expr: ir.Expr
    hole: str


@dataclass
class Kernel:
    name: str
    source: str
    buffers: list[str]  # pointer arguments, in order (forward-level variable names)
    grid: str  # python expression for the launch grid (uses META on cuda)
    consts: dict[str, int] = field(default_factory=dict)  # fixed constexprs (cpu)
    work: int = 1  # total work, passed as the runtime argument N (autotune key)
    helpers: set[str] = field(default_factory=set)
    warps: int | None = None  # num_warps of a fixed (not autotuned) CUDA launch

    def launch(self) -> str:
        args = ", ".join([*self.buffers, str(self.work)])
        consts = "".join(f", {k}={v}" for k, v in self.consts.items())
        if self.warps is not None:
            consts += f", num_warps={self.warps}"
        return f"{self.name}[{self.grid}]({args}{consts})"


def _lit(value) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float):
        if value != value:
            return 'float("nan")'
        if value in (float("inf"), float("-inf")):
            return 'float("inf")' if value > 0 else '-float("inf")'
        return repr(value)
    return str(int(value))


class Writer:
    """One kernel's source under construction, with CSE of evaluated subexpressions per scope."""

    def __init__(self, name: str, doc: str, blocks: Blocks):
        self.name, self.doc, self.blocks = name, doc, blocks
        self.bufs: dict[str, str] = {}
        self.lines: list[str] = []
        self.depth = 1
        self.count = 0
        self.memo: list[dict] = [{}]
        self.helpers: set[str] = set()
        self.constexprs: list[str] = []
        self.epilogue: Epilogue | None = None
        # multi-indices made by delinearize(): idx tuple -> (linear variable, shape)
        self.linear: dict[tuple[str, ...], tuple[str, ir.Shape]] = {}

    # ---- plumbing
    def ptr(self, buf: str, out: bool = False) -> str:
        if buf not in self.bufs:
            self.bufs[buf] = "out_ptr" if out else f"in{len(self.bufs)}_ptr"
        return self.bufs[buf]

    def line(self, text: str) -> None:
        self.lines.append("    " * self.depth + text)

    def tmp(self, code: str, prefix: str = "t") -> str:
        self.count += 1
        var = f"{prefix}{self.count}"
        self.line(f"{var} = {code}")
        return var

    @contextlib.contextmanager
    def block(self, header: str | None):
        """A nested scope (loop body); ``None`` inlines the body (single-iteration loop)."""
        if header is None:
            yield
            return
        self.line(header)
        self.depth += 1
        self.memo.append({})
        try:
            yield
        finally:
            self.memo.pop()
            self.depth -= 1

    def _get(self, key):
        for scope in reversed(self.memo):
            if key in scope:
                return scope[key]
        return None

    def delinearize(self, lin: str, shape: ir.Shape) -> list[str]:
        """Multi-index (one expression per dim) of a row-major linear index."""
        strides = ir.contiguous_strides(shape)
        out = []
        for d, (size, stride) in enumerate(zip(shape, strides, strict=True)):
            if size == 1:
                out.append("0")
                continue
            code = lin if stride == 1 else f"({lin} // {stride})"
            if d > 0:
                code = f"{code} % {size}"
            out.append(self.tmp(code, "i"))
        self.linear[tuple(out)] = (lin, tuple(shape))
        return out

    # ---- expression evaluation
    def ev(self, e: ir.Expr, idx: list[str], mask: str, subst: dict | None = None) -> str:
        key = (id(e), tuple(idx), mask)
        hit = self._get(key)
        if hit is not None:
            return hit
        code = self._ev(e, list(idx), mask, subst or {})
        var = code if isinstance(e, ir.Const) else self.tmp(code, "v")
        self.memo[-1][key] = var
        return var

    def _ev(self, e, idx, mask, subst) -> str:
        if isinstance(e, ir.Const):
            return _lit(e.value)
        if isinstance(e, ir.Load):
            if e.buf in subst:
                return subst[e.buf]
            terms = [f"{i} * {s}" if s != 1 else i for i, s, n in zip(idx, e.strides, e.shape, strict=True)
                     if s != 0 and n != 1 and i != "0"]
            if e.offset:
                terms.append(str(e.offset))
            p = self.ptr(e.buf)
            if not any(s != 0 and n != 1 and i != "0" for i, s, n in zip(idx, e.strides, e.shape, strict=True)):
                return f"tl.load({p} + {e.offset})"
            lin = self._contiguous_linear(e, idx)
            if lin is not None:
                # a contiguous read in the kernel's own order: the plain linear index keeps the
                # access pattern visible to Triton (coalesced, vectorised), no div/mod, no where()
                return f"tl.load({p} + {lin}{f' + {e.offset}' if e.offset else ''}, mask={mask}, other=0)"
            # where(): the offset takes the mask's block shape even when every index is a
            # scalar (batch or group ids), and masked lanes never form an out-of-range address
            return f"tl.load({p} + tl.where({mask}, {' + '.join(terms)}, 0), mask={mask}, other=0)"
        if isinstance(e, ir.Op):
            args = [self.ev(a, idx, mask, subst) for a in e.args]
            return self._op(e, args, idx)
        if isinstance(e, ir.View):
            cidx = []
            for od, start, step in e.maps:
                if od < 0 or idx[od] == "0":
                    cidx.append(str(start))
                else:
                    code = idx[od] if step == 1 else f"{idx[od]} * {step}"
                    cidx.append(self.tmp(f"{code} + {start}", "i") if start else code)
            return self.ev(e.child, cidx, mask, subst)
        if isinstance(e, ir.Reshape):
            strides = ir.contiguous_strides(e.shape)
            terms = [f"{i} * {s}" for i, s, n in zip(idx, strides, e.shape, strict=True) if n != 1 and i != "0"]
            lin = self.tmp(" + ".join(terms) if terms else "0", "i")
            return self.ev(e.child, self.delinearize(lin, e.child.shape), mask, subst)
        if isinstance(e, ir.Cat):
            d = e.dim
            result = None
            for part, off in reversed(list(zip(e.parts, e.offsets, strict=True))):
                lo, hi = off, off + part.shape[d]
                cond = self.tmp(f"({idx[d]} >= {lo}) & ({idx[d]} < {hi})", "c")
                pidx = list(idx)
                pidx[d] = self.tmp(f"{idx[d]} - {lo}", "i") if lo else idx[d]
                pmask = self.tmp(f"{mask} & {cond}", "m")
                val = self.ev(part, pidx, pmask, subst)
                result = val if result is None else self.tmp(f"tl.where({cond}, {val}, {result})", "v")
            return result
        raise TypeError(f"cannot evaluate {type(e).__name__}")

    def _contiguous_linear(self, e: ir.Load, idx: list[str]) -> str | None:
        """The linear variable ``idx`` was delinearized from, when ``e`` reads exactly that
        row-major order (same shape, contiguous strides); else None."""
        made = self.linear.get(tuple(idx))
        if made is None or tuple(e.shape) != made[1]:
            return None
        strides = ir.contiguous_strides(e.shape)
        if any(n != 1 and s != c for s, c, n in zip(e.strides, strides, e.shape, strict=True)):
            return None
        return made[0]

    def _op(self, e: ir.Op, a: list[str], idx: list[str]) -> str:
        n, p = e.name, e.params
        binary = {"add": "+", "sub": "-", "mul": "*", "div": "/", "lt": "<", "le": "<=",
                  "gt": ">", "ge": ">=", "eq": "==", "ne": "!=", "and": "&", "or": "|"}
        if n in binary:
            return f"{a[0]} {binary[n]} {a[1]}"
        simple = {"exp": "tl.exp", "log": "tl.log", "sqrt": "tl.sqrt", "rsqrt": "tl.rsqrt",
                  "cos": "tl.cos", "sin": "tl.sin", "exp2": "tl.exp2", "log2": "tl.log2",
                  "abs": "tl.abs", "floor": "tl.floor", "ceil": "tl.ceil", "erf": "tl.math.erf",
                  "sigmoid": "tl.sigmoid", "maximum": "tl.maximum", "minimum": "tl.minimum",
                  "where": "tl.where"}
        if n in simple:
            return f"{simple[n]}({', '.join(a)})"
        x = a[0] if a else ""
        if n == "neg":
            return f"-{x}"
        if n == "not":
            return f"{x} == 0"
        if n == "cast":
            return f"{x}.to({TL_DTYPES[e.dtype]})"
        if n == "tanh":
            self.helpers.add("_tanh")
            return f"_tanh({x})"
        if n == "relu":
            return f"tl.maximum({x}, 0)"
        if n == "lerp":  # PyTorch's two-sided formula, for matching rounding
            s, t, w = a
            return f"tl.where(tl.abs({w}) < 0.5, {s} + {w} * ({t} - {s}), {t} - ({t} - {s}) * (1 - {w}))"
        if n == "pow":
            return f"tl.exp2({a[1]} * tl.log2({x}))"
        if n == "sign":
            return f"tl.where({x} > 0, 1.0, tl.where({x} < 0, -1.0, 0.0))"
        if n == "round":  # round half to even, as torch.round
            return f"tl.where(tl.abs({x} - tl.floor({x}) - 0.5) == 0, 2.0 * tl.floor({x} * 0.5 + 0.5), tl.floor({x} + 0.5))"
        if n in ("triu", "tril"):
            (diag,) = p
            rel = ">=" if n == "triu" else "<="
            return f"tl.where(({idx[-1]} - {idx[-2]}) {rel} {diag}, {x}, 0)"
        raise KeyError(n)

    # ---- output
    def store(self, out: str, lin: str, value: str, mask: str, shape: ir.Shape) -> None:
        """Write ``value`` (the producer's element at row-major ``lin`` of ``shape``)."""
        if self.epilogue is not None:
            epi = self.epilogue
            idx = self.delinearize(lin, epi.expr.shape)
            value = self.ev(epi.expr, idx, mask, subst={epi.hole: value})
        self.line(f"tl.store({self.ptr(out, out=True)} + {lin}, {value}, mask={mask})")

    def finish(self, grid: str, consts: dict[str, int], work: int, tune: list[str] | None) -> Kernel:
        params = [*self.bufs.values(), "N", *(f"{c}: tl.constexpr" for c in self.constexprs)]
        head = []
        if tune:
            head.append("@triton.autotune(configs=[")
            head.extend(f"    {c}," for c in tune)
            head.append('], key=["N"])')
        head.append("@triton.jit")
        head.append(f"def {self.name}({', '.join(params)}):")
        head.append(f'    """{self.doc}"""')
        src = "\n".join(head + self.lines) + "\n"
        return Kernel(self.name, src, list(self.bufs), grid, consts, work, set(self.helpers))


# Below this many elements touched, a kernel launches with one fixed config: on an H200 the
# autotuner's per-call dispatch added ~25 us of launch time (plain jit 31 us, autotuned 56 us, for
# an 8K-element SiLU; benchmarks/gpu_profile.py), more than such a kernel runs.
SMALL_WORK = 1 << 20


def _finish_1d(w: Writer, units: int, key: str, configs: list[tuple[int, int]], elems: int,
               cpu_value: int) -> Kernel:
    """Launch over ceil(units / key) programs. CUDA: autotune over ``configs`` ((value, warps))
    when the kernel touches ``elems`` >= SMALL_WORK elements, else the middle config, fixed.
    CPU (interpreter): ``cpu_value``, fixed."""
    if w.blocks.tune and elems >= SMALL_WORK:
        tune = [_config({key: v}, wp) for v, wp in configs]
        return w.finish(f'lambda META: (triton.cdiv({units}, META["{key}"]),)', {}, units, tune)
    if w.blocks.tune:
        value, warps = configs[len(configs) // 2]
        kernel = w.finish(f"({-(-units // value)},)", {key: value}, units, None)
        kernel.warps = warps
        return kernel
    return w.finish(f"({-(-units // cpu_value)},)", {key: cpu_value}, units, None)


def _config(consts: dict[str, int], warps: int) -> str:
    inner = ", ".join(f'"{k}": {v}' for k, v in consts.items())
    return f"triton.Config({{{inner}}}, num_warps={warps})"


# ---------------------------------------------------------------- templates


POINTWISE_CONFIGS = [(256, 2), (1024, 4), (4096, 8)]


def pointwise(w: Writer, expr: ir.Expr, out: str) -> Kernel:
    n = ir.numel(expr.shape)
    w.constexprs = ["BLOCK"]
    w.line("offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)")
    w.line("mask = offs < N")
    idx = w.delinearize("offs", expr.shape)
    v = w.ev(expr, idx, "mask")
    w.store(out, "offs", v, "mask", expr.shape)
    return _finish_1d(w, n, "BLOCK", POINTWISE_CONFIGS, n, min(w.blocks.pointwise, next_pow2(n)))


COLUMN_BR = 64  # reduced elements per loop step of a column reduction (GPU)

ROW_KINDS = {"sum", "mean", "amax", "amin", "argmax", "argmin", "var", "norm2",
             "softmax", "log_softmax", "normalize"}


def rowwise(w: Writer, kind: str, x: ir.Expr, dims: tuple[int, ...], out: str,
            correction: int = 1, eps: float = 1e-5) -> Kernel:
    """Reduce ``x`` over ``dims`` (any set), or normalise over them (softmax, norms)."""
    shape = x.shape
    kept = [d for d in range(len(shape)) if d not in dims]
    kshape = tuple(shape[d] for d in kept)
    rshape = tuple(shape[d] for d in dims)
    M, R = ir.numel(kshape), ir.numel(rshape)
    b = w.blocks
    # On a GPU, a reduction that keeps the innermost dim (a column sum of a row-major matrix)
    # reads memory along the kept rows: many rows per program, a short loop over the reduced
    # dims, so each [BM, BR] tile is coalesced along BM (a [1, R] tile would stride by a row).
    column = b.tune and (len(shape) - 1) not in dims and shape[-1] > 1 and R > 1
    single = R <= b.row_single and not column
    BR = next_pow2(R) if single else min(next_pow2(R), COLUMN_BR if column else 1024)
    w.constexprs = ["BM"]
    w.line("rows = tl.program_id(0) * BM + tl.arange(0, BM)")
    w.line("rm = rows[:, None]")
    w.line(f"mmask = rm < {M}")
    kidx = w.delinearize("rm", kshape)
    fdt = "tl.float32"

    cache: list = []

    def load_chunk():
        # a row that fits one block is loaded once and reused by every pass
        if single and cache:
            return cache[0]
        out = _load_chunk()
        if single:
            cache.append(out)
        return out

    def _load_chunk():
        w.line(f"rr = r0 + tl.arange(0, {BR})[None, :]")
        w.line(f"mask = mmask & (rr < {R})")
        ridx = w.delinearize("rr", rshape)
        idx = [None] * len(shape)
        for d, i in zip(kept, kidx, strict=True):
            idx[d] = i
        for d, i in zip(dims, ridx, strict=True):
            idx[d] = i
        v = w.ev(x, idx, "mask")
        if ir.is_float(x.dtype) and x.dtype != torch.float32:
            v = w.tmp(f"{v}.to({fdt})", "v")
        # broadcast to the full tile: a value constant along the row still counts R times
        v = w.tmp(f"{v} + tl.zeros([BM, {BR}], {TL_DTYPES[torch.float32] if ir.is_float(x.dtype) else 'tl.int64'})", "x")
        return v, idx

    loop = None if single else f"for r0 in range(0, {R}, {BR}):"
    if single:
        w.line("r0 = 0")

    def sum_of(expr_fn, init="0.0"):
        acc = w.tmp(f"tl.zeros([BM], {fdt}) + {init}", "acc")
        with w.block(loop):
            v, idx = load_chunk()
            w.line(f"{acc} += tl.sum(tl.where(mask, {expr_fn(v)}, 0.0), 1)")
        return acc, idx

    out_dtype_full = kind in ("softmax", "log_softmax", "normalize")
    if kind in ("sum", "mean"):
        acc, _ = sum_of(lambda v: v)
        res = w.tmp(f"{acc} / {R}" if kind == "mean" else acc, "r")
    elif kind == "norm2":
        acc, _ = sum_of(lambda v: f"{v} * {v}")
        res = w.tmp(f"tl.sqrt({acc})", "r")
    elif kind in ("amax", "amin"):
        fn, fill = ("max", '-float("inf")') if kind == "amax" else ("min", 'float("inf")')
        acc = w.tmp(f"tl.full([BM], {fill}, {fdt})", "acc")
        with w.block(loop):
            v, _ = load_chunk()
            w.line(f"{acc} = tl.{fn}imum({acc}, tl.{fn}(tl.where(mask, {v}, {fill}), 1))")
        res = acc
    elif kind in ("argmax", "argmin"):
        fn, fill, cmp = (("max", '-float("inf")', ">") if kind == "argmax"
                         else ("min", 'float("inf")', "<"))
        best = w.tmp(f"tl.full([BM], {fill}, {fdt})", "best")
        bidx = w.tmp("tl.zeros([BM], tl.int64)", "bidx")
        with w.block(loop):
            v, _ = load_chunk()
            vm = w.tmp(f"tl.where(mask, {v}, {fill})", "x")
            cb = w.tmp(f"tl.{fn}({vm}, 1)", "cb")
            # first index attaining the chunk's extreme (PyTorch returns the first occurrence)
            ci = w.tmp(f"tl.min(tl.where(({vm} == {cb}[:, None]) & mask, rr, {R}), 1).to(tl.int64)", "ci")
            up = w.tmp(f"{cb} {cmp} {best}", "up")
            w.line(f"{best} = tl.where({up}, {cb}, {best})")
            w.line(f"{bidx} = tl.where({up}, {ci}, {bidx})")
        res = bidx
    elif kind in ("var", "normalize"):
        acc, _ = sum_of(lambda v: v)
        mean = w.tmp(f"{acc} / {R}", "mean")
        acc2, _ = sum_of(lambda v: f"({v} - {mean}[:, None]) * ({v} - {mean}[:, None])")
        if kind == "var":
            res = w.tmp(f"{acc2} / {max(R - correction, 0)}" if R - correction > 0
                        else f"{acc2} * float(\"nan\")", "r")
        else:
            rstd = w.tmp(f"1.0 / tl.sqrt({acc2} / {R} + {eps})", "rstd")
    elif kind in ("softmax", "log_softmax"):
        mx = w.tmp(f"tl.full([BM], -float(\"inf\"), {fdt})", "mx")
        den = w.tmp(f"tl.zeros([BM], {fdt})", "den")
        with w.block(loop):
            v, _ = load_chunk()
            vm = w.tmp(f"tl.where(mask, {v}, -float(\"inf\"))", "x")
            nm = w.tmp(f"tl.maximum({mx}, tl.max({vm}, 1))", "nm")
            # rows past M are all -inf: keep their exponent finite to avoid NaN noise
            safe = w.tmp(f"tl.where({nm} == -float(\"inf\"), 0.0, {nm})", "sm")
            w.line(f"{den} = {den} * tl.exp({mx} - {safe}) + tl.sum(tl.exp({vm} - {safe}[:, None]), 1)")
            w.line(f"{mx} = {nm}")
    else:
        raise KeyError(kind)

    if out_dtype_full:
        full_strides = ir.contiguous_strides(shape)
        with w.block(loop):
            v, idx = load_chunk()
            if kind == "softmax":
                y = w.tmp(f"tl.exp({v} - {mx}[:, None]) / {den}[:, None]", "y")
            elif kind == "log_softmax":
                y = w.tmp(f"{v} - {mx}[:, None] - tl.log({den}[:, None])", "y")
            else:
                y = w.tmp(f"({v} - {mean}[:, None]) * {rstd}[:, None]", "y")
            terms = [f"{i} * {s}" for i, s, n in zip(idx, full_strides, shape, strict=True) if n != 1 and i != "0"]
            lin = w.tmp(" + ".join(terms) if terms else "rm * 0 + rr * 0", "o")
            w.store(out, lin, y, "mask", shape)
    else:
        w.line(f"rmask = rows < {M}")
        w.store(out, "rows", res, "rmask", kshape)

    if b.tune and column:
        bms = sorted({max(1, min(next_pow2(M), bm)) for bm in (16, 32, 64, 128)})
        configs = [(bm, 4) for bm in bms]
    else:
        bms = sorted({max(1, min(next_pow2(M), max(1, n // BR))) for n in (1024, 4096, 16384)})
        configs = [(bm, 4 if bm * BR <= 4096 else 8) for bm in bms]
    cpu_bm = max(1, min(next_pow2(M), b.row_elems // BR))
    return _finish_1d(w, M, "BM", configs, M * R, cpu_bm)


def scan(w: Writer, kind: str, x: ir.Expr, dim: int, out: str) -> Kernel:
    """Cumulative sum/max/min along ``dim``: chunked associative scan with a running carry."""
    shape = x.shape
    kept = [d for d in range(len(shape)) if d != dim]
    kshape = tuple(shape[d] for d in kept)
    M, R = ir.numel(kshape), shape[dim]
    BR = min(next_pow2(R), 1024)
    w.constexprs = ["BM"]
    w.line("rm = (tl.program_id(0) * BM + tl.arange(0, BM))[:, None]")
    w.line(f"mmask = rm < {M}")
    kidx = w.delinearize("rm", kshape)
    fill = {"cumsum": "0.0", "cummax": '-float("inf")', "cummin": 'float("inf")'}[kind]
    carry = w.tmp(f"tl.full([BM], {fill}, tl.float32)", "carry")
    strides = ir.contiguous_strides(shape)
    with w.block(f"for r0 in range(0, {R}, {BR}):"):
        w.line(f"rr = r0 + tl.arange(0, {BR})[None, :]")
        w.line(f"mask = mmask & (rr < {R})")
        idx = [None] * len(shape)
        for d, i in zip(kept, kidx, strict=True):
            idx[d] = i
        idx[dim] = "rr"
        v = w.ev(x, idx, "mask")
        v = w.tmp(f"tl.where(mask, {v} + tl.zeros([BM, {BR}], tl.float32), {fill})", "x")
        if kind == "cumsum":
            c = w.tmp(f"tl.cumsum({v}, 1) + {carry}[:, None]", "c")
            w.line(f"{carry} = {carry} + tl.sum({v}, 1)")
        else:
            comb = "_max_combine" if kind == "cummax" else "_min_combine"
            fn = "maximum" if kind == "cummax" else "minimum"
            red = "max" if kind == "cummax" else "min"
            w.helpers.add(comb)
            c = w.tmp(f"tl.{fn}(tl.associative_scan({v}, 1, {comb}), {carry}[:, None])", "c")
            w.line(f"{carry} = tl.{fn}({carry}, tl.{red}({v}, 1))")
        terms = [f"{i} * {s}" for i, s, n in zip(idx, strides, shape, strict=True) if n != 1 and i != "0"]
        lin = w.tmp(" + ".join(terms), "o")
        w.store(out, lin, c, "mask", shape)
    bm = max(1, min(next_pow2(M), 4096 // BR))
    return _finish_1d(w, M, "BM", [(m, 4) for m in sorted({1, min(bm, 4), bm})], M * R, bm)


def _mm_consts(w: Writer, M: int, N: int, K: int):
    bm, bn, bk = w.blocks.mm
    bm, bn, bk = (max(16, min(bm, next_pow2(M))), max(16, min(bn, next_pow2(N))),
                  max(16, min(bk, next_pow2(K))))
    return bm, bn, bk


def _mm_tune(M: int, N: int, K: int) -> list[str]:
    cands = [(32, 32, 32, 4), (64, 64, 32, 4), (128, 64, 32, 8), (64, 128, 32, 8), (128, 128, 32, 8),
             # one narrow side (N or M under 16, e.g. a (398 x 548) @ (548 x 12) bmm that ran at
             # 0.08x cuBLAS with 32 x 32 x 32 tiles): tall tiles, longer K steps
             (128, 16, 64, 4), (16, 128, 64, 4)]
    out = []
    for bm, bn, bk, wp in cands:
        if bm > max(16, next_pow2(M)) * 2 or bn > max(16, next_pow2(N)) * 2:
            continue
        if (bn == 16 and N > 16) or (bm == 16 and M > 16):  # narrow tiles for narrow sides only
            continue
        out.append(_config({"BM": bm, "BN": bn, "BK": bk}, wp))
    return out or [_config({"BM": 32, "BN": 32, "BK": 32}, 4)]


def _finish_tiles(w: Writer, M: int, N: int, K: int, grid_z: int, loop_k: int | None = None) -> Kernel:
    """Launch over (M / BM, N / BN, grid_z) tiles: autotuned on CUDA, fixed in the interpreter.
    ``loop_k``: the length the BK loop runs over, where it is not the whole reduction K."""
    if w.blocks.tune:
        grid = f'lambda META: (triton.cdiv({M}, META["BM"]), triton.cdiv({N}, META["BN"]), {grid_z})'
        return w.finish(grid, {}, M * N * K, _mm_tune(M, N, K))
    bm, bn, bk = _mm_consts(w, M, N, loop_k or K)
    return w.finish(f"({-(-M // bm)}, {-(-N // bn)}, {grid_z})", {"BM": bm, "BN": bn, "BK": bk},
                    M * N * K, None)


MAX_GRID_Z = 65535  # CUDA's limit on grid axes 1 and 2


def _accumulate_dot(w: Writer, av: str, bv: str, narrow: bool = False) -> None:
    """``acc += a @ b`` over tiles masked by ``amask``/``bmask``, fp32 (``ieee``), with the padding
    lanes zeroed: a fused prologue may map 0 to non-zero (e.g. exp). ``narrow``: fewer than 16
    columns, multiplied and summed without ``tl.dot``, which would pad them to 16. The product is
    laid out [BM, BN, BK] and summed over its last axis: Triton's combine pass rewrites the
    [BM, BK, BN] sum over axis 1 into a ``tt.dot`` with TF32 inputs (triton 3.6 and 3.7), which the
    hardened judge rejects."""
    a = w.tmp(f"tl.where(amask, {av}, 0.0).to(tl.float32)", "a")
    b = w.tmp(f"tl.where(bmask, {bv}, 0.0).to(tl.float32)", "b")
    if narrow:
        w.line(f"acc += tl.sum({a}[:, None, :] * tl.trans({b})[None, :, :], 2)")
    else:
        w.line(f'acc += tl.dot({a}, {b}, input_precision="ieee")')


NARROW_TILE_ELEMS = 8192  # BM * BK * BN of a narrow (broadcast-and-sum) tile: registers bound it


def _narrow_width(cols: int) -> int | None:
    """BN for a convolution with fewer than 16 output channels per group (None: use tl.dot)."""
    return max(2, next_pow2(cols)) if cols < 16 else None


def _finish_narrow(w: Writer, M: int, N: int, K: int, grid_z: int, loop_k: int) -> Kernel:
    """Tile grid for :func:`_accumulate_dot` with ``narrow``: BN fixed, (BM, BK) tuned."""
    bn = _narrow_width(N)
    shapes = [(NARROW_TILE_ELEMS // bn // bk, bk) for bk in (16, 32, 64)]
    shapes = [(min(bm, 256), bk) for bm, bk in shapes if bm >= 16]
    if w.blocks.tune:
        configs = [_config({"BM": bm, "BN": bn, "BK": bk}, 4) for bm, bk in shapes]
        grid = f'lambda META: (triton.cdiv({M}, META["BM"]), {-(-N // bn)}, {grid_z})'
        return w.finish(grid, {}, M * N * K, configs)
    bm, bk = max(16, min(32, next_pow2(M))), max(16, min(32, next_pow2(loop_k)))
    return w.finish(f"({-(-M // bm)}, {-(-N // bn)}, {grid_z})", {"BM": bm, "BN": bn, "BK": bk},
                    M * N * K, None)


SKINNY_MAX_K = 32  # reductions up to this length unroll in the skinny-matmul kernel


def matmul(w: Writer, a: ir.Expr, b: ir.Expr, out: str) -> Kernel:
    """Batched ``a @ b`` with a tiled ``tl.dot`` (fp32, ``ieee`` precision); a, b share batch dims.

    A matmul with K <= 16, or a side under 16 (``tl.dot``'s minimum tile) and a short reduction,
    goes to :func:`skinny_tiles` (``x @ W``) or :func:`skinny_matmul` instead: dot tiles would be
    mostly padding, and such a matmul is bound by writing its output (on an H200 a
    (2854, 7093, 16) @ (16, 38) matmul ran 7.0 ms on dot tiles against 2.6 ms in cuBLAS).
    """
    *batch, M, K = a.shape
    N = b.shape[-1]
    if K <= 16 or (min(M, N) < 16 and K <= SKINNY_MAX_K):
        if N >= 8 and _same_for_every_batch(b, len(batch)):
            return skinny_tiles(w, a, b, out)
        return skinny_matmul(w, a, b, out)
    B = ir.numel(tuple(batch))
    w.constexprs = ["BM", "BN", "BK"]
    w.line("rm = tl.program_id(0) * BM + tl.arange(0, BM)")
    w.line("rn = tl.program_id(1) * BN + tl.arange(0, BN)")
    # CUDA caps grid axis 2 at 65535: larger batches loop, each program taking every
    # num_programs(2)-th batch (a GPU-scale matmul of 5740 x 5957 batches failed to launch).
    grid_b = min(B, MAX_GRID_Z)
    header = None if grid_b == B else f"for pb in range(tl.program_id(2), {B}, {grid_b}):"
    if header is None:
        w.line("pb = tl.program_id(2)")
    with w.block(header):
        bidx = w.delinearize("pb", tuple(batch))
        w.line("acc = tl.zeros([BM, BN], dtype=tl.float32)")
        with w.block(f"for k0 in range(0, {K}, BK):"):
            w.line("rk = k0 + tl.arange(0, BK)")
            w.line(f"amask = (rm[:, None] < {M}) & (rk[None, :] < {K})")
            w.line(f"bmask = (rk[:, None] < {K}) & (rn[None, :] < {N})")
            av = w.ev(a, [*bidx, "rm[:, None]", "rk[None, :]"], "amask")
            bv = w.ev(b, [*bidx, "rk[:, None]", "rn[None, :]"], "bmask")
            _accumulate_dot(w, av, bv)
        w.line(f"cmask = (rm[:, None] < {M}) & (rn[None, :] < {N})")
        lin = w.tmp(f"pb * {M * N} + rm[:, None] * {N} + rn[None, :]", "o")
        w.store(out, lin, "acc", "cmask", (*batch, M, N))
    return _finish_tiles(w, M, N, K, grid_b)


def _same_for_every_batch(b: ir.Expr, nbatch: int) -> bool:
    """Whether ``b`` is one matrix broadcast over the batch dims (``x @ W``)."""
    if nbatch == 0:
        return True
    return isinstance(b, ir.Load) and all(s == 0 for s in b.strides[:nbatch])


SKINNY_TILE_ELEMS = 8192  # BM x BN accumulator of a skinny tile: registers bound it


def skinny_tiles(w: Writer, a: ir.Expr, b: ir.Expr, out: str) -> Kernel:
    """``a @ W`` with a short K and one W for every batch: [BM rows x N] output tiles.

    Rows are (batch, m) flattened; each of the K steps is an outer product of a column of the A
    tile and a row of W, so index arithmetic is per tile, not per element, and the store is a
    row-major [BM, N] block. The per-element form (:func:`skinny_matmul`) ran a (2854, 7093, 16)
    @ (16, 38) matmul at 0.37x cuBLAS on an H200.
    """
    *batch, M, K = a.shape
    N = b.shape[-1]
    rows = ir.numel(tuple(batch)) * M
    bn = next_pow2(N)
    w.constexprs = ["BM"]
    w.line("rm = tl.program_id(0) * BM + tl.arange(0, BM)")
    w.line(f"rn = tl.arange(0, {bn})")
    w.line(f"rmask = rm < {rows}")
    w.line(f"nmask = rn < {N}")
    ridx = w.delinearize("rm", (*batch, M))
    w.line(f"acc = tl.zeros([BM, {bn}], dtype=tl.float32)")
    for k in range(K):
        av = w.ev(a, [*ridx, str(k)], "rmask")
        bv = w.ev(b, ["0"] * len(batch) + [str(k), "rn"], "nmask")
        w.line(f"acc += {av}.to(tl.float32)[:, None] * {bv}.to(tl.float32)[None, :]")
    w.line("cmask = rmask[:, None] & nmask[None, :]")
    lin = w.tmp(f"rm[:, None] * {N} + rn[None, :]", "o")
    w.store(out, lin, "acc", "cmask", (*batch, M, N))
    bms = [bm for bm in (32, 64, 128) if bm * bn <= SKINNY_TILE_ELEMS] or [16]
    cpu_bm = max(1, min(next_pow2(rows), max(1, 1024 // bn)))
    return _finish_1d(w, rows, "BM", [(bm, 4) for bm in bms], rows * N * K, cpu_bm)


def skinny_matmul(w: Writer, a: ir.Expr, b: ir.Expr, out: str) -> Kernel:
    """``a @ b`` with K <= SKINNY_MAX_K as one elementwise pass over the output, K unrolled.

    GPU-scale programs produce matmuls such as 34M batches of (21 x 1) @ (1 x 1), where a tiled
    kernel spends its time on padding; here each output element is a short dot product and the
    pass is bound by writing the output, like any elementwise kernel.
    """
    *batch, M, K = a.shape
    N = b.shape[-1]
    shape = (*batch, M, N)
    n = ir.numel(shape)
    w.constexprs = ["BLOCK"]
    w.line("offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)")
    w.line("mask = offs < N")
    *bidx, mi, ni = w.delinearize("offs", shape)
    acc = w.tmp("tl.zeros([BLOCK], dtype=tl.float32)", "acc")
    for k in range(K):
        av = w.ev(a, [*bidx, mi, str(k)], "mask")
        bv = w.ev(b, [*bidx, str(k), ni], "mask")
        w.line(f"{acc} += {av}.to(tl.float32) * {bv}.to(tl.float32)")
    w.store(out, "offs", acc, "mask", shape)
    return _finish_1d(w, n, "BLOCK", POINTWISE_CONFIGS, n * K, min(w.blocks.pointwise, next_pow2(n)))


def _conv_input_tile(w: Writer, x: ir.Expr, batch: str, pos: list[str], valid: list[str]) -> str:
    """The [rows x input channels] tile of ``x`` at spatial positions ``pos`` under ``amask``."""
    w.line(f"amask = {' & '.join(valid)}")
    n0 = f"{batch}[:, None]" if batch != "0" else "0"
    return w.ev(x, [n0, "ci[None, :]", *pos], "amask")


@dataclass(frozen=True)
class ConvSpec:
    transposed: bool
    stride: tuple[int, ...]
    padding: tuple[int, ...]
    dilation: tuple[int, ...]
    groups: int
    out_shape: tuple[int, ...]  # full output shape (N, OC, *O)


def conv(w: Writer, x: ir.Expr, wt: ir.Expr, spec: ConvSpec, out: str) -> Kernel:
    """Direct convolution (or transposed convolution) as an implicit GEMM per group.

    Rows are output positions (n, o...), columns output channels of the group, the reduction runs
    over (input channel, kernel offset). Transposed convolution gathers: output o receives input
    i = (o + p - k*d) / s where that division is exact and in range; with a stride above 1 it
    goes to :func:`conv_transpose_phased`, which does not multiply the masked-out taps.
    """
    groups_by_phases = spec.groups * ir.numel(spec.stride)
    if spec.transposed and max(spec.stride) > 1 and groups_by_phases <= MAX_GRID_Z:
        return conv_transpose_phased(w, x, wt, spec, out)
    nb, cin, *ins = x.shape
    _, oc, *outs = spec.out_shape
    G = spec.groups
    ksz = tuple(wt.shape[2:])
    cg = cin // G
    ocg = oc // G
    M = nb * ir.numel(tuple(outs))
    K = cg * ir.numel(ksz)
    P = ir.numel(tuple(outs))
    w.constexprs = ["BM", "BN", "BK"]
    w.line("rm = tl.program_id(0) * BM + tl.arange(0, BM)")
    w.line("rn = tl.program_id(1) * BN + tl.arange(0, BN)")
    w.line("g = tl.program_id(2)")
    midx = w.delinearize("rm", (nb, *outs))
    w.line(f"oc = g * {ocg} + rn")
    w.line("acc = tl.zeros([BM, BN], dtype=tl.float32)")
    with w.block(f"for k0 in range(0, {K}, BK):"):
        w.line("rk = k0 + tl.arange(0, BK)")
        kidx = w.delinearize("rk", (cg, *ksz))
        w.line(f"ci = g * {cg} + {kidx[0]}")
        valid = [f"(rm[:, None] < {M})", f"(rk[None, :] < {K})"]
        pos = []
        for j, size in enumerate(ins):
            o = f"{midx[1 + j]}[:, None]" if midx[1 + j] != "0" else "0"
            k = f"{kidx[1 + j]}[None, :]" if kidx[1 + j] != "0" else "0"
            s, p, d = spec.stride[j], spec.padding[j], spec.dilation[j]
            if not spec.transposed:
                q = w.tmp(f"{o} * {s} - {p} + {k} * {d}", "q")
            else:
                t = w.tmp(f"{o} + {p} - {k} * {d}", "q")
                valid.append(f"({t} >= 0) & ({t} % {s} == 0)" if s != 1 else f"({t} >= 0)")
                q = w.tmp(f"tl.where({t} >= 0, {t}, 0) // {s}", "q") if s != 1 else t
            valid.append(f"({q} >= 0) & ({q} < {size})")
            pos.append(q)
        av = _conv_input_tile(w, x, midx[0], pos, valid)
        w.line(f"bmask = (rk[:, None] < {K}) & (rn[None, :] < {ocg})")
        kk = [f"{i}[:, None]" if i != "0" else "0" for i in kidx[1:]]
        if spec.transposed:  # weight (C_in, OC/G, *k)
            bv = w.ev(wt, ["ci[:, None]", "rn[None, :]", *kk], "bmask")
        else:  # weight (OC, C_in/G, *k)
            bv = w.ev(wt, ["oc[None, :]", f"{kidx[0]}[:, None]" if kidx[0] != "0" else "0", *kk],
                      "bmask")
        _accumulate_dot(w, av, bv, narrow=_narrow_width(ocg) is not None)
    w.line(f"cmask = (rm[:, None] < {M}) & (rn[None, :] < {ocg})")
    n_ = f"({midx[0]})" if midx[0] != "0" else "0"
    lin = w.tmp(f"{n_}[:, None] * {oc * P} + oc[None, :] * {P} + (rm % {P})[:, None]"
                if midx[0] != "0" else f"oc[None, :] * {P} + (rm % {P})[:, None]", "o")
    w.store(out, lin, "acc", "cmask", spec.out_shape)
    if _narrow_width(ocg):
        return _finish_narrow(w, M, ocg, K, G, loop_k=K)
    return _finish_tiles(w, M, ocg, K, G)


def conv_transpose_phased(w: Writer, x: ir.Expr, wt: ir.Expr, spec: ConvSpec, out: str) -> Kernel:
    """Strided transposed convolution, one output phase per program.

    Output o (per spatial dim) receives input i = (o + p - k*d) / s only for the taps k where that
    division is exact, which depends on o only through its phase r = o mod s. A program takes the
    rows of one phase (o = r + s*t) and one group, so every tap is valid or invalid for the whole
    tile: invalid taps are skipped, valid ones read i = t + (r + p - k*d) / s. The gathering form
    multiplied every tap and masked all but 1/s^d of them (a stride-14 ConvTranspose2d at GPU
    scale timed out on an H200).
    """
    nb, cin, *ins = x.shape
    _, oc, *outs = spec.out_shape
    G, ksz, strides = spec.groups, tuple(wt.shape[2:]), tuple(spec.stride)
    cg, ocg = cin // G, oc // G
    steps = tuple(-(-o // s) for o, s in zip(outs, strides, strict=True))  # t per phase (max)
    rows = nb * ir.numel(steps)
    phases = ir.numel(strides)
    taps = ir.numel(ksz)
    P = ir.numel(tuple(outs))
    w.constexprs = ["BM", "BN", "BK"]
    w.line("rm = tl.program_id(0) * BM + tl.arange(0, BM)")
    w.line("rn = tl.program_id(1) * BN + tl.arange(0, BN)")
    w.line(f"g = tl.program_id(2) // {phases}")
    w.line(f"phase = tl.program_id(2) % {phases}")
    ridx = w.delinearize("phase", strides)  # r per spatial dim (scalars)
    tidx = w.delinearize("rm", (nb, *steps))  # (n, t...) per row
    opos = []
    rmask = [f"(rm < {rows})"]
    for j, (r, t) in enumerate(zip(ridx, tidx[1:], strict=True)):
        o = w.tmp(f"{r} + {strides[j]} * {t}", "op")
        opos.append(o)
        rmask.append(f"({o} < {outs[j]})")
    w.line(f"rowmask = {' & '.join(rmask)}")
    w.line(f"oc = g * {ocg} + rn")
    w.line("acc = tl.zeros([BM, BN], dtype=tl.float32)")
    with w.block(f"for tap in range(0, {taps}):"):
        kidx = w.delinearize("tap", ksz)
        shifts, ok = [], []
        for j, (r, k) in enumerate(zip(ridx, kidx, strict=True)):
            c = w.tmp(f"{r} + {spec.padding[j]} - {k} * {spec.dilation[j]}", "c")
            ok.append(f"({c} % {strides[j]} == 0)")
            shifts.append(c)
        with w.block(f"if {' & '.join(ok)}:"):
            with w.block(f"for c0 in range(0, {cg}, BK):"):
                w.line("rk = c0 + tl.arange(0, BK)")
                w.line(f"ci = g * {cg} + rk")
                valid = ["rowmask[:, None]", f"(rk[None, :] < {cg})"]
                pos = []
                for j, size in enumerate(ins):
                    t = f"{tidx[1 + j]}[:, None]" if tidx[1 + j] != "0" else "0"
                    q = w.tmp(f"{t} + {shifts[j]} // {strides[j]}", "q")
                    valid.append(f"({q} >= 0) & ({q} < {size})")
                    pos.append(q)
                av = _conv_input_tile(w, x, tidx[0], pos, valid)
                w.line(f"bmask = (rk[:, None] < {cg}) & (rn[None, :] < {ocg})")
                bv = w.ev(wt, ["ci[:, None]", "rn[None, :]", *kidx], "bmask")  # (C_in, OC/G, *k)
                _accumulate_dot(w, av, bv, narrow=_narrow_width(ocg) is not None)
    w.line(f"cmask = rowmask[:, None] & (rn[None, :] < {ocg})")
    ostr = ir.contiguous_strides(tuple(outs))
    spatial = " + ".join(f"{o} * {st}" for o, st in zip(opos, ostr, strict=True))
    n_ = f"{tidx[0]}[:, None] * {oc * P} + " if tidx[0] != "0" else ""
    lin = w.tmp(f"{n_}oc[None, :] * {P} + ({spatial})[:, None]", "o")
    w.store(out, lin, "acc", "cmask", spec.out_shape)
    if _narrow_width(ocg):
        return _finish_narrow(w, rows, ocg, cg * taps, G * phases, loop_k=cg)
    return _finish_tiles(w, rows, ocg, cg * taps, G * phases, loop_k=cg)


def pool(w: Writer, kind: str, x: ir.Expr, ksz, stride, padding, dilation, out_shape, out) -> Kernel:
    """Max or average pooling (count_include_pad): each output element loops over its window."""
    nsp = len(ksz)
    n = ir.numel(out_shape)
    w.constexprs = ["BLOCK"]
    w.line("offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)")
    w.line("omask = offs < N")
    oidx = w.delinearize("offs", tuple(out_shape))
    lead = oidx[: len(out_shape) - nsp]
    fill = '-float("inf")' if kind == "max" else "0.0"
    w.line(f"acc = tl.full([BLOCK], {fill}, tl.float32)")
    ins = x.shape[len(x.shape) - nsp:]
    with w.block(f"for kk in range(0, {ir.numel(tuple(ksz))}):"):
        kidx = w.delinearize("kk", tuple(ksz))
        valid = ["omask"]
        pos = []
        for j in range(nsp):
            o = oidx[len(lead) + j]
            q = w.tmp(f"{o} * {stride[j]} - {padding[j]} + {kidx[j]} * {dilation[j]}", "q")
            valid.append(f"({q} >= 0) & ({q} < {ins[j]})")
            pos.append(q)
        w.line(f"wmask = {' & '.join(valid)}")
        v = w.ev(x, [*lead, *pos], "wmask")
        if kind == "max":
            w.line(f"acc = tl.maximum(acc, tl.where(wmask, {v}, -float(\"inf\")))")
        else:
            w.line(f"acc += tl.where(wmask, {v}, 0.0)")
    res = "acc" if kind == "max" else w.tmp(f"acc / {ir.numel(tuple(ksz))}", "r")
    w.store(out, "offs", res, "omask", tuple(out_shape))
    window = ir.numel(tuple(ksz))
    return _finish_1d(w, n, "BLOCK", [(128, 4), (512, 4), (1024, 8)], n * window, min(1024, next_pow2(n)))
