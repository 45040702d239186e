"""ViT-B/16 MLP down-projection: 64 images x 197 tokens, 3072 -> 768."""
import torch
import torch.nn as nn

TOKENS, DIM, OUT = 64 * 197, 3072, 768


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
