"""Lowerings of recurrent layers (``nn.LSTM``, ``nn.GRU``): per layer and direction, one GEMM
for the input projection of every time step, then a Python loop in ``forward`` launching one
fused step kernel per time step (``kernels.recurrent``); the outputs are views of the sequence
buffers the steps write."""

from __future__ import annotations

import torch
import torch.nn as nn

from drtriton.compiler import ir, kernels
from drtriton.compiler.kernels.recurrent import GATES, step_kernel
from drtriton.compiler.lower import FUNCTIONS, Lowering, Unsupported, _contig
from drtriton.compiler.lowerings.layers import linear
from drtriton.compiler.lowerings.registry import _f, module
from drtriton.compiler.lowerings.views import dense


@module(nn.LSTM, nn.GRU)
def _m_recurrent(L: Lowering, m, p, x, hx=None):
    cell = "lstm" if isinstance(m, nn.LSTM) else "gru"
    if cell == "lstm" and m.proj_size:
        raise Unsupported("LSTM with proj_size")
    if m.dropout and m.training and m.num_layers > 1:
        raise Unsupported("dropout between recurrent layers in training mode")
    x = _f(L.t(x))
    if len(x.shape) != 3:
        raise Unsupported("unbatched recurrent input")
    if m.batch_first:
        x = ir.transpose(x, 0, 1)  # (T, B, I)
    T, B, _ = x.shape
    dirs = 2 if m.bidirectional else 1
    h0, c0 = (hx if cell == "lstm" else (hx, None)) if hx is not None else (None, None)
    layer_in, last_h, last_c = x, [], []
    for layer in range(m.num_layers):
        seqs = []
        for d in range(dirs):
            state = layer * dirs + d
            seq, h_n, c_n = _direction(L, m, p, cell, layer_in, layer, d, _state(L, h0, state),
                                       _state(L, c0, state), T, B)
            seqs.append(seq)
            last_h.append(h_n)
            last_c.append(c_n)
        layer_in = seqs[0] if dirs == 1 else FUNCTIONS[torch.cat](L, seqs, 2)
    out = ir.transpose(layer_in, 0, 1) if m.batch_first else layer_in
    h_n = FUNCTIONS[torch.stack](L, last_h, 0)
    if cell == "gru":
        return out, h_n
    return out, (h_n, FUNCTIONS[torch.stack](L, last_c, 0))


def _state(L: Lowering, v, index: int) -> ir.Expr | None:
    return None if v is None else ir.view(_f(L.t(v)), L.t(v).shape[1:],
                                          ((-1, index, 0), (0, 0, 1), (1, 0, 1)))


def _direction(L: Lowering, m, p, cell: str, x: ir.Expr, layer: int, d: int, h0, c0, T: int,
               B: int):
    """One layer in one direction: (time-ordered output sequence, final h, final c)."""
    H, gates = m.hidden_size, GATES[cell]
    sfx = f"_l{layer}" + ("_reverse" if d else "")
    bias = m.bias
    gx = linear(L, ir.reshape(x, (T * B, x.shape[2])), p(f"weight_ih{sfx}"),
                p(f"bias_ih{sfx}") if bias else None)
    gx = _fresh(L, gx, copy=False)
    whh = p(f"weight_hh{sfx}")
    bhh = p(f"bias_hh{sfx}") if bias else ir.Const((gates * H,), torch.float32, 0.0)
    bhh = _fresh(L, bhh, copy=False)
    h0 = _fresh(L, h0 if h0 is not None else ir.Const((B, H), torch.float32, 0.0), copy=False)
    c = _fresh(L, c0 if c0 is not None else ir.Const((B, H), torch.float32, 0.0), copy=True)
    L.flush(whh.buf)
    hs = L.new_buf()
    L.shapes[hs] = ((T, B, H), torch.float32)
    L.emitted.add(hs)
    name = f"k{len(L.prog.kernels)}_{cell}_step"
    k = step_kernel(cell, name, B, H, L.blocks.dot_precision)
    k.buffers = [gx.buf, whh.buf, bhh.buf, h0.buf, hs, c.buf]
    L.prog.kernels.append(k)
    L.prog.body += [
        f"{hs} = torch.empty(({T}, {B}, {H}), device=dev, dtype=torch.float32)",
        f"for s in range({T}):",
        "    " + k.launch(("s", f"{T - 1} - s" if d else "s")),  # time runs backwards for d = 1
    ]
    steps = ir.Load((T, B, H), torch.float32, hs, (B * H, H, 1), 0)
    seq = ir.view(steps, (T, B, H), ((0, T - 1, -1), (1, 0, 1), (2, 0, 1))) if d else steps
    last = ir.view(steps, (B, H), ((-1, T - 1, 0), (0, 0, 1), (1, 0, 1)))
    return seq, last, c


