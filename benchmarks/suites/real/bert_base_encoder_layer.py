"""BERT-base encoder layer (encoder.layer.0): post-LN, 12-head self-attention via SDPA (no padding),
residual + LayerNorm, GELU FFN 768 -> 3072, residual + LayerNorm; 32 x 512 tokens."""
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, SEQ, DIM, HEADS, HIDDEN = 32, 512, 768, 12, 3072


class Model(nn.Module):
    def __init__(self, dim, heads, hidden):
        super().__init__()
        self.heads = heads
        self.query = nn.Linear(dim, dim)
        self.key = nn.Linear(dim, dim)
        self.value = nn.Linear(dim, dim)
        self.attn_out = nn.Linear(dim, dim)
        self.attn_norm = nn.LayerNorm(dim, eps=1e-12)
        self.intermediate = nn.Linear(dim, hidden)
        self.output = nn.Linear(hidden, dim)
        self.out_norm = nn.LayerNorm(dim, eps=1e-12)

    def forward(self, x):
        b, s, d = x.shape
        q = self.query(x).view(b, s, self.heads, d // self.heads).transpose(1, 2)
        k = self.key(x).view(b, s, self.heads, d // self.heads).transpose(1, 2)
        v = self.value(x).view(b, s, self.heads, d // self.heads).transpose(1, 2)
        a = F.scaled_dot_product_attention(q, k, v, dropout_p=0.0)
        a = a.transpose(1, 2).reshape(b, s, d)
        h = self.attn_norm(self.attn_out(a) + x)
        return self.out_norm(self.output(F.gelu(self.intermediate(h))) + h)


def get_inputs():
    return [torch.randn(BATCH, SEQ, DIM)]


def get_init_inputs():
    return [DIM, HEADS, HIDDEN]
