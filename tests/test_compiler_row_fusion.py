"""Reductions and gathers fuse with what reads them, as people write these ops by hand.

* An elementwise consumer of a reduction's broadcast result over the reduced tensor's shape is
  stored by the reduction's own kernel (a hand-written RMSNorm is one kernel, not a reduction
  and then a pass that reads the input again).
* A gather (an embedding, a class picked by a target) is an expression: it fuses into the
  kernel that reads it instead of being written out first.
* ``logsumexp`` (and cross entropy's) is one online pass over each row.
* A reduction reading a softmax or log_softmax whole reads the softmax's input through each
  row's (maximum, sum of exponentials): the normalised tensor is never written (a KL
  distillation loss, an entropy).
* A variance or normalisation over rows longer than a tile reads them once for its statistics
  (chunks' means and squared deviations merged), not twice; a GPU batch norm over few channels
  splits its rows into chunks whose (mean, squared deviations) merge exactly.

Each case runs on the CPU and as CUDA emission in the interpreter, and counts its kernels: the
counts before these fusions were RMS 2, SOFTMAX 4, LAYERNORM 3, COLUMN 2, LSE 4, EMBED 3, CE 6.
"""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402
import torch  # noqa: E402
import triton  # noqa: E402

from compiler_cases.harness import program, run_pair  # noqa: E402
from drtriton.compiler import CompilerConfig, compile_program  # noqa: E402

RMS = program("v = a.pow(2).mean(-1, keepdim=True)\nreturn self.w * (a * torch.rsqrt(v + 1e-6))",
              [(3, 5, 48)], init="self.w = nn.Parameter(torch.randn(48))")
SOFTMAX = program("m = a.amax(dim=-1, keepdim=True)\ne = torch.exp(a - m)\n"
                  "return e / e.sum(-1, keepdim=True)", [(6, 40)])
LAYERNORM = program(
    "mu = a.mean(-1, keepdim=True)\nvar = ((a - mu) ** 2).mean(-1, keepdim=True)\n"
    "return (a - mu) / torch.sqrt(var + 1e-5) * self.g + self.b", [(4, 7, 33)],
    init="self.g = nn.Parameter(torch.randn(33))\nself.b = nn.Parameter(torch.randn(33))")
COLUMN = program("m = a.mean(0, keepdim=True)\nreturn a - m", [(37, 9)])
LSE = program("return torch.logsumexp(a, dim=1) + torch.logsumexp(a, dim=(0, 2))[None, :1]",
              [(3, 50, 4)])
# the result is needed as well: it is written, and its consumer is a pass of its own
KEPT = program("m = a.sum(1, keepdim=True)\nreturn a - m, m", [(5, 24)])
# read at another row than the one reduced: not a broadcast of the row's own result
FLIPPED = program("m = a.mean(-1, keepdim=True)\nreturn a * m.flip(1)", [(2, 6, 16)])
KL = program("s = F.log_softmax(a / 2.0, dim=-1)\np = F.softmax(b.view(-1, 40) / 2.0, dim=-1)\n"
             "return F.kl_div(s.view(-1, 40), p, reduction='batchmean') * 4.0",
             [(2, 3, 40), (2, 3, 40)])
ENTROPY = program("p = torch.softmax(a, dim=1)\nreturn -(p * torch.log(p + 1e-9)).sum(1)",
                  [(5, 30, 3)])
# the softmax is an output too: it is written once, and the sum reads it
SOFTMAX_KEPT = program("p = torch.softmax(a, dim=-1)\nreturn p.sum(), p", [(5, 30)])
CE = program("return F.cross_entropy(a, self.t, label_smoothing=0.1)", [(12, 30)],
             init="self.register_buffer('t', torch.randint(0, 30, (12,)))")
EMBED = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(50, 24)
        self.pos = nn.Embedding(16, 24)
        self.norm = nn.LayerNorm(24)
        self.register_buffer("ids", torch.arange(16).unsqueeze(0))

    def forward(self, x):
        h = self.tok(x) + self.pos(self.ids[:, : x.shape[1]])
        return self.norm(h)


