"""ViT-B/16 encoder block (blocks.0): pre-LN, 12-head self-attention via SDPA, GELU MLP 768 -> 3072;
256 images x 197 tokens."""
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, TOKENS, DIM, HEADS, HIDDEN = 256, 197, 768, 12, 3072


class Model(nn.Module):
    def __init__(self, dim, heads, hidden):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        b, n, c = x.shape
        qkv = (
            self.qkv(self.norm1(x))
            .reshape(b, n, 3, self.heads, c // self.heads)
            .permute(2, 0, 3, 1, 4)
        )
        q, k, v = qkv.unbind(0)
        a = F.scaled_dot_product_attention(q, k, v, dropout_p=0.0)
        a = a.transpose(1, 2).reshape(b, n, c)
        x = x + self.proj(a)
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


def get_inputs():
    return [torch.randn(BATCH, TOKENS, DIM)]


def get_init_inputs():
    return [DIM, HEADS, HIDDEN]
