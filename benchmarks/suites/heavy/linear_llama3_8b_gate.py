"""Llama-3-8B MLP gate projection: 4 x 1024 tokens, 4096 -> 14336, no bias."""
import torch
import torch.nn as nn

TOKENS, DIM, OUT = 4 * 1024, 4096, 14336


class Model(nn.Module):
    def __init__(self, dim, out):
        super().__init__()
        self.fc = nn.Linear(dim, out, bias=False)

    def forward(self, x):
        return self.fc(x)


def get_inputs():
    return [torch.randn(TOKENS, DIM)]


def get_init_inputs():
    return [DIM, OUT]
