"""T5 self-attention with relative position bias (HF layout): bidirectional log-spaced buckets
from torch.log / torch.where / .long() / clamp, bias embedding permuted to heads, unscaled
scores, softmax in float then .type_as."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, d_model=32, d_kv=8, n_heads=4, num_buckets=16, max_distance=32,
                 dropout_rate=0.1):
        super().__init__()
        self.d_model = d_model
        self.key_value_proj_dim = d_kv
        self.n_heads = n_heads
        self.inner_dim = n_heads * d_kv
        self.relative_attention_num_buckets = num_buckets
        self.relative_attention_max_distance = max_distance
        self.dropout = dropout_rate
        self.q = nn.Linear(d_model, self.inner_dim, bias=False)
        self.k = nn.Linear(d_model, self.inner_dim, bias=False)
        self.v = nn.Linear(d_model, self.inner_dim, bias=False)
        self.o = nn.Linear(self.inner_dim, d_model, bias=False)
        self.relative_attention_bias = nn.Embedding(num_buckets, n_heads)
        self.eval()  # an inference model: compiled for eval mode

    @staticmethod
    def _relative_position_bucket(relative_position, bidirectional=True, num_buckets=32,
                                  max_distance=128):
        relative_buckets = 0
        if bidirectional:
            num_buckets //= 2
            relative_buckets += (relative_position > 0).to(torch.long) * num_buckets
            relative_position = torch.abs(relative_position)
        else:
            relative_position = -torch.min(relative_position, torch.zeros_like(relative_position))
        max_exact = num_buckets // 2
        is_small = relative_position < max_exact
        relative_position_if_large = max_exact + (
            torch.log(relative_position.float() / max_exact)
            / math.log(max_distance / max_exact)
            * (num_buckets - max_exact)
        ).long()
        relative_position_if_large = relative_position_if_large.clamp(max=num_buckets - 1)
        relative_buckets += torch.where(is_small, relative_position, relative_position_if_large)
        return relative_buckets

    def compute_bias(self, query_length, key_length, device=None):
        if device is None:
            device = self.relative_attention_bias.weight.device
        context_position = torch.arange(query_length, dtype=torch.long, device=device)[:, None]
        memory_position = torch.arange(key_length, dtype=torch.long, device=device)[None, :]
        relative_position = memory_position - context_position
        relative_position_bucket = self._relative_position_bucket(
            relative_position,
            bidirectional=True,
            num_buckets=self.relative_attention_num_buckets,
            max_distance=self.relative_attention_max_distance,
        )
        values = self.relative_attention_bias(relative_position_bucket)
        values = values.permute([2, 0, 1]).unsqueeze(0)
        return values

    def forward(self, hidden_states):
        batch_size, seq_length = hidden_states.shape[:2]

        def shape(states):
            return states.view(batch_size, -1, self.n_heads, self.key_value_proj_dim).transpose(1, 2)

        def unshape(states):
            return states.transpose(1, 2).contiguous().view(batch_size, -1, self.inner_dim)

        query_states = shape(self.q(hidden_states))
        key_states = shape(self.k(hidden_states))
        value_states = shape(self.v(hidden_states))
        scores = torch.matmul(query_states, key_states.transpose(3, 2))
        position_bias = self.compute_bias(seq_length, seq_length, device=scores.device)
        scores += position_bias
        attn_weights = F.softmax(scores.float(), dim=-1).type_as(scores)
        attn_weights = F.dropout(attn_weights, p=self.dropout, training=self.training)
        attn_output = unshape(torch.matmul(attn_weights, value_states))
        attn_output = self.o(attn_output)
        return attn_output, position_bias


def get_inputs():
    return [torch.randn(2, 12, 32)]


def get_init_inputs():
    return [32, 8, 4, 16, 32, 0.1]
