"""Layers users reach for that the compiler lowered no way of: PReLU (one weight or one per
channel), convolutions with reflect, replicate and circular padding modes, ``Tensor.unfold``
framing (a strided view) and ``repeat_interleave`` (grouped-query attention's key and value
heads). One program written like model code, both modes, against PyTorch."""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402

from compiler_cases.harness import check, program  # noqa: E402
from drtriton.compiler import CompilerConfig, UnsupportedOperatorError, compile_program  # noqa: E402

LAYERS = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.act = nn.PReLU()
        self.act_c = nn.PReLU(4)
        self.conv = nn.Conv2d(4, 4, 3, padding=1, padding_mode="reflect")
        self.conv_c = nn.Conv1d(4, 4, 3, padding=2, dilation=2, padding_mode="circular")
        self.conv_r = nn.Conv2d(4, 4, 3, padding="same", padding_mode="replicate")

    def forward(self, x, s, k):
        y = self.act_c(self.conv(x)) + self.act(self.conv_r(x))
        frames = s.unfold(-1, 8, 4)  # (2, 4, 7, 8)
        kv = k.repeat_interleave(2, dim=1)
        return (y, self.conv_c(s), frames.sum(-1), torch.repeat_interleave(kv, 3) * 2,
                F.prelu(s, torch.tensor([0.2])))


def get_inputs():
    return [torch.randn(2, 4, 8, 8), torch.randn(2, 4, 32), torch.randn(2, 2, 3, 5)]


def get_init_inputs():
    return []
