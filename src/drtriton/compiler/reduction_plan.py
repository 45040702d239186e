"""Reductions, softmax-like ops and scans for ``Lowering``: one kernel, or split for the GPU.

A reduction is one ``rowwise`` kernel unless its shape leaves the GPU idle: a column reduction
with few kept elements splits its reduced dim into chunks (``_split_factor``), and a row
reduction with few, long rows cuts each row into identity-padded chunks (``_row_split``); both
then reduce the partial results in a second kernel. On the CPU (the interpreter) nothing splits.
``Reductions`` is mixed into ``Lowering``, whose ``t``, ``kernel``, ``flush_expr`` and ``blocks``
it uses.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from drtriton.compiler import ir, kernels
from drtriton.compiler.config import Unsupported
from drtriton.compiler.kernels.reductions import innermost_dim

SPLITTABLE = ("sum", "mean", "amax", "amin")  # chunk results combine exactly
SPLIT_TARGET_ELEMS = 1 << 16  # kept elements x chunks a split column reduction aims for
# Row reductions with few rows (a full sum, a LayerNorm over a whole tensor): one program per
# row leaves most SMs idle (a 983M-element LayerNorm with one row ran in one program). With
# fewer than ROW_SPLIT_MAX_ROWS rows of at least ROW_SPLIT_MIN_LEN elements, each row is
# reduced in chunks of ROW_SPLIT_CHUNK multiples, about ROW_SPLIT_PROGRAMS programs in all.
ROW_SPLITTABLE = ("sum", "mean", "amax", "amin", "norm2", "var")
ROW_SPLIT_MAX_ROWS = 256
ROW_SPLIT_MIN_LEN = 1 << 16
ROW_SPLIT_PROGRAMS = 1024
ROW_SPLIT_CHUNK = 4096
UNFOLDABLE = ("softmax", "log_softmax")  # rowfull kinds a reduction may read unfolded
_IDENTITY = {"sum": 0.0, "amax": float("-inf"), "amin": float("inf")}


def _as_rows(x: ir.Expr, dims: tuple[int, ...]) -> ir.Expr:
    """``x`` as a [rows, length] matrix: its kept dims, then the reduced ``dims``, flattened."""
    kept = tuple(d for d in range(len(x.shape)) if d not in dims)
    length = ir.numel(tuple(x.shape[d] for d in dims))
    perm = kept + tuple(dims)
    permuted = ir.permute(x, perm) if perm != tuple(range(len(perm))) else x
    return ir.reshape(permuted, (ir.numel(x.shape) // length, length))


def _pair(pairs: ir.Load, k: int) -> ir.Load:
    """Statistic ``k`` of a kernel's interleaved pairs (``kernels.reductions.PAIRS``: shape
    kept + (2,)), in the kept shape."""
    return ir.Load(pairs.shape[:-1], pairs.dtype, pairs.buf, pairs.strides[:-1], k)


EXACT_FLOAT_COUNT = 1 << 24  # float32 holds every integer up to this exactly


@dataclass(frozen=True)
class RowReduction:
    """What a pending one-kernel reduction reduces: ``kernels.rowwise``'s arguments, kept so an
    elementwise consumer of its broadcast result can join it (``Lowering.materialize``)."""

    kind: str
    x: ir.Expr
    dims: tuple[int, ...]
    kw: tuple[tuple[str, object], ...] = ()

    def make(self, spread: kernels.Epilogue | None = None):
        """The kernel template call, storing ``spread`` instead of the result where given."""
        kw = dict(self.kw)
        return lambda w, o: kernels.rowwise(w, self.kind, self.x, self.dims, o, spread=spread,
                                            **kw)


class Reductions:
    """The reduction planner half of ``Lowering`` (see the module docstring)."""

    def reduce(self, kind: str, x: ir.Expr, dims, keepdim: bool = False, **kw) -> ir.Expr:
        x = self.t(x)
        rank = len(x.shape)
        if rank == 0:
            x = ir.reshape(x, (1,))
            rank, dims = 1, None
        if dims is None:
            dims = tuple(range(rank))
        elif isinstance(dims, int):
            dims = (dims,)
        dims = tuple(sorted({d % rank for d in dims}))
        kept = tuple(s for d, s in enumerate(x.shape) if d not in dims)
        dtype = torch.int64 if kind in ("argmax", "argmin") else (
            x.dtype if ir.is_float(x.dtype) else torch.float32)
        count = math.prod(x.shape[d] for d in dims)
        if kind == "sum" and x.dtype == torch.bool and count <= EXACT_FLOAT_COUNT:
            # a count of true elements: every partial sum is an integer below 2**24, exact in
            # the float32 accumulators; the node's int64 dtype is restored by the caller
            x, dtype = ir.cast(x, torch.float32), torch.float32
        integer = not ir.is_float(x.dtype)
        if integer and kind in ("sum", "prod", "amax", "amin"):
            # exact in int64 accumulators, as PyTorch sums integers (the result is int64)
            dtype = torch.int64 if kind in ("sum", "prod") else x.dtype
        elif integer and kind == "logsumexp":
            raise Unsupported(f"{kind} of {x.dtype}")
        x = self._unfold_normalised(x)
        self.flush_expr(x)
        # the split forms combine their partial results in float32
        chunks = 0 if integer else self._row_split(kind, x.shape, dims)
        if chunks:
            out = self._row_split_reduce(kind, x, dims, chunks, kw.get("correction", 1))
            out = ir.reshape(out, kept)
            if keepdim:
                return ir.reshape(out, tuple(1 if d in dims else s for d, s in enumerate(x.shape)))
            return out
        split = 0 if integer else self._split_factor(kind, x.shape, dims)
        if split:
            out = self._split_reduce(kind, x, dims[0], split, kept, dtype)
        else:
            rows = RowReduction(kind, x, dims, tuple(sorted(kw.items())))
            out = self.kernel(rows.make(), kept, dtype, rows)
        if keepdim:
            return ir.reshape(out, tuple(1 if d in dims else s for d, s in enumerate(x.shape)))
        return out

    def logsumexp(self, x: ir.Expr, dims, keepdim: bool = False) -> ir.Expr:
        """log(sum(exp(x))) over ``dims``: one online pass, or, where a GPU reduction of this
        shape splits (few long rows, or a column reduction with few kept elements), amax then
        a sum of exponentials relative to it, both splittable."""
        x = self.t(x)
        if not x.shape:
            return self.reduce("logsumexp", x, None, keepdim)
        rank = len(x.shape)
        dims = tuple(sorted({d % rank for d in ((dims,) if isinstance(dims, int) else dims)}))
        if not (self._row_split("sum", x.shape, dims) or self._split_factor("sum", x.shape, dims)):
            return self.reduce("logsumexp", x, dims, keepdim)
        top = self.reduce("amax", x, dims, True)
        total = self.reduce("sum", ir.op("exp", ir.op("sub", x, top)), dims, True)
        out = ir.op("add", ir.op("log", total), top)
        if keepdim:
            return out
        return ir.reshape(out, tuple(s for d, s in enumerate(x.shape) if d not in dims))

    def _split_factor(self, kind: str, shape: ir.Shape, dims: tuple[int, ...]) -> int:
        """How many chunks a GPU column reduction splits its reduced dim into (0: none).

        A column reduction (the innermost dim kept) gives each program BM kept elements and
        the whole reduced length: with few kept elements there are too few programs to keep HBM
        busy (an 8192 x 8192 sum over dim 0 ran at 0.65x eager on an H200). Splitting the
        reduced dim into chunks reduced in parallel, then reducing the chunk results, fixes
        that for the kinds whose chunk results combine exactly (equal chunks make mean exact).
        """
        if not self.blocks.tune or kind not in SPLITTABLE or len(dims) != 1:
            return 0
        d = dims[0]
        if d == innermost_dim(shape):
            return 0
        n = shape[d]
        want = -(-SPLIT_TARGET_ELEMS // (ir.numel(shape) // n))
        split = 1
        while split < want and split * 2 <= min(64, n // 256) and n % (split * 2) == 0:
            split *= 2
        return split if split >= 2 else 0

    def _split_reduce(self, kind: str, x: ir.Expr, d: int, split: int, kept: ir.Shape,
                      dtype: torch.dtype) -> ir.Expr:
        """``kind`` over dim ``d`` as two reductions: over chunks of ``d``, then over the chunks."""
        n = x.shape[d]
        chunked = ir.reshape(x, x.shape[:d] + (split, n // split) + x.shape[d + 1:])
        part_shape = x.shape[:d] + (split,) + x.shape[d + 1:]
        part = self.kernel(lambda w, o, x=chunked: kernels.rowwise(w, kind, x, (d + 1,), o),
                           part_shape, dtype)
        self.flush_expr(part)
        return self.kernel(lambda w, o, x=part: kernels.rowwise(w, kind, x, (d,), o), kept, dtype)

    def _row_split(self, kind: str, shape: ir.Shape, dims: tuple[int, ...]) -> int:
        """How many chunks each row of a GPU row reduction with few, long rows is cut into."""
        if not self.blocks.tune or kind not in ROW_SPLITTABLE or not shape:
            return 0
        if innermost_dim(shape) not in dims:
            return 0  # a column reduction: _split_factor's case
        length = ir.numel(tuple(shape[d] for d in dims))
        rows = ir.numel(shape) // max(length, 1)
        if rows >= ROW_SPLIT_MAX_ROWS or length < ROW_SPLIT_MIN_LEN:
            return 0
        want = -(-ROW_SPLIT_PROGRAMS // rows)
        return max(0, min(want, length // ROW_SPLIT_CHUNK))

    def _row_split_reduce(self, kind: str, x: ir.Expr, dims: tuple[int, ...], chunks: int,
                          correction: int) -> ir.Expr:
        """``kind`` over ``dims`` as [rows, length] -> [rows, chunks] partials -> [rows].

        Rows are padded with the reduction's identity to whole chunks (a Cat with a constant),
        so any length splits. mean, norm2 and var are sums with a final elementwise step (var
        in two passes, as the one-kernel form computes it)."""
        length = ir.numel(tuple(x.shape[d] for d in dims))
        rows = ir.numel(x.shape) // length
        if kind == "var":
            mean = self._row_split_reduce("mean", x, dims, chunks, 0)
            keep = tuple(1 if d in dims else s for d, s in enumerate(x.shape))
            dev = ir.op("sub", x, ir.reshape(mean, keep))
            total = self._row_split_reduce("sum", ir.op("mul", dev, dev), dims, chunks, 0)
            if length - correction <= 0:
                return ir.op("mul", total, ir.const(float("nan")))
            return ir.op("div", total, ir.const(float(length - correction)))
        if kind == "norm2":
            return ir.op("sqrt", self._row_split_reduce("sum", ir.op("mul", x, x), dims, chunks, 0))
        base = "sum" if kind == "mean" else kind
        flat = _as_rows(x, dims)
        chunk = -(-length // chunks)
        chunk = -(-chunk // ROW_SPLIT_CHUNK) * ROW_SPLIT_CHUNK
        chunks = -(-length // chunk)
        pad = chunks * chunk - length
        if pad:
            fill = ir.Const((rows, pad), flat.dtype, _IDENTITY[base])  # a shaped constant
            flat = ir.Cat((rows, length + pad), flat.dtype, (flat, fill), 1, (0, length))
        parts = ir.reshape(flat, (rows, chunks, chunk))
        dtype = flat.dtype if ir.is_float(flat.dtype) else torch.float32
        partial = self.kernel(lambda w, o, x=parts: kernels.rowwise(w, base, x, (2,), o),
                              (rows, chunks), dtype)
        self.flush_expr(partial)
        out = self.kernel(lambda w, o, x=partial: kernels.rowwise(w, base, x, (1,), o),
                          (rows,), dtype)
        return ir.op("div", out, ir.const(float(length))) if kind == "mean" else out

    def rowfull(self, kind: str, x: ir.Expr, dims, **kw) -> ir.Expr:
        """Softmax-like ops over ``dims`` producing a tensor of x's shape."""
        x = self.t(x)
        if not ir.is_float(x.dtype):
            x = ir.cast(x, torch.float32)
        rank = len(x.shape)
        dims = tuple(
            sorted({d % max(rank, 1) for d in ((dims,) if isinstance(dims, int) else dims)})
        )
        chunks = self._row_split("sum", x.shape, dims)
        if chunks:
            return self._rowfull_split(kind, x, dims, chunks, **kw)
        self.flush_expr(x)
        lazy = kind in UNFOLDABLE and x.dtype == torch.float32 and not kw
        return self.kernel(
            lambda w, o, x=x: kernels.rowwise(w, kind, x, dims, o, **kw), x.shape, x.dtype,
            full=RowReduction(kind, x, dims) if lazy else None)

    def _unfold_normalised(self, x: ir.Expr) -> ir.Expr:
        """A reduction reading a pending softmax or log_softmax whole (and nothing else needs
        it) reads the softmax's input instead, through each row's maximum and sum of
        exponentials: one online pass of their own, and the normalised tensor is never written
        and read back (a distillation loss's KL term read 10 tensor-sized passes, now 4)."""
        for buf in list(ir.buffers_of(x)):
            p = self.pending.get(buf)
            if p is None or p.full is None or p.epi is not None:
                continue
            if not self._fusable(x, buf) or self._live_elsewhere(buf, x):
                continue
            # the softmax stays pending: a later read in this node (topk's next arg-reduction)
            # still finds it, and one that nothing reads is never emitted; its statistics are
            # computed once for all the reductions that unfold it
            if p.unfolded is None:
                p.unfolded = self._normalised(p.full, p.labels)
            x = ir.substitute(x, buf, p.unfolded)
        return x

    def _normalised(self, full: RowReduction, labels: list[str]) -> ir.Expr:
        """``full``'s softmax or log_softmax as an expression over its input and a pending
        kernel of its rows' (maximum, sum of exponentials), computed as the one-kernel form
        computes them, so the values are the same."""
        x, dims = full.x, full.dims
        kept = [d for d in range(len(x.shape)) if d not in dims]
        kshape = tuple(x.shape[d] for d in kept)
        stats = self.kernel(
            lambda w, o: kernels.rowwise(w, "softmax_stats", x, dims, o), kshape + (2,),
            torch.float32)
        self.pending[stats.buf].labels = list(labels)
        keep = tuple(1 if d in dims else n for d, n in enumerate(x.shape))
        top, den = (ir.reshape(_pair(stats, k), keep) for k in (0, 1))
        shifted = ir.op("sub", x, top)
        if full.kind == "softmax":
            return ir.op("div", ir.op("exp", shifted), den)
        return ir.op("sub", shifted, ir.op("log", den))

    def _rowfull_split(self, kind: str, x: ir.Expr, dims: tuple[int, ...], chunks: int,
                       eps: float = 1e-5, **_) -> ir.Expr:
        """Few long rows: the statistics as split reductions, then one elementwise pass."""
        if kind == "normalize":
            moments = self._split_moments(x, dims, chunks)
            if moments is not None:
                mean, var = moments
                return ir.op("mul", ir.op("sub", x, mean),
                             ir.op("rsqrt", ir.op("add", var, ir.const(eps))))
            mean = self.reduce("mean", x, dims, True)
            dev = ir.op("sub", x, mean)
            var = self.reduce("mean", ir.op("mul", dev, dev), dims, True)
            return ir.op("mul", dev, ir.op("rsqrt", ir.op("add", var, ir.const(eps))))
        top = self.reduce("amax", x, dims, True)
        shifted = ir.op("sub", x, top)
        total = self.reduce("sum", ir.op("exp", shifted), dims, True)
        if kind == "softmax":
            return ir.op("div", ir.op("exp", shifted), total)
        if kind == "log_softmax":
            return ir.op("sub", shifted, ir.op("log", total))
        raise KeyError(kind)

    def _split_moments(self, x: ir.Expr, dims: tuple[int, ...], chunks: int
                       ) -> tuple[ir.Expr, ir.Expr] | None:
        """Mean and biased variance over ``dims`` (kept as size-1 dims) of few long rows, in one
        pass over x: each of about ``chunks`` equal chunks of a row gets its (mean, squared
        deviations) from one kernel, and the chunks merge exactly (Chan et al. for equal
        counts). Mean, then squared deviations, would read x twice (a training-mode batch
        norm's input: once more than PyTorch's Welford kernel). None where no chunk count from
        ``chunks`` down to half of it divides the rows."""
        flat = _as_rows(x, dims)
        rows, length = flat.shape
        count = next((c for c in range(chunks, chunks // 2, -1) if length % c == 0), 1)
        if count < 2:
            return None
        chunk = length // count
        parts = ir.reshape(flat, (rows, count, chunk))
        pairs = self.kernel(lambda w, o: kernels.rowwise(w, "moments", parts, (2,), o),
                            (rows, count, 2), torch.float32)
        means, m2s = _pair(pairs, 0), _pair(pairs, 1)
        mean = self.reduce("mean", means, (1,), True)
        spread = ir.op("sub", means, mean)
        m2 = self.reduce("sum", ir.op("add", m2s, ir.op(
            "mul", ir.op("mul", spread, spread), ir.const(float(chunk)))), (1,))
        keep = tuple(1 if d in dims else s for d, s in enumerate(x.shape))
        var = ir.op("div", m2, ir.const(float(length)))
        return ir.reshape(mean, keep), ir.reshape(var, keep)

    def scan(self, kind: str, x: ir.Expr, dim: int) -> ir.Expr:
        """A cumulative ``kind`` along ``dim``; a cumsum or cumprod of integers runs exactly in
        int64, as PyTorch's (whose result is int64)."""
        x = self.t(x)
        if not ir.is_float(x.dtype):
            if kind not in ("cumsum", "cumprod"):
                raise Unsupported(f"{kind} of {x.dtype}")
            x = ir.cast(x, torch.int64)
        if len(x.shape) == 0:
            return x
        dim = dim % len(x.shape)
        self.flush_expr(x)
        return self.kernel(lambda w, o, x=x: kernels.scan(w, kind, x, dim, o), x.shape, x.dtype)
