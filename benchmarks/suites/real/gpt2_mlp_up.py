"""GPT-2 small MLP up-projection with GELU: 32 x 1024 tokens, 768 -> 3072."""
import torch
import torch.nn as nn
import torch.nn.functional as F

TOKENS, DIM, HIDDEN = 32 * 1024, 768, 3072


class Model(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.fc = nn.Linear(dim, hidden)

    def forward(self, x):
        return F.gelu(self.fc(x))


def get_inputs():
    return [torch.randn(TOKENS, DIM)]


def get_init_inputs():
    return [DIM, HIDDEN]
