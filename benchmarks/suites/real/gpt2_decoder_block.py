"""GPT-2 small decoder block (transformer.h.0): pre-LN causal self-attention + GELU MLP, 768 wide,
12 heads; 12 x 1024 tokens."""
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, SEQ, DIM, HEADS, HIDDEN = 12, 1024, 768, 12, 3072


class Model(nn.Module):
    def __init__(self, dim, heads, hidden):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(dim, eps=1e-5)
        self.c_attn = nn.Linear(dim, 3 * dim)
        self.attn_proj = nn.Linear(dim, dim)
        self.ln_2 = nn.LayerNorm(dim, eps=1e-5)
        self.c_fc = nn.Linear(dim, hidden)
        self.mlp_proj = nn.Linear(hidden, dim)

    def forward(self, x):
        b, s, d = x.shape
        h = self.ln_1(x)
        q, k, v = self.c_attn(h).split(d, dim=2)
        q = q.view(b, s, self.heads, d // self.heads).transpose(1, 2)
        k = k.view(b, s, self.heads, d // self.heads).transpose(1, 2)
        v = v.view(b, s, self.heads, d // self.heads).transpose(1, 2)
        a = F.scaled_dot_product_attention(q, k, v, dropout_p=0.0, is_causal=True)
        a = a.transpose(1, 2).reshape(b, s, d)
        x = x + self.attn_proj(a)
        m = self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))
        return x + m


def get_inputs():
    return [torch.randn(BATCH, SEQ, DIM)]


def get_init_inputs():
    return [DIM, HEADS, HIDDEN]
