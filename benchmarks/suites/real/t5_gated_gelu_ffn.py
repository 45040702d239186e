"""T5 v1.1-base feed-forward layer (block.0.layer.1): T5 RMS LayerNorm, gated-GELU FFN 768 -> 2048
-> 768 without bias, residual; 32 x 512 tokens."""
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, SEQ, DIM, HIDDEN = 32, 512, 768, 2048


class Model(nn.Module):
    def __init__(self, dim, hidden, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.layer_norm_weight = nn.Parameter(torch.ones(dim))
        self.wi_0 = nn.Linear(dim, hidden, bias=False)
        self.wi_1 = nn.Linear(dim, hidden, bias=False)
        self.wo = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        variance = x.pow(2).mean(-1, keepdim=True)
        h = self.layer_norm_weight * (x * torch.rsqrt(variance + self.eps))
        h = F.gelu(self.wi_0(h), approximate="tanh") * self.wi_1(h)
        return x + self.wo(h)


def get_inputs():
    return [torch.randn(BATCH, SEQ, DIM)]


def get_init_inputs():
    return [DIM, HIDDEN]
