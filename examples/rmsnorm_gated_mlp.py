"""RMSNorm followed by a SwiGLU gated MLP with a residual connection (KernelBench format).

Convert: drtriton convert examples/rmsnorm_gated_mlp.py
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, d_model, d_hidden, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.gate = nn.Linear(d_model, d_hidden, bias=False)
        self.up = nn.Linear(d_model, d_hidden, bias=False)
        self.down = nn.Linear(d_hidden, d_model, bias=False)

    def forward(self, x):
        h = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


batch, seq, d_model, d_hidden = 2, 8, 32, 48


def get_inputs():
    return [torch.randn(batch, seq, d_model)]


def get_init_inputs():
    return [d_model, d_hidden]
