"""BERT-large intermediate: 32 x 512 tokens, 1024 -> 4096."""
import torch
import torch.nn as nn

TOKENS, DIM, OUT = 32 * 512, 1024, 4096


class Model(nn.Module):
    def __init__(self, dim, out):
        super().__init__()
        self.fc = nn.Linear(dim, out, bias=True)

    def forward(self, x):
        return self.fc(x)


def get_inputs():
    return [torch.randn(TOKENS, DIM)]


def get_init_inputs():
    return [DIM, OUT]
