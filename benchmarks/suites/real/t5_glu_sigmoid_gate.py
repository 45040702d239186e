"""Sigmoid-gated GLU feed-forward input (Shazeer 2020, T5-base FFN_GLU): sigmoid(x W) * (x V), 768
-> 2048, no bias; 64 x 512 tokens."""
import torch
import torch.nn as nn

TOKENS, DIM, HIDDEN = 64 * 512, 768, 2048


class Model(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.wi_0 = nn.Linear(dim, hidden, bias=False)
        self.wi_1 = nn.Linear(dim, hidden, bias=False)

    def forward(self, x):
        return torch.sigmoid(self.wi_0(x)) * self.wi_1(x)


def get_inputs():
    return [torch.randn(TOKENS, DIM)]


def get_init_inputs():
    return [DIM, HIDDEN]
