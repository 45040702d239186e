"""Lowerings of ``nn`` module calls (parameters as buffers of the candidate)."""

from __future__ import annotations

import torch.nn as nn

from drtriton.compiler import ir
from drtriton.compiler.lower import MODULES, Unsupported
from drtriton.compiler.lowerings.elementwise import (
    SELU_ALPHA,
    SELU_SCALE,
    _logsigmoid,
    elu,
    gelu,
    glu,
    hardsigmoid,
    hardtanh,
    leaky_relu,
    prelu,
    silu,
    softplus,
)
from drtriton.compiler.lowerings.layers import adaptive, adaptive_avg, conv, linear, pool
from drtriton.compiler.lowerings.reductions import (
    batch_norm,
    group_norm,
    instance_norm,
    layer_norm,
    rms_norm,
)
from drtriton.compiler.lowerings.registry import _f, module
from drtriton.compiler.lowerings.views import _flatten, _unflatten, pad

# ------------------------------------------------------------------ nn modules


@module(nn.Linear)
def _m_linear(L, m, p, x):
    return linear(L, x, p("weight"), p("bias"))


@module(nn.Conv1d, nn.Conv2d, nn.Conv3d)
def _m_conv(L, m, p, x):
    nsp = len(m.kernel_size)
    padding = m.padding
    if m.padding_mode != "zeros":  # reflect, replicate, circular: padded first, as torch does
        x, padding = pad(L, x, m._reversed_padding_repeated_twice, m.padding_mode), 0
    return conv(L, nsp, x, p("weight"), p("bias"), m.stride, padding, m.dilation, m.groups)


@module(nn.PReLU)
def _m_prelu(L, m, p, x):
    return prelu(L, _f(L.t(x)), _f(p("weight")))


@module(nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)
def _m_convt(L, m, p, x, output_size=None):
    if output_size is not None:
        raise Unsupported("output_size argument")
    nsp = len(m.kernel_size)
    return conv(L, nsp, x, p("weight"), p("bias"), m.stride, m.padding, m.dilation, m.groups,
                True, m.output_padding)


@module(nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)
def _m_bn(L, m, p, x):
    batch_stats = m.training or not m.track_running_stats
    rm = None if batch_stats else p("running_mean")
    rv = None if batch_stats else p("running_var")
    return batch_norm(L, x, rm, rv, p("weight"), p("bias"), batch_stats, m.eps)


@module(nn.LayerNorm)
def _m_ln(L, m, p, x):
    return layer_norm(L, x, m.normalized_shape, p("weight"), p("bias"), m.eps)


if hasattr(nn, "RMSNorm"):
    @module(nn.RMSNorm)
    def _m_rms(L, m, p, x):
        return rms_norm(L, x, m.normalized_shape, p("weight"), m.eps)


@module(nn.GroupNorm)
def _m_gn(L, m, p, x):
    return group_norm(L, x, m.num_groups, p("weight"), p("bias"), m.eps)


@module(nn.InstanceNorm1d, nn.InstanceNorm2d, nn.InstanceNorm3d)
def _m_in(L, m, p, x):
    if m.track_running_stats and not m.training:
        return batch_norm(L, x, p("running_mean"), p("running_var"), p("weight"), p("bias"),
                          False, m.eps)
    return instance_norm(L, x, p("weight"), p("bias"), m.eps)


@module(nn.MaxPool1d, nn.MaxPool2d, nn.MaxPool3d)
def _m_maxpool(L, m, p, x):
    nsp = {nn.MaxPool1d: 1, nn.MaxPool2d: 2, nn.MaxPool3d: 3}[type(m)]
    return pool(L, "max", nsp, x, m.kernel_size, m.stride, m.padding, m.dilation, m.ceil_mode,
                return_indices=m.return_indices)


@module(nn.AvgPool1d, nn.AvgPool2d, nn.AvgPool3d)
def _m_avgpool(L, m, p, x):
    nsp = {nn.AvgPool1d: 1, nn.AvgPool2d: 2, nn.AvgPool3d: 3}[type(m)]
    return pool(L, "avg", nsp, x, m.kernel_size, m.stride, m.padding, 1, m.ceil_mode,
                m.count_include_pad, getattr(m, "divisor_override", None))


