"""Lowerings of matmul, linear, convolution and pooling."""

from __future__ import annotations

import functools
import math
import operator

import torch
import torch.nn as nn
import torch.nn.functional as F

from drtriton.compiler import ir, kernels
from drtriton.compiler.kernels import attention
from drtriton.compiler.kernels.writer import HALF
from drtriton.compiler.lower import Deferred, Lowering, Unsupported
from drtriton.compiler.lower import _tuple as ntuple
from drtriton.compiler.lowerings.reductions import _channel
from drtriton.compiler.lowerings.registry import _f, fn, method, module
from drtriton.compiler.lowerings.views import _diagonal, pad, repeat_each, take

# ------------------------------------------------------------------ matmul and linear

_TILE = 64  # a typical autotuned tile edge: how many output tiles re-read each input tile


def reread_input(L: Lowering, x: ir.Expr, reads_per_element: float) -> ir.Expr:
    """``x`` as a kernel that reads each element ``reads_per_element`` times should see it: a
    computed expression is materialised first when re-evaluating it at every read would cost more
    than ``max_window_recompute`` (``ir.op_cost`` units) per element: e.g. GELU fused into a 3-D
    max pool's 512-element windows. Materialising costs one write and one read per element."""
    if ir.is_cheap(x) or ir.op_cost(x) * reads_per_element <= L.config.max_window_recompute:
        return x
    return L.materialize(x)


TENSOR_CORE_MIN = 32  # M, N and K from which a GPU matmul reads K-major operands


def k_major(L: Lowering, a: ir.Expr, b: ir.Expr) -> tuple[ir.Expr, ir.Expr, tuple[bool, bool]]:
    """Operands of a tensor-core matmul with K contiguous: Hopper's fp32 (TF32) wgmma reads both
    from shared memory K-major, and Triton routes other layouts through a slower path (on an H200
    a 3xTF32 8192 x 768 x 2304 product ran 0.36 ms with B K-major, 0.83 ms N-major). A plain
    buffer read in another order is copied first (one pass over the operand). So is a computed
    operand (a fused prologue: LayerNorm's normalisation, SwiGLU's gate) where the other side is
    long: Triton copies only plain loads into shared memory asynchronously, and on an H200 a
    3xTF32 4096^3 product fed through ``where()`` ran 34 TFLOP/s against 55 from plain loads.

    Under one TF32 product per dot, an fp32 operand's copy rounds it to the nearest TF32
    (``tf32_round``), and a plain one is copied so where the other side is at least
    ``TF32_COPY_MIN``: its dot then takes it as loaded instead of rounding it in registers every
    step. Also returns, per operand, whether it holds TF32 values (``kernels.matmul``)."""
    M, K, N = a.shape[-2], a.shape[-1], b.shape[-1]
    if L.blocks.dot_precision == "ieee" or min(M, N, K) < TENSOR_CORE_MIN:
        return a, b, (False, False)
    tf32 = L.blocks.dot_precision == "tf32"
    round_a, round_b = (tf32 and e.dtype == torch.float32 for e in (a, b))
    copy_a = (isinstance(a, ir.Load) and a.strides[-1] != 1 or _write_first(L, a, N)
              or round_a and N >= TF32_COPY_MIN)
    copy_b = (isinstance(b, ir.Load) and b.strides[-2] != 1 or _write_first(L, b, M)
              or round_b and M >= TF32_COPY_MIN)
    if copy_a:
        a = L.materialize(_tf32_rounded(a) if round_a else a)
    if copy_b:
        bt = ir.transpose(b, -2, -1)
        b = ir.transpose(L.materialize(_tf32_rounded(bt) if round_b else bt), -2, -1)
    return a, b, (round_a and copy_a, round_b and copy_b)


def _tf32_rounded(e: ir.Expr) -> ir.Expr:
    return ir.op("tf32_round", e)


# the other side's length from which a plain fp32 operand of a one-TF32-product matmul is copied
# rounded (k_major): the copy costs 8 bytes per element (2 ns at 4 TB/s), rounding in registers
# cost 25-65% of the product on an H200, about 0.4 * 2N flops per element at ~400 TFLOP/s, so the
# copy pays from N of about 1000
TF32_COPY_MIN = 1024


# the other side's length from which a computed operand is written out first: the pass costs
# 8 bytes per operand element, the slower pipeline ~40% of 2 * N flops per element, even at
# N = 128 (at 4 TB/s and 55 TFLOP/s)
PROLOGUE_MIN = 128


def _write_first(L: Lowering, e: ir.Expr, other_side: int) -> bool:
    """Whether a computed operand is written out before the product: where the product is long
    enough to pay for the pass, or where it joins a pending kernel's epilogue (free)."""
    return not ir.is_cheap(e) and (other_side >= PROLOGUE_MIN or L.joins_pending(e))


def _torch_in(L: Lowering, e: ir.Expr, dtype: torch.dtype) -> str:
    """``e`` as a torch operand of ``dtype`` (hybrid): torch's products take one dtype."""
    view = L.as_torch(e)
    return view if e.dtype == dtype else f"{view}.to({dtype})"


def matmul(L: Lowering, a, b, vendor: bool | None = None) -> ir.Expr:
    """``a @ b``; ``vendor``: whether it calls the vendor library (None: ask
    ``L.vendor_product``; a caller that asked already passes its answer)."""
    a, b = _f(L.t(a)), _f(L.t(b))
    if vendor is None:
        vendor = L.vendor_product(_product_signature("matmul", a, b), _matmul_flops(a, b))
    squeeze_a = len(a.shape) == 1
    squeeze_b = len(b.shape) == 1
    if squeeze_a:
        a = ir.reshape(a, (1, a.shape[0]))
    if squeeze_b:
        b = ir.reshape(b, (b.shape[0], 1))
    if not vendor:  # before broadcasting, so that a batch-broadcast stays a view
        a = reread_input(L, a, max(1.0, b.shape[-1] / _TILE))
        b = reread_input(L, b, max(1.0, a.shape[-2] / _TILE))
        a, b, exact = k_major(L, a, b)
    else:
        exact = (False, False)
    batch = ir.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = ir.broadcast_to(a, batch + a.shape[-2:])
    b = ir.broadcast_to(b, batch + b.shape[-2:])
    M, K, N = a.shape[-2], a.shape[-1], b.shape[-1]
    if b.shape[-2] != K:
        raise Unsupported(f"matmul shapes {a.shape} @ {b.shape}")
    shape = batch + (M, N)
    dtype = ir.promote(a.dtype, b.dtype)  # bf16 @ bf16 is bf16 (fp32 accumulation), as in torch
    if vendor:
        code = f"torch.matmul({_torch_in(L, a, dtype)}, {_torch_in(L, b, dtype)})"
        out = L.torch_call(code, shape, dtype)
    else:
        L.flush_expr(a, b)
        out = L.kernel(lambda w, o, a=a, b=b: kernels.matmul(w, a, b, o, exact), shape, dtype)
    final = shape
    if squeeze_a:
        final = final[:-2] + final[-1:]
    if squeeze_b:
        final = final[:-1]
    return ir.reshape(out, final)


