"""Lowerings of loss functions and gathers (cross entropy, NLL, KL divergence, regression losses,
margin losses (triplet, hinge embedding) and pairwise distance, ``torch.gather``).

A value picked by a tensor of indices (gather's ``index``, the target class of cross entropy
and NLL) has no place in the IR, whose loads have static strides: ``take`` is its own kernel,
one lane per picked element, that evaluates the index expression and then the source expression
at that index (``Writer.ev`` takes index expressions, computed ones included). An index outside
the source's extent, where PyTorch raises, reads 0 (never out-of-bounds memory): ignored targets
(``ignore_index``, by default -100) pick 0 and are masked afterwards.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn import _reduction

from drtriton.compiler import ir
from drtriton.compiler.lower import Lowering, Unsupported
from drtriton.compiler.lowerings.elementwise import log1p
from drtriton.compiler.lowerings.registry import _f, fn, module
from drtriton.compiler.lowerings.views import dense, take

REDUCTIONS = ("mean", "sum", "none")


# ------------------------------------------------------------------ shared pieces


def _reduction_arg(size_average, reduce, reduction: str, allowed=REDUCTIONS) -> str:
    if size_average is not None or reduce is not None:
        reduction = _reduction.legacy_get_string(size_average, reduce, emit_warning=False)
    if reduction not in allowed:
        raise Unsupported(f"reduction={reduction!r}")
    return reduction


def _reduce_loss(L: Lowering, loss: ir.Expr, reduction: str) -> ir.Expr:
    """PyTorch's ``apply_loss_reduction``: the elementwise loss, its sum or its mean."""
    if reduction == "none":
        return loss
    return L.reduce("sum" if reduction == "sum" else "mean", loss, None)


def _no_weight(weight) -> None:
    if weight is not None:
        raise Unsupported("class or element weights (weight=) are not lowered")


def _logsumexp_keep(L: Lowering, x: ir.Expr, dim: int) -> ir.Expr:
    """log(sum(exp(x))) over ``dim``, kept as a size-1 dim, as a buffer (read by several
    kernels)."""
    return L.materialize(L.logsumexp(x, dim, True))


# ------------------------------------------------------------------ cross entropy and NLL


def _class_dim(x: ir.Expr) -> int:
    """PyTorch's class dim: 1 for (N, C, d1, ...), 0 for an unbatched (C,) input."""
    if not x.shape:
        raise Unsupported("a 0-d input has no class dim")
    return 0 if len(x.shape) == 1 else 1


def _pick_class(L: Lowering, x: ir.Expr, target: ir.Expr, cdim: int, ignore_index) -> ir.Expr:
    """``x`` at each class-index target along the class dim, shaped like ``target``."""
    if target.dtype != torch.int64:
        raise Unsupported(f"class-index targets of {target.dtype} (PyTorch requires int64)")
    if isinstance(ignore_index, bool) or not isinstance(ignore_index, int):
        raise Unsupported(f"ignore_index={ignore_index!r}")
    keep = x.shape[:cdim] + (1,) + x.shape[cdim + 1:]
    if target.shape != x.shape[:cdim] + x.shape[cdim + 1:]:
        raise Unsupported(f"target shape {target.shape} for input {x.shape}")
    return ir.reshape(take(L, x, cdim, ir.reshape(target, keep)), target.shape)


def _class_weights(L: Lowering, weight, x: ir.Expr, cdim: int):
    """``weight=`` of the class-index losses: a float vector of one weight per class, or None."""
    if weight is None:
        return None
    w = _f(dense(L, weight))
    if w.shape != (x.shape[cdim],):
        raise Unsupported(f"class weight of shape {w.shape} for {x.shape[cdim]} classes")
    return w


def _target_weights(L: Lowering, w: ir.Expr, target: ir.Expr) -> ir.Expr:
    """``w[target]``, shaped like ``target`` (an ignored target, out of range, picks 0)."""
    flat = ir.reshape(target, (max(1, ir.numel(target.shape)),))
    return ir.reshape(take(L, w, 0, flat), target.shape)


def _along_classes(w: ir.Expr, x: ir.Expr, cdim: int) -> ir.Expr:
    """The class weight vector shaped to broadcast against ``x`` along its class dim."""
    return ir.reshape(w, tuple(n if k == cdim else 1 for k, n in enumerate(x.shape)))


