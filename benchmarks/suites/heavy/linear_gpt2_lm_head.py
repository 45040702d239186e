"""GPT-2 small LM head: 8 x 512 tokens, 768 -> 50257, no bias."""
import torch
import torch.nn as nn

TOKENS, DIM, OUT = 8 * 512, 768, 50257


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