@fn(torch.matmul, operator.matmul, torch.mm, torch.bmm)
@method("matmul", "mm", "bmm", "__matmul__")
def _matmul(L, a, b):
    return matmul(L, a, b)


def scaled_dot_product_attention(L, q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False,
                                 scale=None, enable_gqa=False) -> ir.Expr:
    """``softmax(q @ k^T * scale + mask) @ v``: one flash-attention kernel (online softmax; the
    scores never reach memory; ``kernels.attention``) where the heads fit, else its
    decomposition: two matrix products around a row softmax (vendor products in hybrid).
    ``is_causal`` keeps the top-left triangle, as PyTorch does for unequal lengths; a bool mask
    keeps where True, a float mask is added."""
    if dropout_p:
        raise Unsupported("scaled_dot_product_attention with dropout_p > 0 (random)")
    q, k, v = _f(L.t(q)), _f(L.t(k)), _f(L.t(v))
    if enable_gqa and q.shape[-3] != k.shape[-3]:  # each key and value head serves a group
        k, v = (repeat_each(e, q.shape[-3] // e.shape[-3], -3) for e in (k, v))
    factor = float(scale) if scale is not None else 1.0 / math.sqrt(q.shape[-1])
    if attention.fits(q, k, v):  # hybrid too: the judge lets hybrid call products, not this
        return _flash_attention(L, q, k, v, attn_mask, is_causal, factor)
    scores = ir.op("mul", matmul(L, q, ir.transpose(k, -2, -1)), ir.const(factor))
    if is_causal:  # the lower triangle, the rest -inf
        scores = ir.Op(scores.shape, scores.dtype, "tril", (scores,), (0, float("-inf")))
    if attn_mask is not None:
        mask = L.t(attn_mask)
        if mask.dtype == torch.bool:
            scores = ir.op("where", mask, scores, ir.const(float("-inf")))
        else:
            scores = ir.op("add", scores, _f(mask))
    weights = L.rowfull("softmax", scores, -1)
    if weights.dtype != v.dtype and v.dtype in HALF:
        weights = ir.cast(weights, v.dtype)  # P @ V in the values' dtype, as flash attention does
    return matmul(L, weights, v)


def _flash_attention(L: Lowering, q, k, v, attn_mask, causal: bool, factor: float) -> ir.Expr:
    mask = L.t(attn_mask) if attn_mask is not None else None
    if mask is not None and mask.dtype != torch.bool:
        mask = _f(mask)
    query_blocks = max(1.0, q.shape[-2] / _TILE)  # each key and value is read once per block
    k, v = reread_input(L, k, query_blocks), reread_input(L, v, query_blocks)
    if _tensor_cores(L):  # dot operands as plain loads (see k_major)
        q, k, v = (e if ir.is_cheap(e) else L.materialize(e) for e in (q, k, v))
        if v.dtype == torch.float32 and v.strides[-2] != 1:
            # P @ V takes V as its B operand: TF32 wgmma reads it K-major (along the keys), so
            # V is copied transposed once, against the Lq / BM times the kernel reads it
            v = ir.transpose(L.materialize(ir.transpose(v, -2, -1)), -2, -1)
    L.flush_expr(*(e for e in (q, k, v, mask) if e is not None))
    shape = (*q.shape[:-1], v.shape[-1])
    dtype = ir.promote(q.dtype, v.dtype)
    return L.kernel(lambda w, o: attention.attention(w, q, k, v, mask, causal, factor, o),
                    shape, dtype)


@fn(F.scaled_dot_product_attention)
def _sdpa(L, q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
          enable_gqa=False):
    return scaled_dot_product_attention(L, q, k, v, attn_mask, dropout_p, is_causal, scale,
                                        enable_gqa)


def linear(L, x, weight, bias):
    x, weight = _f(L.t(x)), _f(L.t(weight))
    weight_t = ir.transpose(weight, 0, 1) if len(weight.shape) == 2 else weight
    vendor = L.vendor_product(_product_signature("matmul", x, weight_t),
                              _matmul_flops(x, weight_t))
    if vendor and bias is not None:
        bias = L.t(bias)
        if _half_operands(x, weight, bias):
            return _vendor_linear(L, x, weight, bias)
    y = matmul(L, x, weight_t, vendor)
    if bias is None:
        return y
    y = ir.op("add", y, bias)
    # on tensor cores the bias joins the product's epilogue now (no extra pass: the product is
    # written anyway), so that a consumer reading the result through views (attention's heads
    # split from one QKV projection) or as a product's operand reads a plain buffer
    return L.materialize(y) if not vendor and L.blocks.dot_precision != "ieee" else y


def _product_signature(kind: str, a: ir.Expr, b: ir.Expr, detail: str = "") -> str:
    """What makes two products the same problem for a library: kind, shapes, layouts (``r``:
    rows contiguous, ``t``: transposed, ``c``: computed), dtypes."""
    layout = "".join(_layout(e) for e in (a, b))
    return (f"{kind} {tuple(a.shape)}x{tuple(b.shape)} {layout} {a.dtype}x{b.dtype}{detail}"
            .replace("torch.", ""))


def _matmul_flops(a: ir.Expr, b: ir.Expr) -> float:
    a_shape = a.shape if len(a.shape) > 1 else (1, *a.shape)
    b_shape = b.shape if len(b.shape) > 1 else (*b.shape, 1)
    batch = ir.numel(ir.broadcast_shapes(a_shape[:-2], b_shape[:-2]))
    return 2.0 * batch * a_shape[-2] * a_shape[-1] * b_shape[-1]


def _layout(e: ir.Expr) -> str:
    if not isinstance(e, ir.Load):
        return "c"
    return "r" if len(e.shape) < 2 or e.strides[-1] == 1 else "t"


def _half_operands(x: ir.Expr, weight: ir.Expr, bias: ir.Expr) -> bool:
    return (x.dtype in HALF and x.dtype == weight.dtype == bias.dtype
            and len(weight.shape) == 2 and len(bias.shape) == 1)


def _vendor_linear(L: Lowering, x: ir.Expr, weight: ir.Expr, bias: ir.Expr) -> ir.Expr:
    """Hybrid, 16-bit: one vendor call with the bias in its epilogue, rounded once as torch's
    own is. Adding the bias to the rounded product differs from eager by an ulp of bf16, which a
    LayerNorm after it can carry past a 1e-2 tolerance, though no less accurate."""
    x, weight, bias = L.t(x), L.t(weight), L.t(bias)
    code = (f"torch.nn.functional.linear({_torch_in(L, x, x.dtype)}, "
            f"{_torch_in(L, weight, x.dtype)}, {_torch_in(L, bias, x.dtype)})")
    return L.torch_call(code, x.shape[:-1] + (weight.shape[0],), x.dtype)


def _tensor_cores(L: Lowering) -> bool:
    return L.config.mode == "strict" and L.blocks.dot_precision != "ieee"


@fn(F.linear)
def _linear(L, x, weight, bias=None):
    return linear(L, x, weight, bias)


def _scaled_sum(y: ir.Expr, bias: ir.Expr, beta, alpha) -> ir.Expr:
    """``beta * bias + alpha * y``; with ``beta`` 0 the bias is ignored, NaN and Inf in it too
    (PyTorch's rule)."""
    if alpha != 1:
        y = ir.op("mul", y, ir.const(float(alpha)))
    if beta == 0:
        return ir.broadcast_to(y, ir.broadcast_shapes(y.shape, bias.shape))
    if beta != 1:
        bias = ir.op("mul", bias, ir.const(float(beta)))
    return ir.op("add", y, bias)


@fn(torch.addmm)
@method("addmm")
def _addmm(L, bias, a, b, *, beta=1, alpha=1):
    return _scaled_sum(matmul(L, a, b), L.t(bias), beta, alpha)


fn(torch.baddbmm)(_addmm)
method("baddbmm")(_addmm)
fn(torch.addmv)(_addmm)  # matmul of a matrix and a vector is torch.mv's
method("addmv")(_addmm)


@fn(torch.addr)
@method("addr")
def _addr(L, bias, v1, v2, *, beta=1, alpha=1):
    """``beta * bias + alpha * outer(v1, v2)``."""
    v1, v2 = L.t(v1), L.t(v2)
    if len(v1.shape) != 1 or len(v2.shape) != 1:
        raise Unsupported(f"addr of shapes {v1.shape} and {v2.shape} (vectors only)")
    outer = ir.op("mul", ir.reshape(v1, (v1.shape[0], 1)), ir.reshape(v2, (1, v2.shape[0])))
    return _scaled_sum(outer, L.t(bias), beta, alpha)


@fn(torch.addbmm)
@method("addbmm")
def _addbmm(L, bias, a, b, *, beta=1, alpha=1):
    """``beta * bias + alpha * sum_i a[i] @ b[i]`` as one product over the batch and K
    together: ``(n, batch * k) @ (batch * k, m)``."""
    a, b = L.t(a), L.t(b)
    if len(a.shape) != 3 or len(b.shape) != 3:
        raise Unsupported("addbmm of operands that are not 3-D")
    batch, n, k = a.shape
    flat_a = ir.reshape(ir.permute(a, (1, 0, 2)), (n, batch * k))
    flat_b = ir.reshape(b, (batch * k, b.shape[2]))
    return _addmm(L, bias, flat_a, flat_b, beta=beta, alpha=alpha)


# ------------------------------------------------------------------ convolution and pooling


def _conv_padding(padding, nsp, ksz, dilation):
    if padding == "valid":
        return (0,) * nsp
    if padding == "same":
        out = []
        for k, d in zip(ksz, dilation, strict=True):
            out.append(d * (k - 1) // 2)  # an odd total's extra one: ``_same_extra``
        return tuple(out)
    return ntuple(padding, nsp)


def _same_extra(L: Lowering, x: ir.Expr, ksz, dilation) -> ir.Expr:
    """``x`` padded by one zero after its end along each spatial dim whose 'same' padding is odd
    in total (an even kernel): PyTorch puts the extra one on the right."""
    extra = [d * (k - 1) % 2 for k, d in zip(ksz, dilation, strict=True)]
    if not any(extra):
        return x
    return pad(L, x, [w for e in reversed(extra) for w in (0, e)])


def conv(L: Lowering, nsp: int, x, weight, bias, stride, padding, dilation, groups,
         transposed=False, output_padding=0) -> ir.Expr:
    x, weight = _f(L.t(x)), _f(L.t(weight))
    unbatched = len(x.shape) == nsp + 1
    if unbatched:
        x = ir.reshape(x, (1, *x.shape))
    ksz = weight.shape[2:]
    stride, dilation = ntuple(stride, nsp), ntuple(dilation, nsp)
    if padding == "same" and not transposed:
        x = _same_extra(L, x, ksz, dilation)
    padding = _conv_padding(padding, nsp, ksz, dilation)
    ins = x.shape[2:]
    if transposed:
        opad = ntuple(output_padding, nsp)
        oc = weight.shape[1] * groups
        outs = tuple((i - 1) * s - 2 * p + d * (k - 1) + op + 1 for i, s, p, d, k, op in
                     zip(ins, stride, padding, dilation, ksz, opad, strict=True))
    else:
        oc = weight.shape[0]
        outs = tuple((i + 2 * p - d * (k - 1) - 1) // s + 1 for i, s, p, d, k in
                     zip(ins, stride, padding, dilation, ksz, strict=True))
    shape = (x.shape[0], oc, *outs)
    dtype = ir.promote(x.dtype, weight.dtype)
    name = f"conv_transpose{nsp}d" if transposed else f"conv{nsp}d"
    detail = f" stride {stride} padding {padding} dilation {dilation} groups {groups}"
    # each output element sums in_channels / groups x taps products; transposed, each input
    # element feeds out_channels / groups x taps outputs (the weight's shape after its first dim)
    flops = 2.0 * ir.numel(weight.shape[1:]) * ir.numel(x.shape if transposed else shape)
    if L.vendor_product(_product_signature(name, x, weight, detail), flops):
        extra = f", output_padding={ntuple(output_padding, nsp)}" if transposed else ""
        code = (f"torch.nn.functional.{name}({_torch_in(L, x, dtype)}, "
                f"{_torch_in(L, weight, dtype)}, None, stride={stride}, padding={padding}{extra}, "
                f"groups={groups}, dilation={dilation}).contiguous()")  # channels-last in, out
        out = L.torch_call(code, shape, dtype)
    else:
        spec = kernels.ConvSpec(transposed, stride, padding, dilation, int(groups), shape)
        # each input element feeds every tap of the windows over it, once per output-channel tile
        overlap = ir.numel(ksz) * ir.numel(outs) / ir.numel(ins)
        if transposed:
            overlap /= ir.numel(stride)  # the phased kernel skips the taps that miss the input
        if not transposed and x.shape[1] == int(groups):  # one input channel per group
            x = reread_input(L, x, max(1.0, overlap))
            make = kernels.conv_depthwise
        elif _merged_taps(L, x, weight, spec):
            nd, cin = len(x.shape), x.shape[1]
            exact, copy = _tf32_copies(L, x, weight)
            x = L.materialize(copy(ir.permute(x, (0, *range(2, nd), 1))))
            x = ir.reshape(x, (*x.shape[:-2], x.shape[-2] * cin))
            weight = L.materialize(copy(ir.permute(weight, (*range(2, nd - 1), 0, nd - 1, 1))))
            weight = ir.reshape(weight, (*weight.shape[:-2], weight.shape[-2] * cin))
            make = functools.partial(kernels.conv_merged_taps, cin=cin, tf32_exact=exact)
        elif _channels_last(L, x, weight, spec):
            nd = len(x.shape)
            exact, copy = _tf32_copies(L, x, weight)
            x = L.materialize(copy(ir.permute(x, (0, *range(2, nd), 1))))
            weight = L.materialize(copy(ir.permute(weight, (*range(2, nd), 0, 1))))
            make = functools.partial(kernels.conv_channels_last, tf32_exact=exact)
        else:
            x = reread_input(L, x, max(1.0, overlap) * -(-(oc // int(groups)) // _TILE))
            make = kernels.conv
        L.flush_expr(x, weight)
        out = L.kernel(lambda w, o, x=x, wt=weight: make(w, x, wt, spec, o), shape, dtype)
    if bias is not None:
        out = ir.op("add", out, _channel(L.t(bias), len(shape)))
    if unbatched:
        out = ir.reshape(out, shape[1:])
    return out


CHANNELS_LAST_MIN = 16  # input channels per group from which a GPU convolution runs
# channels-last on tensor cores (tl.dot's smallest tile side)
CHANNELS_LAST_MIN_OUT = 8  # and output channels per group: 8 to 15 pad a 16-wide tile, at most
# 2x, where the no-dot form multiplies on FMA units (ESPCN's last 32 -> 9 convolution)


def _channels_last(L: Lowering, x: ir.Expr, weight: ir.Expr, spec: kernels.ConvSpec) -> bool:
    """Whether a convolution runs as :func:`kernels.conv_channels_last`: on GPUs (tensor-core
    dots), not transposed, with enough channels per group for dot tiles. Its input and weight
    are copied into channels-last and tap-major order first (one pass over each)."""
    cg = x.shape[1] // spec.groups
    ocg = spec.out_shape[1] // spec.groups
    return (L.blocks.dot_precision != "ieee" and not spec.transposed
            and cg >= CHANNELS_LAST_MIN and ocg >= CHANNELS_LAST_MIN_OUT)


def _tf32_copies(L: Lowering, x: ir.Expr, weight: ir.Expr):
    """(whether, how) a convolution's channels-last copies round fp32 to the nearest TF32: under
    one TF32 product per dot, so the copy the kernel needs anyway does the rounding the dot
    would otherwise do in registers every step (``kernels.writer.fp32_dot``)."""
    exact = (L.blocks.dot_precision == "tf32"
             and x.dtype == torch.float32 and weight.dtype == torch.float32)
    return exact, _tf32_rounded if exact else (lambda e: e)


def _merged_taps(L: Lowering, x: ir.Expr, weight: ir.Expr, spec: kernels.ConvSpec) -> bool:
    """Whether a convolution runs as :func:`kernels.conv_merged_taps`: on GPUs, too few input
    channels for channels-last tiles (an image stem), but a window row of at least 16 inputs
    (kw * C) to reduce over per tap; one group, no dilation along the last spatial dim; and no
    more padded reduction than the im2col form's (``conv``), whose one reduction over C * taps
    pads once: a tensor-core dot's work grows with its padded K, and on an H200 the ResNet stem
    (a row of 21 padded to 32, 7 times) and ViT's 16x16 patch embedding (48 padded to 64, 16
    times) ran 9% and 13% slower this way than as im2col."""
    cin, kw = x.shape[1], weight.shape[-1]
    rows = ir.numel(tuple(weight.shape[2:-1]))
    merged_k = rows * _padded(kw * cin)
    return (L.blocks.dot_precision != "ieee" and not spec.transposed and spec.groups == 1
            and cin < CHANNELS_LAST_MIN and kw * cin >= CHANNELS_LAST_MIN
            and spec.dilation[-1] == 1 and spec.out_shape[1] >= CHANNELS_LAST_MIN
            and merged_k <= _padded(rows * kw * cin))


def _padded(k: int, step: int = 32) -> int:
    """``k`` rounded up to the reduction step of the convolution tiles (BK, at least 32)."""
    return -(-k // step) * step


def _conv_fn(nsp, transposed):
    if transposed:
        def h(L, x, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
            return conv(
                L, nsp, x, weight, bias, stride, padding, dilation, groups, True, output_padding
            )
    else:
        def h(L, x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
            return conv(L, nsp, x, weight, bias, stride, padding, dilation, groups)
    return h


for _n, (_c, _ct) in enumerate([(F.conv1d, F.conv_transpose1d), (F.conv2d, F.conv_transpose2d),
                                 (F.conv3d, F.conv_transpose3d)], start=1):
    fn(_c)(_conv_fn(_n, False))
    fn(_ct)(_conv_fn(_n, True))


def pool(L: Lowering, kind: str, nsp: int, x, kernel_size, stride=None, padding=0, dilation=1,
         ceil_mode=False, count_include_pad=True, divisor_override=None, return_indices=False):
    x = _f(L.t(x))
    ksz = ntuple(kernel_size, nsp)
    stride = ksz if stride is None or stride == [] else ntuple(stride, nsp)
    padding, dilation = ntuple(padding, nsp), ntuple(dilation, nsp)
    ins = x.shape[-nsp:]
    outs = tuple(_pooled_size(i, p, d, k, s, ceil_mode) for i, p, d, k, s in
                 zip(ins, padding, dilation, ksz, stride, strict=True))
    shape = x.shape[:-nsp] + outs
    divide = _avg_divisor(ins, outs, ksz, stride, padding, count_include_pad, divisor_override)
    x = reread_input(L, x, ir.numel(shape) * ir.numel(ksz) / ir.numel(x.shape))
    L.flush_expr(x)
    values = L.kernel(
        lambda w, o, x=x: kernels.pool(w, kind, x, ksz, stride, padding, dilation, shape, o,
                                       divide),
        shape,
        torch.float32,
    )
    if not return_indices:
        return values
    indices = L.kernel(  # a second pass over the windows: where each maximum is
        lambda w, o, x=x: kernels.pool(w, "argmax", x, ksz, stride, padding, dilation, shape,
                                       o), shape, torch.int64)
    return values, indices


def _avg_divisor(ins, outs, ksz, stride, padding, count_include_pad: bool,
                 divisor_override) -> int | str | None:
    """What average pooling divides a window's sum by (``kernels.pool``'s ``divide``): the
    window size unless the last window hangs over the padded input (``ceil_mode``) or padding
    is not counted."""
    if divisor_override:
        return int(divisor_override)
    overhang = any((o - 1) * s - p + k > n + p
                   for n, o, k, s, p in zip(ins, outs, ksz, stride, padding, strict=True))
    if not count_include_pad and (overhang or any(padding)):
        return "valid"
    return "padded" if overhang else None


def _pooled_size(n: int, p: int, d: int, k: int, s: int, ceil_mode: bool) -> int:
    """PyTorch's pooling output size; with ``ceil_mode`` the last window may hang over the end
    (max pooling ignores what it covers outside the input) but must start inside the input or
    its left padding."""
    span = n + 2 * p - d * (k - 1) - 1
    if not ceil_mode:
        return span // s + 1
    out = -(-span // s) + 1
    return out - 1 if (out - 1) * s >= n + p else out


for _n, (_a, _m) in enumerate([(F.avg_pool1d, F.max_pool1d), (F.avg_pool2d, F.max_pool2d),
                                (F.avg_pool3d, F.max_pool3d)], start=1):
    def _ap(L, x, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
            divisor_override=None, _n=_n):  # F.avg_pool*d's order: no dilation
        return pool(L, "avg", _n, x, kernel_size, stride, padding, 1, ceil_mode,
                    count_include_pad, divisor_override)

    fn(_a)(_ap)

    def _mp(L, x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
            return_indices=False, _n=_n):
        return pool(L, "max", _n, x, kernel_size, stride, padding, dilation, ceil_mode,
                    return_indices=return_indices)

    fn(_m)(_mp)
    if hasattr(F, f"max_pool{_n}d_with_indices"):  # (values, indices) whatever its flag says
        fn(getattr(F, f"max_pool{_n}d_with_indices"))(
            lambda L, x, *a, _mp=_mp, return_indices=True, **k: _mp(L, x, *a, **k,
                                                                   return_indices=True))


def adaptive(L: Lowering, kind: str, nsp: int, x, output_size) -> ir.Expr:
    """Adaptive average or max pooling: output i of a dim of size n to o pools the window
    ``[floor(i * n / o), ceil((i + 1) * n / o))``, as PyTorch does. Windows are products of one
    interval per dim, so non-dividing sizes pool one dim after another (a mean of means over
    intervals is the mean over their product; likewise max)."""
    x = _f(L.t(x))
    if len(x.shape) not in (nsp + 1, nsp + 2):
        raise Unsupported(f"adaptive pooling of a rank-{len(x.shape)} input over {nsp} dims")
    ins = x.shape[-nsp:]
    if not isinstance(output_size, list | tuple):
        output_size = (output_size,) * nsp
    if len(output_size) != nsp:
        raise Unsupported(f"adaptive pooling to {len(output_size)} sizes over {nsp} dims")
    outs = tuple(i if o is None else int(o) for i, o in zip(ins, output_size, strict=True))
    if min(outs) < 1:
        raise Unsupported(f"adaptive pooling to an empty output {outs}")
    first = len(x.shape) - nsp
    if all(o == 1 for o in outs):
        return L.reduce("mean" if kind == "avg" else "amax", x, tuple(range(first, len(x.shape))),
                        True)
    if not any(i % o for i, o in zip(ins, outs, strict=True)):
        k = tuple(i // o for i, o in zip(ins, outs, strict=True))
        return pool(L, kind, nsp, x, k, k)
    for j, o in enumerate(outs):
        x = _adaptive_dim(L, kind, x, first + j, o)
    return x


def adaptive_avg(L: Lowering, nsp: int, x, output_size) -> ir.Expr:
    return adaptive(L, "avg", nsp, x, output_size)


def _adaptive_dim(L: Lowering, kind: str, x: ir.Expr, d: int, o: int) -> ir.Expr:
    """Adaptive pooling of dim ``d`` alone to size ``o``."""
    n = x.shape[d]
    reduce = "mean" if kind == "avg" else "amax"
    if n == o:
        return x
    if n % o == 0:  # equal windows of n // o: a reshape, reduced over the window dim
        return L.reduce(reduce, ir.reshape(x, x.shape[:d] + (o, n // o) + x.shape[d + 1:]), d + 1)
    starts = [i * n // o for i in range(o)]
    ends = [-(-(i + 1) * n // o) for i in range(o)]
    k = max(e - s for s, e in zip(starts, ends, strict=True))
    # tap t of window i reads s + t; past the window's end max pooling re-reads its last element
    # (the max is unchanged) and average pooling reads -1, which ``take`` returns as 0
    past = {"max": lambda e: e - 1, "avg": lambda e: -1}[kind]
    taps = [s + t if s + t < e else past(e) for s, e in zip(starts, ends, strict=True)
            for t in range(k)]
    rank = len(x.shape)
    wide = x.shape[:d] + (o * k,) + x.shape[d + 1:]
    index = _constant(L, f"made_taps_{kind}_{n}_{o}", taps, torch.int64)
    index = ir.broadcast_to(ir.reshape(index, tuple(o * k if q == d else 1 for q in range(rank))),
                            wide)
    windows = ir.reshape(take(L, x, d, index), x.shape[:d] + (o, k) + x.shape[d + 1:])
    if kind == "max":
        return L.reduce("amax", windows, d + 1)
    sizes = [float(e - s) for s, e in zip(starts, ends, strict=True)]
    sizes = _constant(L, f"made_sizes_{n}_{o}_{str(x.dtype)[6:]}", sizes, x.dtype)
    sizes = ir.reshape(sizes, tuple(o if q == d else 1 for q in range(rank)))
    return ir.op("div", L.reduce("sum", windows, d + 1), sizes)


def _constant(L: Lowering, name: str, values: list, dtype: torch.dtype) -> ir.Expr:
    """A 1-D constant the compiler computed (a buffer made once, an arange or a scalar); one
    buffer per ``name`` (the name determines the values)."""
    if name in L.params:  # made already: e.g. the other dim of a square pooling
        return L.param(name)
    return L._traced_constant(name, torch.tensor(values, dtype=dtype))


for _n, _f_ in enumerate([F.adaptive_avg_pool1d, F.adaptive_avg_pool2d, F.adaptive_avg_pool3d], 1):
    fn(_f_)(lambda L, x, output_size, _n=_n: adaptive(L, "avg", _n, x, output_size))


def _adaptive_max(nsp: int):
    def h(L, x, output_size, return_indices=False):
        if return_indices:
            raise Unsupported("adaptive max pooling with return_indices=True")
        return adaptive(L, "max", nsp, x, output_size)

    return h


for _n, _f_ in enumerate([F.adaptive_max_pool1d, F.adaptive_max_pool2d, F.adaptive_max_pool3d], 1):
    fn(_f_)(_adaptive_max(_n))


# ------------------------------------------------------------------ einsum


@fn(torch.bilinear, F.bilinear)
def _bilinear(L, x1, x2, weight, bias=None):
    """``x1 A_o x2`` for every output ``o``: an einsum over the two inputs' last dims."""
    lead = "abcdefg"[: len(L.t(x1).shape) - 1]
    y = _einsum(L, f"{lead}i,oij,{lead}j->{lead}o", x1, weight, x2)
    return y if bias is None else ir.op("add", y, L.t(bias))


@fn(torch.cdist)
def _cdist(L, x1, x2, p=2.0, compute_mode=None):
    """Pairwise p-norm distances from the differences themselves (PyTorch takes a product for
    p = 2 on large inputs; the differences are at least as accurate)."""
    a, b = _f(L.t(x1)), _f(L.t(x2))
    if len(a.shape) < 2 or a.shape[-1] != b.shape[-1]:
        raise Unsupported("cdist of inputs that are not (..., P, M) and (..., R, M)")
    diff = ir.op("abs", ir.op("sub", ir.reshape(a, a.shape[:-1] + (1, a.shape[-1])),
                              ir.reshape(b, b.shape[:-2] + (1,) + b.shape[-2:])))
    return _p_norm(L, diff, p)


def _p_norm(L, diff: ir.Expr, p: float) -> ir.Expr:
    """The p-norm over the last dim of non-negative ``diff`` (p > 0 or inf)."""
    if p == float("inf"):
        return L.reduce("amax", diff, -1, False)
    if p <= 0:
        raise Unsupported(f"a distance with p = {p}")
    powered = diff if p == 1 else ir.op("mul", diff, diff) if p == 2 else ir.op(
        "exp", ir.op("mul", ir.op("log", diff), ir.const(float(p))))
    total = L.reduce("sum", powered, -1, False)
    if p == 1:
        return total
    if p == 2:
        return ir.op("sqrt", total)
    return ir.op("exp", ir.op("div", ir.op("log", total), ir.const(float(p))))


@fn(torch.pdist, F.pdist)
def _pdist(L, input, p=2.0):
    """The distances of every pair of rows i < j, in row-major order: pair k's row i from the
    closed form ``floor((2n - 1 - sqrt((2n - 1)^2 - 8k)) / 2)`` in float64 (exact for these
    sizes), then corrected by one where rounding put k before row i's first pair."""
    x = _f(L.t(input))
    if len(x.shape) != 2:
        raise Unsupported("pdist of an input that is not (N, M)")
    n, m = x.shape
    pairs = n * (n - 1) // 2
    if pairs == 0:
        raise Unsupported("pdist of fewer than two rows")
    k = ir.arange(pairs, 0, 1, torch.float64)
    b = float(2 * n - 1)
    root = ir.op("sqrt", ir.op("sub", ir.const(b * b), ir.op("mul", k, ir.const(8.0))))
    i = ir.op("floor", ir.op("mul", ir.op("sub", ir.const(b), root), ir.const(0.5)))

    def first(row: ir.Expr) -> ir.Expr:  # the pair index where row's pairs start
        return ir.op("mul", ir.op("mul", row, ir.op("sub", ir.const(b), row)), ir.const(0.5))

    i = ir.op("where", ir.op("lt", k, first(i), dtype=torch.bool), ir.op(
        "sub", i, ir.const(1.0)), i, dtype=torch.float64)
    i = ir.op("where", ir.op("ge", k, first(ir.op("add", i, ir.const(1.0))), dtype=torch.bool),
              ir.op("add", i, ir.const(1.0)), i, dtype=torch.float64)
    j = ir.op("add", ir.op("add", ir.op("sub", k, first(i)), i), ir.const(1.0))

    def rows(at: ir.Expr) -> ir.Expr:
        index = ir.broadcast_to(ir.reshape(ir.cast(at, torch.int64), (pairs, 1)), (pairs, m))
        return take(L, x, 0, index)

    return _p_norm(L, ir.op("abs", ir.op("sub", rows(i), rows(j))), float(p))


@fn(torch.einsum)
def _einsum(L, equation, *operands):
    """Any number of operands; an ellipsis stands for the same broadcast dims in every operand
    (aligned on the right) and leads an implicit output. An implicit output (no ``->``) is, as
    in NumPy and PyTorch, the indices that appear once, in alphabetical order. An index repeated
    in one operand takes its diagonal. Indices of one operand alone are summed first, then the
    operands are contracted pairwise left to right (each pair keeps the indices the output or a
    later operand needs): a batched matmul where the pair shares an index it no longer needs,
    else a broadcast product (lazy, fused into its consumer)."""
    if len(operands) == 1 and isinstance(operands[0], list | tuple):
        operands = tuple(operands[0])
    if not operands:
        raise Unsupported(f"einsum {equation!r} without operands")
    xs = [_f(L.t(x)) for x in operands]
    eq = _explicit_einsum(equation, [len(x.shape) for x in xs])
    ins, out = eq.split("->")
    terms = ins.split(",")
    if len(terms) != len(xs) or any(len(t) != len(x.shape) for t, x in zip(terms, xs, strict=True)):
        raise Unsupported(f"einsum {equation!r} (indices do not match the operands' ranks)")
    if len(set(out)) != len(out) or not set(out) <= set(ins) - {","}:
        raise Unsupported(f"einsum {equation!r} (bad output indices)")
    for i, (x, t) in enumerate(zip(xs, terms, strict=True)):
        xs[i], terms[i] = _einsum_diagonals(L, x, t)
    others = [[out, *(u for j, u in enumerate(terms) if j != i)] for i in range(len(terms))]
    xs = [_sum_unused(L, x, t, o) for x, t, o in zip(xs, terms, others, strict=True)]
    terms = [_kept(t, o) for t, o in zip(terms, others, strict=True)]
    x, t = xs[0], terms[0]
    for i in range(1, len(xs)):
        later = [out, *terms[i + 1:]]
        both = t + "".join(c for c in terms[i] if c not in t)
        keep = [c for c in out if c in both] + [c for c in both if c not in out
                                                and any(c in u for u in later)]
        x, t = _einsum_pair(L, [x, xs[i]], [t, terms[i]], "".join(keep)), "".join(keep)
    return ir.permute(x, tuple(t.index(c) for c in out))


def _explicit_einsum(equation: str, ranks: list[int]) -> str:
    """``equation`` with its output written out and each ellipsis replaced by letters the
    equation does not use, one per broadcast dim, right-aligned across operands."""
    eq = equation.replace(" ", "")
    ins, arrow, out = eq.partition("->")
    terms = ins.split(",")
    if any(t.replace("...", "").count(".") for t in terms + [out]):
        raise Unsupported(f"einsum {equation!r} (a '.' outside an ellipsis)")
    if len(terms) != len(ranks):
        raise Unsupported(f"einsum {equation!r} names {len(terms)} operands, got {len(ranks)}")
    widths = [rank - (len(t) - 3) if "..." in t else 0
              for t, rank in zip(terms, ranks, strict=True)]
    if min(widths, default=0) < 0:
        raise Unsupported(f"einsum {equation!r} (more indices than an operand has dims)")
    free = [c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if c not in eq]
    dots = "".join(free[:max(widths, default=0)])
    terms = [t.replace("...", dots[len(dots) - w:]) for t, w in zip(terms, widths, strict=True)]
    if arrow:
        out = out.replace("...", dots)
    else:
        letters = "".join(terms)
        out = dots + "".join(sorted(c for c in set(letters) - set(dots)
                                    if letters.count(c) == 1))
    return ",".join(terms) + "->" + out


def _einsum_diagonals(L, x: ir.Expr, term: str) -> tuple[ir.Expr, str]:
    """An operand whose term repeats an index, as its diagonal over each repeated pair (the
    index moves last); other operands as they are."""
    while len(set(term)) != len(term):
        c = next(c for c in term if term.count(c) > 1)
        i, j = term.index(c), term.index(c, term.index(c) + 1)
        x = _diagonal(L, x, 0, i, j)
        term = "".join(u for k, u in enumerate(term) if k not in (i, j)) + c
    return x, term


def _kept(term: str, others: list[str]) -> str:
    return "".join(c for c in term if any(c in o for o in others))


def _sum_unused(L, x: ir.Expr, term: str, others: list[str]) -> ir.Expr:
    dims = tuple(i for i, c in enumerate(term) if not any(c in o for o in others))
    return L.reduce("sum", x, dims, False) if dims else x


def _einsum_pair(L, xs: list[ir.Expr], terms: list[str], out: str) -> ir.Expr:
    """Two operands whose every index is in ``out`` or in both (then summed)."""
    (a, b), (ta, tb) = xs, terms
    batch = [c for c in out if c in ta and c in tb]
    left = [c for c in out if c in ta and c not in tb]
    right = [c for c in out if c in tb and c not in ta]
    contracted = [c for c in ta if c in tb and c not in out]
    size: dict[str, int] = {}  # an index of size 1 in one operand broadcasts, as in PyTorch
    for t, x in zip(terms, xs, strict=True):
        for c, n in zip(t, x.shape, strict=True):
            size[c] = max(size.get(c, 1), n)
    if not contracted:  # a broadcast product: each operand viewed in out's order
        def aligned(x, t):
            own = dict(zip(t, x.shape, strict=True))
            x = ir.permute(x, tuple(t.index(c) for c in out if c in t))
            return ir.reshape(x, tuple(own.get(c, 1) for c in out))

        return ir.op("mul", aligned(a, ta), aligned(b, tb))

    def grouped(x, t, groups):
        order = [c for g in groups for c in g]
        x = ir.broadcast_to(ir.permute(x, tuple(t.index(c) for c in order)),
                            tuple(size[c] for c in order))
        return ir.reshape(x, tuple(math.prod(size[c] for c in g) for g in groups))

    a3 = grouped(a, ta, [batch, left, contracted])
    b3 = grouped(b, tb, [batch, contracted, right])
    y = matmul(L, a3, b3)  # (batch, left, right)
    y = ir.reshape(y, tuple(size[c] for c in batch + left + right))
    order = batch + left + right
    return ir.permute(y, tuple(order.index(c) for c in out))


# ------------------------------------------------------------------ multi-head attention


class AttentionResult(tuple):
    """(output, weights) of multi-head attention: a tuple subclass, so that taking the output
    does not count as a use of the weights (``Deferred``, lowered only when used)."""


def _additive(mask: ir.Expr) -> ir.Expr:
    """PyTorch's canonical attention mask: a bool one is -inf where True (not attended), 0
    elsewhere; a float one is added as it is."""
    if mask.dtype == torch.bool:
        return ir.op("where", mask, ir.const(float("-inf")), ir.const(0.0), dtype=torch.float32)
    if not ir.is_float(mask.dtype):
        raise Unsupported(f"attention mask of {mask.dtype} (bool or float masks only)")
    return mask


@fn(F.multi_head_attention_forward)
def _mha_forward(L, query, key, value, embed_dim_to_check, num_heads, in_proj_weight,
                 in_proj_bias, bias_k, bias_v, add_zero_attn, dropout_p, out_proj_weight,
                 out_proj_bias, training=True, key_padding_mask=None, need_weights=True,
                 attn_mask=None, use_separate_proj_weight=False, q_proj_weight=None,
                 k_proj_weight=None, v_proj_weight=None, static_k=None, static_v=None,
                 average_attn_weights=True, is_causal=False):
    """``nn.MultiheadAttention``'s functional core (sequence-first (L, N, E) inputs, or (L, E)
    unbatched) as its decomposition: the packed or separate input projections, per-head scaled
    dot-product attention, the output projection. ``attn_mask`` ((L, S) or (N * heads, L, S))
    and ``key_padding_mask`` ((N, S)) are bool (True: not attended) or float (added), summed as
    PyTorch does. The attention weights (``need_weights=True``) are lowered only if the forward
    uses them (``Deferred``): then as their own softmax of the scores, averaged over the heads
    unless ``average_attn_weights`` is False."""
    if bias_k is not None or bias_v is not None or add_zero_attn or static_k is not None \
            or static_v is not None:
        raise Unsupported("multi-head attention with bias_k/v, zero attention or static keys")
    if dropout_p and training:
        raise Unsupported("multi-head attention dropout in training mode (random)")
    q, k, v = (_f(L.t(t)) for t in (query, key, value))
    batched = len(q.shape) == 3
    if len(q.shape) not in (2, 3) or len(k.shape) != len(q.shape):
        raise Unsupported(f"multi-head attention of a rank-{len(q.shape)} query")
    kpm = None if key_padding_mask is None else L.t(key_padding_mask)
    if not batched:  # one sequence: a batch of 1
        q, k, v = (ir.reshape(t, (t.shape[0], 1, t.shape[1])) for t in (q, k, v))
        kpm = None if kpm is None else ir.reshape(kpm, (1, *kpm.shape))
    E, H = q.shape[2], num_heads
    if use_separate_proj_weight:
        weights = [L.t(w) for w in (q_proj_weight, k_proj_weight, v_proj_weight)]
    else:
        w = L.t(in_proj_weight)
        weights = [_rows_of(w, i * E, E) for i in range(3)]
    biases = [None] * 3 if in_proj_bias is None else [
        _rows_of(L.t(in_proj_bias), i * E, E) for i in range(3)]
    heads = [_heads(linear(L, t, wt, b), H) for t, wt, b in zip((q, k, v), weights, biases,
                                                                   strict=True)]
    Lq, N, S = q.shape[0], q.shape[1], k.shape[0]
    mask = None if attn_mask is None else _additive(L.t(attn_mask))
    if mask is not None and len(mask.shape) == 3:  # (N * heads, L, S)
        mask = ir.reshape(mask, (N, H, *mask.shape[1:]))
    if kpm is not None:
        if kpm.shape != (N, S):
            raise Unsupported(f"key_padding_mask of shape {kpm.shape} for {N} sequences of {S}")
        kpm = ir.reshape(_additive(kpm), (N, 1, 1, S))
        mask = kpm if mask is None else ir.op("add", mask, kpm)
    attn = scaled_dot_product_attention(L, *heads, mask, 0.0, is_causal and mask is None)
    merged = ir.reshape(ir.permute(ir.reshape(attn, (N, H, Lq, E // H)), (2, 0, 1, 3)),
                        (Lq, N, E))
    out = linear(L, merged, L.t(out_proj_weight),
                 None if out_proj_bias is None else L.t(out_proj_bias))
    if not batched:
        out = ir.reshape(out, (Lq, E))
    weights_out = None
    if need_weights:
        def weights():
            return _attention_weights(L, heads[0], heads[1], mask, average_attn_weights,
                                      batched)
        weights_out = Deferred(weights, (heads[0], heads[1], mask))
    return AttentionResult((out, weights_out))


def _attention_weights(L: Lowering, q, k, mask, average: bool, batched: bool) -> ir.Expr:
    """``softmax(q @ k^T / sqrt(d) + mask)`` of (N, heads, L, d) heads: (N, heads, L, S), or
    averaged over the heads (N, L, S), as multi-head attention returns them."""
    scores = ir.op("mul", matmul(L, q, ir.transpose(k, -2, -1)),
                   ir.const(1.0 / math.sqrt(q.shape[-1])))
    if mask is not None:
        scores = ir.op("add", scores, mask)
    weights = L.rowfull("softmax", scores, -1)
    if average:
        weights = L.reduce("mean", weights, (1,))
    return weights if batched else ir.reshape(weights, weights.shape[1:])


@module(nn.MultiheadAttention)
def _m_mha(L, m: nn.MultiheadAttention, p, query, key, value, key_padding_mask=None,
           need_weights=True, attn_mask=None, average_attn_weights=True, is_causal=False):
    """``nn.MultiheadAttention`` lowered whole (its forward inspects its masks in Python, which
    a trace cannot follow): batch-first inputs transposed to sequence-first and back."""
    q, k, v = (L.t(t) for t in (query, key, value))
    batch_first = m.batch_first and len(q.shape) == 3
    if batch_first:
        q, k, v = (ir.transpose(t, 0, 1) for t in (q, k, v))
    out, weights = _mha_forward(
        L, q, k, v, m.embed_dim, m.num_heads, p("in_proj_weight"), p("in_proj_bias"),
        p("bias_k"), p("bias_v"), m.add_zero_attn, m.dropout, p("out_proj.weight"),
        p("out_proj.bias"), training=m.training, key_padding_mask=key_padding_mask,
        need_weights=need_weights, attn_mask=attn_mask,
        use_separate_proj_weight=not m._qkv_same_embed_dim, q_proj_weight=p("q_proj_weight"),
        k_proj_weight=p("k_proj_weight"), v_proj_weight=p("v_proj_weight"),
        average_attn_weights=average_attn_weights, is_causal=is_causal)
    return AttentionResult((ir.transpose(out, 0, 1) if batch_first else out, weights))


def _rows_of(w: ir.Expr, start: int, n: int) -> ir.Expr:
    maps = ((0, start, 1),) + tuple((d, 0, 1) for d in range(1, len(w.shape)))
    return ir.view(w, (n, *w.shape[1:]), maps)


def _heads(x: ir.Expr, heads: int) -> ir.Expr:
    """(L, N, E) -> (N, heads, L, E / heads)."""
    Lx, N, E = x.shape
    return ir.permute(ir.reshape(x, (Lx, N, heads, E // heads)), (1, 2, 0, 3))