def _ignored_mean(L: Lowering, loss: ir.Expr, target: ir.Expr, ignore_index: int,
                  reduction: str, weights: ir.Expr | None = None) -> ir.Expr:
    """Zero the loss where ``target == ignore_index``; the mean counts only the others, or with
    class weights divides by the sum of the weights of their targets (0/0 is NaN when every
    target is ignored, as in PyTorch)."""
    valid = ir.op("ne", target, ir.const(ignore_index))
    loss = ir.op("where", valid, loss, ir.const(0.0))
    if reduction == "none":
        return loss
    total = L.reduce("sum", loss, None)
    if reduction == "sum":
        return total
    if weights is None:
        count = L.reduce("sum", ir.cast(valid, torch.float32), None)
    else:
        count = L.reduce("sum", ir.op("where", valid, weights, ir.const(0.0)), None)
    return ir.op("div", total, count)


def cross_entropy(L: Lowering, x, target, weight, ignore_index: int, reduction: str,
                  smoothing: float) -> ir.Expr:
    """``F.cross_entropy`` as ATen composes it: ``nll = w[target] * (lse - x[target])`` (minus
    log_softmax at the target, times the target's class weight, 1 without ``weight``) and, with
    label smoothing eps, ``(1 - eps) * nll + eps / C * sum_c w_c (lse - x_c)``; ignored targets
    count 0 and leave the mean's denominator (their number, or the sum of their weights)."""
    if not isinstance(smoothing, int | float) or not 0.0 <= smoothing <= 1.0:
        raise Unsupported(f"label_smoothing={smoothing!r}")
    x, target = dense(L, x), dense(L, target)
    if not ir.is_float(x.dtype):
        raise Unsupported(f"cross entropy of {x.dtype} logits")
    x = x if x.dtype == torch.float64 else ir.cast(x, torch.float32)
    cdim = _class_dim(x)
    if not ir.is_cheap(x):  # read by several kernels: computed once
        x = L.materialize(x)
    w = _class_weights(L, weight, x, cdim)
    lse = _logsumexp_keep(L, x, cdim)
    eps = float(smoothing)
    nll_all = ir.op("sub", lse, x)  # minus log_softmax, every class
    if w is not None:
        w_c = _along_classes(w, x, cdim)
    if ir.is_float(target.dtype):
        if w is not None:
            nll_all = ir.op("mul", nll_all, w_c)
        return _cross_entropy_probs(L, x, target, nll_all, cdim, eps, reduction)
    lse_t = ir.reshape(lse, target.shape)
    loss = ir.op("sub", lse_t, _pick_class(L, x, target, cdim, ignore_index))
    w_t = None if w is None else _target_weights(L, w, target)
    if w_t is not None:
        loss = ir.op("mul", loss, w_t)
    if eps:
        smooth = L.reduce("sum", nll_all if w is None else ir.op("mul", nll_all, w_c), cdim)
        loss = ir.op("add", ir.op("mul", loss, ir.const(1.0 - eps)),
                     ir.op("mul", smooth, ir.const(eps / x.shape[cdim])))
    return _ignored_mean(L, loss, target, ignore_index, reduction, w_t)