def _fresh(L: Lowering, e: ir.Expr, copy: bool) -> ir.Load:
    """``e`` as a contiguous buffer already written (its kernel emitted); ``copy``: a buffer of
    its own even when ``e`` is one already (the step kernels update it in place)."""
    if copy or isinstance(e, ir.Const):
        e = L.kernel(lambda w, o, v=e: kernels.pointwise(w, v, o), e.shape, e.dtype)
    else:
        e = L.materialize(e)
    L.flush(e.buf)
    if e.offset or not _contig(e.shape, e.strides):
        raise Unsupported("recurrent operand not contiguous")
    return e


# ------------------------------------------------------------------ single steps (cells)


def _recurrent_term(L: Lowering, m, p, h: ir.Expr, B: int) -> ir.Expr:
    """``h @ W_hh^T + b_hh``; a zero state (the first step, or no state given) contributes the
    bias alone, with no product over constants."""
    bias = p("bias_hh") if m.bias else None
    if isinstance(h, ir.Const) and h.value == 0:
        n = (4 if isinstance(m, nn.LSTMCell) else 3) * m.hidden_size
        if bias is None:
            return ir.Const((B, n), torch.float32, 0.0)
        return ir.broadcast_to(ir.reshape(bias, (1, n)), (B, n))
    return linear(L, dense(L, h), p("weight_hh"), bias)


@module(nn.LSTMCell, nn.GRUCell)
def _m_cell(L: Lowering, m, p, x, hx=None):
    """One step of ``nn.LSTMCell``/``nn.GRUCell`` (a model's own loop calls it per step): two
    linear layers and the gate arithmetic, all lazy expressions fused into their consumers."""
    x = _f(L.t(x))
    if len(x.shape) != 2:
        raise Unsupported("unbatched recurrent cell input")
    B, H = x.shape[0], m.hidden_size
    zeros = ir.Const((B, H), torch.float32, 0.0)
    if isinstance(m, nn.LSTMCell):
        h, c = (zeros, zeros) if hx is None else (_f(L.t(hx[0])), _f(L.t(hx[1])))
        c = dense(L, c)  # a constant state (zeros) as a tensor-valued expression in kernels
    else:
        h, c = (zeros if hx is None else _f(L.t(hx))), None
    gi = linear(L, x, p("weight_ih"), p("bias_ih") if m.bias else None)
    gh = _recurrent_term(L, m, p, h, B)
    h = dense(L, h)

    def gate(g: ir.Expr, q: int) -> ir.Expr:
        return ir.view(g, (B, H), ((0, 0, 1), (1, q * H, 1)))

    def sig(v: ir.Expr) -> ir.Expr:
        return ir.op("sigmoid", v)

    def tanh(v: ir.Expr) -> ir.Expr:
        return ir.op("tanh", v)

    if c is not None:
        i, f, g, o = (ir.op("add", gate(gi, q), gate(gh, q)) for q in range(4))
        c_new = ir.op("add", ir.op("mul", sig(f), c), ir.op("mul", sig(i), tanh(g)))
        return ir.op("mul", sig(o), tanh(c_new)), c_new
    r = sig(ir.op("add", gate(gi, 0), gate(gh, 0)))
    z = sig(ir.op("add", gate(gi, 1), gate(gh, 1)))
    n = tanh(ir.op("add", gate(gi, 2), ir.op("mul", r, gate(gh, 2))))
    return ir.op("add", ir.op("mul", ir.op("sub", ir.const(1.0), z), n), ir.op("mul", z, h))
