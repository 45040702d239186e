"""BERT-base FFN output: 3072 -> 768 projection, residual add, LayerNorm; 64 x 512 tokens."""
import torch
import torch.nn as nn

TOKENS, DIM, HIDDEN = 64 * 512, 768, 3072


class Model(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.fc = nn.Linear(hidden, dim)
        self.norm = nn.LayerNorm(dim)

    def forward(self, h, residual):
        return self.norm(self.fc(h) + residual)


def get_inputs():
    return [torch.randn(TOKENS, HIDDEN), torch.randn(TOKENS, DIM)]


def get_init_inputs():
    return [DIM, HIDDEN]
