"""``nn.LSTM`` and ``nn.GRU``: an input-projection GEMM per layer and direction, then one fused
step kernel per time step; compiled and checked against PyTorch in the interpreter (also the GPU
emission, whose dots are 3xTF32)."""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

from compiler_cases.harness import check, run_pair  # noqa: E402
from drtriton.compiler import CompilerConfig, UnsupportedOperatorError, compile_program  # noqa: E402

TEMPLATE = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.{cell}(5, 6, num_layers={layers}, batch_first={bf}, bidirectional={bi},
                             bias={bias})

    def forward(self, x{state_args}):
        {unpack} = self.rnn(x{state_pass})
        return {outputs}


def get_inputs():
    x = torch.randn({x_shape})
    return [x{state_inputs}]


def get_init_inputs():
    return []
'''


def _program(cell, layers=1, bf=False, bi=False, bias=True, states=False, T=4, B=3):
    dirs = 2 if bi else 1
    x_shape = (B, T, 5) if bf else (T, B, 5)
    n_states = 2 if cell == "LSTM" else 1
    names = ["h0", "c0"][:n_states]
    state_args = "".join(f", {n}" for n in names) if states else ""
    state_pass = (", (h0, c0)" if cell == "LSTM" else ", h0") if states else ""
    shape = (layers * dirs, B, 6)
    state_inputs = "".join(f", torch.randn{shape}" for _ in names) if states else ""
    unpack, outputs = (("out, (h, c)", "out, h, c") if cell == "LSTM" else ("out, h", "out, h"))
    return TEMPLATE.format(cell=cell, layers=layers, bf=bf, bi=bi, bias=bias, unpack=unpack,
                           outputs=outputs,
                           state_args=state_args, state_pass=state_pass, x_shape=x_shape,
                           state_inputs=state_inputs)


CASES = {
    "lstm": dict(cell="LSTM"),
    "lstm_states_two_layers": dict(cell="LSTM", layers=2, states=True),
    "lstm_bidirectional_batch_first": dict(cell="LSTM", bi=True, bf=True, layers=2),
    "lstm_no_bias": dict(cell="LSTM", bias=False),
    "gru": dict(cell="GRU"),
    "gru_state_bidirectional": dict(cell="GRU", bi=True, states=True),
    "gru_batch_first_two_layers": dict(cell="GRU", bf=True, layers=2, bias=False),
}


@pytest.mark.parametrize("device", ["cpu", "cuda"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_recurrent_layers_match_pytorch(name, device, monkeypatch):
    import triton

    src = _program(**CASES[name])
    candidate = compile_program(src, CompilerConfig(device=device))
    assert "for s in range(" in candidate and "_step[" in candidate
    if device == "cuda":  # the interpreter cannot benchmark: every autotuned kernel's first config
        from test_compiler_cuda_emission import _fixed_autotune

        monkeypatch.setattr(triton, "autotune", _fixed_autotune(0))
    want, got = run_pair(src, candidate)
    assert len(want) == len(got)
    for w, g in zip(want, got, strict=True):
        assert w.shape == g.shape
        torch.testing.assert_close(g, w, atol=1e-5, rtol=1e-4)


def test_an_lstm_with_projections_is_refused_by_fx_and_decomposed_by_auto():
    """The LSTM lowering refuses projections; the default capture converts the LSTM's
    decomposition (GEMMs and pointwise steps) through torch.export."""
    src = _program("LSTM").replace("bias=True)", "bias=True, proj_size=3)")
    with pytest.raises(UnsupportedOperatorError, match="proj_size"):
        compile_program(src, CompilerConfig(device="cpu", capture="fx"))
    want, got = run_pair(src, compile_program(src, CompilerConfig(device="cpu")))
    for w, g in zip(want, got, strict=True):
        torch.testing.assert_close(g, w, atol=1e-5, rtol=1e-4)


CELL_LOOPS = {
    "gru_cell_loop": (
        "h = torch.zeros(a.size(0), 8, device=a.device)\n"
        "for t in range(a.size(1)):\n    h = self.m(a[:, t], h)\nreturn h",
        "self.m = nn.GRUCell(6, 8)",
    ),
    "lstm_cell_loop_no_bias": (
        "h, c = b, b * 0.5\nfor t in range(a.size(1)):\n"
        "    h, c = self.m(a[:, t], (h, c))\nreturn h, c",
        "self.m = nn.LSTMCell(6, 8, bias=False)",
    ),
    "gru_cell_without_state": ("return self.m(a[:, 0])", "self.m = nn.GRUCell(6, 8)"),
    "lstm_cell_from_a_constant_state": (
        "h = torch.full((2, 8), 0.5)\nh2, c2 = self.m(a[:, 1], (h, h))\nreturn h2, c2",
        "self.m = nn.LSTMCell(6, 8)",
    ),
}


@pytest.mark.parametrize("name", sorted(CELL_LOOPS))
def test_recurrent_cells_in_a_models_own_loop(name):
    from compiler_cases.harness import program

    body, init = CELL_LOOPS[name]
    src = program(body, [(2, 3, 6), (2, 8)], init=init)
    check(src, atol=1e-5, rtol=1e-4, equal_nan=False)


FLATTENED = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(5, 6, num_layers=2, bidirectional=True)
        # every weight a view into one storage, as flatten_parameters leaves them under cuDNN
        names = [n for n, _ in self.rnn.named_parameters()]
        flat = torch.cat([p.detach().reshape(-1) for p in self.rnn.parameters()])
        start = 0
        for name in names:
            shape = getattr(self.rnn, name).shape
            count = shape.numel()
            setattr(self.rnn, name, nn.Parameter(flat[start:start + count].view(shape)))
            start += count

    def forward(self, x):
        out, (h, c) = self.rnn(x)
        return out, h, c


def get_inputs():
    return [torch.randn(4, 3, 5)]


def get_init_inputs():
    return []
'''


@pytest.mark.parametrize("mode", ["strict", "hybrid"])
def test_weights_that_are_views_into_one_storage_are_read_where_they_are(mode):
    """A strided view of a parameter starts at the parameter, not at its storage's start: on
    CUDA an RNN's weights are views into one flattened buffer (a 2-layer LSTM read layer 0's
    input weights for layer 1)."""
    check(FLATTENED, mode, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("capture", ["fx", "export", "auto"])
def test_packed_sequences_are_refused_naming_the_call_and_its_line(capture):
    """Traced, ``pack_padded_sequence`` failed deep inside (``__cuda_array_interface__``, or a
    FakeTensor size in ``zeros``); the refusal names it, and torch's functions are restored."""
    src = '''
import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(4, 4, batch_first=True)

    def forward(self, x, lengths):
        _, h = self.gru(pack_padded_sequence(x, lengths, batch_first=True))
        return h


def get_inputs():
    return [torch.randn(2, 3, 4), torch.tensor([3, 2])]


def get_init_inputs():
    return []
'''
    before = torch.nn.utils.rnn.pack_padded_sequence
    with pytest.raises(UnsupportedOperatorError) as err:
        compile_program(src, CompilerConfig(device="cpu", capture=capture))
    assert err.value.operator == "pack_padded_sequence" and err.value.line == 13
    assert "packed variable-length sequences" in str(err.value)
    assert torch.nn.utils.rnn.pack_padded_sequence is before
