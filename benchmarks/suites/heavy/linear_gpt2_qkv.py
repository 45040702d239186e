"""GPT-2 small attention QKV projection: 8 x 1024 tokens, 768 -> 2304."""
import torch
import torch.nn as nn

TOKENS, DIM, OUT = 8 * 1024, 768, 2304


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