def _cross_entropy_probs(L: Lowering, x: ir.Expr, target: ir.Expr, nll: ir.Expr, cdim: int,
                         eps: float, reduction: str) -> ir.Expr:
    """Class-probability targets: ``-(log_softmax(x) * t').sum()`` with ``t' = (1 - eps) t +
    eps / C`` (``nll`` is minus log_softmax, times the class weights if any), the mean over
    every element but the class dim (PyTorch divides by numel / C, weights or not);
    ignore_index does not apply."""
    if target.shape != x.shape:
        raise Unsupported(f"probability target shape {target.shape} for input {x.shape}")
    t = _f(target)
    if eps:
        t = ir.op("add", ir.op("mul", t, ir.const(1.0 - eps)), ir.const(eps / x.shape[cdim]))
    loss = L.reduce("sum", ir.op("mul", t, nll), cdim)
    if reduction == "none":
        return loss
    total = L.reduce("sum", loss, None)
    if reduction == "sum":
        return total
    return ir.op("div", total, ir.const(float(ir.numel(x.shape) // x.shape[cdim])))


@fn(F.cross_entropy)
def _cross_entropy(L: Lowering, input, target, weight=None, size_average=None,
                   ignore_index: int = -100, reduce=None, reduction: str = "mean",
                   label_smoothing: float = 0.0) -> ir.Expr:
    reduction = _reduction_arg(size_average, reduce, reduction)
    return cross_entropy(L, input, target, weight, ignore_index, reduction, label_smoothing)


def nll_loss(L: Lowering, x, target, weight, ignore_index: int, reduction: str) -> ir.Expr:
    """``F.nll_loss``: ``-w[target] * x[target]`` along the class dim (w = 1 without
    ``weight``); the mean divides by the number, or the summed weights, of the kept targets."""
    x, target = _f(dense(L, x)), dense(L, target)
    cdim = _class_dim(x)
    picked = _pick_class(L, x, target, cdim, ignore_index)
    w = _class_weights(L, weight, x, cdim)
    w_t = None if w is None else _target_weights(L, w, target)
    loss = ir.op("neg", picked) if w_t is None else ir.op("mul", ir.op("neg", picked), w_t)
    return _ignored_mean(L, loss, target, ignore_index, reduction, w_t)


@fn(F.nll_loss)
def _nll_loss(L: Lowering, input, target, weight=None, size_average=None,
              ignore_index: int = -100, reduce=None, reduction: str = "mean") -> ir.Expr:
    reduction = _reduction_arg(size_average, reduce, reduction)
    return nll_loss(L, input, target, weight, ignore_index, reduction)


# ------------------------------------------------------------------ KL divergence


def kl_div(L: Lowering, x, target, reduction: str, log_target: bool) -> ir.Expr:
    """``F.kl_div`` as ATen computes it: ``exp(t) * (t - x)`` for log targets, else
    ``xlogy(t, t) - t * x`` (xlogy is 0 where t == 0, so ``0 * x`` still gives NaN for an
    infinite x, as PyTorch does). batchmean is the sum divided by the input's first dim."""
    x, t = _f(dense(L, x)), _f(dense(L, target))
    if log_target:
        loss = ir.op("mul", ir.op("exp", t), ir.op("sub", t, x))
    else:
        xlogy = ir.op("where", ir.op("eq", t, ir.const(0.0)), ir.const(0.0),
                      ir.op("mul", t, ir.op("log", t)))
        loss = ir.op("sub", xlogy, ir.op("mul", t, x))
    if reduction != "batchmean":
        return _reduce_loss(L, loss, reduction)
    total = L.reduce("sum", loss, None)
    return ir.op("div", total, ir.const(float(x.shape[0]))) if x.shape else total


@fn(F.kl_div)
def _kl_div(L: Lowering, input, target, size_average=None, reduce=None,
            reduction: str = "mean", log_target: bool = False) -> ir.Expr:
    reduction = _reduction_arg(size_average, reduce, reduction, (*REDUCTIONS, "batchmean"))
    return kl_div(L, input, target, reduction, bool(log_target))


# ------------------------------------------------------------------ regression losses


def _diff(L: Lowering, x, target) -> ir.Expr:
    return ir.op("sub", _f(dense(L, x)), _f(dense(L, target)))


def smooth_l1(L: Lowering, x, target, reduction: str, beta: float) -> ir.Expr:
    """ATen's smooth L1: ``0.5 * z * z / beta`` below beta, ``z - 0.5 * beta`` above (L1 at 0)."""
    z = ir.op("abs", _diff(L, x, target))
    if beta == 0:
        return _reduce_loss(L, z, reduction)
    if beta < 0:
        raise Unsupported(f"beta={beta}")
    quad = ir.op("div", ir.op("mul", ir.op("mul", ir.const(0.5), z), z), ir.const(float(beta)))
    lin = ir.op("sub", z, ir.const(0.5 * beta))
    return _reduce_loss(L, ir.op("where", ir.op("lt", z, ir.const(float(beta))), quad, lin),
                        reduction)


def huber(L: Lowering, x, target, reduction: str, delta: float) -> ir.Expr:
    """``0.5 * z * z`` below delta, ``delta * (z - 0.5 * delta)`` above."""
    if delta <= 0:
        raise Unsupported(f"delta={delta}")
    z = ir.op("abs", _diff(L, x, target))
    quad = ir.op("mul", ir.op("mul", ir.const(0.5), z), z)
    lin = ir.op("mul", ir.const(float(delta)), ir.op("sub", z, ir.const(0.5 * delta)))
    return _reduce_loss(L, ir.op("where", ir.op("lt", z, ir.const(float(delta))), quad, lin),
                        reduction)


@fn(F.smooth_l1_loss)
def _smooth_l1_loss(L: Lowering, input, target, size_average=None, reduce=None,
                    reduction: str = "mean", beta: float = 1.0) -> ir.Expr:
    return smooth_l1(L, input, target, _reduction_arg(size_average, reduce, reduction), beta)


@fn(F.huber_loss)
def _huber_loss(L: Lowering, input, target, reduction: str = "mean", delta: float = 1.0,
                weight=None) -> ir.Expr:
    _no_weight(weight)
    return huber(L, input, target, _reduction_arg(None, None, reduction), delta)


@fn(F.mse_loss)
def _mse_loss(L: Lowering, input, target, size_average=None, reduce=None,
              reduction: str = "mean", weight=None) -> ir.Expr:
    _no_weight(weight)
    d = _diff(L, input, target)
    return _reduce_loss(L, ir.op("mul", d, d), _reduction_arg(size_average, reduce, reduction))


@fn(F.l1_loss)
def _l1_loss(L: Lowering, input, target, size_average=None, reduce=None,
             reduction: str = "mean", weight=None) -> ir.Expr:
    _no_weight(weight)
    loss = ir.op("abs", _diff(L, input, target))
    return _reduce_loss(L, loss, _reduction_arg(size_average, reduce, reduction))


# ------------------------------------------------------------------ margin losses


def _clamp_min0(x: ir.Expr) -> ir.Expr:
    return ir.op("maximum", x, ir.const(0.0))


def pairwise_distance(L: Lowering, x1, x2, p: float, eps: float, keepdim: bool) -> ir.Expr:
    """ATen's ``norm(x1 - x2 + eps, p, dim=-1)`` for p = 1 or 2 (the ones people train with)."""
    d = ir.op("add", ir.op("sub", _f(dense(L, x1)), _f(dense(L, x2))), ir.const(float(eps)))
    if p == 2:
        return ir.op("sqrt", L.reduce("sum", ir.op("mul", d, d), -1, keepdim))
    if p == 1:
        return L.reduce("sum", ir.op("abs", d), -1, keepdim)
    raise Unsupported(f"p={p} (p = 1 or 2 are lowered)")


@fn(F.pairwise_distance)
def _pairwise_distance(L: Lowering, x1, x2, p: float = 2.0, eps: float = 1e-6,
                       keepdim: bool = False) -> ir.Expr:
    return pairwise_distance(L, x1, x2, p, eps, keepdim)


def triplet_margin(L: Lowering, anchor, positive, negative, margin: float, p: float, eps: float,
                   swap: bool, reduction: str) -> ir.Expr:
    """``max(d(a, p) - d(a, n) + margin, 0)``; with ``swap`` the negative's distance is the
    smaller of d(a, n) and d(p, n)."""
    d_pos = pairwise_distance(L, anchor, positive, p, eps, False)
    d_neg = pairwise_distance(L, anchor, negative, p, eps, False)
    if swap:
        d_neg = ir.op("minimum", d_neg, pairwise_distance(L, positive, negative, p, eps, False))
    loss = _clamp_min0(ir.op("add", ir.op("sub", d_pos, d_neg), ir.const(float(margin))))
    return _reduce_loss(L, loss, reduction)


@fn(F.triplet_margin_loss)
def _triplet_margin_loss(L: Lowering, anchor, positive, negative, margin: float = 1.0,
                         p: float = 2, eps: float = 1e-6, swap: bool = False, size_average=None,
                         reduce=None, reduction: str = "mean") -> ir.Expr:
    return triplet_margin(L, anchor, positive, negative, margin, p, eps, swap,
                          _reduction_arg(size_average, reduce, reduction))


def hinge_embedding(L: Lowering, x, target, margin: float, reduction: str) -> ir.Expr:
    """ATen's: ``x`` where the target is not -1, plus ``max(margin - x, 0)`` where it is not 1."""
    x, y = _f(dense(L, x)), _f(dense(L, target))
    zero = ir.const(0.0)
    below = ir.op("where", ir.op("ne", y, ir.const(1.0)),
                  _clamp_min0(ir.op("sub", ir.const(float(margin)), x)), zero)
    kept = ir.op("where", ir.op("ne", y, ir.const(-1.0)), x, zero)
    return _reduce_loss(L, ir.op("add", below, kept), reduction)


@fn(F.hinge_embedding_loss)
def _hinge_embedding_loss(L: Lowering, input, target, margin: float = 1.0, size_average=None,
                          reduce=None, reduction: str = "mean") -> ir.Expr:
    return hinge_embedding(L, input, target, margin,
                           _reduction_arg(size_average, reduce, reduction))


# ------------------------------------------------------------------ nn loss modules


@module(nn.CrossEntropyLoss)
def _m_cross_entropy(L: Lowering, m: nn.CrossEntropyLoss, p, input, target) -> ir.Expr:
    return cross_entropy(L, input, target, p("weight"), m.ignore_index,
                         _reduction_arg(None, None, m.reduction), m.label_smoothing)


@module(nn.NLLLoss)
def _m_nll(L: Lowering, m: nn.NLLLoss, p, input, target) -> ir.Expr:
    return nll_loss(L, input, target, p("weight"), m.ignore_index,
                    _reduction_arg(None, None, m.reduction))


@module(nn.KLDivLoss)
def _m_kl_div(L: Lowering, m: nn.KLDivLoss, p, input, target) -> ir.Expr:
    reduction = _reduction_arg(None, None, m.reduction, (*REDUCTIONS, "batchmean"))
    return kl_div(L, input, target, reduction, m.log_target)


@module(nn.SmoothL1Loss)
def _m_smooth_l1(L: Lowering, m: nn.SmoothL1Loss, p, input, target) -> ir.Expr:
    return smooth_l1(L, input, target, _reduction_arg(None, None, m.reduction), m.beta)


@module(nn.HuberLoss)
def _m_huber(L: Lowering, m: nn.HuberLoss, p, input, target) -> ir.Expr:
    return huber(L, input, target, _reduction_arg(None, None, m.reduction), m.delta)


@module(nn.MSELoss)
def _m_mse(L: Lowering, m: nn.MSELoss, p, input, target) -> ir.Expr:
    return _mse_loss(L, input, target, reduction=m.reduction)


@module(nn.L1Loss)
def _m_l1(L: Lowering, m: nn.L1Loss, p, input, target) -> ir.Expr:
    return _l1_loss(L, input, target, reduction=m.reduction)


@module(nn.TripletMarginLoss)
def _m_triplet(L: Lowering, m: nn.TripletMarginLoss, p, anchor, positive, negative) -> ir.Expr:
    return triplet_margin(L, anchor, positive, negative, m.margin, m.p, m.eps, m.swap,
                          _reduction_arg(None, None, m.reduction))


@module(nn.HingeEmbeddingLoss)
def _m_hinge(L: Lowering, m: nn.HingeEmbeddingLoss, p, input, target) -> ir.Expr:
    return hinge_embedding(L, input, target, m.margin, _reduction_arg(None, None, m.reduction))


@module(nn.PairwiseDistance)
def _m_pairwise(L: Lowering, m: nn.PairwiseDistance, p, x1, x2) -> ir.Expr:
    return pairwise_distance(L, x1, x2, m.norm, m.eps, m.keepdim)


# ------------------------------------------------------------------ binary cross entropy


def _same_shape(x: ir.Expr, target: ir.Expr, what: str) -> None:
    if target.shape != x.shape:  # F raises ValueError here
        raise Unsupported(f"{what} of target {target.shape} and input {x.shape} (sizes differ)")


def _weighted(loss: ir.Expr, weight) -> ir.Expr:
    """The elementwise loss times ``weight`` broadcast to it (a per-class or per-element
    rescaling weight, as PyTorch's ``weight=`` of the binary losses)."""
    if weight is None:
        return loss
    weight = _f(weight)
    if ir.broadcast_shapes(loss.shape, weight.shape) != loss.shape:
        raise Unsupported(f"weight of shape {weight.shape} for a loss of shape {loss.shape}")
    return ir.op("mul", loss, weight)


def _log_sigmoid(x: ir.Expr) -> ir.Expr:
    """``min(x, 0) - log1p(exp(-|x|))``: never overflows."""
    return ir.op("sub", ir.op("minimum", x, ir.const(0.0)),
                 log1p(ir.op("exp", ir.op("neg", ir.op("abs", x)))))


def binary_cross_entropy_with_logits(L: Lowering, x, target, weight, pos_weight,
                                     reduction: str) -> ir.Expr:
    """ATen's stable form: ``(1 - t) * x - log_sigmoid(x) * (1 + (pos_weight - 1) * t)``, times
    ``weight``; ``log_sigmoid(x) = min(x, 0) - log1p(exp(-|x|))`` never overflows."""
    x, t = _f(dense(L, x)), _f(dense(L, target))
    _same_shape(x, t, "binary_cross_entropy_with_logits")
    log_sig = _log_sigmoid(x)
    if pos_weight is not None:
        scale = ir.op("add", ir.op("mul", ir.op("sub", _f(L.t(pos_weight)), ir.const(1.0)), t),
                      ir.const(1.0))
        log_sig = ir.op("mul", log_sig, scale)
    loss = ir.op("sub", ir.op("mul", ir.op("sub", ir.const(1.0), t), x), log_sig)
    return _reduce_loss(L, _weighted(loss, None if weight is None else L.t(weight)), reduction)


@fn(F.binary_cross_entropy_with_logits)
def _bce_with_logits(L: Lowering, input, target, weight=None, size_average=None, reduce=None,
                     reduction: str = "mean", pos_weight=None) -> ir.Expr:
    return binary_cross_entropy_with_logits(L, input, target, weight, pos_weight,
                                            _reduction_arg(size_average, reduce, reduction))


def binary_cross_entropy(L: Lowering, x, target, weight, reduction: str) -> ir.Expr:
    """ATen's: ``(t - 1) * max(log1p(-x), -100) - t * max(log(x), -100)`` (each log clamped at
    -100, so x = 0 or 1 gives a finite loss), times ``weight``. PyTorch raises for an input
    outside [0, 1]; here such an element's loss is NaN."""
    x, t = _f(dense(L, x)), _f(dense(L, target))
    _same_shape(x, t, "binary_cross_entropy")
    floor = ir.const(-100.0)
    log_x = ir.op("maximum", ir.op("log", x), floor)
    log_1mx = ir.op("maximum", log1p(ir.op("neg", x)), floor)
    loss = ir.op("sub", ir.op("mul", ir.op("sub", t, ir.const(1.0)), log_1mx),
                 ir.op("mul", t, log_x))
    return _reduce_loss(L, _weighted(loss, None if weight is None else L.t(weight)), reduction)


@fn(F.binary_cross_entropy)
def _bce(L: Lowering, input, target, weight=None, size_average=None, reduce=None,
         reduction: str = "mean") -> ir.Expr:
    return binary_cross_entropy(L, input, target, weight,
                                _reduction_arg(size_average, reduce, reduction))


# ------------------------------------------------------------------ likelihood losses


@fn(F.soft_margin_loss)
def _soft_margin_loss(L: Lowering, input, target, size_average=None, reduce=None,
                      reduction: str = "mean") -> ir.Expr:
    """``log(1 + exp(-y x))``."""
    x, y = _f(L.t(input)), _f(L.t(target))
    loss = log1p(ir.op("exp", ir.op("neg", ir.op("mul", y, x))))
    return _reduce_loss(L, loss, _reduction_arg(size_average, reduce, reduction))


@fn(F.multilabel_soft_margin_loss)
def _multilabel_soft_margin_loss(L: Lowering, input, target, weight=None, size_average=None,
                                 reduce=None, reduction: str = "mean") -> ir.Expr:
    """Per sample, the mean over classes of ``-(y log s(x) + (1 - y) log s(-x))``."""
    _no_weight(weight)
    x, y = _f(L.t(input)), _f(L.t(target))
    pos, neg = _log_sigmoid(x), _log_sigmoid(ir.op("neg", x))
    loss = ir.op("neg", ir.op("add", ir.op("mul", y, pos),
                              ir.op("mul", ir.op("sub", ir.const(1.0), y), neg)))
    per_sample = L.reduce("mean", loss, len(x.shape) - 1)
    return _reduce_loss(L, per_sample, _reduction_arg(size_average, reduce, reduction))


@fn(F.multilabel_margin_loss)
def _multilabel_margin_loss(L: Lowering, input, target, size_average=None, reduce=None,
                            reduction: str = "mean") -> ir.Expr:
    """Per sample, ``sum_j sum_k max(0, 1 - (x[y_j] - x[k])) / C`` over the targets ``y_j``
    before the first -1 (repeats count again) and the classes ``k`` that are not targets, as
    eager PyTorch computes it (its ATen decomposition also counts the labels after the -1)."""
    x, y = _f(L.t(input)), L.t(target)
    unbatched = len(x.shape) == 1
    if len(x.shape) not in (1, 2) or y.shape != x.shape:
        raise Unsupported(f"multilabel margin loss of {x.shape} and {y.shape}")
    if unbatched:
        x, y = ir.reshape(x, (1,) + x.shape), ir.reshape(y, (1,) + y.shape)
    n, c = x.shape
    ended = L.scan("cumsum", ir.cast(ir.op("eq", y, ir.const(-1)), torch.int64), 1)
    valid = ir.op("eq", ended, ir.const(0), dtype=torch.bool)  # [n, j]
    label = ir.op("where", valid, y, ir.const(0), dtype=torch.int64)
    picked = take(L, x, 1, label)  # x[y_j], [n, j]
    k = ir.broadcast_to(ir.reshape(ir.arange(c, 0, 1, torch.int64), (1, 1, c)), (n, c, c))
    hits = ir.op("and", ir.reshape(valid, (n, c, 1)),
                 ir.op("eq", ir.reshape(label, (n, c, 1)), k), dtype=torch.bool)
    is_target = ir.op("gt", L.reduce("amax", ir.cast(hits, torch.float32), 1, True),
                      ir.const(0.0), dtype=torch.bool)  # [n, 1, k]
    margin = _clamp_min0(ir.op("add", ir.op("sub", ir.const(1.0), ir.reshape(picked, (n, c, 1))),
                                ir.reshape(x, (n, 1, c))))
    keep = ir.op("and", ir.reshape(valid, (n, c, 1)), ir.op("not", is_target, dtype=torch.bool),
                 dtype=torch.bool)
    terms = ir.op("where", keep, margin, ir.const(0.0), dtype=margin.dtype)
    loss = ir.op("div", L.reduce("sum", terms, (1, 2)), ir.const(float(c)))
    if unbatched:
        loss = ir.reshape(loss, ())
    return _reduce_loss(L, loss, _reduction_arg(size_average, reduce, reduction))


@fn(F.poisson_nll_loss)
def _poisson_nll_loss(L: Lowering, input, target, log_input=True, full=False, size_average=None,
                      eps=1e-8, reduce=None, reduction: str = "mean") -> ir.Expr:
    x, t = _f(L.t(input)), _f(L.t(target))
    if log_input:
        loss = ir.op("sub", ir.op("exp", x), ir.op("mul", t, x))
    else:
        loss = ir.op("sub", x, ir.op("mul", t, ir.op("log", ir.op("add", x, ir.const(eps)))))
    if full:  # Stirling's term, where the target is above 1
        stirling = ir.op("add", ir.op("sub", ir.op("mul", t, ir.op("log", t)), t), ir.op(
            "mul", ir.const(0.5), ir.op("log", ir.op("mul", ir.const(2 * math.pi), t))))
        loss = ir.op("add", loss, ir.op("where", ir.op("gt", t, ir.const(1.0)), stirling,
                                        ir.const(0.0), dtype=loss.dtype))
    return _reduce_loss(L, loss, _reduction_arg(size_average, reduce, reduction))


@fn(F.gaussian_nll_loss)
def _gaussian_nll_loss(L: Lowering, input, target, var, full=False, eps=1e-6,
                       reduction: str = "mean") -> ir.Expr:
    """``0.5 (log v + (x - t)^2 / v)`` with ``v`` clamped to ``eps``; a variance per sample
    (one dim fewer, or a last dim of 1) broadcasts over the last dim."""
    x, t, v = _f(L.t(input)), _f(L.t(target)), _f(L.t(var))
    if v.shape != x.shape:
        if v.shape == x.shape[:-1]:
            v = ir.reshape(v, v.shape + (1,))
        elif not (v.shape[:-1] == x.shape[:-1] and v.shape[-1:] == (1,)):
            raise Unsupported(f"gaussian_nll_loss with var of shape {v.shape} for {x.shape}")
    v = ir.op("maximum", v, ir.const(float(eps)))
    d = ir.op("sub", x, t)
    loss = ir.op("mul", ir.const(0.5), ir.op("add", ir.op("log", v),
                                             ir.op("div", ir.op("mul", d, d), v)))
    if full:
        loss = ir.op("add", loss, ir.const(0.5 * math.log(2 * math.pi)))
    return _reduce_loss(L, loss, _reduction_arg(None, None, reduction))