'''


@pytest.mark.parametrize("mode", ["strict", "hybrid"])
def test_prelu_padding_modes_unfold_and_repeat_interleave_match_pytorch(mode):
    check(LAYERS, mode, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("capture", ["fx", "export"])
def test_var_mean_std_mean_and_hypot_match_pytorch(capture):
    """Tuple-valued ``var_mean``/``std_mean`` (fx calls them, export keeps ``aten.var_mean``)
    and ``hypot``, also where squaring would overflow fp32."""
    src = program("v, m = torch.var_mean(a, dim=1, correction=0)\n"
                  "s, n = torch.std_mean(a, 0, keepdim=True)\n"
                  "return v + m, s * n, torch.var_mean(a)[0], torch.hypot(a * 1e20, b), "
                  "torch.hypot(a * 0, b * 0)", [(4, 5), (4, 5)])
    check(src, capture=capture)


@pytest.mark.parametrize("capture", ["fx", "export"])
def test_diagonals_trace_and_addbmm_match_pytorch(capture):
    """Diagonals are strided views of the buffer (offsets on both sides, any two dims); trace
    sums one; addbmm is one product over batch and K together."""
    src = program("return (torch.diag(a), torch.diagonal(b, 1, 0, 2), torch.trace(a * 2),\n"
                  "        a.diagonal(-1) + 1, torch.diag(a, 2),\n"
                  "        torch.addbmm(c, b.transpose(1, 2), d, beta=0.5, alpha=2.0))",
                  [(4, 5), (3, 4, 5), (5, 6), (3, 4, 6)])
    check(src, capture=capture)


def test_diag_of_a_vector_builds_the_matrix():
    """``torch.diag(v, k)``: ``v`` on the k-th diagonal of a square of zeros (a scaling matrix
    multiplied in, as ``m @ diag(s)``)."""
    src = program("return torch.diag(a), torch.diag(a, 2), a.diag(-1) * 3, b @ torch.diag(a)",
                  [(5,), (3, 5)])
    check(src)


@pytest.mark.parametrize("capture", ["fx", "export"])
def test_remainder_fmod_and_the_percent_operator_match_pytorch(capture):
    """Python's sign (of the divisor) for ``%`` and ``remainder``, C's (of the dividend) for
    ``fmod``, on floats and integers."""
    src = program("i = (a * 10).long()\n"
                  "return (a % 0.7, torch.remainder(a, b), torch.fmod(a, -0.3), i % 3,\n"
                  "        torch.fmod(i, -4), torch.remainder(i, -3), b.remainder(2))",
                  [(4, 5), (4, 5)])
    check(src, capture=capture)


@pytest.mark.parametrize("capture", ["fx", "export"])
def test_logcumsumexp_matches_pytorch_over_long_rows_and_infinities(capture):
    """A scan with a logaddexp combine, carried across 1,024-wide chunks; values spanning 100
    units (no single shift is safe) and runs of -inf."""
    src = program("m = a.masked_fill(a > 1, float('-inf'))\n"
                  "return torch.logcumsumexp(a, 1), torch.logcumsumexp(a * 50, 0), "
                  "m.logcumsumexp(-1)", [(4, 1500)])
    check(src, capture=capture, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("capture", ["fx", "export"])
def test_bilinear_rrelu_in_eval_and_cdist_match_pytorch(capture):
    src = program("return (self.m(a, b), F.rrelu(a, training=False), torch.cdist(a, c),\n"
                  "        torch.cdist(a, c, p=1), torch.cdist(a, c, p=3.0),\n"
                  "        torch.cdist(a, c, p=float('inf')))", [(4, 5), (4, 6), (7, 5)],
                  init="self.m = nn.Bilinear(5, 6, 3)")
    check(src, capture=capture)


@pytest.mark.parametrize("capture", ["fx", "export"])
def test_rrelu_in_training_mode_is_refused(capture):
    src = program("return F.rrelu(a, training=True)", [(4, 5)])
    with pytest.raises(UnsupportedOperatorError, match="random"):
        compile_program(src, CompilerConfig(capture=capture))


def test_functional_in_place_spellings_and_shrinks():
    """``F.relu_(y)`` changes ``y``: read afterwards it is the activation; thresholds and the
    hard and soft shrinks."""
    body = """
y = a * 2
F.relu_(y)
z = a - 1
F.hardtanh_(z, -0.5, 0.5)
F.leaky_relu_(z, 0.2)
w = F.threshold(a, 0.1, 20.0) + F.hardshrink(a, 0.3) + F.softshrink(a, 0.2)
return y, z, w
"""
    check(program(body, [(4, 5)]), capture="fx")
    check(program(body, [(4, 5)]))


def test_softmin_and_channel_shuffle():
    body = """
s = F.softmin(a, dim=1)
shuffled = F.channel_shuffle(a, 3) + nn.ChannelShuffle(2)(a)
return s, shuffled
"""
    check(program(body, [(2, 6, 3, 4)]))


SEGNET = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    \"\"\"SegNet's pooling indices: the decoder unpools to where the encoder's maxima were.
    ReLU's zeros tie in many windows: the first one is the index.\"\"\"

    def __init__(self):
        super().__init__()
        self.enc = nn.Conv2d(3, 4, 3, padding=1)
        self.pool = nn.MaxPool2d(2, 2, return_indices=True)
        self.unpool = nn.MaxUnpool2d(2, 2)
        self.dec = nn.Conv2d(4, 2, 3, padding=1)

    def forward(self, x, s):
        y = F.relu(self.enc(x))
        p, idx = self.pool(y)
        v, i = F.max_pool2d(x, 3, 2, 1, ceil_mode=True, return_indices=True)
        w, j = F.max_pool1d(s, 3, 2, return_indices=True)
        u, k = F.max_pool3d(x.unsqueeze(1), 2, return_indices=True)
        back = F.max_unpool1d(w, j, 3, 2, output_size=s.shape)
        return self.dec(self.unpool(p * 2, idx, output_size=y.size())), v, i, back, u, k


def get_inputs():
    return [torch.randn(2, 3, 6, 8), torch.randn(2, 3, 11)]


def get_init_inputs():
    return []
"""


def test_max_pool_indices_and_max_unpool():
    check(SEGNET, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("size, args", [((7, 8), "3"), ((7, 8), "(2, 3), stride=2, padding=1"),
                                        ((9, 6), "2, dilation=2, stride=(1, 2)")])
def test_fold_adds_overlapping_patches(size, args):
    """``F.fold`` after ``F.unfold`` sums each pixel over the patches that cover it."""
    body = f"cols = F.unfold(a, {args}) * 2\nreturn F.fold(cols, {size}, {args}), " \
           f"nn.Fold({size}, {args})(cols)"
    check(program(body, [(2, 3, *size)]), atol=1e-5, rtol=1e-5)


def test_norms_of_any_order():
    body = """
return (torch.linalg.vector_norm(a, ord=3, dim=-1), torch.linalg.vector_norm(a, ord=0.5),
        torch.norm(a, p=float("-inf"), dim=0), torch.linalg.vector_norm(torch.relu(a), ord=0,
        dim=1), F.normalize(a, p=3, dim=-1))
"""
    check(program(body, [(4, 6)]), atol=1e-5, rtol=1e-5)


def test_pdist_of_every_pair_of_rows():
    """40 rows: 780 pairs, each pair's rows found from its index by a closed form."""
    body = "return F.pdist(a), torch.pdist(b, p=1), F.pdist(b, p=float('inf')), F.pdist(a[:2])"
    check(program(body, [(7, 3), (40, 5)]), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(("init", "shape"), [
    ("self.conv = nn.Conv1d(3, 4, 2, padding='same')", (2, 3, 9)),  # a 2-tap causal-ish filter
    ("self.conv = nn.Conv2d(2, 3, (4, 2), padding='same', dilation=(1, 3))", (1, 2, 7, 8)),
    ("self.conv = nn.Conv3d(2, 2, 2, padding='same', groups=2)", (1, 2, 3, 4, 5)),
])
def test_same_padding_with_an_even_total_puts_the_extra_zero_after(init, shape):
    """An even kernel's 'same' padding is one wider after than before, as PyTorch pads it."""
    check(program("return self.conv(a)", [shape], init=init), atol=1e-5, rtol=1e-5)