@module(nn.AdaptiveAvgPool1d, nn.AdaptiveAvgPool2d, nn.AdaptiveAvgPool3d)
def _m_adaptive(L, m, p, x):
    nsp = {nn.AdaptiveAvgPool1d: 1, nn.AdaptiveAvgPool2d: 2, nn.AdaptiveAvgPool3d: 3}[type(m)]
    return adaptive_avg(L, nsp, x, m.output_size)


@module(nn.AdaptiveMaxPool1d, nn.AdaptiveMaxPool2d, nn.AdaptiveMaxPool3d)
def _m_adaptive_max(L, m, p, x):
    nsp = {nn.AdaptiveMaxPool1d: 1, nn.AdaptiveMaxPool2d: 2, nn.AdaptiveMaxPool3d: 3}[type(m)]
    if m.return_indices:
        raise Unsupported("adaptive max pooling with return_indices=True")
    return adaptive(L, "max", nsp, x, m.output_size)


@module(nn.GLU)
def _m_glu(L, m, p, x):
    return glu(L, x, m.dim)


def _act(f):
    return lambda L, m, p, x: f(_f(L.t(x)), m)


MODULES.update({
    nn.ReLU: _act(lambda x, m: ir.op("relu", x)),
    nn.ReLU6: _act(lambda x, m: hardtanh(x, 0.0, 6.0)),
    nn.Sigmoid: _act(lambda x, m: ir.op("sigmoid", x)),
    nn.Tanh: _act(lambda x, m: ir.op("tanh", x)),
    nn.SiLU: _act(lambda x, m: silu(x)),
    nn.GELU: _act(lambda x, m: gelu(x, m.approximate)),
    nn.Mish: _act(lambda x, m: ir.op("mul", x, ir.op("tanh", softplus(x)))),
    nn.Hardswish: _act(lambda x, m: ir.op("mul", x, hardsigmoid(x))),
    nn.Hardsigmoid: _act(lambda x, m: hardsigmoid(x)),
    nn.LeakyReLU: _act(lambda x, m: leaky_relu(x, m.negative_slope)),
    nn.ELU: _act(lambda x, m: elu(x, m.alpha)),
    nn.CELU: _act(lambda x, m: elu(x, m.alpha, 1.0, 1.0 / m.alpha)),
    nn.SELU: _act(lambda x, m: elu(x, SELU_ALPHA, SELU_SCALE)),
    nn.Softplus: _act(lambda x, m: softplus(x, m.beta, m.threshold)),
    nn.Softsign: _act(lambda x, m: ir.op("div", x, ir.op("add", ir.op("abs", x), ir.const(1.0)))),
    nn.Hardtanh: _act(lambda x, m: hardtanh(x, m.min_val, m.max_val)),
    nn.Tanhshrink: _act(lambda x, m: ir.op("sub", x, ir.op("tanh", x))),
    nn.Identity: lambda L, m, p, x, *a, **k: L.t(x),
})
MODULES[nn.LogSigmoid] = lambda L, m, p, x: _logsigmoid(L, x)
MODULES[nn.Softmax] = lambda L, m, p, x: L.rowfull("softmax", x, -1 if m.dim is None else m.dim)
MODULES[nn.LogSoftmax] = lambda L, m, p, x: L.rowfull(
    "log_softmax", x, -1 if m.dim is None else m.dim
)
MODULES[nn.Flatten] = lambda L, m, p, x: _flatten(L, x, m.start_dim, m.end_dim)
MODULES[nn.Unflatten] = lambda L, m, p, x: _unflatten(L, x, m.dim, m.unflattened_size)


def _m_dropout(L, m, p, x):
    if m.training and m.p > 0:
        raise Unsupported("dropout in training mode is random")
    return L.t(x)


for _t in (nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d, nn.AlphaDropout):
    MODULES[_t] = _m_dropout


@module(nn.Embedding)
def _m_embedding(L, m, p, x):
    from drtriton.compiler.lowerings.views import embedding

    return embedding(L, x, p("weight"), m.padding_idx, m.max_norm)
