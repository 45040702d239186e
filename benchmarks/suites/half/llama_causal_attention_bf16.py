"""Llama-2-7B attention in bfloat16: q, k, v projections (4096, 32 heads, no bias), causal
scaled-dot-product attention, output projection; 2 x 1024 tokens."""
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, SEQ, DIM, HEADS = 2, 1024, 4096, 32
DTYPE = torch.bfloat16


class Model(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.q_proj = nn.Linear(dim, dim, bias=False)
        self.k_proj = nn.Linear(dim, dim, bias=False)
        self.v_proj = nn.Linear(dim, dim, bias=False)
        self.o_proj = nn.Linear(dim, dim, bias=False)
        self.to(DTYPE)

    def forward(self, x):
        b, s, d = x.shape
        q = self.q_proj(x).view(b, s, self.heads, -1).transpose(1, 2)
        k = self.k_proj(x).view(b, s, self.heads, -1).transpose(1, 2)
        v = self.v_proj(x).view(b, s, self.heads, -1).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o_proj(y.transpose(1, 2).reshape(b, s, d))


def get_inputs():
    return [torch.randn(BATCH, SEQ, DIM, dtype=DTYPE)]


def get_init_inputs():
    return [DIM, HEADS]
