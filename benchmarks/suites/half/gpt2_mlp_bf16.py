"""GPT-2 small MLP in bfloat16: Linear 768 -> 3072, GELU (tanh), Linear 3072 -> 768; 16 x 1024
tokens."""
import torch
import torch.nn as nn
import torch.nn.functional as F

TOKENS, DIM, HIDDEN = 16 * 1024, 768, 3072
DTYPE = torch.bfloat16


class Model(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.c_fc = nn.Linear(dim, hidden)
        self.c_proj = nn.Linear(hidden, dim)
        self.to(DTYPE)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


def get_inputs():
    return [torch.randn(TOKENS, DIM, dtype=DTYPE)]


def get_init_inputs():
    return [DIM, HIDDEN]