def get_inputs():
    return [torch.randint(0, 50, (3, 10))]


def get_init_inputs():
    return []
'''

CASES = {  # program, kernels
    "rms": (RMS, 1), "softmax": (SOFTMAX, 2), "layernorm": (LAYERNORM, 2),
    "column": (COLUMN, 1), "lse": (LSE, 2), "kept": (KEPT, 2), "flipped": (FLIPPED, 2),
    "ce": (CE, 4), "embed": (EMBED, 1), "kl": (KL, 3), "entropy": (ENTROPY, 2),
    "softmax_kept": (SOFTMAX_KEPT, 2),
}
# programs whose softmax a reduction reads unfolded: the shape the softmax would be written at
UNFOLDED = {"kl": "(2, 3, 40)", "entropy": "(5, 30, 3)"}


def _fixed_autotune(configs, key, **kw):
    """``triton.autotune`` launching the first config (the interpreter cannot benchmark)."""
    def wrap(fn):
        class Fixed:
            def __getitem__(self, grid):
                def launch(*args, **kwargs):
                    conf = configs[0].kwargs
                    return fn[grid(conf) if callable(grid) else grid](*args, **kwargs, **conf)
                return launch
        return Fixed()
    return wrap


@pytest.mark.parametrize("device", ["cpu", "cuda"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_reductions_and_gathers_fuse_with_their_readers(name, device, monkeypatch):
    source, n_kernels = CASES[name]
    candidate = compile_program(source, CompilerConfig(device=device))
    assert candidate.count("@triton.jit") == n_kernels, candidate
    monkeypatch.setattr(triton, "autotune", _fixed_autotune)
    want, got = run_pair(source, candidate)
    assert len(want) == len(got)
    for w, g in zip(want, got, strict=True):
        assert w.shape == g.shape and w.dtype == g.dtype
        torch.testing.assert_close(g, w, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_a_reduction_of_a_softmax_never_writes_the_softmax(device):
    for name, shape in UNFOLDED.items():
        candidate = compile_program(CASES[name][0], CompilerConfig(device=device))
        assert f"torch.empty({shape}" not in candidate, candidate
        assert "rows * 2 + 1" in candidate  # its rows' statistics, stored interleaved
    kept = compile_program(SOFTMAX_KEPT, CompilerConfig(device=device))
    assert "torch.empty((5, 30)" in kept


BATCH_NORM = program("return F.batch_norm(a * 0.1 + 5, None, None, training=True)",
                     [(8, 4, 128, 128)])
LONG_ROWS = program("return F.layer_norm(a * 3 + 100, (10007,)), a.var(-1)", [(3, 10007)])


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_long_row_statistics_read_the_rows_once(device, monkeypatch):
    for source in (BATCH_NORM, LONG_ROWS):
        candidate = compile_program(source, CompilerConfig(device=device))
        kernels = candidate.split("@triton.jit")[1:]
        passes = [k.count("for r0 in range(") for k in kernels if "for r0 in range(" in k]
        # statistics in one pass over a row, then the normalised store: two (three before)
        assert max(passes, default=0) <= 2, passes
        if device == "cuda" and source is BATCH_NORM:  # split: a kernel of chunk moments
            assert "rows * 2 + 1" in candidate
        monkeypatch.setattr(triton, "autotune", _fixed_autotune)
        want, got = run_pair(source, candidate)
        for w, g in zip(want, got, strict=True):
            torch.testing.assert_close(g, w, atol=1e-4, rtol=1e-4)


def test_a_fused_gather_reads_nothing_for_an_index_out_of_range():
    """PyTorch raises on such an index; the candidate picks 0 and never reads outside x."""
    source = program("return torch.gather(a, 1, self.i) * 2", [(3, 4)],
                     init="self.register_buffer('i', torch.tensor([[0, 3], [1, 2], [3, 0]]))")
    candidate = compile_program(source, CompilerConfig(device="cpu"))
    want, got = run_pair(source, candidate)
    torch.testing.assert_close(got[0], want[0])
    assert "tl.where(m" in candidate  # the lanes' own in-range mask guards the read
