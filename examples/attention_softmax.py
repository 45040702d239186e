"""Single-head attention: projections, scaled scores, softmax, weighted sum (KernelBench format).

Convert: drtriton convert examples/attention_softmax.py
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, d_model):
        super().__init__()
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)
        self.scale = d_model ** -0.5

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        scores = torch.softmax(q @ k.transpose(-2, -1) * self.scale, dim=-1)
        return self.out(scores @ v)


batch, seq, d_model = 2, 16, 32


def get_inputs():
    return [torch.randn(batch, seq, d_model)]


def get_init_inputs():
    return [d_model]
