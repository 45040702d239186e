"""Llama-7B gate projection with SiLU on 8192 tokens: 4096 -> 11008."""
import torch
import torch.nn as nn
import torch.nn.functional as F

TOKENS, DIM, HIDDEN = 8192, 4096, 11008


class Model(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.gate = nn.Linear(dim, hidden, bias=False)

    def forward(self, x):
        return F.silu(self.gate(x))


def get_inputs():
    return [torch.randn(TOKENS, DIM)]


def get_init_inputs():
    return [DIM, HIDDEN]
