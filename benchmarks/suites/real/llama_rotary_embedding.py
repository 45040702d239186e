"""Llama-3-8B rotary position embedding applied to q (32 heads) and k (8 kv heads), head dim 128,
theta 5e5, cos/sin buffers; 2 x 8192 tokens."""
import torch
import torch.nn as nn

BATCH, SEQ, DIM, HEADS, KV_HEADS = 2, 8192, 4096, 32, 8
ROPE_THETA = 500000.0


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class Model(nn.Module):
    def __init__(self, head_dim, seq, theta):
        super().__init__()
        inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
        freqs = torch.outer(torch.arange(seq, dtype=torch.float32), inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos", emb.cos())
        self.register_buffer("sin", emb.sin())

    def forward(self, q, k):
        s = q.shape[2]
        cos, sin = self.cos[:s], self.sin[:s]
        q_embed = q * cos + rotate_half(q) * sin
        k_embed = k * cos + rotate_half(k) * sin
        return q_embed, k_embed


def get_inputs():
    return [
        torch.randn(BATCH, HEADS, SEQ, DIM // HEADS),
        torch.randn(BATCH, KV_HEADS, SEQ, DIM // HEADS),
    ]


def get_init_inputs():
    return [DIM // HEADS, SEQ, ROPE_THETA]
