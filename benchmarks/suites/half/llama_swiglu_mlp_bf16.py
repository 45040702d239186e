"""Llama-2-7B SwiGLU MLP in bfloat16: gate and up 4096 -> 11008, SiLU(gate) * up, down
11008 -> 4096; 4096 tokens."""
import torch
import torch.nn as nn
import torch.nn.functional as F

TOKENS, DIM, HIDDEN = 4096, 4096, 11008
DTYPE = torch.bfloat16


class Model(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.gate_proj = nn.Linear(dim, hidden, bias=False)
        self.up_proj = nn.Linear(dim, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, dim, bias=False)
        self.to(DTYPE)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


def get_inputs():
    return [torch.randn(TOKENS, DIM, dtype=DTYPE)]


def get_init_inputs():
    return [DIM, HIDDEN]
