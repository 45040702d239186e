"""BERT-style post-LN encoder layer on nn.MultiheadAttention; the key padding mask is built from
a lengths tensor."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, hidden_size=32, num_heads=4, intermediate_size=64, dropout=0.1,
                 layer_norm_eps=1e-12):
        super().__init__()
        self.attention = nn.MultiheadAttention(hidden_size, num_heads, dropout=dropout,
                                               batch_first=True)
        self.attn_dropout = nn.Dropout(dropout)
        self.attn_norm = nn.LayerNorm(hidden_size, eps=layer_norm_eps)
        self.intermediate = nn.Linear(hidden_size, intermediate_size)
        self.output = nn.Linear(intermediate_size, hidden_size)
        self.out_dropout = nn.Dropout(dropout)
        self.out_norm = nn.LayerNorm(hidden_size, eps=layer_norm_eps)
        self.eval()  # an inference model: compiled for eval mode

    def forward(self, hidden_states, lengths):
        seq_len = hidden_states.size(1)
        positions = torch.arange(seq_len, device=hidden_states.device)
        key_padding_mask = positions[None, :] >= lengths[:, None]  # True = padding
        attn_out, _ = self.attention(hidden_states, hidden_states, hidden_states,
                                     key_padding_mask=key_padding_mask, need_weights=False)
        hidden_states = self.attn_norm(hidden_states + self.attn_dropout(attn_out))
        inter = F.gelu(self.intermediate(hidden_states))
        hidden_states = self.out_norm(hidden_states + self.out_dropout(self.output(inter)))
        return hidden_states


def get_inputs():
    return [torch.randn(2, 8, 32), torch.tensor([8, 5])]


def get_init_inputs():
    return [32, 4, 64, 0.1, 1e-12]
