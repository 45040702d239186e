"""Llama-2-7B RMSNorm (input_layernorm, eps 1e-5) over 4096 channels; 4 x 4096 tokens."""
import torch
import torch.nn as nn

BATCH, SEQ, DIM = 4, 4096, 4096


class Model(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        variance = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(variance + self.eps))


def get_inputs():
    return [torch.randn(BATCH, SEQ, DIM)]


def get_init_inputs():
    return [DIM]
