"""MPT-7B self-attention (blocks.0.attn): fused QKV 4096 -> 12288 without bias, 32 heads, ALiBi bias
plus an additive float causal mask input, SDPA, output projection; 2 x 2048 tokens."""
import math
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, SEQ, DIM, HEADS = 2, 2048, 4096, 32
ALIBI_BIAS_MAX = 8


def alibi_slopes(heads, bias_max):
    n = 2 ** math.ceil(math.log2(heads))
    m = torch.arange(1, n + 1, dtype=torch.float32) * (bias_max / n)
    slopes = 1.0 / torch.pow(2, m)
    if n != heads:
        slopes = torch.cat([slopes[1::2], slopes[::2]])[:heads]
    return slopes


class Model(nn.Module):
    def __init__(self, dim, heads, bias_max):
        super().__init__()
        self.heads = heads
        self.Wqkv = nn.Linear(dim, 3 * dim, bias=False)
        self.out_proj = nn.Linear(dim, dim, bias=False)
        self.register_buffer("slopes", alibi_slopes(heads, bias_max))

    def forward(self, x, attn_mask):
        b, s, d = x.shape
        hd = d // self.heads
        q, k, v = self.Wqkv(x).split(d, dim=2)
        q = q.view(b, s, self.heads, hd).transpose(1, 2)
        k = k.view(b, s, self.heads, hd).transpose(1, 2)
        v = v.view(b, s, self.heads, hd).transpose(1, 2)
        pos = torch.arange(s, device=x.device, dtype=x.dtype)
        alibi = self.slopes.view(self.heads, 1, 1) * (pos.view(1, 1, s) - pos.view(1, s, 1))
        bias = alibi.unsqueeze(0) + attn_mask
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, dropout_p=0.0)
        a = a.transpose(1, 2).reshape(b, s, d)
        return self.out_proj(a)


def get_inputs():
    causal = torch.full((SEQ, SEQ), torch.finfo(torch.float32).min).triu(1)
    return [torch.randn(BATCH, SEQ, DIM), causal.expand(BATCH, 1, SEQ, SEQ).contiguous()]


def get_init_inputs():
    return [DIM, HEADS, ALIBI_BIAS_MAX]
