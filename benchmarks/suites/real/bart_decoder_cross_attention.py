"""BART-large decoder cross-attention (decoder.layers.0.encoder_attn): queries from 128 decoder
states, keys/values from 1024 encoder states, 1024 wide, 16 heads, SDPA, residual + LayerNorm; batch
16."""
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, TGT_LEN, SRC_LEN, DIM, HEADS = 16, 128, 1024, 1024, 16


class Model(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.q_proj = nn.Linear(dim, dim)
        self.k_proj = nn.Linear(dim, dim)
        self.v_proj = nn.Linear(dim, dim)
        self.out_proj = nn.Linear(dim, dim)
        self.norm = nn.LayerNorm(dim)

    def forward(self, hidden, encoder_states):
        b, t, d = hidden.shape
        s = encoder_states.shape[1]
        hd = d // self.heads
        q = self.q_proj(hidden).view(b, t, self.heads, hd).transpose(1, 2)
        k = self.k_proj(encoder_states).view(b, s, self.heads, hd).transpose(1, 2)
        v = self.v_proj(encoder_states).view(b, s, self.heads, hd).transpose(1, 2)
        a = F.scaled_dot_product_attention(q, k, v, dropout_p=0.0)
        a = a.transpose(1, 2).reshape(b, t, d)
        return self.norm(hidden + self.out_proj(a))


def get_inputs():
    return [torch.randn(BATCH, TGT_LEN, DIM), torch.randn(BATCH, SRC_LEN, DIM)]


def get_init_inputs():
    return [DIM, HEADS]
